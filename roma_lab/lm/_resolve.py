"""One way to name a model everywhere (notebook parameter, CLI flag, environment variable), and one way
to print it in a table."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roma_lab._environment import ENV
from roma_lab.results import NOT_A_MEASUREMENT

from ._models import (
    DEFAULT_VARIANT,
    MODELS,
    cache_dir,
    file_sha256,
    model_file,
    part_paths,
)
from ._remote import endpoint, remote_kwargs
from ._scripted import SCRIPTED, is_scripted, scripted_lm

__all__ = ["ENGINE_ENV", "LOCAL_ENGINES", "SLOTS_ENV", "LocalModel", "check_lm_name", "describe_lm_name", "local_engine",
           "local_engine_settings", "local_slots",
           "model_label", "replay_lm", "resolve_lm"]

ENV_VAR = ENV.lm

# Settings that configure the engine; every other keyword goes to dspy.LM.
_ENGINE_KWARGS = ("n_ctx", "n_threads", "json_mode", "slots")
#: The engines that serve a local model (``resolve_lm(..., engine=)`` or $ROMA_LAB_ENGINE); the first
#: is the default: on the 2-core machine the server's batching bought no agent tasks per hour
#: (design/local_model.md, "Engines").
LOCAL_ENGINES = ("llama-cpp-python", "llama.cpp-server")
ENGINE_ENV = ENV.engine
SLOTS_ENV = ENV.slots
# dspy.LM defaults for local models; recorded and replayed runs must share them (they are in the key).
_LM_DEFAULTS = {"max_tokens": 1024}
# A model at the user's own server gets the embedded engine's settings (bounded, greedy unless a
# temperature is given): such servers often generate to the context limit and sample by default, and a
# run there should compare with a local one and repeat from the cache. Its HTTP timeout is ROMA's
# call_timeout_s default (LiteLLM's own is 6000 s). Providers' endpoints keep their defaults.
_SERVER_DEFAULTS = _LM_DEFAULTS | {"temperature": 0.0, "timeout": 600.0}
# Every remote model: DSPy retries a rate limit (429), a timeout, a 5xx or a dropped connection,
# waiting the server's Retry-After or else 1, 2, 4, 8, 16 s (31 s in all, where DSPy's default 3
# gives up after 7 s, short of most per-minute rate windows); then the call fails with DSPy's error.
_REMOTE_DEFAULTS = {"num_retries": 5}


@dataclass(frozen=True, slots=True)
class LocalModel:
    """A resolved local model: its cache id and how to get its verified file (called lazily)."""

    model_id: str
    path: Callable[[], Path]
    json_mode: str


def describe_lm_name(name: str | None = None) -> str:
    """The effective name: ``name``, else $ROMA_LAB_LM, else "local"."""
    return name or os.environ.get(ENV_VAR) or "local"


def check_lm_name(name: str | None = None) -> str:
    """The effective name (:func:`describe_lm_name`) once it passes the checks :func:`resolve_lm` makes of
    a name, without loading, hashing or looking for weights: "local:<variant>" must name a known variant
    (ValueError listing them), a .gguf path an existing file (FileNotFoundError). Any other name is a
    LiteLLM model, which its provider checks at the first call."""
    name = describe_lm_name(name)
    if name == "local" or name.startswith("local:"):
        if (name.partition(":")[2] or DEFAULT_VARIANT) not in MODELS:
            raise ValueError(f"unknown local model {name!r}; choose 'local' or one of: "
                             + ", ".join(f"'local:{v}'" for v in MODELS))
    elif name.endswith(".gguf") and not Path(name).expanduser().is_file():
        raise FileNotFoundError(f"model file {Path(name).expanduser()} does not exist")
    return name


def _local_model(name: str, *, check_installed: bool) -> LocalModel | None:
    """The local model a name denotes, or None for a LiteLLM name."""
    name = check_lm_name(name)
    if name == "local" or name.startswith("local:"):
        spec = MODELS[name.partition(":")[2] or DEFAULT_VARIANT]
        if check_installed:
            part_paths(spec)  # fail now, naming the packages to install, not at the first call
        return LocalModel(spec.model_id, lambda: model_file(spec), spec.json_mode)
    if name.endswith(".gguf"):
        path = Path(name).expanduser()
        # The weights' hash is part of the id, so the completion cache follows the file's content.
        return LocalModel(f"{path.stem}@{file_sha256(path)[:12]}", lambda: path, "grammar")
    return None


def resolve_lm(name: Any = None, **kwargs):
    """A ``dspy.LM`` for a model name; the only place in roma_lab that turns a name into a model.

    - None: $ROMA_LAB_LM, else "local".
    - "local": the embedded default (Qwen2.5-Coder-1.5B-Instruct Q4_K_M); "local:<variant>" for
      ``qwen2.5-coder-1.5b``, ``qwen2.5-coder-0.5b`` or ``smollm2-135m``.
    - a path ending in .gguf: that file.
    - "scripted": the deterministic test double (``scripted_lm``), never cached; its rows are
      labelled by ``model_label`` as measuring nothing.
    - anything else: a ``RemoteLM`` (a ``dspy.LM`` whose calls hold one of the name's request slots,
      ``max_concurrency``, and carry the rollout, ``rollout``) on a LiteLLM string, api_base etc. in
      kwargs, retried 5 times with back-off unless ``num_retries`` is given. An
      ``openai/<name>`` model goes to $ROMA_LAB_API_BASE when that is set (key: $ROMA_LAB_API_KEY)
      and, at any server address, through LiteLLM with the local models' ``max_tokens`` and greedy
      decoding unless given (see ``remote_kwargs``, design/online.md). A model at a server address
      is a ``ServerLM``: DSPy's request cache keys its replies by that server too.
    - a ``dspy`` LM object: returned as it is (``kwargs`` configure models built from a name only).

    Local models run in this process, one sequence at a time through llama-cpp-python
    (``engine="llama-cpp-python"``, the default) or on llama.cpp's own server
    (``engine="llama.cpp-server"``: ``slots`` sequences batched at once, else $ROMA_LAB_SLOTS, else
    ``DEFAULT_SLOTS``); $ROMA_LAB_ENGINE names the engine when ``engine`` is not given; with
    completions cached on disk under $ROMA_LAB_CACHE (see ``cache_dir``; the engine and slot count
    are in the key); keyword ``n_ctx`` (a slot's context), ``n_threads`` and ``json_mode`` tune the
    engine, the rest (``temperature``, ``max_tokens``...) go to ``dspy.LM``. Pass ``cache=False``
    to call the model every time.
    """
    import dspy

    if isinstance(name, dspy.BaseLM):
        return name
    if name is not None and not isinstance(name, str):
        raise TypeError(f"expected a model name or a dspy LM, got {type(name).__name__}")
    name = describe_lm_name(name)
    if name == SCRIPTED:
        return scripted_lm(**kwargs)
    local = _local_model(name, check_installed=True)
    if local is None:
        # DSPy's request cache stays on (dspy.LM's default): a rerun repeats no remote call. At a server
        # of the user's its key also holds the server (ServerLM): see design/online.md
        kwargs = _REMOTE_DEFAULTS | remote_kwargs(name, kwargs, _SERVER_DEFAULTS)
        from ._server import RemoteLM, ServerLM

        return (ServerLM if kwargs.get("api_base") or kwargs.get("base_url") else RemoteLM)(name, **kwargs)
    from ._cache import CachingEngine
    from ._engine import AsyncEngine

    engine_kwargs = {"json_mode": local.json_mode} | {k: kwargs.pop(k) for k in _ENGINE_KWARGS if k in kwargs}
    use_cache = kwargs.pop("cache", True)
    engine_class, engine_kwargs = _local_engine(kwargs.pop("engine", None), engine_kwargs)
    engine = engine_class(local.path, model_id=local.model_id, **engine_kwargs)
    if use_cache:
        engine = CachingEngine(engine, model_id=local.model_id, directory=cache_dir() / "completions",
                               settings=_cache_settings(engine.json_mode, engine.kind, engine.slots))
    kwargs = _LM_DEFAULTS | kwargs
    # DSPy's own cache is off: ours is the single cache boundary for local models.
    return dspy.LM(f"local/{local.model_id}", engine=engine, async_engine=AsyncEngine(engine), cache=False, **kwargs)


def local_engine(kind: str | None = None) -> str:
    """The local engine: ``kind``, else $ROMA_LAB_ENGINE, else the first of ``LOCAL_ENGINES``."""
    kind = kind or os.environ.get(ENGINE_ENV, "").strip() or LOCAL_ENGINES[0]
    if kind not in LOCAL_ENGINES:
        raise ValueError(f"unknown local engine {kind!r} (engine= or ${ENGINE_ENV}); choose one of: "
                         + ", ".join(map(repr, LOCAL_ENGINES)))
    return kind


def _local_engine(kind: str | None, engine_kwargs: dict) -> tuple[type, dict]:
    """(engine class, its keywords) for ``engine=kind`` (``local_engine``); the server runs on
    ``slots`` slots, else $ROMA_LAB_SLOTS, else ``DEFAULT_SLOTS``."""
    kind = local_engine(kind)
    if kind == "llama-cpp-python":
        from ._engine import LlamaEngine

        if engine_kwargs.pop("slots", 1) != 1:
            raise ValueError("the llama-cpp-python engine serves one sequence at a time: slots must be 1; "
                             "engine='llama.cpp-server' serves several")
        return LlamaEngine, engine_kwargs
    from ._served import ServerEngine

    return ServerEngine, {"slots": local_slots(engine_kwargs.get("slots"))} | engine_kwargs


def local_slots(slots: int | None = None) -> int:
    """The embedded server's slot count: ``slots``, else $ROMA_LAB_SLOTS, else ``DEFAULT_SLOTS``."""
    from ._served import DEFAULT_SLOTS

    if slots is not None:
        return slots
    text = os.environ.get(SLOTS_ENV, "").strip()
    if not text:
        return DEFAULT_SLOTS
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"${SLOTS_ENV} is the embedded server's slot count, a whole number >= 1; got {text!r}")
    return int(text)


