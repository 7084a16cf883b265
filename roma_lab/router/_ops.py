"""Operations D, T, C, G, V, A: names, preregistered costs, route constraints, and the explicit
task state they act on.

Every operation reads and writes the artifacts in `_State`, so a missing or misordered prerequisite
changes the answer that reaches the evaluator. Family-specific behaviour (one handler per operation
a family reacts to) lives in `_benchmark.FAMILIES`; running a route is `_execute.execute`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

#: Support operations in canonical order, then the answer action.
SUPPORT_OPS: tuple[str, ...] = ("D", "T", "C", "G", "V")
ANSWER = "A"
OP_NAMES: Mapping[str, str] = {
    "D": "decompose",
    "T": "retrieve/tool",
    "C": "code",
    "G": "delegate",
    "V": "verify",
    "A": "answer",
}
#: Preregistered normalised costs (paper §4).
COSTS: Mapping[str, float] = {"D": 0.45, "T": 1.00, "C": 1.15, "G": 1.40, "V": 0.65, "A": 0.30}
BUDGET = 4.5
MAX_SUPPORT_OPS = 3


def canonical(ops) -> tuple[str, ...]:
    """Support operations in canonical order D,T,C,G,V; unknown names are an error."""
    ops = set(ops)
    unknown = ops - set(SUPPORT_OPS)
    if unknown:
        raise ValueError(f"unknown operation(s) {sorted(unknown)}; expected a subset of {SUPPORT_OPS}")
    return tuple(o for o in SUPPORT_OPS if o in ops)


def route_cost(support: tuple[str, ...]) -> float:
    """Cost of a route: its support operations plus the final answer action."""
    return round(sum(COSTS[o] for o in support) + COSTS[ANSWER], 10)


def is_feasible(support: tuple[str, ...], *, budget: float = BUDGET, max_ops: int = MAX_SUPPORT_OPS) -> bool:
    return len(support) <= max_ops and route_cost(support) <= budget + 1e-9


@dataclass
class _State:
    """Mutable working state of one execution; only the executor and handlers touch it."""

    prompt: str
    subgoals: Any = None      # written by D
    evidence: Any = None      # written by T (or G)
    computed: Any = None      # written by C
    candidate: str | None = None


Handler = Callable[[_State, Mapping[str, Any]], str]
