"""DSPy engine running a GGUF model in-process with llama-cpp-python.

DSPy 3.4's supported extension point is an engine object passed as
``dspy.LM("local/<id>", engine=...)``: ``complete(Request) -> Response``. With it, LiteLLM is never
imported. The engine reports token usage so DSPy's usage tracking works.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import functools
import json
import os
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from roma_lab._environment import ENV

from ._limits import request_slot
from ._speed import ModelSpeed, append_speed

__all__ = ["SUPPORTED_PARAMS", "AsyncEngine", "LlamaEngine", "free_cores", "request_messages"]

# Bounds added to every JSON schema before it becomes a grammar: small models otherwise run an
# unbounded string or array until max_tokens.
MAX_STRING_CHARS = 2000
MAX_ARRAY_ITEMS = 12

JSON_MODES = ("grammar", "repair", "auto")

# Generation settings the local engines honour. The replay engine declares the same, so DSPy's
# adapters build the same requests (and cache keys) for it as for the real model.
SUPPORTED_PARAMS = frozenset({"temperature", "max_tokens", "top_p", "top_k", "stop", "seed", "response_format"})


def free_cores() -> int:
    """Threads for llama.cpp: $ROMA_LAB_THREADS, else every CPU this process may run on.

    Not cores minus the load average: generations take turns machine-wide (``machine_turn``), so
    the load counts the toolkit's own previous or queued work, and a kernel started just after
    another stopped generating chose 1 thread and ran at half speed (design/local_model.md has
    the measurements). Set $ROMA_LAB_THREADS lower when other CPU-bound work shares the machine:
    llama.cpp collapses when its threads compete for cores.
    """
    if os.environ.get(ENV.threads):
        return max(1, int(os.environ[ENV.threads]))
    return len(os.sched_getaffinity(0))


# Not under $ROMA_LAB_CACHE: two processes with different caches still share the cores.
GENERATION_LOCK = Path(tempfile.gettempdir()) / "roma_lab-generation.lock"


@contextlib.contextmanager
def machine_turn():
    """One generation at a time on this machine, across processes (an flock on GENERATION_LOCK):
    two notebooks or a test and a notebook generating at once thrash the cores for both."""
    # read-only, created world-readable: any user's process can lock the file another created
    fd = os.open(GENERATION_LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


#: Bound on the memory of the saved prompt states (LRU), everything a state holds counted: for the
#: 1.5B model about 28 KB of KV per token plus a copy of the logits rows (up to n_batch x vocabulary
#: floats, 311 MB for Qwen), so ~9 states of 512 to 1,500 tokens.
STATE_CACHE_BYTES = 3 << 30


def _state_cache():
    """llama-cpp-python's LRU state cache, bounded by what its states hold in memory: its own
    ``cache_size`` counts only llama.cpp's part, so 512-token states filled 8.5 GB under a 384 MiB bound."""
    from llama_cpp import LlamaRAMCache

    class StateCache(LlamaRAMCache):
        @property
        def cache_size(self) -> int:
            return sum(s.llama_state_size + s.scores.nbytes + s.input_ids.nbytes for s in self.cache_state.values())

    return StateCache(capacity_bytes=STATE_CACHE_BYTES)


