"""How every room calls a model through DSPy: the metered call and the JSON-adapter role.

``metered_call`` is the one metered model call (the controller's role calls, the agent's steps, the
single-call system): the call gets its own LM copy (so its history is its own, also when calls run
concurrently) and its own DSPy usage tracker, and ``Meter.usage()`` reads ``call_usage`` from both.
Usage is readable whether the call returned or raised: a failed call still consumed tokens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import dspy
from dspy.utils.usage_tracker import track_usage

from ._usage import CallUsage, call_usage

__all__ = ["JSONRole", "Meter", "metered_call"]


class Meter:
    """What one metered call consumed so far: read it after the call (returned or raised)."""

    __slots__ = ("lm", "_own", "_tracker")

    def __init__(self, lm: Any, own: bool, tracker: Any):
        self.lm, self._own, self._tracker = lm, own, tracker

    def tokens(self) -> Mapping[str, Mapping[str, Any]]:
        """The call's own tracker: model -> token counts."""
        return self._tracker.get_total_tokens()

    def history(self) -> Sequence[Mapping[str, Any]]:
        """The entries the call's own LM copy recorded ([] for an LM that could not be copied: its
        history is every caller's, not this call's)."""
        return list(getattr(self.lm, "history", [])) if self._own else []

    def usage(self) -> CallUsage:
        return call_usage(self.tokens(), self.history())


@contextlib.contextmanager
def metered_call(lm: Any, *, settings: Mapping[str, Any] | None = None, **context: Any) -> Iterator[Meter]:
    """Make one model call inside: ``lm`` copied (with ``settings``, e.g. a temperature or seed) and set
    as DSPy's LM with ``context`` (e.g. an adapter), under the call's own usage tracker. ``lm=None``
    keeps DSPy's configured LM (its usage is still tracked; its history is not this call's)."""
    own = lm is not None and hasattr(lm, "copy")
    call_lm = lm.copy(**(settings or {})) if own else lm
    overrides = {"lm": call_lm} if call_lm is not None else {}
    with dspy.context(**overrides, **context), track_usage() as tracker:
        yield Meter(call_lm, own, tracker)


class JSONRole(dspy.Module):
    """One predictor run with the JSON adapter (set per call, so a user's global adapter is untouched)."""

    def __init__(self, signature: type[dspy.Signature]):
        super().__init__()
        self.predict = dspy.Predict(signature)

    def forward(self, **inputs):
        with dspy.context(adapter=dspy.JSONAdapter()):
            return self.predict(**inputs)
