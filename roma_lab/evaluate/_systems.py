"""Systems a researcher compares on their own tasks: one model call, ROMA with any settings or roles,
an agent with any ``AgentConfig``, or any callable. Each has a ``label`` (the ``condition`` of every
row it answers) and ``bind(tasks)``, which returns ``answer(item, run)`` for that task set (ROMA
and the agent search the set's corpus).

An answer is a str, or a trace with ``.output`` and ``.to_json()`` (a ROMA ``Run``, an agent
``Trajectory``), saved beside the row and counted for usage; a single call returns a
:class:`SingleCallAnswer` (its tokens and cost, from the one usage count ``roma_lab.lm.call_usage``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roma_lab.bench import Item

    from ._tasks import TaskSet

__all__ = ["AgentSystem", "FunctionSystem", "RomaRunError", "RomaSystem", "RomaTimeoutError", "SingleCall",
           "SYSTEM_NAMES", "SingleCallAnswer", "System", "agent", "as_system", "function", "named_systems", "roma",
           "roma_output", "single_call"]


#: The ``kind`` a single call's saved answer names (a run's is "run", an agent trajectory's "trajectory").
SINGLE_CALL_KIND = "single_call"


class RomaRunError(RuntimeError):
    """ROMA's root task failed; recorded as a system error row (its run JSON is kept)."""


class RomaTimeoutError(TimeoutError):
    """ROMA's run reached its deadline (``timed_out``, its run JSON kept). A TimeoutError, so that
    ``run_benchmark``'s stall guard counts it: a model that stopped answering stops the run after
    ``max_consecutive_timeouts`` items instead of spending every item's deadline."""


def roma_output(run: Any) -> str:
    """A finished ROMA run's answer, or the typed error its row records."""
    if run.status == "timed_out" and run.output is None:
        raise RomaTimeoutError(f"ROMA run timed_out: {run.root.error}")
    if run.status == "failed" or run.output is None:
        raise RomaRunError(f"ROMA run {run.status}: {run.root.error}")
    return run.output


class System:
    """The call contract: ``label``, ``model`` (what bounds its concurrency; None: one at a time),
    ``describe()`` (its settings, for provenance) and ``bind(tasks) -> answer(item, run)``."""

    label: str
    model: Any = None

    def describe(self) -> dict[str, Any]:
        raise NotImplementedError

    def bind(self, tasks: TaskSet) -> Callable[[Item, int], Any]:
        raise NotImplementedError


def _model_name(lm: Any) -> str | None:
    from roma_lab.lm import model_label

    return None if lm is None else model_label(lm)


@cache
def _direct_signature():
    import dspy

    class DirectAnswer(dspy.Signature):
        """Answer the question or carry out the task directly, in one reply."""

        question: str = dspy.InputField()
        answer: str = dspy.OutputField()

    return DirectAnswer


@dataclass(frozen=True, slots=True)
class SingleCallAnswer:
    """A single call's answer and what it consumed (cost None: unknown, never 0)."""

    output: str
    input_tokens: int
    output_tokens: int
    cost: float | None
    model: str | None

    def to_json(self) -> str:
        return json.dumps({"kind": SINGLE_CALL_KIND, "output": self.output, "input_tokens": self.input_tokens,
                           "output_tokens": self.output_tokens, "cost": self.cost, "model": self.model})


@dataclass(frozen=True, slots=True)
class SingleCall(System):
    """The model called once: ``dspy.Predict`` question -> answer with the JSON adapter (the ROMA
    tables' base-model row). ``task`` words the question (default: as it is)."""

    lm: Any
    label: str = "single"
    task: Callable[[str], str] = str

    @property
    def model(self) -> Any:
        return self.lm

    def describe(self) -> dict[str, Any]:
        return {"kind": SINGLE_CALL_KIND, "model": _model_name(self.lm)}

    def __call__(self, question: str) -> str:
        return self.answer(question).output

    def answer(self, question: str) -> SingleCallAnswer:
        import dspy

        from roma_lab.lm import metered_call

        with metered_call(self.lm, adapter=dspy.JSONAdapter()) as meter:
            output = dspy.Predict(_direct_signature())(question=self.task(question)).answer
            usage = meter.usage()
        return SingleCallAnswer(output, usage.input_tokens, usage.output_tokens, usage.cost,
                                usage.model or getattr(meter.lm, "model", None))

    def bind(self, tasks: TaskSet) -> Callable[[Item, int], SingleCallAnswer]:
        return lambda item, run: self.answer(item.question)


@dataclass(frozen=True, slots=True)
class RomaSystem(System):
    """ROMA (``roma_lab.controller.Roma``) with any settings or roles; it searches the task set's
    corpus (closed-book without one). Answers with its ``Run`` (the trace saved beside the row); a
    failed root or a run stopped at its deadline is a system error row, its trace still saved."""

    lm: Any
    label: str = "roma"
    roles: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def model(self) -> Any:
        return self.lm

    def describe(self) -> dict[str, Any]:
        return {"kind": "roma", "model": _model_name(self.lm), "roles": sorted(self.roles),
                "settings": {k: v for k, v in sorted(self.settings.items())}}

    def bind(self, tasks: TaskSet) -> Callable[[Item, int], Any]:
        from roma_lab.controller import Roma

        roma = Roma(lm=self.lm, corpus=tasks.corpus, **dict(self.roles), **dict(self.settings))
        return lambda item, run: roma.run(item.question)


