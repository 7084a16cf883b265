"""Which answers rest on no evidence: read from the trace, never stored beside it.

A search executor that found nothing says so to the model in its passages (:data:`NO_EVIDENCE`), and
the trace records those passages. A node whose search found nothing has no evidence; so has a node
that used the result of one (a dependency), and a node that aggregated one (a parent), up to the
root. Their status stays what the run recorded (``completed``): the flag is beside it, so a view
never shows such an answer as plainly complete. A status never claims more than the trace shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._types import OUTPUT_STATUSES, Node

__all__ = ["NO_EVIDENCE", "without_evidence"]

#: How a search executor's passages begin when it had none to show the model: no passage matched the
#: goal, or no corpus was configured (it answers from the model's memory, and says so).
NO_EVIDENCE = ("(no passage matched the goal)", "(no corpus configured")


def _empty_search(node: Node) -> bool:
    for call in node.calls:
        passages: Any = call.outputs.get("passages") if isinstance(call.outputs, Mapping) else None
        if isinstance(passages, Sequence) and not isinstance(passages, str) and passages and all(
                isinstance(p, str) and p.startswith(NO_EVIDENCE) for p in passages):
            return True
    return False


def without_evidence(nodes: Sequence[Node]) -> dict[str, str]:
    """Node id -> why it has no evidence, for every node with an output that rests on a search that
    found nothing: its own, a dependency's, or (for a parent) a subtask's."""
    by_id = {n.id: n for n in nodes}
    children: dict[str, list[str]] = {}
    for n in nodes:
        children.setdefault(n.parent_id, []).append(n.id)
    flagged = {n.id: "its search found no passage" for n in nodes if n.status in OUTPUT_STATUSES and _empty_search(n)}
    changed = True
    while changed:  # dependencies and parents, until nothing more is flagged (a tree: this ends)
        changed = False
        for n in nodes:
            if n.id in flagged or n.status not in OUTPUT_STATUSES:
                continue
            used = [d for d in n.depends_on if d in flagged]
            below = [c for c in children.get(n.id, ()) if c in flagged]
            if used or below:
                flagged[n.id] = (f"it used the result of {used[0]}, which has no evidence" if used
                                 else f"it aggregates {below[0]}, which has no evidence")
                changed = True
    return {i: flagged[i] for i in by_id if i in flagged}