class _ModelHost:
    """The one llama.cpp model of this process, behind a lock.

    A deliberate process-wide object: two model instances on this 2-core machine were 5-30x
    slower than one, so loading another model first frees the current one, and calls are
    serialised (concurrent roles wait their turn instead of thrashing the cores).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._key: tuple | None = None
        self._llama = None
        self._loaded: dict = {}  # set-up of the loaded model, for its speed record
        self._calls, self._call_seconds = 0, 0.0

    def get(self, path: Path, n_ctx: int, n_threads: int | None):
        """The loaded model for these settings, loading it if needed. Call with ``lock`` held.

        ``n_threads=None`` means free_cores() at load time; it is not re-evaluated per call, as a
        changed thread count would force a reload and lose the KV cache.
        """
        key = (str(path), n_ctx, n_threads)
        if key != self._key:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                from ._models import ModelNotInstalledError

                raise ModelNotInstalledError(
                    "local models need llama-cpp-python: pip install 'roma_lab[local-small]' "
                    "(it compiles from source: minutes on 2 cores, then pip caches the wheel)"
                ) from exc
            self.close()
            free_other_models(self)  # a request in flight on another host keeps its model until it returns
            threads = n_threads or free_cores()
            self._loaded = {"model": path.name, "pid": os.getpid(), "threads": threads,
                            "cpus": len(os.sched_getaffinity(0)), "load_avg_1min": os.getloadavg()[0],
                            "loaded_at": datetime.now(UTC)}
            self._llama = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads,
                                n_threads_batch=threads, verbose=False)
            # llama.cpp keeps one evaluated prompt, so when roles interleave (actor, planner,
            # summariser...) each switch evaluated the whole prompt again. Saved states let each
            # role resume its own longest prefix (same completions; speed/bench_lm.py
            # --interleaved-only measures the prompt tokens saved).
            self._llama.set_cache(_state_cache())
            self._key = key
        return self._llama

    @property
    def llama(self):
        """The loaded ``llama_cpp.Llama`` (None before a call loads it), for a benchmark that times it bare."""
        return self._llama

    @property
    def call_seconds(self) -> float:
        """Seconds spent generating since the model was loaded (the waits for the machine's turn left out)."""
        return self._call_seconds

    def generated(self, seconds: float) -> None:
        """Count one generation of the loaded model. Call with ``lock`` held."""
        self._calls += 1
        self._call_seconds += seconds

    def close(self) -> None:
        if self._llama is not None:
            if self._calls:
                append_speed(self._speed())
            self._llama.close()
        self._llama, self._key, self._loaded = None, None, {}
        self._calls, self._call_seconds = 0, 0.0

    def _speed(self) -> ModelSpeed:
        import llama_cpp

        perf = llama_cpp.llama_perf_context(self._llama._ctx.ctx)  # llama.cpp's counters since the load
        return ModelSpeed(**self._loaded, closed_at=datetime.now(UTC), calls=self._calls,
                          call_seconds=self._call_seconds, prompt_tokens=perf.n_p_eval,
                          prompt_seconds=perf.t_p_eval_ms / 1000, generated_tokens=perf.n_eval,
                          generation_seconds=perf.t_eval_ms / 1000)


#: Every host of a model in this process (this module's, and the embedded server's in _served.py),
#: each with a ``close()``: loading a model on one frees the others (one model per process).
MODEL_HOSTS: list = []


def free_other_models(keep) -> None:
    """Close every model host of this process but ``keep``."""
    for host in MODEL_HOSTS:
        if host is not keep:
            host.close()


#: The process's one in-process llama.cpp model and its lock (a deliberate singleton: ``_ModelHost``).
EMBEDDED_HOST = _ModelHost()
MODEL_HOSTS.append(EMBEDDED_HOST)
# Free the model before interpreter teardown: llama-cpp-python's finalizer fails once its module
# globals are gone, printing a traceback at every exit.
atexit.register(EMBEDDED_HOST.close)


class LocalEngine:
    """What the two embedded engines share (in-process ``LlamaEngine``, llama.cpp's server
    ``ServerEngine``): the arguments, the DSPy contract, and one completion with JSON handling.
    A subclass says where a request waits for its turn and what serves it (``_turn``) and how one
    chat completion is generated there (``_generate``)."""

    # Read by DSPy's capability planning: JSONAdapter then sends the signature's JSON schema.
    supports_response_schema = True
    supported_params = SUPPORTED_PARAMS
    kind: str  # in the completion-cache key with ``slots`` (resolve_lm's settings)
    slots: int

    def __init__(self, path, *, model_id: str, n_ctx: int = 4096, n_threads: int | None = None,
                 json_mode: str = "grammar", default_max_tokens: int = 512):
        if json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {JSON_MODES}, got {json_mode!r}")
        self._path = path
        self.model_id = model_id
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.json_mode = json_mode
        self.default_max_tokens = default_max_tokens

    def _turn(self, request):
        """A context manager: wait for this request's turn, yield what generates it."""
        raise NotImplementedError

    def _generate(self, backend, messages, config, *, constrain: bool) -> tuple[str, str, int, int]:
        """One chat completion: (text, finish reason, prompt tokens, completion tokens)."""
        raise NotImplementedError

    def complete(self, request):
        from dspy.lm15 import Message, Response, TextPart, Usage

        if request.tools:
            from dspy.lm15 import UnsupportedFeatureError

            raise UnsupportedFeatureError(f"{self.model_id}: local models do not support native tool calls")
        messages = request_messages(request)
        response_format = request.config.response_format
        constrain = self.json_mode == "grammar" and bool(response_format)
        with self._turn(request) as backend:
            text, finish, n_in, n_out = self._generate(backend, messages, request.config, constrain=constrain)
            if self.json_mode == "auto" and response_format and not _conforms(text, response_format):
                # The one bounded retry: the same request under the grammar, which always parses.
                text, finish, n_in2, n_out2 = self._generate(backend, messages, request.config, constrain=True)
                n_in, n_out = n_in + n_in2, n_out + n_out2
        return Response(id=None, model=self.model_id, message=Message.assistant([TextPart(text)]), finish_reason=finish,
                        usage=Usage(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out))

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))