@dataclass(frozen=True, slots=True)
class AgentSystem(System):
    """The tool-using agent (``roma_lab.agents.Agent``) with any ``AgentConfig``: on the generated
    world it has the world's tools, elsewhere search over the task set's corpus (no tool without
    one). Answers with its ``Trajectory``; the run index is the agent's run (its seeds and rollout ids)."""

    config: Any
    lm: Any = None
    label: str = "agent"

    @property
    def model(self) -> Any:
        return self.lm

    def describe(self) -> dict[str, Any]:
        from roma_lab.agents import run_label

        return {"kind": "agent", "model": _model_name(self.lm), "config": run_label(self.config)}

    def bind(self, tasks: TaskSet) -> Callable[[Item, int], Any]:
        from roma_lab.agents import Agent, BM25Source, qa_tasks

        agent = Agent(self.config, lm=self.lm)
        agent._setup()  # a missing model fails here, once, not as one error row per task
        if tasks.agent_task is not None:
            task_of = tasks.agent_task
        else:
            sources = [BM25Source.over("corpus", tasks.corpus)] if tasks.corpus is not None else []
            built = {t.item.item_id: t for t in qa_tasks(tasks.items, sources=sources, grader=tasks.grader
                                                         or _placeholder_grader())}
            task_of = lambda item: built[item.item_id]  # noqa: E731
        return lambda item, run: agent.run(task_of(item), run=run)


def _placeholder_grader():
    # The agent's own task carries a grader (best-of-N judges may read it); evaluate grades every row
    # itself, with the grader it was given, so this one decides nothing that is recorded.
    from roma_lab.bench import GaiaGrader

    return GaiaGrader()


@dataclass(frozen=True, slots=True)
class FunctionSystem(System):
    """Any ``fn(question) -> str`` (or a trace with ``.output``); ``model`` bounds how many run at once."""

    fn: Callable[[str], Any]
    label: str
    model: Any = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "function", "function": getattr(self.fn, "__qualname__", type(self.fn).__name__),
                "model": _model_name(self.model)}

    def bind(self, tasks: TaskSet) -> Callable[[Item, int], Any]:
        return lambda item, run: self.fn(item.question)


def _resolved(lm: Any) -> Any:
    from roma_lab.lm import resolve_lm

    return resolve_lm(lm) if lm is None or isinstance(lm, str) else lm


def single_call(lm: Any = "local", *, label: str = "single") -> SingleCall:
    """The model called once per task (``lm``: a name for ``roma_lab.lm.resolve_lm`` or a dspy LM)."""
    return SingleCall(_resolved(lm), label)


_ROMA_ARGUMENTS = ("role_lms", "artifacts", "mcp_servers")


def roma(lm: Any = "local", *, label: str = "roma", roles: Mapping[str, Any] | None = None,
         **settings: Any) -> RomaSystem:
    """ROMA on ``lm``; ``roles`` replace any role (atomizer, planner, executors, aggregator, verifier)
    and ``settings`` are ``RomaSettings`` fields (``max_depth``, ``max_concurrency``, ``run_timeout_s``...)."""
    from roma_lab.controller import RomaSettings

    # checked now, not at the first task: Roma's own arguments, then RomaSettings' fields
    RomaSettings.from_keywords(None, {k: v for k, v in settings.items() if k not in _ROMA_ARGUMENTS})
    return RomaSystem(_resolved(lm), label, dict(roles or {}), settings)


def agent(config: Any = None, lm: Any = "local", *, label: str = "agent") -> AgentSystem:
    """The agent with ``config`` (an ``AgentConfig``; None: its defaults) on ``lm``."""
    from roma_lab.agents import AgentConfig

    return AgentSystem(config if config is not None else AgentConfig(), _resolved(lm), label)


def function(fn: Callable[[str], Any], *, label: str | None = None, model: Any = None) -> FunctionSystem:
    """Any callable as a system, labelled ``label`` (default: its name)."""
    if not callable(fn):
        raise TypeError(f"a system is callable, got {type(fn).__name__}")
    return FunctionSystem(fn, label or getattr(fn, "__name__", type(fn).__name__), model)


def as_system(value: Any) -> System:
    """A System as is; a callable wrapped by :func:`function`."""
    if isinstance(value, System):
        return value
    if callable(value):
        return function(value)
    raise TypeError(f"a system is a roma_lab.evaluate System or a callable, got {type(value).__name__}")


#: The systems ``named_systems`` knows, in the order a notebook or the shell lists them.
SYSTEM_NAMES = ("single", "roma", "agent")


def named_systems(names: Sequence[str], lm: Any = "local", **roma_settings: Any) -> list[System]:
    """Systems by name (:data:`SYSTEM_NAMES`), all on ``lm`` (resolved once, so they share one
    model and its concurrency bound); ``roma_settings`` go to ROMA. For notebooks and the shell."""
    unknown = [n for n in names if n not in SYSTEM_NAMES]
    if unknown or not names or len(set(names)) != len(names):
        raise ValueError(f"systems are distinct names from {SYSTEM_NAMES}, got {list(names)}")
    model = _resolved(lm)
    built = {"single": lambda: single_call(model), "roma": lambda: roma(model, **roma_settings),
             "agent": lambda: agent(None, model)}
    return [built[name]() for name in names]
