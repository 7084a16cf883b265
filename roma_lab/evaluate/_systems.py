"""Systems ``evaluate`` compares: one model call, ROMA with any settings or roles, an agent with any
``AgentConfig``, or any callable. Each has a ``label`` (the ``condition`` of every row it answers) and
``bind(tasks)``, which returns its answer function for that task set (ROMA and the agent search the
set's corpus, or use its own tools).

The call contract is one: ``answer(item, run, previous)`` with the task's ``roma_lab.bench.Item``, the
run index and, for a system whose tasks are a chain (``chained``: the agent's long-term memory), the
trace of the task before it in the run (else None). It returns a trace (``roma_lab.trace``: a ROMA or
single-call ``Run``, an agent ``Trajectory``), saved beside the row and counted for usage; a
function system may return plain text (no trace, its usage unknown).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roma_lab.bench import Item
    from roma_lab.trace import Run

    from ._tasks import TaskSet

__all__ = ["AgentSystem", "FunctionSystem", "RomaSystem", "SingleCall", "SYSTEM_NAMES", "System", "agent",
           "as_system", "function", "named_systems", "roma", "single_call"]


class System:
    """The call contract: ``label``, ``model`` (what bounds its concurrency; None: one at a time),
    ``chained`` (a run's tasks run in task order, each handed the trace before it), ``describe()`` (its
    settings, for provenance) and ``bind(tasks) -> answer(item, run, previous)``."""

    label: str
    model: Any = None
    chained: bool = False

    def describe(self) -> dict[str, Any]:
        raise NotImplementedError

    def bind(self, tasks: TaskSet) -> Callable[[Item, int, Any], Any]:
        raise NotImplementedError


def _recordable(value: Any) -> Any:
    """A setting as a run's record holds it (JSON): what an object says of itself (an MCP server: its
    address, never its headers' or variables' values), else its type's name."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "describe"):
        return value.describe()
    if isinstance(value, list | tuple):
        return [_recordable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _recordable(v) for k, v in value.items()}
    return f"<{type(value).__name__}>"


def _wording(task: Callable[[str], str]) -> dict[str, str]:
    """How a system words each question, for its record (nothing when it asks the question as it is)."""
    return {} if task is str else {"task": task("{question}")}


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
class SingleCall(System):
    """The model called once: ``dspy.Predict`` question -> answer with the JSON adapter. ``task`` words
    the question (default: as it is). Its trace is a one-node run holding the call."""

    lm: Any
    label: str = "single"
    task: Callable[[str], str] = str

    @property
    def model(self) -> Any:
        return self.lm

    def describe(self) -> dict[str, Any]:
        return {"kind": "single_call", "model": _model_name(self.lm), **_wording(self.task)}

    def bind(self, tasks: TaskSet) -> SingleCall:
        return self

    def answer(self, question: str) -> Run:
        """The one call on ``question`` (outside an evaluation: a notebook's, a test's)."""
        from roma_lab.bench import Item

        return self(Item("question", "question", question, ""), 0)

    def __call__(self, item: Item, run: int, previous: Any = None) -> Run:
        """The one call on ``item``'s question as a one-node run (its prompt, completion, tokens and cost)."""
        import dspy

        from roma_lab.lm import metered_call
        from roma_lab.trace import LMExchange, single_call_run

        asked = self.task(item.question)
        start = time.perf_counter()
        with metered_call(self.lm, adapter=dspy.JSONAdapter()) as meter:
            output = dspy.Predict(_direct_signature())(question=asked).answer
            usage = meter.usage()
        return single_call_run(question=asked, output=output, input_tokens=usage.input_tokens,
                               output_tokens=usage.output_tokens, cost=usage.cost,
                               model=usage.model or getattr(meter.lm, "model", None),
                               latency_s=time.perf_counter() - start,
                               exchanges=LMExchange.from_history(meter.history()))


@cache
def _final_answer_signature():
    import dspy

    class FinalAnswer(dspy.Signature):
        """Give the final answer to the question, taken from the report: only the answer, in the form the
        question asks for (a name, number, date or short phrase), not a sentence."""

        question: str = dspy.InputField()
        report: str = dspy.InputField(desc="what the system found, in its own words")
        answer: str = dspy.OutputField()

    return FinalAnswer


#: The role of the call that states a ROMA run's final answer in a task's short form.
FINAL_ANSWER_ROLE = "final_answer"


