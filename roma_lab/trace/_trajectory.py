"""The record of one tool-using agent's run on one task: frozen dataclasses in memory, JSON through pydantic.

A :class:`Trajectory` holds every attempt (rollout) the agent made, the steps of each (what the
actor was shown, what it chose, the tool call and its observation), plan revisions, memory
contents, and how the final answer was chosen among rollouts. Calls are recorded in the trace
vocabulary of a ROMA run: every model call is a ``trace.RoleCall`` and every tool call a
``trace.ToolCall``, and :meth:`Trajectory.as_run` gives the trajectory as a ``trace.Run``
whose nodes are the task, its rollouts and their steps, so one usage count and one set of tables
(``calls_df``, ``usage_df``, ``tools_df``) serve both. It lives in the trace room beside ``Run``:
the runner, the viewers and the paper wings read it without importing the agent. See design/agents.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, TypeAdapter, ValidationError

from ._types import Node, RoleCall, Run, ToolCall, Usage, run_status

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ROLLOUT_STATUSES", "TRAJECTORY_KIND", "PlanRevision", "Rollout", "Selection", "Step", "Trajectory",
           "TrajectoryFormatError", "RecordedGrade", "read_trajectory"]

#: Why a rollout ended. ``answered`` is the only one with an answer from the actor.
ROLLOUT_STATUSES = ("answered", "step_limit", "timeout", "unavailable_tool", "malformed_output", "unknown_tool",
                    "bad_arguments", "tool_error", "model_error", "repeated_call")
RolloutStatus = Literal["answered", "step_limit", "timeout", "unavailable_tool", "malformed_output",
                        "unknown_tool", "bad_arguments", "tool_error", "model_error", "repeated_call"]
RolloutKind = Literal["main", "best_of_n", "reflection_retry", "tips_retry", "reanswer"]
_STRICT = ConfigDict(extra="forbid")
_ROOT = "task"  # the id of a trajectory's root node in :meth:`Trajectory.as_run`


class TrajectoryFormatError(ValueError):
    """A saved trajectory is not in the current format (e.g. written before agents recorded their
    calls as ``trace.RoleCall`` / ``ToolCall``) or is not a trajectory at all. Names the file."""


@dataclass(frozen=True, slots=True)
class Step:
    """One actor step. ``*_shown`` are exactly what the actor was given at this step.

    ``tool_call`` is the tool call the agent made for the actor's action (status ``ok``, ``error``
    for a failing tool, ``disconnected`` for one out of service); ``observation`` is the tool's
    result text the actor was shown next (None when the call failed or none was made), and
    ``error_kind`` the agent's failure kind of the step. ``calls`` are the step's model calls, the
    actor's first (then query rewrites made inside the tool, memory and reflection calls)."""

    __pydantic_config__ = _STRICT
    index: int
    subtask: str | None          # the ROMA subtask this step served, None in the main loop
    plan_shown: str
    memory_shown: str
    feedback_shown: str
    thought: str
    action: str
    answer: str | None
    tool_call: ToolCall | None
    observation: str | None
    error_kind: str | None       # a ROLLOUT_STATUSES failure kind, None when the step went through
    error: str | None
    summary: str | None          # memory summary of this step (memory >= "summary")
    critique: str | None         # step reflection (tts="reflection", reflect_at="step")
    calls: tuple[RoleCall, ...]


@dataclass(frozen=True, slots=True)
class PlanRevision:
    """A plan the planner wrote. ``visible`` says whether the actor was shown it."""

    __pydantic_config__ = _STRICT
    after_step: int              # 0 for the initial plan
    kind: Literal["static", "initial", "revision"]
    plan: str
    visible: bool
    observations: tuple[str, ...]  # what the reviser was shown
    calls: tuple[RoleCall, ...]


