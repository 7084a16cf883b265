"""Schedule bounds of a finished run, from the latencies it recorded.

For the same tree and the same call latencies: the critical-path bound (what an ideal
dependency-aware scheduler with unlimited concurrency achieves), the time of a level-by-level
barrier schedule (siblings run in dependency generations, each waiting for the slowest member of
the previous one), and sequential execution (sum of all calls). See design/scheduling.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._types import Run

_BEFORE_CHILDREN = ("atomizer", "planner")


@dataclass(frozen=True, slots=True)
class ScheduleBounds:
    wall_s: float
    critical_path_s: float
    barrier_s: float
    sequential_s: float


def schedule_bounds(run: Run) -> ScheduleBounds:
    """Critical-path, barrier and sequential times implied by ``run``'s recorded call latencies."""
    children: dict[str, list] = {}
    for n in run.nodes:
        if n.parent_id is not None:
            children.setdefault(n.parent_id, []).append(n)

    def times(node) -> tuple[float, float]:
        pre = sum(c.latency_s for c in node.calls if c.role in _BEFORE_CHILDREN)
        post = sum(c.latency_s for c in node.calls if c.role not in _BEFORE_CHILDREN)
        kids = children.get(node.id, [])
        if not kids:
            return pre + post, pre + post
        index = {k.id: i for i, k in enumerate(kids)}
        sub = [times(k) for k in kids]
        finish: list[float] = []  # earliest finish of each child with unlimited concurrency
        generation: list[int] = []
        for i, k in enumerate(kids):
            deps = [index[d] for d in k.depends_on]
            finish.append(sub[i][0] + max((finish[j] for j in deps), default=0.0))
            generation.append(1 + max((generation[j] for j in deps), default=-1))
        barrier = sum(max(sub[i][1] for i in range(len(kids)) if generation[i] == g)
                      for g in range(max(generation) + 1))
        return pre + max(finish) + post, pre + barrier + post

    critical, barrier = times(run.root)
    sequential = sum(c.latency_s for n in run.nodes for c in n.calls)
    return ScheduleBounds(run.wall_s, critical, barrier, sequential)