class LlamaEngine(LocalEngine):
    """DSPy engine for a local GGUF file. The model loads on the first call, not at construction.

    ``path`` is a zero-argument callable returning the verified model path, so resolving a model
    name stays cheap and a run whose calls all hit the completion cache never loads the model.
    ``json_mode`` decides how a JSON request from DSPy's JSONAdapter is honoured:
    ``"grammar"`` constrains decoding to the schema (bounded strings and arrays; always parses,
    but grammar checks slow each token on large vocabularies); ``"repair"`` decodes freely and
    leaves parsing to JSONAdapter's json_repair; ``"auto"`` decodes freely and, only when the
    text lacks a required key, generates once more under the grammar.
    """

    kind = "llama-cpp-python"
    slots = 1  # one sequence at a time: the process-wide model behind one lock (_ModelHost)

    @contextlib.contextmanager
    def _turn(self, request):
        with request_slot(request.model, self.slots), EMBEDDED_HOST.lock, machine_turn():
            yield EMBEDDED_HOST.get(self._path(), self.n_ctx, self.n_threads)

    def _generate(self, llama, messages, config, *, constrain: bool) -> tuple[str, str, int, int]:
        """One chat completion: (text, finish reason, prompt tokens, completion tokens)."""
        kwargs = sampling_settings(config, self.default_max_tokens)
        if constrain:
            grammar = json_grammar(config.response_format)
            if grammar is None:
                kwargs["response_format"] = {"type": "json_object"}  # llama-cpp's generic JSON grammar
            else:
                from llama_cpp import LlamaGrammar

                kwargs["grammar"] = LlamaGrammar.from_string(grammar, verbose=False)
        start = time.perf_counter()
        try:
            out = llama.create_chat_completion(messages=messages, **kwargs)
        except ValueError as exc:
            if "context window" not in str(exc):
                raise
            from dspy.lm15 import ContextLengthError

            raise ContextLengthError(f"{self.model_id}: {exc} (n_ctx={self.n_ctx})") from exc
        EMBEDDED_HOST.generated(time.perf_counter() - start)
        choice, usage = out["choices"][0], out["usage"]
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return choice["message"]["content"] or "", finish, usage["prompt_tokens"], usage["completion_tokens"]

    def close(self) -> None:
        """Nothing to do: the model is shared by the process (see _ModelHost)."""


