"""Scripted roles with fixed latencies: a deterministic stand-in for an LM, for structure studies,
tests and the scheduling benchmark. Every call is logged, with the number of calls in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._plan import Subtask


class ScriptedFailure(RuntimeError):
    """The injected failure of a scripted executor (``ScriptedRoles.fail``)."""


@dataclass(frozen=True, slots=True)
class ScriptedOutput:
    """What a scripted role returns: the contract fields as attributes."""

    output: str = ""
    is_atomic: bool = True
    task_type: str = "think"
    subtasks: tuple[Subtask, ...] = ()
    verdict: bool = True
    feedback: str = ""


@dataclass(frozen=True, slots=True)
class CallLogEntry:
    seq: int
    event: str  # "start" | "end"
    role: str
    goal: str
    in_flight: int  # calls running right after this event


@dataclass(slots=True)
class ScriptedRoles:
    """Async roles driven by a table of plans: a goal with a plan is non-atomic, any other is atomic.

    Executors answer ``done(<goal>)`` followed by the goals of the dependency results found in their
    context, so a test can see exactly which results reached which node. The aggregator joins its children's
    outputs. ``latency_s`` maps a role (``atomizer``, ``planner``, ``aggregator``,
    ``executor:<type>``, or ``executor`` for all types) to seconds; ``default_latency_s`` covers the
    rest. The executor of a goal in ``fail`` raises :class:`ScriptedFailure` (after its latency),
    to inject a failure. ``log`` records every start/end with the number of calls then in flight.
    """

    plans: Mapping[str, Sequence[Subtask]]
    root_type: str = "think"
    latency_s: Mapping[str, float] = field(default_factory=dict)
    default_latency_s: float = 0.0
    fail: Collection[str] = ()
    log: list[CallLogEntry] = field(default_factory=list)
    _in_flight: int = 0

    @property
    def goal(self) -> str:
        """The root goal: the one plan that is nobody's subtask."""
        children = {s.goal for subtasks in self.plans.values() for s in subtasks}
        roots = [g for g in self.plans if g not in children]
        return roots[0] if roots else "task"

    @property
    def max_in_flight(self) -> int:
        return max((e.in_flight for e in self.log), default=0)

    def role_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`Roma`: ``Roma(**roles.role_kwargs(), max_depth=...)``."""
        types = {s.task_type for subtasks in self.plans.values() for s in subtasks} | {self.root_type}
        return {"atomizer": self.atomizer, "planner": self.planner, "aggregator": self.aggregator,
                "executors": {t: _Executor(self, t) for t in sorted(types)}}

    async def _timed(self, role: str, goal: str) -> None:
        self._in_flight += 1
        self.log.append(CallLogEntry(len(self.log), "start", role, goal, self._in_flight))
        delay = self.latency_s.get(role, self.latency_s.get(role.split(":")[0], self.default_latency_s))
        try:
            await asyncio.sleep(delay)
        finally:
            self._in_flight -= 1
            self.log.append(CallLogEntry(len(self.log), "end", role, goal, self._in_flight))

    def _type_of(self, goal: str) -> str:
        for subtasks in self.plans.values():
            for s in subtasks:
                if s.goal == goal:
                    return s.task_type
        return self.root_type

    async def atomizer(self, goal: str, context: str) -> ScriptedOutput:
        await self._timed("atomizer", goal)
        return ScriptedOutput(is_atomic=goal not in self.plans, task_type=self._type_of(goal))

    async def planner(self, goal: str, context: str) -> ScriptedOutput:
        await self._timed("planner", goal)
        return ScriptedOutput(subtasks=tuple(self.plans.get(goal, ())))

    async def aggregator(self, goal: str, context: str, subtask_results: list[dict]) -> ScriptedOutput:
        await self._timed("aggregator", goal)
        return ScriptedOutput(output=" + ".join(str(r["output"]) for r in subtask_results))


@dataclass(frozen=True, slots=True)
class _Executor:
    roles: ScriptedRoles
    task_type: str

    async def __call__(self, goal: str, context: str) -> ScriptedOutput:
        await self.roles._timed(f"executor:{self.task_type}", goal)
        if goal in self.roles.fail:
            raise ScriptedFailure(f"injected failure of {goal!r}")
        # name (not copy) the results it was given, so outputs stay short in deep dependency chains
        seen = [line[1:-1] for line in context.splitlines() if line.startswith("[") and line.endswith("]")]
        return ScriptedOutput(output=f"done({goal})" + (f" using [{'; '.join(seen)}]" if seen else ""))


def tree_plans(
    branching: Sequence[int],
    *,
    chain_every: int = 0,
    task_types: Sequence[str] = ("think",),
    root: str = "task",
) -> dict[str, tuple[Subtask, ...]]:
    """Plans for a regular tree: ``branching[d]`` children per node at depth ``d``.

    Child ``i`` gets task type ``task_types[i % len]``; with ``chain_every = k > 0`` every k-th
    child (i = k-1, 2k-1, ...) depends on its left neighbour, so some siblings wait for others.
    """
    if any(b < 1 for b in branching):
        raise ValueError(f"branching factors must be >= 1, got {list(branching)}")
    plans: dict[str, tuple[Subtask, ...]] = {}
    level = [root]
    for width in branching:
        next_level = []
        for goal in level:
            subtasks = []
            for i in range(width):
                deps = (i - 1,) if chain_every > 0 and i % chain_every == chain_every - 1 and i > 0 else ()
                subtasks.append(Subtask(f"{goal}.{i}", task_types[i % len(task_types)], deps))
            plans[goal] = tuple(subtasks)
            next_level.extend(s.goal for s in subtasks)
        level = next_level
    return plans


def fixed_latency_roles(
    branching: Sequence[int] = (8, 4),
    *,
    latency_s: float = 0.01,
    executor_latency_s: Mapping[str, float] | None = None,
    chain_every: int = 0,
    task_types: Sequence[str] = ("think",),
) -> ScriptedRoles:
    """Scripted roles for a regular tree (see :func:`tree_plans`) where every call takes
    ``latency_s`` except executors listed in ``executor_latency_s`` (task type -> seconds)."""
    per_role = {f"executor:{t}": s for t, s in (executor_latency_s or {}).items()}
    return ScriptedRoles(tree_plans(branching, chain_every=chain_every, task_types=task_types),
                         root_type=task_types[0], latency_s=per_role, default_latency_s=latency_s)
