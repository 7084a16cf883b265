"""The total deadline of one remote model call: a stalled server, or one that drips its reply a byte
at a time (which no HTTP read timeout catches), ends the call with a typed error instead of holding
it forever.

Every remote call (``RemoteLM``) has one: ``resolve_lm(name, deadline_s=...)`` per model, else
$ROMA_LAB_CALL_DEADLINE_S for a run, else :data:`DEFAULT_CALL_DEADLINE_S`. It covers the whole call,
DSPy's own retries of a 429 or a 500 included, and the question to a server of one's own about what it
serves (``_server.py``), so a call never takes longer than its deadline; a call past it is an error row
that a rerun runs again, as any error row is. The embedded engines need none:
a local call is bounded by its ``max_tokens`` at the machine's speed.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from roma_lab._environment import ENV

__all__ = ["CALL_DEADLINE_ENV", "DEFAULT_CALL_DEADLINE_S", "ModelCallDeadlineError", "call_deadline_s"]

CALL_DEADLINE_ENV = ENV.call_deadline_s
#: Seconds a remote call may take in all (DSPy's retries included), unless a model or a run says otherwise.
DEFAULT_CALL_DEADLINE_S = 300.0

T = TypeVar("T")


class ModelCallDeadlineError(TimeoutError):
    """A model call that did not finish within its total deadline. A TimeoutError, so a runner's stall
    guard counts it like any system that stopped answering."""


def call_deadline_s(given: float | None = None) -> float:
    """The deadline in force: ``given`` (a model's own), else $ROMA_LAB_CALL_DEADLINE_S, else the default."""
    if given is None:
        given = ENV.number(CALL_DEADLINE_ENV, "seconds")
        if given is None:
            return DEFAULT_CALL_DEADLINE_S
    if isinstance(given, bool) or not isinstance(given, int | float) or not math.isfinite(given) or given <= 0:
        raise ValueError(f"a model call's deadline must be a positive number of seconds, got {given!r}")
    return float(given)


def _late(model: str, deadline: float) -> ModelCallDeadlineError:
    return ModelCallDeadlineError(f"{model}: no complete reply within the call's deadline of {deadline:g} s "
                                  f"(a stalled or dripping server; set it per model with resolve_lm(..., deadline_s=) "
                                  f"or per run with ${CALL_DEADLINE_ENV})")


class _Callers:
    """Daemon threads that make the calls, each kept for the next call once its own ends: what a thread
    sets up for itself (DSPy's request cache opens its sqlite files once per thread) is set up once per
    thread, not once per call. A call with no idle thread to take it gets a new one, so a call left
    running past its deadline (Python cannot kill it) holds up no other; a thread idle for
    :data:`IDLE_S` ends."""

    IDLE_S = 30.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0  # threads waiting for a call, less the calls queued for them

    def run(self, call: Callable[[], None]) -> None:
        """Have ``call()`` made on one of the threads (it must not raise)."""
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._calls.put(call)
                return
        threading.Thread(target=self._serve, args=(call,), daemon=True, name="roma_lab-model-call").start()

    def _serve(self, call: Callable[[], None]) -> None:
        while True:
            call()
            call = None  # nothing of a finished call is kept alive by an idle thread
            with self._lock:
                self._idle += 1
            while call is None:
                try:
                    call = self._calls.get(timeout=self.IDLE_S)
                except queue.Empty:
                    with self._lock:
                        if self._idle:  # more threads wait than calls are queued: this one may go
                            self._idle -= 1
                            return
                    # else a call was queued for this thread just now: take it


_CALLERS = _Callers()


def within_deadline(call: Callable[[], T], deadline: float, model: str, *, spent_s: float = 0.0) -> T:
    """``call()`` on a daemon thread in a copy of this context; its result, its error, or past what is
    left of ``deadline`` seconds (``spent_s`` are gone already) a :class:`ModelCallDeadlineError` (the
    thread is left to end on its own: Python cannot kill it, and its reply is no longer awaited)."""
    if spent_s >= deadline:  # nothing left: the request is not sent
        raise _late(model, deadline)
    box: dict[str, Any] = {}
    finished = threading.Event()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            box["value"] = context.run(call)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc
        finally:
            finished.set()

    _CALLERS.run(run)
    if not finished.wait(deadline - spent_s):
        raise _late(model, deadline)
    if "error" in box:
        raise box["error"]
    return box["value"]


async def awithin_deadline(call: Coroutine[Any, Any, T], deadline: float, model: str, *, spent_s: float = 0.0) -> T:
    """``await call`` cancelled past what is left of ``deadline`` seconds (``spent_s`` are gone already;
    its connection closed) as a :class:`ModelCallDeadlineError`."""
    if spent_s >= deadline:  # nothing left: the request is not sent
        call.close()
        raise _late(model, deadline)
    try:
        return await asyncio.wait_for(call, deadline - spent_s)
    except TimeoutError:
        raise _late(model, deadline) from None
