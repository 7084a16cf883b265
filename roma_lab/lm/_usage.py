"""The one usage count: what one model call consumed, from its DSPy usage tracker and its LM's history.

Both trace writers read it: the controller for every role call (``RoleCall``) and the agent for every
model call of a trajectory, so tokens, cost and model names follow one rule everywhere. The cost rule
is ``_price.py``'s: in-process models cost 0, a cached completion costs nothing now, a fresh remote
completion without a price is unknown (None), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._price import call_cost, in_process, served_from_cache

__all__ = ["CallUsage", "call_usage"]


@dataclass(frozen=True, slots=True)
class CallUsage:
    """Tokens and cost of one call. ``model``: the models that reported usage, joined by ", " in
    name order (None: none did, e.g. every request was served from a cache)."""

    input_tokens: int
    output_tokens: int
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
        cost = float(sum(costs))
    else:
        cost = None  # a fresh completion without a price (or no LM history at all): unknown
    return CallUsage(input_tokens=sum(int(u.get("prompt_tokens") or 0) for u in usage.values()),
                     output_tokens=sum(int(u.get("completion_tokens") or 0) for u in usage.values()),
                     cost=cost, model=", ".join(sorted(usage)) or None)
