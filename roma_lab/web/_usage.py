"""What each search and read consumed, for whoever meters it: the web room's usage record.

Every call (a success or a failure, live or replayed) is one :class:`WebCall`, added to every
:func:`web_meter` open in the caller's context (a ``ContextVar``: nested meters each see the calls
made inside them; ``roma_lab._concurrent.concurrent_map`` carries them into its worker threads). A
ROMA executor or an agent opens one around a tool call and copies the calls into its trace.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = ["WebCall", "WebMeter", "web_meter"]


@dataclass(frozen=True, slots=True)
class WebCall:
    """One search or read. ``provider``: the search provider's name, or "reader" for a read;
    ``target``: the query or the URL; ``cost``: USD (None: unknown, see ``_price.call_cost``);
    ``replayed``: served from a recording (no request was made); ``latency_s``: wall time of the
    call here (a replay's is its lookup); ``results``: hits returned (None for a read, or a failure);
    ``error``: the failure's message (None: it succeeded); ``key``: the call's recording key."""

    provider: str
    kind: Literal["search", "read"]
    target: str
    cost: float | None
    replayed: bool
    latency_s: float
    results: int | None
    error: str | None
    key: str


class WebMeter:
    """The calls made while it was open, in the order they ended."""

    __slots__ = ("_calls", "_lock")

    def __init__(self) -> None:
        self._calls: list[WebCall] = []
        self._lock = threading.Lock()

    def add(self, call: WebCall) -> None:
        with self._lock:
            self._calls.append(call)

    @property
    def calls(self) -> tuple[WebCall, ...]:
        with self._lock:
            return tuple(self._calls)

    def cost(self) -> float | None:
        """The calls' total cost in USD; None when any call's cost is unknown."""
        costs = [c.cost for c in self.calls]
        return None if None in costs else math.fsum(costs)


_METERS: contextvars.ContextVar[tuple[WebMeter, ...]] = contextvars.ContextVar("roma_lab_web_meters", default=())


@contextlib.contextmanager
def web_meter() -> Iterator[WebMeter]:
    """Count the web calls made inside (in this context and the contexts copied from it)."""
    meter = WebMeter()
    token = _METERS.set((*_METERS.get(), meter))
    try:
        yield meter
    finally:
        _METERS.reset(token)


def record_call(call: WebCall) -> None:
    for meter in _METERS.get():
        meter.add(call)
