"""A ROMA atomizer backed by the calibrated meta-router: zero LM calls per node (issue 12 §2).

The meta-routing paper proposes its router as a cheap gate above agents (§7): does direct answering
suffice, and which operations compose the rest. ROMA's atomizer makes the same decision with an LM
call per node. `RouterAtomizer(model)` makes it from the router's route for the node's goal:

- atomic when the route has at most one support operation and no decomposition (D): one executor
  can carry it out; two or more operations, or D, mean a composition, so the node is planned;
- the executor type from the operations: code (C) -> ``code``, retrieval (T) -> ``search``,
  anything else -> ``think``.

Where it maps badly (design/router_semantic.md, "Inside ROMA"): the router's operations D, T, C, G, V
are not ROMA's task types. Delegation (G: ask a specialist because retrieval is down) has no ROMA
executor and becomes ``think``; verification (V) is ROMA's verifier setting, not a task type, so it
is only counted towards "not atomic"; ``write`` is never chosen (no operation composes text). The
router was trained on the 17 templated families of the meta-routing suite, so on open questions
(SimpleQA, FRAMES) its route reflects n-gram or embedding overlap with those families, nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RouterDecision:
    """The atomizer contract's fields; ``reasoning`` shows the route and probabilities in the tree."""

    is_atomic: bool
    task_type: str
    reasoning: str


def decision_for(route: tuple[str, ...]) -> tuple[bool, str]:
    """(is_atomic, task_type) for a router route (support operations in canonical order)."""
    atomic = len(route) <= 1 and "D" not in route
    task_type = "code" if "C" in route else "search" if "T" in route else "think"
    return atomic, task_type


@dataclass(frozen=True, slots=True)
class RouterAtomizer:
    """``(goal, context) -> .is_atomic, .task_type`` from ``model.route(goal)``; ``model`` is a fitted
    ``roma_lab.router.OperationModel`` (lexical or semantic). The context is not routed: the router was
    trained on single prompts. A goal the router cannot read (control characters, no letter or digit)
    raises, so ROMA fails that node with the router's message instead of guessing."""

    model: Any

    def __call__(self, *, goal: str, context: str = "") -> RouterDecision:
        probs = self.model.probability(goal)
        route = self.model.route(goal)
        atomic, task_type = decision_for(route)
        shown = ", ".join(f"{op}={p:.2f}" for op, p in zip("DTCGV", probs))
        return RouterDecision(atomic, task_type, f"router route {''.join(route) or '(answer only)'} at tau "
                                                 f"{self.model.tau:.2f} ({shown})")