def with_final_answer(run: Run, question: str, lm: Any) -> Run:
    """``run`` with one more call on its root: the model asked for ``question``'s answer alone from the
    run's output (its report). The call is the trace's like any other (prompt, completion, tokens, cost),
    the root's and the run's output become its answer, and the report stays in the call's inputs."""
    import dataclasses

    import dspy

    from roma_lab.lm import metered_call
    from roma_lab.trace import LMExchange, RoleCall

    start = time.perf_counter()
    with metered_call(lm, adapter=dspy.JSONAdapter()) as meter:
        answer = dspy.Predict(_final_answer_signature())(question=question, report=run.output).answer
        usage = meter.usage()
    latency = time.perf_counter() - start
    call = RoleCall(role=FINAL_ANSWER_ROLE, inputs={"question": question, "report": run.output},
                    outputs={"answer": answer}, context_chars=len(question) + len(run.output),
                    input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=usage.cost,
                    latency_s=latency, started_s=run.wall_s, model=usage.model or getattr(meter.lm, "model", None),
                    queued_s=run.wall_s, exchanges=LMExchange.from_history(meter.history()))
    root = run.nodes[0]
    ended = run.wall_s + latency
    root = dataclasses.replace(root, output=answer, calls=(*root.calls, call),
                               ended_s=ended if root.ended_s is not None else None)
    return dataclasses.replace(run, output=answer, nodes=(root, *run.nodes[1:]), wall_s=ended)


@dataclass(frozen=True, slots=True)
class _RomaAnswer:
    roma: Any  # roma_lab.controller.Roma
    task: Callable[[str], str]
    final_answer: Any = None  # the model that states the final answer in the task's short form (None: no such step)

    def __call__(self, item: Item, run: int, previous: Any = None) -> Run:
        asked = self.task(item.question)
        result = self.roma.run(asked)
        if self.final_answer is None or result.status != "completed" or not result.output:
            return result
        return with_final_answer(result, asked, self.final_answer)


@dataclass(frozen=True, slots=True)
class RomaSystem(System):
    """ROMA (``roma_lab.controller.Roma``) with any settings or roles; it searches the task set's
    corpus or the web (closed-book without either). ``task`` words the question. On tasks that ask for
    short answers (``TaskSet.asking_short_answers``) one more call on ``lm`` states the final answer from
    the run's report (``with_final_answer``): ROMA's aggregator writes sentences. Answers with its ``Run``; a failed
    root or a run stopped at its deadline is a system error row, its trace still saved."""

    lm: Any
    label: str = "roma"
    roles: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    task: Callable[[str], str] = str

    @property
    def model(self) -> Any:
        return self.lm

    def describe(self) -> dict[str, Any]:
        return {"kind": "roma", "model": _model_name(self.lm), "roles": sorted(self.roles),
                "settings": {k: _recordable(v) for k, v in sorted(self.settings.items())}, **_wording(self.task)}

    def bind(self, tasks: TaskSet) -> _RomaAnswer:
        from roma_lab.controller import Roma

        return _RomaAnswer(Roma(lm=self.lm, corpus=tasks.corpus, web=tasks.web, **dict(self.roles), **dict(self.settings)),
                           self.task, self.lm if tasks.short_answers else None)


@dataclass(frozen=True, slots=True)
class _AgentAnswer:
    agent: Any  # roma_lab.agents.Agent
    task_of: Callable[[Item], Any]

    @property
    def model(self) -> Any:
        return self.agent.models()["actor"]  # what bounds how many tasks run at once

    def __call__(self, item: Item, run: int, previous: Any = None) -> Any:
        # a chain hands on the long-term memory the task before left (its chosen rollout's)
        memory = previous.final_rollout.long_term_after if previous is not None else ""
        return self.agent.run(self.task_of(item), run=run, long_term=memory)


