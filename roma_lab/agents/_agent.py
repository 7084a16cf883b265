"""The step-wise tool-using agent: one ``run(task)`` gives one :class:`Trajectory`.

A run makes one or more attempts (rollouts). Each rollout has its own environment (tool state),
memory and seed. Within a rollout the actor, shown the task, tools, plan, tips, memory and the
last step's feedback, either calls one tool or answers. Failures never escape: a malformed reply,
an unknown tool, missing arguments or a failing tool become the step's error (the actor sees it
next step); ``max_consecutive_errors`` of them in a row, the step limit, the wall-time budget or an
out-of-service tool end the rollout with that status, as does a call the repeat guard refuses (the
rollout is then asked for its answer, as at the step limit). Every model call goes through ``_call``,
which applies the temperature and seed and records the call in the controller's vocabulary (a
``RoleCall``, its usage counted by ``roma_lab.lm.call_usage``); every tool call is a ``ToolCall``.
"""

from __future__ import annotations

import contextvars
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from roma_lab._concurrent import concurrent_map
from roma_lab.bench import answer_key
from roma_lab.trace import LMExchange, RoleCall, ToolCall, context_chars, jsonable

from ._config import ROLES, AgentConfig, config_hash
from ._env import AgentTask, Environment, Tool, ToolContext, ToolError, ToolUnavailable, describe_tools
from ._memory import Memory
from ._select import is_non_answer, pick_best_score, vote_selection
from roma_lab.trace import PlanRevision, Rollout, Selection, Step, Trajectory

__all__ = ["STATIC_WORKFLOW", "Agent", "sampling_seed"]

#: The one manual workflow every task follows under ``planning="static"``.
STATIC_WORKFLOW = (
    "1. Read the task and note exactly what must be reported and in what form.\n"
    "2. Use the tools, one call at a time, to fetch, prepare or compute what the task needs.\n"
    "3. Before answering, check the latest observation against every condition in the task.\n"
    "4. Report only the requested value, exactly as the task asks."
)
FINAL = "final_answer"
_CALL = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*\((.*)\)\s*$", re.DOTALL)  # a call written as the action
_KWARGS = re.compile(r"^\s*\w+\s*=")
_KWARG = re.compile(r"""(\w+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^,]*))""")
MAX_SUBTASKS = 4          # ROMA plans longer than this are cut (with a warning in the ROMA run)
_SHOWN_CHARS = 400        # observation length in rollout digests for judges
_SHOWN_LINES = 12         # observation lines a step keeps in memory (the trajectory keeps them all)
LAST_STEP = "This is your last step: set action to final_answer and give your best answer now."
AT_LIMIT = "The step limit is reached: answer from the steps above, with no tool."
# Calls made inside tools (query rewrites) until the step that made them records them: one list per
# step loop, found through the context, since subtasks running at once share one environment.
_PENDING: contextvars.ContextVar[list[RoleCall]] = contextvars.ContextVar("roma_lab_agent_pending")


def sampling_seed(run: int, index: int) -> int:
    """The sampling seed of rollout ``index`` in run ``run``: the run index for the first rollout, distinct for
    every (run, rollout) pair while runs < 1000."""
    return run + 1000 * index


