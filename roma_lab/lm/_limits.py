"""How many requests may be in flight to one model at once, process-wide.

Independent work (benchmark items, agent tasks x runs, best-of-N rollouts, judge calls) runs on
threads; what bounds it is the model, not the caller: one limit per model name, shared by every
caller in the process. The embedded engine's limit is its slot count (``slots``, 1 for the
in-process llama.cpp engine, which serves one sequence at a time); a remote model's is
``DEFAULT_REMOTE_CONCURRENCY`` unless set for its name with :func:`set_max_concurrency` or
``$ROMA_LAB_MAX_CONCURRENCY`` (``"8"`` for every remote model, or ``"openai/qwen=4,gpt-4o=16"``).

The limit is enforced where every request passes, :func:`request_slot` (:func:`arequest_slot` in a
coroutine): in the in-process engines (``ScriptedEngine``, ``LlamaEngine``) around a generation,
and in ``RemoteLM`` around a remote call; a cache hit takes no slot. There is one
``threading.BoundedSemaphore`` per model name and limit, created at first use. A semaphore is never resized: a request takes the
one of the limit in force when it starts, so a changed limit holds for new requests while those
already in flight finish under the old one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from roma_lab._environment import ENV

__all__ = ["DEFAULT_REMOTE_CONCURRENCY", "LIMIT_ENV", "arequest_slot", "max_concurrency", "request_slot",
           "set_max_concurrency"]

DEFAULT_REMOTE_CONCURRENCY = 8
LIMIT_ENV = ENV.max_concurrency
_overrides: dict[str, int] = {}
_gates: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_lock = threading.Lock()
# An async caller waits on the event loop, polling: a worker thread blocked in acquire() would hold
# one of the loop's few executor threads, which the request holding the slot may need to finish.
_POLL_FIRST_S, _POLL_MAX_S = 0.001, 0.01


def _name(lm: Any) -> str:
    return lm if isinstance(lm, str) else str(getattr(lm, "model", type(lm).__name__))


def _positive(value: Any, where: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: a concurrency limit is a whole number >= 1, got {value!r}") from None
    if n < 1 or str(value).strip() not in (str(n), f"+{n}"):
        raise ValueError(f"{where}: a concurrency limit is a whole number >= 1, got {value!r}")
    return n


def _from_env() -> tuple[int | None, dict[str, int]]:
    """($ROMA_LAB_MAX_CONCURRENCY's default for remote models, its per-name limits)."""
    text = os.environ.get(LIMIT_ENV, "").strip()
    if not text:
        return None, {}
    if "=" not in text:
        return _positive(text, f"${LIMIT_ENV}"), {}
    named = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.rpartition("=")
        if not sep or not name.strip():
            raise ValueError(f"${LIMIT_ENV}: expected name=N pairs separated by commas, got {part!r}")
        named[name.strip()] = _positive(value, f"${LIMIT_ENV} ({name.strip()})")
    return None, named


def set_max_concurrency(model: str, n: int | None) -> None:
    """Allow ``n`` requests in flight to the model named ``model`` (``None``: back to the default)."""
    with _lock:
        if n is None:
            _overrides.pop(model, None)
        else:
            _overrides[model] = _positive(n, f"set_max_concurrency({model!r})")


def max_concurrency(lm: Any) -> int:
    """The limit for a model (a ``dspy.LM`` or its name): set for its name, else from
    ``$ROMA_LAB_MAX_CONCURRENCY``, else an in-process engine's ``slots`` (1 without one), else
    ``DEFAULT_REMOTE_CONCURRENCY``."""
    engine = getattr(lm, "engine", None)
    # dspy.LM.engine is "auto"/"litellm"/"lm15" for a remote model, an engine object in-process
    slots = None if engine is None or isinstance(engine, str) else getattr(engine, "slots", 1)
    return _limit(_name(lm), slots)


def _limit(name: str, slots: int | None) -> int:
    """The limit for model ``name``, served in-process on ``slots`` slots (None: a remote model)."""
    with _lock:
        if name in _overrides:
            return _overrides[name]
    default, named = _from_env()
    if name in named:
        return named[name]
    if slots is not None:  # in-process: the engine says how many sequences it serves at once
        return _positive(slots, f"{name}'s engine slots")
    return default or DEFAULT_REMOTE_CONCURRENCY


def _gate(name: str, slots: int | None) -> threading.BoundedSemaphore:
    limit = _limit(name, slots)
    with _lock:
        gate = _gates.get((name, limit))
        if gate is None:
            gate = _gates[name, limit] = threading.BoundedSemaphore(limit)
        return gate


@contextlib.contextmanager
def request_slot(model: str, slots: int | None = None) -> Iterator[None]:
    """Hold one of model ``model``'s request slots while the block runs, waiting for one if all are
    taken; ``slots`` is an in-process engine's own count (None for a remote model)."""
    with _gate(model, slots):
        yield


@contextlib.asynccontextmanager
async def arequest_slot(model: str, slots: int | None = None) -> AsyncIterator[None]:
    """:func:`request_slot` for a coroutine: it waits without blocking the event loop."""
    gate, delay = _gate(model, slots), _POLL_FIRST_S
    while not gate.acquire(blocking=False):
        await asyncio.sleep(delay)
        delay = min(2 * delay, _POLL_MAX_S)
    try:
        yield
    finally:
        gate.release()
