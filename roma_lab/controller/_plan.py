"""Planner output validation: repair deterministically, record every repair as a warning.

The planner contract is ``subtasks: list[{goal, task_type, depends_on: list[int]}]`` where
``depends_on`` holds indices of *earlier* siblings. Anything else a planner emits is repaired here
so the scheduler only ever sees a valid DAG; only a plan with no usable subtask is rejected
(``PlanCheck.subtasks == ()``), which makes the controller re-ask the planner once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from roma_lab.trace import show


@dataclass(frozen=True, slots=True)
class Subtask:
    goal: str
    task_type: str
    depends_on: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PlanCheck:
    """Result of :func:`validate_plan`: the repaired plan (empty = unusable) and what was repaired."""

    subtasks: tuple[Subtask, ...]
    warnings: tuple[str, ...]


def _field(item: Any, name: str) -> Any:
    try:
        return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)
    except Exception:  # an item that breaks when read has no usable field
        return None


def _on_cycle(n: int, edges: list[tuple[int, int]]) -> set[tuple[int, int]]:
    """The edges (i, j) of a directed graph on ``range(n)`` that lie on a cycle: exactly those whose
    two ends share a strongly connected component (linear time, whatever the plan)."""
    import numpy as np
    from scipy.sparse import coo_array
    from scipy.sparse.csgraph import connected_components

    rows, cols = zip(*edges, strict=True)
    graph = coo_array((np.ones(len(edges)), (rows, cols)), shape=(n, n))
    _, component = connected_components(graph, directed=True, connection="strong")
    return {(i, j) for i, j in edges if component[i] == component[j]}


def validate_plan(
    raw: Any,
    *,
    task_types: Collection[str],
    default_type: str,
    max_subtasks: int,
) -> PlanCheck:
    """Return a valid plan repaired from ``raw`` (any planner output), never raising.

    Repairs, each recorded as a warning: plans that are not a list or tuple and items without a
    goal are dropped; plans longer than ``max_subtasks`` are truncated; unknown task types become
    ``default_type``; ``depends_on`` that is not a list, tuple or set is ignored; dependencies that
    are not integers, point at the subtask itself, a later sibling (forward references, which is
    where cycles come from), a dropped item or outside the plan are removed. Repeated dependency
    indices are merged first (they mean the same thing).
    """
    if not isinstance(raw, (list, tuple)):  # only finite, ordered containers: indices refer to positions
        return PlanCheck((), (f"plan is not a list of subtasks (got {type(raw).__name__})",))
    items = list(raw)
    warnings: list[str] = []
    if not items:
        return PlanCheck((), ("plan is empty",))
    if len(items) > max_subtasks:
        warnings.append(f"plan has {len(items)} subtasks; kept the first {max_subtasks}")
        items = items[:max_subtasks]

    kept: dict[int, int] = {}  # original index -> new index
    goals: list[str] = []
    types: list[str] = []
    raw_deps: list[list[int]] = []
    for i, item in enumerate(items):
        goal = _field(item, "goal")
        if not isinstance(goal, str) or not goal.strip():
            warnings.append(f"subtask {i} has no goal; dropped")
            continue
        task_type = _field(item, "task_type")
        if not (isinstance(task_type, str) and task_type in task_types):
            warnings.append(f"subtask {i} has unknown task type {show(task_type)}; using {default_type!r}")
            task_type = default_type
        deps = _field(item, "depends_on")
        if deps is None:
            deps = []
        elif not isinstance(deps, (list, tuple, set, frozenset)):
            warnings.append(f"subtask {i} depends_on is not a list ({show(deps)}); ignored")
            deps = []
        ints: dict[int, None] = {}  # ordered set: a repeated index is one dependency, one warning
        for d in deps:
            if isinstance(d, int) and not isinstance(d, bool):
                ints[d] = None
            else:
                warnings.append(f"subtask {i} has non-integer dependency {show(d)}; removed")
        kept[i] = len(goals)
        goals.append(goal.strip())
        types.append(task_type)
        raw_deps.append(list(ints))

    if not goals:
        return PlanCheck((), (*warnings, "no usable subtask left"))

    originals = sorted(kept)
    edges = [(i, d) for i in originals for d in raw_deps[kept[i]] if d in kept and d != i]
    # only a forward reference can close a cycle; without one the plan is acyclic already
    on_cycle = _on_cycle(len(items), edges) if any(d > i for i, d in edges) else set()
    subtasks = []
    for new_i, orig_i in enumerate(originals):
        clean: list[int] = []
        for d in raw_deps[new_i]:
            if d == orig_i:
                warnings.append(f"subtask {orig_i} depends on itself; removed")
            elif d < 0 or d >= len(items):
                warnings.append(f"subtask {orig_i} depends on {show(d)}, outside the plan; removed")
            elif d not in kept:
                warnings.append(f"subtask {orig_i} depends on dropped subtask {d}; removed")
            elif d > orig_i:
                kind = "a cycle" if (orig_i, d) in on_cycle else "a forward reference"
                warnings.append(f"subtask {orig_i} depends on later subtask {d} ({kind}); removed")
            else:
                clean.append(kept[d])
        subtasks.append(Subtask(goals[new_i], types[new_i], tuple(sorted(clean))))
    return PlanCheck(tuple(subtasks), tuple(warnings))
