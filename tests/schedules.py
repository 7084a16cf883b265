"""A run with a known schedule, and how many calls ran at once: shared by the controller's timeline
tests and the execution-tree view's tests (in Python and in the browser)."""

from __future__ import annotations

from roma_lab.trace import Run
from roma_lab.controller import Roma, fixed_latency_roles


def scheduled_run(max_concurrency: int, on_event=None) -> Run:
    """Two levels of three; every third sibling depends on its left neighbour; search calls are slower."""
    roles = fixed_latency_roles((3, 3), latency_s=0.01, chain_every=3, task_types=("search", "think", "think"),
                                executor_latency_s={"search": 0.03})
    return Roma(**roles.role_kwargs(), max_depth=2, max_concurrency=max_concurrency, max_subtasks=3).run(
        roles.goal, on_event=on_event)


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most (start, end) intervals open at one moment; one ending when another starts does not overlap it."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak
