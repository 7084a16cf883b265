"""The executable offline tool benchmark: the 504-task meta-routing suite seen by a tool-using agent.

Each support operation (D decompose, T retrieve, C compute, G delegate, V verify) is a tool whose
observation comes from the task's hidden state (``roma_lab.router._tools``); the agent decides what
to call and when to answer, and the suite's exact evaluator grades the answer with its four
statuses. Calling an unavailable component stops the attempt, as the suite's executor does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from roma_lab.bench import Grade, Item, exact_key, guarded, prediction_text
from roma_lab.router import (DEFAULT_SEED, SPLITS, SUCCESS, TOOLS, OperationSession, generate_suite, split_tasks,
                             tool_outcome)

from ._env import AgentTask, Tool, ToolContext, ToolUnavailable

__all__ = ["SUITE_BENCHMARK", "SUITE_TOOLS", "SuiteGrader", "sample_suite_tasks", "suite_tasks"]

SUITE_BENCHMARK = "meta-routing-tools"
SUITE_TOOLS: tuple[Tool, ...] = tuple(Tool(t.name, t.description) for t in TOOLS)
_OP_OF = {t.name: t.op for t in TOOLS}


class _SuiteEnvironment:
    """One attempt's working state on one suite task."""

    tools = SUITE_TOOLS

    def __init__(self, task) -> None:
        self.session = OperationSession(task)

    def call(self, name: str, arguments: Mapping[str, str]) -> str:
        if self.session.stopped:  # only reachable when rollouts share one state (the official variant)
            raise ToolUnavailable("this task's state stopped at an out-of-service component")
        observation = self.session.call(_OP_OF[name])
        if observation.unavailable:
            raise ToolUnavailable(observation.text)
        return observation.text


@dataclass(frozen=True, slots=True)
class SuiteGrader:
    """The suite's exact evaluator applied to a trajectory's final answer.

    Labels are the suite's statuses: success, incorrect_answer, no_answer, and
    unavailable_component when the final attempt stopped at an out-of-service tool.
    """

    task: Any  # roma_lab.router.Task
    name: str = "meta-routing exact evaluator"

    def __call__(self, item: Item, prediction: Any) -> Grade:
        def grade() -> Grade:
            stopped = getattr(prediction, "status", None) == "unavailable_tool"
            status = tool_outcome(self.task, prediction_text(prediction), stopped=stopped)
            return Grade(label=status, score=float(status == SUCCESS), grader=self.name)

        return guarded(self.name, grade)

    @staticmethod
    def answer_key(answer: object) -> str:
        """The exact evaluator's own key (``router.is_correct`` trims whitespace, nothing more)."""
        return exact_key(answer)


def _agent_task(task) -> AgentTask:
    item = Item(benchmark=SUITE_BENCHMARK, item_id=task.task_id, question=task.prompt, answer=task.answer,
                metadata={"family": task.family, "workload": task.workload, "kind": task.kind})

    def environment(context: ToolContext) -> _SuiteEnvironment:
        return _SuiteEnvironment(task)

    return AgentTask(item=item, split=task.split, stratum=task.family, environment=environment,
                     grader=SuiteGrader(task))


def suite_tasks(splits: Sequence[str] = ("dev",), *, seed: int = DEFAULT_SEED,
                families: Sequence[str] | None = None) -> list[AgentTask]:
    """Suite tasks of ``splits`` (train is for mining tips only) as agent tasks, stratum = family."""
    for split in splits:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected some of {SPLITS}")
    suite = generate_suite(seed)
    tasks = [t for split in splits for t in split_tasks(suite, split)]
    if families is not None:
        unknown = set(families) - {t.family for t in suite}
        if unknown:
            raise ValueError(f"unknown families {sorted(unknown)}")
        tasks = [t for t in tasks if t.family in families]
    return [_agent_task(t) for t in tasks]


def sample_suite_tasks(split: str, n: int | None, *, seed: int) -> list[AgentTask]:
    """``n`` tasks of one suite split, spread over families (``roma_lab.stats.stratified_sample``):
    each family's tasks are shuffled by a seeded Generator, then the sorted families are visited in a
    seeded order, one task each per round, until ``n`` (``None``: every task; more than the split
    holds: a ``SampleSizeError`` naming how many it holds). Deterministic in (split, n, seed); a larger
    n extends a smaller one."""
    from roma_lab.stats import stratified_sample

    return stratified_sample(suite_tasks((split,)), n, seed=seed, stratum=attrgetter("stratum"), shuffle_strata=True,
                             what=f"tasks of the {split} split")