def local_engine_settings(name: str | None = None) -> dict | None:
    """The engine and slot count a model name runs on, as ``resolve_lm(name)`` would build it, without
    loading anything: ``{"engine": ..., "slots": n}`` for a local model, None otherwise (provenance)."""
    if _local_model(describe_lm_name(name), check_installed=False) is None:
        return None
    kind = local_engine()
    return {"engine": kind, "slots": local_slots() if kind == "llama.cpp-server" else 1}


def _cache_settings(json_mode: str, kind: str, slots: int) -> dict:
    """What a local model's completion-cache key holds besides the request: the JSON decoding mode,
    and the engine's kind and slot count (greedy outputs differ across slot counts and batch make-up)."""
    return {"json_mode": json_mode, "engine": kind, "slots": slots}


def model_label(lm: Any) -> str:
    """How tables and run files name a model: a name as written, or an LM's model string; the
    scripted test double's says it is one ("scripted (test double, not a measurement)"), and a model
    called at a server of the user's says where ("openai/qwen @ http://host:8000/v1": the name alone
    would pass for the provider's own model)."""
    name = lm if isinstance(lm, str) else str(getattr(lm, "model", type(lm).__name__))
    if is_scripted(name):
        return f"{name} (test double, {NOT_A_MEASUREMENT})"
    server = endpoint(lm)
    return f"{name} @ {server}" if server else name