def sampling_settings(config, default_max_tokens: int) -> dict[str, Any]:
    """A request's sampling settings as llama.cpp takes them, in-process and served alike. Greedy by
    default: local runs are then reproducible and the completion cache meaningful."""
    settings: dict[str, Any] = {"temperature": 0.0 if config.temperature is None else config.temperature,
                                "max_tokens": config.max_tokens or default_max_tokens}
    if config.stop:
        settings["stop"] = list(config.stop)
    for name in ("top_p", "top_k", "seed"):
        if getattr(config, name) is not None:
            settings[name] = getattr(config, name)
    return settings


def request_messages(request) -> list[dict[str, str]]:
    """OpenAI-style text messages from a canonical request; non-text content is an error."""
    from dspy.lm15 import UnsupportedFeatureError

    messages = []
    if request.system is not None:
        system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
        messages.append({"role": "system", "content": system})
    for message in request.messages:
        if any(type(part).__name__ != "TextPart" for part in message.parts):
            raise UnsupportedFeatureError("local models accept text messages only")
        messages.append({"role": message.role, "content": message.text or ""})
    return messages


def _conforms(text: str, response_format: dict) -> bool:
    """Whether ``text`` repairs to JSON that validates against the request's schema (required keys,
    types, and list bounds such as a planner's maxItems: free decoding ignores all of them)."""
    import json_repair
    import jsonschema

    try:
        value = json_repair.loads(text)
    except Exception:  # json_repair raises on some inputs; any failure means "not usable"
        return False
    schema = _schema_of(response_format)
    if schema is None:
        return isinstance(value, dict)
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def _schema_of(response_format: dict) -> dict | None:
    """The JSON schema inside DSPy's ({"schema": ...}) or OpenAI's ({"json_schema": {"schema": ...}}) form."""
    return response_format.get("schema") or response_format.get("json_schema", {}).get("schema")


def json_grammar(response_format: dict) -> str | None:
    """GBNF grammar text for DSPy's JSON response_format, or None for the generic JSON grammar.

    We build the grammar ourselves because llama-cpp-python constrains only
    ``{"type": "json_object", "schema": ...}`` (an OpenAI-style ``json_schema`` request is silently
    unconstrained), and its converter expands ``maxLength`` into nested rules that llama.cpp
    rejects; llama.cpp's native ``{0,N}`` repetition bounds strings instead.
    """
    schema = _schema_of(response_format)
    if schema is None:
        return None
    return _schema_grammar(json.dumps(bound_arrays(schema), sort_keys=True))


@functools.lru_cache(maxsize=64)
def _schema_grammar(schema_json: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    text = json_schema_to_gbnf(schema_json)
    return text.replace(_UNBOUNDED_STRING, _UNBOUNDED_STRING.replace("char*", f"char{{0,{MAX_STRING_CHARS}}}"))


# The converter's rule for a string without length bounds.
_UNBOUNDED_STRING = r'string ::= "\"" char* "\"" space'


def bound_arrays(schema):
    """Copy of a JSON schema with a maxItems on every array that has none."""
    if isinstance(schema, list):
        return [bound_arrays(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: bound_arrays(value) for key, value in schema.items()}
    if bounded.get("type") == "array" or (isinstance(bounded.get("type"), list) and "array" in bounded["type"]):
        bounded.setdefault("maxItems", MAX_ARRAY_ITEMS)
    return bounded


class AsyncEngine:
    """Async counterpart DSPy needs for ``acall``: runs the sync engine in a worker thread (which
    waits there for a request slot, off the event loop)."""

    def __init__(self, sync) -> None:
        self.sync = sync
        self.slots = getattr(sync, "slots", 1)

    async def complete(self, request):
        if getattr(self.sync, "watches_parses", False):  # a caching engine (lm/_cache.py)
            from ._unparsed import watch_parses

            watch_parses()  # here, in the caller's context: the worker thread runs in a copy of it
        return await asyncio.to_thread(self.sync.complete, request)

    async def stream(self, request):
        for event in await asyncio.to_thread(lambda: list(self.sync.stream(request))):
            yield event

    async def aclose(self) -> None:
        self.sync.close()
