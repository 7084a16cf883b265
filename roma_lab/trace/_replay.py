"""The schedule a replayed run would have had with its recorded model timings (issue 26).

Re-running a notebook serves every model request from the completion cache, so the replayed run's
own clock spans only lookups. When every role call was served that way and the cache recorded how
long each completion took to generate, :func:`replayed_schedule` re-times the run as if each call
had taken that long, with the waits of the controller (``_roma.py``). Pure: it reads a ``Run``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass

from ._types import STOPPED_RUN_STATUSES, Node, Run

_BEFORE_CHILDREN = ("atomizer", "planner")  # a planned node's calls before its subtasks are created


@dataclass(frozen=True, slots=True)
class ReplayedCall:
    """One role call re-timed: when it asked for a slot, got one, and ended (seconds on the run's clock)."""

    queued_s: float
    started_s: float
    ended_s: float


@dataclass(frozen=True, slots=True)
class ReplayedNode:
    """One node re-timed, as :class:`Node` records times (None where the run recorded none: a node
    that never began has no ``started_s``, a node reused by a repair no times at all); ``calls`` in
    the order of ``Node.calls``."""

    created_s: float | None
    started_s: float | None
    ended_s: float | None
    calls: tuple[ReplayedCall, ...]


@dataclass(frozen=True, slots=True)
class ReplayedSchedule:
    """Every node of a replayed run (by id) at its recorded timings; ``wall_s`` when the root ends."""

    nodes: Mapping[str, ReplayedNode]
    wall_s: float


def _duration(node: Node, index: int) -> float | None:
    """A call's recorded time: its model requests at their recorded latencies, plus its tool calls
    (which ran in this run, at the times it recorded); None unless every request is a cache replay
    with a recorded latency (a call with no request recorded included)."""
    call = node.calls[index]
    recorded = [e.recorded_latency_s if e.cached else None for e in call.exchanges]
    if not recorded or None in recorded:
        return None
    return sum(recorded) + sum(t.latency_s for t in call.tools)


def replayed_schedule(run: Run) -> ReplayedSchedule | None:
    """The times ``run`` would have recorded had each role call taken its recorded time, or None
    when some role call was not a cache replay with recorded latencies (a live call, an entry or a
    cache that recorded no time, a call that recorded no model request), when the run made no call,
    or when it was stopped (its deadline cut calls the trace does not hold).

    The rule, the controller's (``_roma.py``): a node begins once its parent planned it (the end of
    the parent's last atomizer/planner call before its subtasks; its parent's start when there was
    none, as a repair's kept plan) and its dependencies (``depends_on``) ended; the root at 0. Its
    calls run one after another: the first asks for a slot when the node begins, each next one when
    the previous one ended, and the first call after its subtasks (aggregator, verifier) also only
    once every subtask ended. A node whose dependency has no output never begins (skipped): it ends
    when its dependencies end. A node reused by a repair makes no call and, for its dependents, ends
    when it could begin. A node ends with its last call or last subtask, whichever is later. With a
    recorded ``max_concurrency``, a call holds one of that many slots: when a slot frees, the call
    waiting longest takes it (a FIFO semaphore), ties broken by the order the calls queued in the
    run; without one, every call starts when it asks.
    """
    if run.status in STOPPED_RUN_STATUSES:
        return None
    durations = {(n.id, i): _duration(n, i) for n in run.nodes for i in range(len(n.calls))}
    if not durations or None in durations.values():
        return None
    by_id = {n.id: n for n in run.nodes}
    children: dict[str, list[Node]] = {n.id: [] for n in run.nodes}
    for n in run.nodes:
        if n.parent_id is not None:
            children[n.parent_id].append(n)
    ends: dict[tuple[str, int], float] = {}  # calls scheduled so far
    starts: dict[tuple[str, int], float] = {}
    known: dict[tuple[str, str], float] = {}  # ("begin" | "end" | "planned", node id) once determined

    def pre_calls(n: Node) -> int:
        """How many of the node's calls came before its subtasks (all of them when it has none)."""
        if not children[n.id]:
            return len(n.calls)
        return next((i for i, c in enumerate(n.calls) if c.role.split(":")[0] not in _BEFORE_CHILDREN), len(n.calls))

    def latest(times: list[float | None]) -> float | None:
        return None if None in times else max(times, default=0.0)

    def memo(kind: str, n: Node, value: float | None) -> float | None:
        if value is not None:
            known[kind, n.id] = value
        return value

    def planned(n: Node) -> float | None:  # when the node was created
        if ("planned", n.id) in known or n.parent_id is None:
            return known.get(("planned", n.id), 0.0)
        parent = by_id[n.parent_id]
        k = pre_calls(parent)
        return memo("planned", n, begin(parent) if k == 0 else ends.get((parent.id, k - 1)))

    def begin(n: Node) -> float | None:  # when the node began (or, skipped, could have)
        if ("begin", n.id) in known:
            return known["begin", n.id]
        return memo("begin", n, latest([planned(n), *(end(by_id[d]) for d in n.depends_on)]))

    def end(n: Node) -> float | None:
        if ("end", n.id) in known:
            return known["end", n.id]
        if n.reused:
            return memo("end", n, begin(n))
        times = [begin(n), *(ends.get((n.id, i)) for i in range(len(n.calls))), *(end(k) for k in children[n.id])]
        return memo("end", n, latest(times))

    def asks(n: Node, i: int) -> float | None:  # when call i of node n asks for a slot
        if i == 0:
            return begin(n)
        waits = [ends.get((n.id, i - 1))]
        if i == pre_calls(n):
            waits += [end(k) for k in children[n.id]]
        return latest(waits)

    limit = run.settings.max_concurrency if run.settings is not None else None
    free = [0.0] * limit if limit is not None else None  # when each slot is next free
    order = {key: k for k, key in enumerate(sorted(durations, key=lambda key: _queued(by_id[key[0]], key[1])))}
    queued: dict[tuple[str, int], float] = {}
    while len(ends) < len(durations):
        for key in durations.keys() - ends.keys() - queued.keys():
            t = asks(by_id[key[0]], key[1])
            if t is not None:
                queued[key] = t
        slot = free[0] if free is not None else -math.inf
        key = min(queued.keys() - ends.keys(), key=lambda k: (max(queued[k], slot), queued[k], order[k]))
        starts[key] = max(queued[key], slot)
        ends[key] = starts[key] + durations[key]
        if free is not None:
            heapq.heapreplace(free, ends[key])
    nodes = {}
    for n in run.nodes:
        calls = tuple(ReplayedCall(queued[n.id, i], starts[n.id, i], ends[n.id, i]) for i in range(len(n.calls)))
        if n.reused:
            nodes[n.id] = ReplayedNode(None, None, None, calls)
        else:
            nodes[n.id] = ReplayedNode(planned(n), None if n.started_s is None else begin(n), end(n), calls)
    return ReplayedSchedule(nodes, end(run.root))


def _queued(node: Node, index: int) -> float:
    """When a call asked for a slot in the run (files from before ``queued_s``: when it got one)."""
    call = node.calls[index]
    return call.started_s if call.queued_s is None else call.queued_s