def replay_lm(name: str | None = None, *, directory: Path | None = None, json_mode: str | None = None,
              engine: str | None = None, slots: int | None = None, **kwargs):
    """A ``dspy.LM`` that serves only completions recorded by ``resolve_lm(name)`` (with the same
    ``engine`` and ``slots``: they are in the cache key).

    A request never recorded raises ``CacheMissError``. Needs neither llama.cpp nor the
    model packages, so tests can replay a real model's outputs anywhere.
    """
    import dspy

    from ._cache import ReplayEngine
    from ._engine import AsyncEngine

    name = describe_lm_name(name)
    local = _local_model(name, check_installed=False)
    if local is None:
        raise ValueError(f"replay_lm serves recorded local-model completions; {name!r} is not a local model name")
    engine_class, engine_kwargs = _local_engine(engine, {} if slots is None else {"slots": slots})
    engine = ReplayEngine(model_id=local.model_id, directory=directory or cache_dir() / "completions",
                          settings=_cache_settings(json_mode or local.json_mode, engine_class.kind,
                                                   engine_kwargs.get("slots", 1)))
    kwargs = _LM_DEFAULTS | kwargs
    return dspy.LM(f"local/{local.model_id}", engine=engine, async_engine=AsyncEngine(engine), cache=False, **kwargs)