@dataclass(frozen=True, slots=True)
class Rollout:
    """One attempt at the task, with its own tool state, memory and seed."""

    __pydantic_config__ = _STRICT
    index: int
    kind: RolloutKind
    seed: int | None             # None at temperature 0 (greedy: the seed would change nothing)
    status: RolloutStatus
    error: str | None
    answer: str | None
    note: str                    # shown at every step: why this attempt was made (a critique, a re-answer)
    tips_shown: tuple[str, ...]
    steps: tuple[Step, ...]
    plans: tuple[PlanRevision, ...]
    long_term_before: str
    long_term_after: str
    # The ROMA run (Run JSON, its clock starting at ``delegation_started_s`` on the trajectory's) when
    # subtasks are delegated; its decomposer calls are its role calls, its executors' work the subtask steps.
    delegation: dict[str, Any] | None = None
    delegation_started_s: float | None = None


@dataclass(frozen=True, slots=True)
class Selection:
    """How the final rollout was chosen. ``scores`` per rollout for ``score``; for ``vote``,
    ``votes`` per answer key (the grader's, ``bench.answer_key``) and ``ballots`` each rollout's key
    (None: it did not vote); ``tie`` when the top count or score was shared."""

    __pydantic_config__ = _STRICT
    method: Literal["single", "vote", "list", "score", "reflection"]
    chosen: int
    scores: tuple[float | None, ...] = ()
    votes: dict[str, int] = field(default_factory=dict)
    ballots: tuple[str | None, ...] = ()  # empty in trajectories saved before it existed
    tie: bool = False
    note: str = ""
    calls: tuple[RoleCall, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordedGrade:
    """The grade of the final answer, as the task's grader gave it."""

    __pydantic_config__ = _STRICT
    label: str | None
    score: float | None          # None when grading failed (see error)
    grader: str
    error: str | None = None
    raw: str = ""
    details: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Trajectory:
    __pydantic_config__ = _STRICT
    task_id: str
    benchmark: str
    split: str
    stratum: str
    question: str
    config: dict[str, Any]
    config_hash: str
    run: int
    temperature: float
    rollouts: tuple[Rollout, ...]
    selection: Selection
    answer: str | None
    status: RolloutStatus        # status of the rollout the answer comes from
    reanswered: bool
    uses_gold_answers: bool
    wall_s: float
    grade: RecordedGrade | None = None

    @property
    def output(self) -> str:
        """The answer as text (the bench graders and run files read ``.output``)."""
        return self.answer or ""

    @property
    def final_rollout(self) -> Rollout:
        return self.rollouts[self.selection.chosen]

    @property
    def n_steps(self) -> int:
        return sum(len(r.steps) for r in self.rollouts)

    @property
    def n_tool_calls(self) -> int:
        return sum(s.tool_call is not None for r in self.rollouts for s in r.steps)

    @property
    def n_repeated_calls(self) -> int:
        """Tool calls the repeat guard did not run again (``AgentConfig.repeat_guard``)."""
        return sum(s.error_kind == "repeated_call" for r in self.rollouts for s in r.steps)

    def as_run(self) -> Run:
        """The trajectory as a ROMA run trace whose nodes are the task, its rollouts and their steps.

        - Root ``task`` (task type ``task``): goal the question, output the final answer; it holds
          the selection's calls (scorer, selector, answer reflection). ``completed`` when there is
          an answer, else ``failed`` with the final rollout's status and error.
        - One child per rollout, ``r<i>`` (task type: the rollout's kind, e.g. ``best_of_n``; goal the
          question): ``completed`` with its answer when it answered, else ``failed`` with its status
          (a rollout that hit the step limit or the wall-time budget ended by itself: the run was
          not stopped, so it is ``failed``, never ``cancelled``). It holds its plans' calls (the
          initial plan and every revision, in order).
        - Its steps below it, ``r<i>.<n>`` by position (task type ``step``; goal the action chosen):
          ``completed`` with the answer or the observation, or ``failed`` with the step's
          ``error_kind``. A step's actor call carries the step's tool call.
        - A delegated ROMA run's nodes grafted below their rollout (ids ``r<i>/<id>``, times moved to
          the trajectory's clock), their calls' roles prefixed ``decomposer:``; executor calls are
          left out (their model calls are the subtask's steps, placed below the node of that subtask).

        The run's status follows its nodes as a ROMA run's does: ``failed`` without an answer,
        ``completed`` when every node completed, else ``partial`` (e.g. a best-of-N rollout failed)."""
        answer_error = None if self.answer is not None else _why(self.final_rollout)
        nodes = [Node(id=_ROOT, parent_id=None, depth=0, goal=self.question, task_type="task",
                      status="completed" if self.answer is not None else "failed", output=self.answer,
                      error=answer_error, calls=self.selection.calls, created_s=0.0, started_s=0.0,
                      ended_s=self.wall_s)]
        for r in self.rollouts:
            nodes.extend(_rollout_nodes(r, self.question))
        return Run(goal=self.question, status=run_status(tuple(nodes)), output=self.answer, nodes=tuple(nodes), wall_s=self.wall_s)

    def final_answer(self) -> str | None:
        """The answer a runner grades (None: the agent gave none, graded as the wrong answer it is)."""
        return self.answer

    def usage(self) -> Usage:
        """Usage in total (:meth:`Run.usage` of :meth:`as_run`)."""
        return self.as_run().usage()

    def facts(self) -> dict[str, Any]:
        """What a table may need of this trajectory beyond its row: how the agent ran (status of the
        chosen rollout, steps, tool calls, repeated calls, rollouts, re-answer) and with what."""
        return {"agent_status": self.status, "steps": self.n_steps, "tool_calls": self.n_tool_calls,
                "repeated_calls": self.n_repeated_calls, "rollouts": len(self.rollouts),
                "reanswered": self.reanswered, "uses_gold_answers": self.uses_gold_answers,
                "seed": self.rollouts[0].seed, "temperature": self.temperature, "config_hash": self.config_hash,
                "wall_s": self.wall_s}

    def with_grade(self, grade: RecordedGrade) -> Trajectory:
        """This trajectory with its final answer's grade recorded (a runner grades, then saves)."""
        return replace(self, grade=grade)

    def calls_df(self) -> pd.DataFrame:
        """One row per model call (:meth:`Run.calls_df` of :meth:`as_run`)."""
        return self.as_run().calls_df()

    def usage_df(self) -> pd.DataFrame:
        """Usage per component and in total (:meth:`Run.usage_df` of :meth:`as_run`)."""
        return self.as_run().usage_df()

    def tools_df(self) -> pd.DataFrame:
        """One row per tool call (:meth:`Run.tools_df` of :meth:`as_run`)."""
        return self.as_run().tools_df()

    def to_json(self) -> str:
        text = _ADAPTER.dump_json(self, indent=1).decode()
        return f'{{\n "kind": "{TRAJECTORY_KIND}",{text[1:]}'  # the kind first, as every saved trace names it

    @classmethod
    def from_json(cls, text: str | bytes) -> Trajectory:
        """Read :meth:`to_json` text back; text in an older format (or not a trajectory) is a
        :class:`TrajectoryFormatError`."""
        try:
            data = json.loads(text)
            if isinstance(data, dict) and data.get("kind") == TRAJECTORY_KIND:
                del data["kind"]  # absent from files written before traces named their kind
                text = json.dumps(data)
            return _ADAPTER.validate_json(text)
        except ValueError as err:
            if not isinstance(err, ValidationError):
                raise TrajectoryFormatError(f"not a trajectory: not JSON ({err})") from err
            raise TrajectoryFormatError(f"not a trajectory in the current format ({err.error_count()} problems, "
                                        f"first: {_first_problem(err)}); trajectories written before agents "
                                        "recorded trace.RoleCall/ToolCall must be re-run") from err


_ADAPTER = TypeAdapter(Trajectory)
#: The ``kind`` a saved trajectory names first (``roma_lab.trace``'s runs name "run").
TRAJECTORY_KIND = "trajectory"


def _first_problem(err: ValidationError) -> str:
    first = err.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc']) or 'the file'}: {first['msg']}"


def _why(r: Rollout) -> str:
    return f"{r.status}: {r.error}" if r.error else r.status


def _span(calls: tuple[RoleCall, ...], tools: tuple[ToolCall, ...] = ()) -> tuple[float | None, float | None]:
    """When the first of these calls started and the last ended (None, None: no call)."""
    timed = [(c.started_s, c.started_s + c.latency_s) for c in (*calls, *tools)]
    return (min(t[0] for t in timed), max(t[1] for t in timed)) if timed else (None, None)


def _rollout_nodes(r: Rollout, question: str) -> list[Node]:
    """The nodes of one rollout in :meth:`Trajectory.as_run`: itself, its grafted ROMA nodes, its steps."""
    rid = f"r{r.index}"
    grafted = _grafted(r, rid)
    subtask_node = {}  # a subtask step goes below the (first) ROMA node of its subtask
    for n in grafted:
        subtask_node.setdefault(n.goal, n)
    steps = []
    for position, s in enumerate(r.steps, 1):
        parent = subtask_node.get(s.subtask) if s.subtask is not None else None
        calls = s.calls
        if s.tool_call is not None and calls:  # the tool the actor's reply chose, called by the agent
            calls = (replace(calls[0], tools=(s.tool_call,)), *calls[1:])
        start, end = _span(calls, () if s.tool_call is None else (s.tool_call,))
        failed = s.error_kind is not None
        steps.append(Node(id=f"{rid}.{position}", parent_id=rid if parent is None else parent.id,
                          depth=2 if parent is None else parent.depth + 1, goal=s.action or "(no action)",
                          task_type="step", status="failed" if failed else "completed",
                          output=None if failed else s.answer if s.answer is not None else s.observation,
                          error=f"{s.error_kind}: {s.error}" if failed else None, calls=calls,
                          created_s=start, started_s=start, ended_s=end))
    plan_calls = tuple(c for p in r.plans for c in p.calls)
    ends = [t for n in (*grafted, *steps) for t in (n.started_s, n.ended_s) if t is not None]
    own_start, own_end = _span(plan_calls)
    times = [t for t in (own_start, own_end, *ends) if t is not None]
    start, end = (min(times), max(times)) if times else (None, None)
    answered = r.status == "answered"
    node = Node(id=rid, parent_id=_ROOT, depth=1, goal=question, task_type=r.kind,
                status="completed" if answered else "failed", output=r.answer if answered else None,
                error=None if answered else _why(r), calls=plan_calls, created_s=start, started_s=start, ended_s=end)
    return [node, *grafted, *steps]


def _grafted(r: Rollout, rid: str) -> list[Node]:
    """A rollout's delegated ROMA run as nodes below it, on the trajectory's clock."""
    if r.delegation is None:
        return []
    run = Run.from_json(json.dumps(r.delegation))
    shift = r.delegation_started_s or 0.0

    def moved(t: float | None) -> float | None:
        return None if t is None else t + shift

    def graft_id(node_id: str | None) -> str:
        return rid if node_id is None else f"{rid}/{node_id}"

    return [replace(n, id=graft_id(n.id), parent_id=graft_id(n.parent_id), depth=n.depth + 2,
                    depends_on=tuple(graft_id(d) for d in n.depends_on),
                    calls=tuple(replace(c, role=f"decomposer:{c.role}", started_s=c.started_s + shift,
                                        queued_s=moved(c.queued_s))
                                for c in n.calls if not c.role.startswith("executor")),
                    created_s=moved(n.created_s), started_s=moved(n.started_s), ended_s=moved(n.ended_s))
            for n in run.nodes]


def read_trajectory(path: str | Path) -> Trajectory:
    """The trajectory saved at ``path``; a file in an older format is a :class:`TrajectoryFormatError`
    naming the file."""
    from roma_lab.results import read_regular_bytes

    try:
        return Trajectory.from_json(read_regular_bytes(path))
    except TrajectoryFormatError as err:
        raise TrajectoryFormatError(f"{path}: {err}") from err.__cause__
