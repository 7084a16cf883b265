"""The record of one agent run on one task: frozen dataclasses in memory, JSON through pydantic.

A :class:`Trajectory` holds every attempt (rollout) the agent made, the steps of each (what the
actor was shown, what it chose, the tool call and its observation), plan revisions, memory
contents, every model call with its tokens, and how the final answer was chosen among rollouts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict, TypeAdapter

__all__ = ["ROLLOUT_STATUSES", "ModelCall", "PlanRevision", "Rollout", "Selection", "Step", "ToolCall",
           "Trajectory", "RecordedGrade"]

#: Why a rollout ended. ``answered`` is the only one with an answer from the actor.
ROLLOUT_STATUSES = ("answered", "step_limit", "timeout", "unavailable_tool", "malformed_output", "unknown_tool",
                    "bad_arguments", "tool_error", "model_error")
RolloutStatus = Literal["answered", "step_limit", "timeout", "unavailable_tool", "malformed_output",
                        "unknown_tool", "bad_arguments", "tool_error", "model_error"]
RolloutKind = Literal["main", "best_of_n", "reflection_retry", "tips_retry", "reanswer"]
_STRICT = ConfigDict(extra="forbid")


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call: the role, the model that answered, its outputs, tokens and time."""

    __pydantic_config__ = _STRICT
    role: str
    model: str | None
    outputs: dict[str, Any]
    input_tokens: int
    output_tokens: int
    latency_s: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    __pydantic_config__ = _STRICT
    name: str
    arguments: dict[str, str]
    observation: str | None
    latency_s: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """One actor step. ``*_shown`` are exactly what the actor was given at this step."""

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
    error_kind: str | None       # a ROLLOUT_STATUSES failure kind, None when the step went through
    error: str | None
    summary: str | None          # memory summary of this step (memory >= "summary")
    critique: str | None         # step reflection (tts="reflection", reflect_at="step")
    calls: tuple[ModelCall, ...]


@dataclass(frozen=True, slots=True)
class PlanRevision:
    """A plan the planner wrote. ``visible`` says whether the actor was shown it."""

    __pydantic_config__ = _STRICT
    after_step: int              # 0 for the initial plan
    kind: Literal["static", "initial", "revision"]
    plan: str
    visible: bool
    observations: tuple[str, ...]  # what the reviser was shown
    calls: tuple[ModelCall, ...]


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
    delegation: dict[str, Any] | None = None   # the ROMA run (Run JSON) when subtasks are delegated
    calls: tuple[ModelCall, ...] = ()          # rollout-level calls (e.g. the answer reflection)


@dataclass(frozen=True, slots=True)
class Selection:
    """How the final rollout was chosen. ``scores`` per rollout for ``score``; ``votes`` per
    normalised answer for ``vote``; ``tie`` when the top count or score was shared."""

    __pydantic_config__ = _STRICT
    method: Literal["single", "vote", "list", "score", "reflection"]
    chosen: int
    scores: tuple[float | None, ...] = ()
    votes: dict[str, int] = field(default_factory=dict)
    tie: bool = False
    note: str = ""
    calls: tuple[ModelCall, ...] = ()


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

    def model_calls(self) -> list[ModelCall]:
        calls = list(self.selection.calls)
        for r in self.rollouts:
            calls.extend(r.calls)
            calls.extend(c for p in r.plans for c in p.calls)
            calls.extend(c for s in r.steps for c in s.calls)
        return calls

    def to_json(self) -> str:
        return _ADAPTER.dump_json(self, indent=1).decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> Trajectory:
        return _ADAPTER.validate_json(text)


_ADAPTER = TypeAdapter(Trajectory)
