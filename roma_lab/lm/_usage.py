"""The one usage count: what one model call consumed, from its DSPy usage tracker and its LM's history.

Both trace writers read it: the controller for every role call (``RoleCall``) and the agent for every
model call of a trajectory, so tokens, cost and model names follow one rule everywhere. The cost rule
is ``_price.py``'s: in-process models cost 0, a cached completion costs nothing now, a fresh remote
completion without a price is unknown (None), never 0.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._price import call_cost, in_process, served_from_cache

__all__ = ["CallUsage", "UsageWarning", "call_usage"]

#: More tokens than any one call has consumed: a count past it is a server's error, not usage.
MAX_CALL_TOKENS = 100_000_000


class UsageWarning(UserWarning):
    """A server reported usage outside its domain (negative, not a number, absurdly large): it is
    recorded as unknown, never used as a number, and the call's answer stands."""


def _known_count(values: Iterable[Any], what: str, model: str) -> int | None:
    """The sum of reported token counts, or None (unknown, with a warning) if any is outside the
    domain of a count. A missing count (None) is 0, as DSPy reports a cached call's."""
    total = 0
    for value in values:
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or value != int(value) or not 0 <= value <= MAX_CALL_TOKENS:
            warnings.warn(f"{model} reported {what} = {value!r}, not a token count: recorded as unknown",
                          UsageWarning, stacklevel=3)
            return None
        total += int(value)
    return total


@dataclass(frozen=True, slots=True)
class CallUsage:
    """Tokens and cost of one call. ``model``: the models that reported usage, joined by ", " in
    name order (None: none did, e.g. every request was served from a cache)."""

    input_tokens: int | None  # None: unknown (a server reported no count it could have)
    output_tokens: int | None
    cost: float | None
    model: str | None


def call_usage(usage: Mapping[str, Mapping[str, Any]], history: Sequence[Mapping[str, Any]]) -> CallUsage:
    """The usage of one finished call: ``usage`` is its own tracker's ``get_total_tokens()`` (model ->
    token counts) and ``history`` the entries its own LM copy recorded during the call."""
    # a cached completion keeps its original price in history but costs nothing now (and reports no usage)
    costs = [call_cost(h.get("model"), h.get("cost")) for h in history if not served_from_cache(h)]
    if usage and all(in_process(str(model)) for model in usage):
        cost = 0.0  # only in-process models answered (also when the LM history is not this call's)
    elif history and None not in costs:
        try:
            cost = float(sum(costs))
        except (TypeError, ValueError):  # a price that is not a number: below, unknown with a warning
            cost = math.nan
    else:
        cost = None  # a fresh completion without a price (or no LM history at all): unknown
    models = ", ".join(sorted(usage)) or None
    if cost is not None and (not math.isfinite(cost) or cost < 0):  # never a negative or made-up cost
        warnings.warn(f"{models} reported a cost of {cost!r}: recorded as unknown", UsageWarning, stacklevel=2)
        cost = None
    return CallUsage(input_tokens=_known_count((u.get("prompt_tokens") for u in usage.values()), "prompt_tokens", models),
                     output_tokens=_known_count((u.get("completion_tokens") for u in usage.values()),
                                                "completion_tokens", models),
                     cost=cost, model=models)