@dataclass(frozen=True, slots=True)
class AgentSystem(System):
    """The tool-using agent (``roma_lab.agents.Agent``) with any ``AgentConfig``: on a task set of agent
    tasks (the generated world, the suite) it has their tools, elsewhere search over the task set's
    corpus (no tool without one). Answers with its ``Trajectory``; the run index is the agent's run
    (its seeds and rollout ids). ``roles`` replace any of the agent's model roles by a callable. With
    the paper's long-term memory, a run's tasks are a chain, each shown the memory the one before left."""

    config: Any
    lm: Any = None
    label: str = "agent"
    roles: Mapping[str, Callable[..., Any]] = field(default_factory=dict)

    @property
    def model(self) -> Any:
        return self.config.models.get("actor", self.lm)

    @property
    def chained(self) -> bool:
        return self.config.memory == "long_term" and self.config.long_term_visibility == "paper"

    def describe(self) -> dict[str, Any]:
        from roma_lab.agents import run_label

        return {"kind": "agent", "model": _model_name(self.model), "config": run_label(self.config)}

    def bind(self, tasks: TaskSet) -> _AgentAnswer:
        from roma_lab.agents import Agent, BM25Source, WebSource, check_tips, qa_tasks

        agent = Agent(self.config, lm=self.lm, roles=dict(self.roles) or None)
        agent.setup()  # a missing model fails here, once, not as one error row per task
        if tasks.agent_task is not None:
            task_of = tasks.agent_task
        else:
            sources = ([WebSource("web", tasks.web)] if tasks.web is not None
                       else [BM25Source.over("corpus", tasks.corpus)] if tasks.corpus is not None else [])
            built = {t.item.item_id: t for t in qa_tasks(tasks.items, sources=sources, grader=tasks.grader
                                                         or _placeholder_grader())}
            task_of = _Lookup(built)
        check_tips(self.config, [task_of(item) for item in tasks.items])
        if tasks.private:
            from ._private import refuse_caching_models

            refuse_caching_models(agent.models().items())
        return _AgentAnswer(agent, task_of)


@dataclass(frozen=True, slots=True)
class _Lookup:
    """An item's agent task, built once per task set."""

    tasks: Mapping[str, Any]

    def __call__(self, item: Item) -> Any:
        return self.tasks[item.item_id]


def _placeholder_grader():
    # The agent's own task carries a grader (best-of-N judges may read it); evaluate grades every row
    # itself, with the grader it was given, so this one decides nothing that is recorded.
    from roma_lab.bench import GaiaGrader

    return GaiaGrader()


@dataclass(frozen=True, slots=True)
class _FunctionAnswer:
    fn: Callable[[str], Any]

    def __call__(self, item: Item, run: int, previous: Any = None) -> Any:
        return self.fn(item.question)


@dataclass(frozen=True, slots=True)
class FunctionSystem(System):
    """Any ``fn(question) -> str`` (or a trace); ``model`` bounds how many run at once."""

    fn: Callable[[str], Any]
    label: str
    model: Any = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "function", "function": getattr(self.fn, "__qualname__", type(self.fn).__name__),
                "model": _model_name(self.model)}

    def bind(self, tasks: TaskSet) -> _FunctionAnswer:
        return _FunctionAnswer(self.fn)


def _resolved(lm: Any) -> Any:
    from roma_lab.lm import resolve_lm

    return resolve_lm(lm) if lm is None or isinstance(lm, str) else lm


def single_call(lm: Any = "local", *, label: str = "single", task: Callable[[str], str] = str) -> SingleCall:
    """The model called once per task (``lm``: a name for ``roma_lab.lm.resolve_lm`` or a dspy LM)."""
    return SingleCall(_resolved(lm), label, task)


_ROMA_ARGUMENTS = ("role_lms", "artifacts", "mcp_servers")


def roma(lm: Any = "local", *, label: str = "roma", roles: Mapping[str, Any] | None = None,
         task: Callable[[str], str] = str, **settings: Any) -> RomaSystem:
    """ROMA on ``lm``; ``roles`` replace any role (atomizer, planner, executors, aggregator, verifier)
    and ``settings`` are ``RomaSettings`` fields (``max_depth``, ``max_concurrency``, ``run_timeout_s``...)."""
    from roma_lab.controller import RomaSettings

    # checked now, not at the first task: Roma's own arguments, then RomaSettings' fields
    RomaSettings.from_keywords(None, {k: v for k, v in settings.items() if k not in _ROMA_ARGUMENTS})
    return RomaSystem(_resolved(lm), label, dict(roles or {}), settings, task)


def agent(config: Any = None, lm: Any = "local", *, label: str = "agent",
          roles: Mapping[str, Callable[..., Any]] | None = None) -> AgentSystem:
    """The agent with ``config`` (an ``AgentConfig``; None: its defaults) on ``lm`` (None: the models
    ``config`` names)."""
    from roma_lab.agents import AgentConfig

    return AgentSystem(config if config is not None else AgentConfig(), None if lm is None else _resolved(lm), label,
                       dict(roles or {}))


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