@dataclass(slots=True)
class _Context:
    """What one ``run`` shares across its rollouts."""

    task: AgentTask
    run: int
    t0: float  # when the run started (time.monotonic()): every recorded time is seconds since then
    deadline: float | None
    tools_text: str

    def timed_out(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline


@dataclass(slots=True)
class _Loop:
    """The outcome of one step loop (a rollout's main loop or a ROMA subtask)."""

    steps: list[Step]
    plans: list[PlanRevision]
    status: str
    error: str | None
    answer: str | None
    long_term: str


def trim_observation(text: str, max_lines: int = _SHOWN_LINES) -> str:
    """An observation as memory shows it: at most ``max_lines`` lines, the first ones and the last
    two (where the suite's tools state the current answer candidate), the cut counted."""
    lines = text.splitlines()
    if len(lines) <= max_lines:
        return text
    head, tail = lines[: max_lines - 3], lines[-2:]
    return "\n".join([*head, f"... ({len(lines) - len(head) - len(tail)} more lines)", *tail])


def _step_result(answer: str | None, observation: str | None, kind: str | None, message: str | None) -> str:
    """What a step's memory says it returned: the final answer, the observation, or the error."""
    return (f"final answer {answer!r}" if answer is not None else
            observation if kind is None else f"ERROR ({kind}): {message}")


def _step_text(index: int, thought: str, action: str, arguments: Mapping[str, str], result: str) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    head = f"Step {index}: {thought}\n" if thought else f"Step {index}:\n"
    return f"{head}Action: {action}({args})\nResult: {trim_observation(result)}"


class Agent:
    """An agent of one configuration.

    Args:
        config: the design choices (``AgentConfig``), recorded in every trajectory.
        lm: the actor's model: a ``dspy.LM`` or a ``roma_lab.lm.resolve_lm`` name. ``None``: the
            actor named in ``config.models``, else DSPy's configured LM, else ``resolve_lm()``.
            Roles not named in ``config.models`` use the actor's model.
        roles: replacements for role modules (keys from ``ROLES``): any callable taking the role's
            keyword inputs and returning an object with its output fields as attributes.
    """

    def __init__(self, config: AgentConfig, *, lm: Any = None, roles: Mapping[str, Callable[..., Any]] | None = None):
        unknown = set(roles or {}) - set(ROLES)
        if unknown:
            raise ValueError(f"unknown roles {sorted(unknown)}; roles are {ROLES}")
        self.config = config
        self._lm = lm
        self._role_overrides = dict(roles or {})
        self._modules: dict[str, Callable[..., Any]] | None = None
        self._lms: dict[str, Any] = {}

    # --- models ---

    def setup(self) -> None:
        """Resolve each role's model and module once (names resolved lazily: a cached run loads nothing).
        A runner calls it before the first task, so a missing model fails once, not once per task."""
        if self._modules is not None:
            return
        import dspy

        from roma_lab.lm import resolve_lm

        from ._signatures import default_module

        resolved: dict[str, Any] = {}

        def model(spec: Any) -> Any:
            if isinstance(spec, str):
                resolved.setdefault(spec, resolve_lm(spec))
                return resolved[spec]
            return spec

        actor = self.config.models.get("actor", self._lm)
        if actor is None:
            actor = dspy.settings.lm if dspy.settings.lm is not None else resolve_lm()
        actor = model(actor)
        self._lms = {role: model(self.config.models[role]) if role in self.config.models else actor for role in ROLES}
        # The actor's signature: with or without a free-text thought before the action.
        self._signature = {role: role for role in ROLES} | {"actor": "actor_thought" if self.config.thought else "actor"}
        self._modules = {role: self._role_overrides.get(role) or default_module(self._signature[role])
                         for role in ROLES if role != "decomposer"}

    def models(self) -> dict[str, Any]:
        """Each role's model (after :meth:`setup`): what bounds its concurrency, what may cache."""
        self.setup()
        return dict(self._lms)

    def _lm_for(self, role: str, seed: int | None) -> tuple[Any, dict[str, Any]]:
        """The role's model and this run's sampling settings for it (part of every completion-cache key)."""
        settings: dict[str, Any] = {"temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        if seed is not None:
            settings["seed"] = seed
        return self._lms[role], settings

    def _workers(self, role: str) -> int:
        """How many independent pieces of work calling ``role`` run at once: its model's bound."""
        from roma_lab.lm import max_concurrency

        return max_concurrency(self._lms[role])

    def _seed(self, run: int, index: int) -> int | None:
        # Greedy decoding ignores the seed, so none is sent; the rollout id (``run``) keeps runs apart.
        return sampling_seed(run, index) if self.config.temperature > 0 else None

    def _call(self, t0: float, role: str, seed: int | None, **inputs: Any) -> tuple[Any, RoleCall]:
        """Call one role; never raises. Returns (prediction or None, the recorded call). ``t0``: when
        the run started. Usage is read from the call's own tracker and LM copy, as the controller reads
        a role call's, and so are the requests as sent (``exchanges``)."""
        from roma_lab.lm import metered_call

        from ._signatures import output_fields

        lm, settings = self._lm_for(role, seed)
        started = time.monotonic()
        prediction, outputs, error = None, {}, None
        with metered_call(lm, settings=settings) as meter:
            try:
                prediction = self._modules[role](**inputs)
                outputs = {name: jsonable(getattr(prediction, name)) for name in output_fields(self._signature[role])}
            except Exception as exc:  # noqa: BLE001 - a role's failure is recorded, and typed by the caller
                prediction, error = None, f"{type(exc).__name__}: {exc}"
            usage, history = meter.usage(), meter.history()
        call = RoleCall(role=role, inputs=jsonable(inputs), outputs=outputs, context_chars=context_chars(inputs),
                        input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=usage.cost,
                        latency_s=time.monotonic() - started, started_s=started - t0,
                        model=usage.model or getattr(meter.lm, "model", None), error=error,
                        exchanges=LMExchange.from_history(history))
        return prediction, call

    # --- one run ---

    def run(self, task: AgentTask, *, run: int = 0, long_term: str = "") -> Trajectory:
        """Solve ``task`` once. ``run`` is the run index (the seed when sampling); ``long_term`` is
        the long-term memory carried from earlier tasks of this run (``memory="long_term"``).

        Every request is marked with its rollout (``roma_lab.lm.rollout``): ``"<run>:<index>"`` inside
        a rollout, ``"<run>"`` for the judges between rollouts, so run 2 of a task never replays run 1's
        cached replies, even at temperature 0."""
        from roma_lab.lm import rollout

        self.setup()
        with rollout(str(run)):
            return self._run(task, run, long_term)

    def _run(self, task: AgentTask, run: int, long_term: str) -> Trajectory:
        from roma_lab.lm import rollout

        cfg = self.config
        started = time.monotonic()
        first_env = task.environment(self._tool_context(task, run, 0, started))
        ctx = _Context(task=task, run=run, t0=started,
                       deadline=None if cfg.max_wall_s is None else started + cfg.max_wall_s,
                       tools_text=describe_tools(first_env.tools))
        rollouts: list[Rollout] = []
        tips = cfg.tips.tips if cfg.tips is not None and cfg.tips_usage == "paper" else ()
        long_term = long_term if cfg.memory == "long_term" and cfg.long_term_visibility == "paper" else ""

        def make(index: int, kind: str, note: str = "", tips_shown: tuple[str, ...] = tips) -> Rollout:
            """Rollout ``index``, on a fresh environment unless rollouts share one (official variant)."""
            fresh = index > 0 and cfg.rollout_isolation == "paper"
            env = task.environment(self._tool_context(task, run, index, started)) if fresh else first_env
            with rollout(f"{run}:{index}"):
                return self._rollout(ctx, index, kind, env, note, tips_shown, long_term)

        def attempt(kind: str, note: str = "", tips_shown: tuple[str, ...] = tips) -> Rollout:
            rollouts.append(make(len(rollouts), kind, note, tips_shown))
            return rollouts[-1]

        if cfg.tts == "best_of_n":
            # Isolated rollouts are independent: they run at once, as many as the actor's model
            # allows; rollouts sharing one tool state (official variant) run one after the other.
            workers = self._workers("actor") if cfg.rollout_isolation == "paper" else 1
            rollouts.extend(concurrent_map(lambda index: make(index, "best_of_n"), range(cfg.n_rollouts),
                                           workers=workers))
            selection = self._select(ctx, rollouts)
        elif cfg.tts == "reflection" and cfg.reflect_at == "end":
            selection = self._reflect_on_answer(ctx, attempt("main"), attempt)
        else:
            attempt("main")
            selection = Selection(method="single", chosen=0)

        uses_gold = False
        if cfg.tips_usage == "official":  # the official code's retry: only when the gold check fails
            uses_gold = True
            grade = task.grader(task.item, rollouts[selection.chosen].answer or "")
            if grade.score != 1.0:
                attempt("tips_retry", tips_shown=cfg.tips.tips)
                selection = _override(selection, len(rollouts) - 1,
                                      f"gold check failed ({grade.label}); retried once with plan tips")

        reanswered = False
        final = rollouts[selection.chosen]
        asked = bool(final.steps) and final.steps[-1].feedback_shown == AT_LIMIT  # the answerer's call ended it
        if (cfg.reanswer and is_non_answer(final.answer) and not ctx.timed_out()
                and not (cfg.reanswer_with == "call" and asked)):
            reanswered = True
            why = f"A previous attempt ended without an answer ({final.status}{': ' + final.error if final.error else ''})."
            if cfg.reanswer_with == "call":  # one call from the steps already taken, not the trajectory again
                with rollout(f"{run}:{len(rollouts)}"):
                    rollouts.append(self._reanswer_call(ctx, final, len(rollouts), why))
            else:
                attempt("reanswer", note=f"{why} Solve the task and give a definite answer.")
            selection = _override(selection, len(rollouts) - 1,
                                  f"re-answered: rollout {final.index} gave no answer ({final.status})")
        final = rollouts[selection.chosen]
        return Trajectory(
            task_id=task.item.item_id, benchmark=task.item.benchmark, split=task.split, stratum=task.stratum,
            question=task.item.question, config=cfg.to_dict(), config_hash=config_hash(cfg), run=run,
            temperature=cfg.temperature, rollouts=tuple(rollouts), selection=selection, answer=final.answer,
            status=final.status, reanswered=reanswered, uses_gold_answers=uses_gold,
            wall_s=time.monotonic() - started)

    def _tool_context(self, task: AgentTask, run: int, index: int, t0: float) -> ToolContext:
        """Search settings for one rollout's environment; query rewrites are model calls, kept in
        the running step loop's pending calls until the step that made the search records them."""
        cfg = self.config
        rewrite = None
        if cfg.query_optimization in ("reflect", "reflect+expand"):
            seed = self._seed(run, index)

            def rewrite(query: str) -> str:
                prediction, call = self._call(t0, "query_rewriter", seed, task=task.item.question, query=query)
                _PENDING.get().append(call)
                improved = str(getattr(prediction, "improved_query", "") or "").strip()
                return improved or query  # a failed rewrite keeps the original query (the call shows why)

        return ToolContext(search_sources=cfg.search_sources, search_k=cfg.search_k, rewrite_query=rewrite,
                           expand_query=cfg.query_optimization in ("expand", "reflect+expand"))

    # --- one rollout ---

    def _rollout(self, ctx: _Context, index: int, kind: str, env: Environment, note: str,
                 tips: tuple[str, ...], long_term: str) -> Rollout:
        cfg = self.config
        seed = self._seed(ctx.run, index)
        question = ctx.task.item.question
        tips_text = "\n".join(f"- {t}" for t in tips)
        memory = Memory(cfg.memory, cfg.memory_window, cfg.retrieval_k, long_term,
                        show_long_term=cfg.long_term_visibility == "paper")
        plans: list[PlanRevision] = []
        if cfg.planning == "static":
            plans.append(PlanRevision(0, "static", STATIC_WORKFLOW, True, (), ()))
        elif cfg.planning == "revise":
            prediction, call = self._call(ctx.t0, "planner", seed, task=question, tools=ctx.tools_text, tips=tips_text)
            plan = str(getattr(prediction, "plan", "") or "").strip()
            plans.append(PlanRevision(0, "initial", plan, True, (), (call,)))
        steps: list[Step] = []
        delegation = delegation_started_s = None
        if cfg.subtasks and not ctx.timed_out():
            delegation_started_s = time.monotonic() - ctx.t0
            delegation, sub_steps, result = self._delegate(ctx, env, seed, tips_text)
            steps.extend(sub_steps)
            memory.add(f"Subtask decomposition (ROMA): {result}")
        loop = self._loop(ctx, env, seed, question, tips_text, memory, plans, cfg.max_steps, note=note, subtask=None)
        return Rollout(index=index, kind=kind, seed=seed, status=loop.status, error=loop.error, answer=loop.answer,
                       note=note, tips_shown=tips, steps=tuple(steps + loop.steps), plans=tuple(loop.plans),
                       long_term_before=long_term, long_term_after=loop.long_term, delegation=delegation,
                       delegation_started_s=delegation_started_s)

    def _loop(self, ctx: _Context, env: Environment, seed: int | None, question: str, tips_text: str, memory: Memory,
              plans: list[PlanRevision], max_steps: int, note: str, subtask: str | None) -> _Loop:
        """Steps until an answer or a stop. ``note`` (a critique of an earlier attempt) is shown at
        every step, before the feedback on the previous step."""
        token = _PENDING.set([])
        try:
            return self._steps(ctx, env, seed, question, tips_text, memory, plans, max_steps, note, subtask)
        finally:
            _PENDING.reset(token)

    def _steps(self, ctx: _Context, env: Environment, seed: int | None, question: str, tips_text: str, memory: Memory,
               plans: list[PlanRevision], max_steps: int, note: str, subtask: str | None) -> _Loop:
        """The body of ``_loop``, its pending calls in ``_PENDING``."""
        cfg = self.config
        pending = _PENDING.get()
        steps: list[Step] = []
        errors_in_a_row, since_plan = 0, []
        done: dict[tuple[str, str], tuple[int, str]] = {}  # tool calls that ran: (step, result), for the repeat guard
        status, error, answer = "step_limit", f"no answer within {max_steps} steps", None
        feedback = ""
        for index in range(1, max_steps + 1):
            if ctx.timed_out():
                status, error = "timeout", f"wall-time budget of {cfg.max_wall_s:g} s spent before step {index}"
                break
            plan_shown = next((p.plan for p in reversed(plans) if p.visible), "")
            memory_shown = memory.render(question)
            feedback_shown = "\n".join(x for x in (note, feedback, LAST_STEP if index == max_steps else "") if x)
            prediction, act_call = self._call(ctx.t0, "actor", seed, task=question, tools=ctx.tools_text,
                                              plan=plan_shown, tips=tips_text, memory=memory_shown, feedback=feedback_shown)
            thought, action, arguments, tool_call, observation, kind, message, final = self._act(
                ctx, env, prediction, act_call, index, done)
            text = _step_text(index, thought, action or "?", arguments, _step_result(final, observation, kind, message))
            if subtask is not None:
                text = f"[subtask: {subtask}] {text}"
            step_calls = [act_call, *pending]
            pending.clear()
            summary = critique = None
            if subtask is None:
                summary, critique = self._after_step(ctx, memory, seed, question, text, final is not None, step_calls)
            memory.add(text, summary)
            steps.append(Step(index=index, subtask=subtask, plan_shown=plan_shown, memory_shown=memory_shown,
                              feedback_shown=feedback_shown, thought=thought, action=action, answer=final,
                              tool_call=tool_call, observation=observation, error_kind=kind, error=message,
                              summary=summary, critique=critique, calls=tuple(step_calls)))
            if final is not None:
                status, error, answer = "answered", None, final
                break
            if kind in ("unavailable_tool", "repeated_call"):  # a repeat: the rollout has found what it will find
                status, error = kind, message
                break
            errors_in_a_row = errors_in_a_row + 1 if kind else 0
            if errors_in_a_row >= cfg.max_consecutive_errors:
                status, error = kind, f"{errors_in_a_row} failed steps in a row; last: {message}"
                break
            feedback = "\n".join(x for x in (f"Your previous step failed: {message}" if kind else "",
                                             f"Reflection on your previous step: {critique}" if critique else "") if x)
            since_plan.append(text)
            if subtask is None and index < max_steps and self._revision_due(index):
                plans.append(self._revise(ctx, seed, question, tips_text, plans[-1].plan, since_plan, index))
                since_plan = []
        # a rollout that repeats a call has its steps' results: asked for its answer at once, as at the limit
        if status in ("step_limit", "repeated_call") and cfg.answer_at_limit and not ctx.timed_out():
            step = self._answer_at_limit(ctx, seed, question, memory, len(steps) + 1, subtask)
            steps.append(step)
            if step.answer:
                status, error, answer = "answered", None, step.answer
        return _Loop(steps, plans, status, error, answer, memory.long_term)

    def _reanswer_call(self, ctx: _Context, failed: Rollout, index: int, why: str) -> Rollout:
        """The re-answer as one call of the answerer, shown the failed rollout's memory after its last
        step, recorded as a rollout of one step."""
        memory = ""
        if failed.steps:
            last = failed.steps[-1]
            text = _step_text(last.index, last.thought, last.action or "?",
                              last.tool_call.arguments if last.tool_call else {},
                              _step_result(last.answer, last.observation or "", last.error_kind, last.error))
            memory = "\n".join(x for x in (last.memory_shown, text) if x)
        step = self._answer_at_limit(ctx, failed.seed, ctx.task.item.question, memory, 1, None)
        return Rollout(index=index, kind="reanswer", seed=failed.seed,
                       status="answered" if step.answer else step.error_kind or "step_limit",
                       error=None if step.answer else step.error, answer=step.answer, note=why, tips_shown=(),
                       steps=(step,), plans=(), long_term_before=failed.long_term_after,
                       long_term_after=failed.long_term_after)

    def _answer_at_limit(self, ctx: _Context, seed: int | None, question: str, memory: Memory | str, index: int,
                         subtask: str | None) -> Step:
        """The step after the last: the answerer's one call, recorded as a step whose action is the
        final answer (or whose error is the call's failure). ``memory``: the rollout's, or its text."""
        memory_shown = memory if isinstance(memory, str) else memory.render(question)
        prediction, call = self._call(ctx.t0, "answerer", seed, task=question, memory=memory_shown)
        answer = str(getattr(prediction, "answer", "") or "").strip() if prediction is not None else ""
        if prediction is None:
            kind, error = ("malformed_output" if (call.error or "").startswith("AdapterParseError")
                           else "model_error"), call.error
        else:  # an empty reply leaves the rollout at its step limit
            kind, error = (None, None) if answer else ("step_limit", "the answerer gave no answer at the step limit")
        return Step(index=index, subtask=subtask, plan_shown="", memory_shown=memory_shown, feedback_shown=AT_LIMIT,
                    thought="", action=FINAL, answer=answer or None, tool_call=None, observation=None,
                    error_kind=kind, error=error, summary=None, critique=None, calls=(call,))

    def _act(self, ctx: _Context, env: Environment, prediction: Any, act_call: RoleCall, index: int,
             done: dict[tuple[str, str], tuple[int, str]]) -> tuple:
        """Carry out the actor's reply at step ``index``: (thought, action, arguments, tool call,
        observation, error kind, error message, final answer). Exactly one of error kind and final
        answer is set, or neither when a tool call went through. ``done`` holds the rollout's tool
        calls that went through, by (tool, arguments): the repeat guard's memory."""
        if prediction is None:
            kind = "malformed_output" if (act_call.error or "").startswith("AdapterParseError") else "model_error"
            return "", "", {}, None, None, kind, act_call.error, None
        thought = str(getattr(prediction, "thought", "") or "")
        action = str(prediction.action or "").strip()
        raw_arguments, answer = str(prediction.arguments or "").strip(), str(prediction.answer or "").strip()
        written_call = _CALL.match(action)
        if written_call:  # "name(args)" in the action field: the name, and the args unless given apart
            action, inside = written_call.group(1), written_call.group(2).strip()
            raw_arguments = raw_arguments if raw_arguments not in ("", "{}") else inside
            answer = answer or inside.strip("\"'")
        if action.lower() == FINAL:
            return thought, action, {}, None, None, None, None, answer
        tool = next((t for t in env.tools if t.name.lower() == action.lower()), None)
        if tool is None:
            names = ", ".join(t.name for t in env.tools) or "none"
            return thought, action, {}, None, None, "unknown_tool", \
                f"unknown tool {action!r}; the tools are {names} (or {FINAL})", None
        arguments = parse_arguments(raw_arguments, tool)
        missing = [p for p in tool.parameters if not arguments.get(p, "").strip()]
        if missing:
            return thought, action, arguments, None, None, "bad_arguments", \
                f"{tool.name} needs the argument(s) {', '.join(missing)} as a JSON object", None
        key = (tool.name, json.dumps(arguments, sort_keys=True))
        if self.config.repeat_guard and tool.idempotent and key in done:
            # An idempotent tool answers an identical call identically: running it again buys a step of
            # nothing. A failed call is not remembered, so it may be retried.
            step, result = done[key]
            return thought, action, arguments, None, None, "repeated_call", \
                (f"{tool.name} was already called with these arguments at step {step} and was not run again; its "
                 f"result was: {trim_observation(result, 4)}\nCall another tool, change the arguments, or give "
                 "the final answer."), None
        tool_call, observation, kind, message = self._use_tool(ctx, env, tool.name, arguments)
        if kind is None:
            done[key] = (index, observation)
        return thought, action, arguments, tool_call, observation, kind, message, None

    def _use_tool(self, ctx: _Context, env: Environment, name: str,
                  arguments: dict[str, str]) -> tuple[ToolCall, str | None, str | None, str | None]:
        """Run one tool call; a failure becomes (kind, message), never an exception. Returns the
        recorded call, the observation (None on failure), the failure kind and its message."""
        from roma_lab.web import web_meter

        started = time.monotonic()
        observation, kind, message, status = None, None, None, "ok"
        with web_meter() as web:  # what a web search or read was billed, and whether it was replayed
            try:
                observation = env.call(name, arguments)
            except ToolUnavailable as exc:  # out of service: the trace's word for a tool that is gone
                kind, message, status = "unavailable_tool", str(exc), "disconnected"
            except ToolError as exc:
                kind, message, status = "tool_error", str(exc), "error"
            except Exception as exc:  # noqa: BLE001 - a broken tool is a failing tool, never a crash
                kind, message, status = "tool_error", f"{type(exc).__name__}: {exc}", "error"
        call = ToolCall(name=name, server=None, arguments=arguments, status=status,
                        result_chars=None if observation is None else len(observation),
                        latency_s=time.monotonic() - started, started_s=started - ctx.t0, error=message,
                        cost=web.cost(), replayed=bool(web.calls) and all(c.replayed for c in web.calls))
        return call, observation, kind, message

    def _after_step(self, ctx: _Context, memory: Memory, seed: int | None, question: str, text: str, final: bool,
                    calls: list[RoleCall]) -> tuple[str | None, str | None]:
        """Memory summary, long-term fusion and step reflection of one step (as configured)."""
        cfg = self.config
        summary = critique = None
        if cfg.memory != "current" and not final:  # nothing reads the summary of the last step
            prediction, call = self._call(ctx.t0, "summarizer", seed, task=question, step=text)
            calls.append(call)
            summary = str(getattr(prediction, "summary", "") or "").strip() or None
        if cfg.memory == "long_term":  # also the final step: later tasks of the run read it
            prediction, call = self._call(ctx.t0, "memory", seed, long_term_memory=memory.long_term,
                                          step=f"Task: {question}\n{text}")
            calls.append(call)
            updated = str(getattr(prediction, "updated_memory", "") or "").strip()
            memory.long_term = updated or memory.long_term
        if cfg.tts == "reflection" and cfg.reflect_at == "step" and not final:
            prediction, call = self._call(ctx.t0, "step_reflector", seed, task=question, step=text)
            calls.append(call)
            critique = str(getattr(prediction, "critique", "") or "").strip() or None
        return summary, critique

    def _revision_due(self, index: int) -> bool:
        cfg = self.config
        if cfg.planning != "revise" or index % cfg.revise_every:
            return False
        # The official code's condition: no revision at all when the interval is 1 (its default).
        return not (cfg.revision_visibility == "official" and cfg.revise_every == 1)

    def _revise(self, ctx: _Context, seed: int | None, question: str, tips_text: str, plan: str,
                observations: list[str], index: int) -> PlanRevision:
        prediction, call = self._call(ctx.t0, "reviser", seed, task=question, tools=ctx.tools_text, tips=tips_text,
                                      plan=plan, observations="\n\n".join(observations))
        revised = str(getattr(prediction, "revised_plan", "") or "").strip()
        # The official code appends the revision to a list the actor never reads.
        visible = bool(revised) and self.config.revision_visibility == "paper"
        return PlanRevision(index, "revision", revised or plan, visible, tuple(observations), (call,))

    # --- subtask decomposition through ROMA ---

    def _delegate(self, ctx: _Context, env: Environment, seed: int | None,
                  tips_text: str) -> tuple[dict, list[Step], str]:
        """ROMA plans subtasks (its atomizer, planner and aggregator on the decomposer's model) and
        runs them in dependency order, independent ones at once (as many as the decomposer's model
        allows); each subtask is solved by this actor with the same tools, one tool call at a time.
        Returns the ROMA run (its JSON data, calls as ROMA recorded them), the subtask steps (in the
        plan's order, whichever finished first) and the result the main loop is shown."""
        import dspy

        from roma_lab.controller import TASK_TYPES, Roma

        question = ctx.task.item.question
        solved: list[tuple[str, tuple[Step, ...]]] = []  # (goal, its steps) as each subtask ends
        workers = self._workers("decomposer")
        shared = env if workers == 1 else _OneCallAtATime(env)

        def solve(goal: str, context: str):
            sub_question = f"{goal}\n\n(This is a subtask of: {question})" + (f"\n\n{context}" if context else "")
            memory = Memory("current", self.config.memory_window, self.config.retrieval_k)
            loop = self._loop(ctx, shared, seed, sub_question, tips_text, memory, [], self.config.subtask_steps,
                              note="", subtask=goal)
            solved.append((goal, tuple(loop.steps)))
            if loop.answer is None:
                raise RuntimeError(f"subtask ended without an answer ({loop.status}: {loop.error})")
            return dspy.Prediction(output=loop.answer)

        lm, settings = self._lm_for("decomposer", seed)
        roma = Roma(executors={t: solve for t in TASK_TYPES}, lm=lm.copy(**settings) if hasattr(lm, "copy") else lm,
                    max_depth=1,
                    max_concurrency=workers, max_subtasks=MAX_SUBTASKS)
        result = roma.run(question)
        text = result.output if result.output is not None else f"failed ({result.root.error})"
        # the plan's order: a goal's first node; a subtask solved twice (a retry) keeps its attempts' order
        order: dict[str, int] = {}
        for node in result.nodes:
            order.setdefault(node.goal, len(order))
        by_plan = sorted(solved, key=lambda done: order.get(done[0], len(order)))
        return json.loads(result.to_json()), [step for _, steps in by_plan for step in steps], text

    # --- test-time scaling ---

    def _select(self, ctx: _Context, rollouts: list[Rollout]) -> Selection:
        cfg = self.config
        question = ctx.task.item.question
        seed = self._seed(ctx.run, 0)
        if cfg.selection == "vote":
            return vote_selection([r.answer for r in rollouts], key=answer_key(ctx.task.grader))
        if cfg.selection == "score":  # one scorer call per rollout, at once; read in rollout order
            scores, calls = [], []
            judged = concurrent_map(lambda r: self._call(ctx.t0, "scorer", seed, task=question, attempt=_digest(r)),
                                    rollouts, workers=self._workers("scorer"))
            for prediction, call in judged:
                calls.append(call)
                score = getattr(prediction, "score", None)
                scores.append(min(10.0, max(0.0, float(score))) if isinstance(score, (int, float)) else None)
            chosen, tie = pick_best_score(scores)
            note = "" if any(s is not None for s in scores) else "no score came back; kept rollout 0"
            return Selection(method="score", chosen=chosen, scores=tuple(scores), tie=tie, note=note,
                             calls=tuple(calls))
        attempts = "\n\n".join(f"Attempt {r.index}:\n{_digest(r)}" for r in rollouts)
        prediction, call = self._call(ctx.t0, "selector", seed, task=question, attempts=attempts)
        index = getattr(prediction, "index", None)
        if isinstance(index, int) and 0 <= index < len(rollouts):
            return Selection(method="list", chosen=index, calls=(call,))
        return Selection(method="list", chosen=0, note=f"selector gave no valid index ({index!r}); kept rollout 0",
                         calls=(call,))

    def _reflect_on_answer(self, ctx: _Context, first: Rollout, attempt: Callable[..., Rollout]) -> Selection:
        prediction, call = self._call(ctx.t0, "answer_reflector", self._seed(ctx.run, 0), task=ctx.task.item.question,
                                      attempt=_digest(first))
        if prediction is None or getattr(prediction, "acceptable", None) is not False:
            note = "answer accepted" if prediction is not None else "reflection failed; answer kept"
            return Selection(method="reflection", chosen=0, note=note, calls=(call,))
        if ctx.timed_out():
            return Selection(method="reflection", chosen=0, note="rejected, but no time left to retry", calls=(call,))
        critique = str(getattr(prediction, "critique", "") or "").strip()
        retry = attempt("reflection_retry", note=f"A previous attempt was judged wrong: {critique}")
        return Selection(method="reflection", chosen=retry.index,
                         note="answer rejected; re-tried once with the critique",
                         calls=(call,))


class _OneCallAtATime:
    """An environment shared by subtasks running at once: one tool call at a time, so a tool's
    state is never changed by two calls together."""

    def __init__(self, env: Environment):
        self.tools = env.tools
        self._env, self._lock = env, threading.Lock()

    def call(self, name: str, arguments: Mapping[str, str]) -> str:
        with self._lock:
            return self._env.call(name, arguments)


def parse_arguments(text: str, tool: Tool) -> dict[str, str]:
    """The actor's arguments text as {name: text}: a JSON object (repaired like DSPy's adapter
    repairs replies; non-string values become JSON text), keyword pairs (``query='x', k=2``), or,
    for a one-argument tool, the bare text as that argument. Anything else gives no arguments, so
    a required one is reported missing."""
    import json_repair

    text = text.strip()
    if _KWARGS.match(text):
        return {m.group(1): next(g for g in m.groups()[1:] if g is not None).strip() for m in _KWARG.finditer(text)}
    try:
        value = json_repair.loads(text) if text else {}
    except Exception:  # noqa: BLE001 - json_repair raises on some inputs: not an object, then
        value = None
    if isinstance(value, dict):
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
    if len(tool.parameters) == 1 and text:
        return {tool.parameters[0]: text}
    return {}


def _override(selection: Selection, chosen: int, why: str) -> Selection:
    """The selection after a later attempt replaced the chosen one (the note keeps both reasons)."""
    return replace(selection, chosen=chosen, note=f"{selection.note} {why}".strip())


def _digest(rollout: Rollout) -> str:
    """A rollout as judges read it: each step's action and (shortened) result, then the answer."""
    lines = []
    for s in rollout.steps:
        call = s.tool_call
        if s.observation is not None:
            result = s.observation[:_SHOWN_CHARS]
        else:
            result = f"ERROR ({s.error_kind}): {s.error}" if s.error_kind else ""
        args = ", ".join(f"{k}={v!r}" for k, v in (call.arguments if call else {}).items())
        lines.append(f"Step {s.index}: {s.action or '?'}({args})" + (f" -> {result}" if result else ""))
    lines.append(f"Final answer: {rollout.answer!r} (ended: {rollout.status})")
    return "\n".join(lines)
