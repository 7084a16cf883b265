"""The ROMA control loop (paper §2.1, Algorithm 1) with dependency-aware scheduling.

Every node runs atomize -> (execute | plan -> children -> aggregate) -> optional verify. Each child is
its own asyncio task that waits only for its own dependencies, so there are no level barriers.
One semaphore bounds concurrent *role calls*; a parent never holds a slot while its children run,
so deep trees cannot deadlock. See design/scheduling.md.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, is_dataclass, replace
from os import PathLike
from typing import Any

from ._plan import Subtask, validate_plan
from ._types import TASK_TYPES, Node, NodeEvent, RoleCall, Run

# Context locality: a node sees at most this many ancestor goals, each cut to this length.
_ANCESTRY_GOALS = 3
_GOAL_CHARS = 200

_OUTPUT_FIELDS = {
    "atomizer": ("is_atomic", "task_type"),
    "planner": ("subtasks",),
    "executor": ("output",),
    "aggregator": ("output",),
    "verifier": ("verdict", "feedback"),
}
_OPTIONAL_OUTPUTS = ("reasoning", "code", "passages")  # shown in the tree when a role exposes them

Observer = Callable[[NodeEvent], None]


class RoleError(RuntimeError):
    """A role call raised, timed out or broke its output contract. The node becomes ``failed``."""

    def __init__(self, role: str, message: str):
        super().__init__(f"{role}: {message}")
        self.role = role
        self.message = message


class _NothingToAggregate(Exception):
    """Every subtask of a planned node failed or was skipped."""


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if is_dataclass(value) and not isinstance(value, type):
        return _jsonable(asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _context_chars(inputs: Mapping[str, Any]) -> int:
    return sum(len(v) if isinstance(v, str) else len(json.dumps(v, ensure_ascii=False)) for v in inputs.values())


def _render_context(ancestors: Sequence[str], results: Sequence[tuple[str, str]]) -> str:
    parts = []
    if ancestors:
        lines = "\n".join(f"- {g[:_GOAL_CHARS]}" for g in ancestors)
        parts.append(f"This task is part of (outermost first):\n{lines}")
    if results:
        blocks = "\n\n".join(f"[{goal[:_GOAL_CHARS]}]\n{output}" for goal, output in results)
        parts.append(f"Results of prerequisite tasks:\n{blocks}")
    return "\n\n".join(parts)


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def _tracked_call(fn: Callable[..., Any], inputs: Mapping[str, Any], lm: Any) -> tuple[Any, dict, list]:
    """Run one sync role under its own DSPy usage tracker and LM copy (so concurrent calls never mix)."""
    import dspy
    from dspy.utils.usage_tracker import track_usage

    call_lm = lm.copy() if lm is not None else None
    overrides = {"lm": call_lm} if call_lm is not None else {}
    with dspy.context(**overrides), track_usage() as tracker:
        result = fn(**inputs)
    return result, tracker.get_total_tokens(), list(getattr(call_lm, "history", []))


async def _atracked_call(fn: Callable[..., Any], inputs: Mapping[str, Any], lm: Any) -> tuple[Any, dict, list]:
    import dspy
    from dspy.utils.usage_tracker import track_usage

    call_lm = lm.copy() if lm is not None else None
    overrides = {"lm": call_lm} if call_lm is not None else {}
    with dspy.context(**overrides), track_usage() as tracker:
        result = await fn(**inputs)
    return result, tracker.get_total_tokens(), list(getattr(call_lm, "history", []))


def _in_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future:
    """Run a sync role call on its own daemon thread. A timed-out call cannot be killed, but then it
    holds only its own thread, never a pooled worker that later calls would queue behind (and whose
    queueing time would count against their own time limit)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if not future.done():  # a timed-out caller has already cancelled it
            future.set_exception(error) if error is not None else future.set_result(result)

    def target() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (fn(*args), None)
        except BaseException as err:  # noqa: BLE001 - handed to the awaiting coroutine
            outcome = (None, err)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the run (and its loop) ended while this late call was still going
            pass

    threading.Thread(target=target, name="roma-role", daemon=True).start()
    return future


@dataclass(slots=True)
class _RunState:
    """Everything one run mutates; a fresh one per run so a Roma object can be reused."""

    t0: float
    slots: asyncio.Semaphore
    lms: dict[str, Any]
    nodes: dict[str, Node]
    on_event: Observer | None

    def update(self, node_id: str, **changes: Any) -> Node:
        node = replace(self.nodes[node_id], **changes)
        self.nodes[node_id] = node
        if self.on_event is not None:
            try:
                self.on_event(NodeEvent(node.status, node))
            except Exception as err:  # a broken view must not break the run, but must be seen
                warnings.warn(f"run observer raised {err!r}; the run continues", stacklevel=1)
        return node

    def add_warning(self, node_id: str, message: str) -> None:
        self.update(node_id, warnings=self.nodes[node_id].warnings + (message,))


class Roma:
    """A recursive ROMA agent. Any role may be replaced by a callable with the same keyword contract.

    Args:
        atomizer: ``(goal, context) -> .is_atomic, .task_type``
        planner: ``(goal, context) -> .subtasks`` (items with goal, task_type, depends_on)
        executors: ``{task_type: (goal, context) -> .output}`` for task types search/think/write/code
        aggregator: ``(goal, context, subtask_results) -> .output``
        verifier: optional ``(goal, context, candidate) -> .verdict, .feedback``
        lm: model for every role: a ``dspy.LM`` or a name for ``roma_lab.lm.resolve_lm``. ``None``:
            the LM configured in DSPy, else (when default roles are used) ``resolve_lm()``.
        role_lms: per-role models, keys ``atomizer``, ``planner``, ``executor``,
            ``executor:<task_type>``, ``aggregator``, ``verifier``.
        corpus: texts or a folder/.jsonl for the default ``search`` executor's BM25 retriever.
        max_depth: nodes at this depth are executed without asking the atomizer.
        max_concurrency: role calls in flight at once, over the whole tree.
        max_subtasks: longer plans are truncated (with a warning).
        call_timeout_s: a role call taking longer fails its node.
    """

    def __init__(
        self,
        atomizer: Callable[..., Any] | None = None,
        planner: Callable[..., Any] | None = None,
        executors: Mapping[str, Callable[..., Any]] | None = None,
        aggregator: Callable[..., Any] | None = None,
        verifier: Callable[..., Any] | None = None,
        *,
        lm: Any = None,
        role_lms: Mapping[str, Any] | None = None,
        corpus: Sequence[str] | str | PathLike[str] | None = None,
        max_depth: int = 2,
        max_concurrency: int = 4,
        max_subtasks: int = 8,
        call_timeout_s: float = 600.0,
    ):
        for name, value, low in (("max_depth", max_depth, 0), ("max_concurrency", max_concurrency, 1),
                                 ("max_subtasks", max_subtasks, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not call_timeout_s > 0:
            raise ValueError(f"call_timeout_s must be > 0, got {call_timeout_s!r}")
        if executors is not None:
            unknown = set(executors) - set(TASK_TYPES)
            if unknown or not executors:
                raise ValueError(f"executors must map some of {TASK_TYPES} to callables; got {sorted(executors)}")
        valid_lm_keys = {"atomizer", "planner", "executor", "aggregator", "verifier"}
        valid_lm_keys |= {f"executor:{t}" for t in TASK_TYPES}
        bad = set(role_lms or {}) - valid_lm_keys
        if bad:
            raise ValueError(f"unknown role_lms keys {sorted(bad)}; valid: {sorted(valid_lm_keys)}")

        self.uses_default_roles = None in (atomizer, planner, executors, aggregator)
        if self.uses_default_roles:
            from ._roles import Aggregator, Atomizer, Planner, default_executors

            atomizer = atomizer or Atomizer()
            planner = planner or Planner()
            aggregator = aggregator or Aggregator()
            executors = executors or default_executors(corpus)
        self.atomizer = atomizer
        self.planner = planner
        self.executors = dict(executors)
        self.aggregator = aggregator
        self.verifier = verifier
        self.lm = lm
        self.role_lms = dict(role_lms or {})
        self.max_depth = max_depth
        self.max_concurrency = max_concurrency
        self.max_subtasks = max_subtasks
        self.call_timeout_s = float(call_timeout_s)
        self.task_types = tuple(t for t in TASK_TYPES if t in self.executors)
        self.default_type = "think" if "think" in self.executors else self.task_types[0]

    # --- public entry points ---

    def run(self, goal: str, *, on_event: Observer | None = None) -> Run:
        """Run to completion. Inside a running event loop (Jupyter) the run gets its own thread + loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(goal, on_event=on_event))
        ctx = contextvars.copy_context()  # keep the caller's dspy.context() settings
        with ThreadPoolExecutor(1, thread_name_prefix="roma-run") as pool:
            return pool.submit(ctx.run, asyncio.run, self.arun(goal, on_event=on_event)).result()

    async def arun(self, goal: str, *, on_event: Observer | None = None) -> Run:
        """Run inside the caller's event loop. ``on_event`` sees every node change as it happens."""
        if not isinstance(goal, str) or not goal.strip():
            raise ValueError("goal must be a non-empty string")
        root = Node(id="0", parent_id=None, depth=0, goal=goal.strip(), task_type=self.default_type)
        lms = self._resolve_lms()  # before the clock starts: loading a local model is not run time
        state = _RunState(time.monotonic(), asyncio.Semaphore(self.max_concurrency), lms, {root.id: root}, on_event)
        state.update(root.id)  # announce the root as pending
        await self._solve(state, root.id, inherited=(), dep_results=())
        nodes = tuple(state.nodes.values())
        statuses = {n.status for n in nodes}
        root = state.nodes["0"]
        if root.status != "completed":
            status = "failed"
        elif statuses == {"completed"}:
            status = "completed"
        else:
            status = "partial"
        return Run(goal=root.goal, status=status, output=root.output, nodes=nodes,
                   wall_s=time.monotonic() - state.t0, settings=self._settings(state.lms))

    # --- models ---

    def _lm_key(self, role: str) -> Any:
        if role in self.role_lms:
            return self.role_lms[role]
        if role.startswith("executor:") and "executor" in self.role_lms:
            return self.role_lms["executor"]
        return self.lm

    def _resolve_lms(self) -> dict[str, Any]:
        """One LM (or None = leave DSPy's setting alone) per role key, names resolved once per run."""
        import dspy

        keys = ["atomizer", "planner", "aggregator", *(f"executor:{t}" for t in self.task_types)]
        if self.verifier is not None:
            keys.append("verifier")
        resolved: dict[Any, Any] = {}
        lms = {}
        for key in keys:
            spec = self._lm_key(key)
            if spec is None and self.uses_default_roles and dspy.settings.lm is None:
                spec = ""  # resolve_lm(None): $ROMA_LAB_LM or the embedded default
            if isinstance(spec, str):
                if spec not in resolved:
                    from roma_lab.lm import resolve_lm

                    resolved[spec] = resolve_lm(spec or None)
                spec = resolved[spec]
            lms[key] = spec if spec is not None else dspy.settings.lm
        return lms

    def _settings(self, lms: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "max_depth": self.max_depth,
            "max_concurrency": self.max_concurrency,
            "max_subtasks": self.max_subtasks,
            "call_timeout_s": self.call_timeout_s,
            "verifier": self.verifier is not None,
            "models": {k: getattr(v, "model", None) for k, v in lms.items()},
        }

    # --- one role call: the only place that touches models, time limits and usage ---

    async def _call(self, state: _RunState, node_id: str, role: str, fn: Callable[..., Any], **inputs: Any) -> dict:
        component = role.split(":")[0]
        lm = state.lms.get(role)
        async with state.slots:
            started = time.monotonic()
            try:
                if _is_async(fn):
                    pending = _atracked_call(fn, inputs, lm)
                else:
                    ctx = contextvars.copy_context()
                    pending = _in_thread(ctx.run, _tracked_call, fn, inputs, lm)
                result, usage, history = await asyncio.wait_for(pending, self.call_timeout_s)
                outputs = {}
                for name in _OUTPUT_FIELDS[component]:
                    if not hasattr(result, name):
                        raise RoleError(role, f"output has no field {name!r} (got {type(result).__name__})")
                    outputs[name] = _jsonable(getattr(result, name))
                outputs.update({k: _jsonable(getattr(result, k)) for k in _OPTIONAL_OUTPUTS if hasattr(result, k)})
                error = None
            except TimeoutError:
                error, outputs, usage, history = f"timed out after {self.call_timeout_s:g} s", {}, {}, []
            except RoleError as err:
                error, outputs, usage, history = err.message, {}, {}, []
            except Exception as err:  # the role's own failure, recorded on the node
                error, outputs, usage, history = f"{type(err).__name__}: {err}", {}, {}, []
            latency = time.monotonic() - started
        # a cached completion keeps its original price in history but costs nothing now (and reports no usage)
        known = [h["cost"] for h in history
                 if h.get("cost") is not None and not getattr(h.get("response"), "cache_hit", False)]
        # an in-process model has no per-call price: its cost is zero, not unknown
        local_only = bool(usage) and all(str(model).startswith("local/") for model in usage)
        call = RoleCall(
            role=role,
            inputs=_jsonable(dict(inputs)),
            outputs=outputs,
            context_chars=_context_chars(inputs),
            input_tokens=sum(int(u.get("prompt_tokens") or 0) for u in usage.values()),
            output_tokens=sum(int(u.get("completion_tokens") or 0) for u in usage.values()),
            cost=sum(known) if known else (0.0 if local_only else None),
            latency_s=latency,
            started_s=started - state.t0,
            model=", ".join(sorted(usage)) or getattr(lm, "model", None),
            error=error,
        )
        state.update(node_id, calls=state.nodes[node_id].calls + (call,))
        if error is not None:
            raise RoleError(role, error)
        return outputs

    # --- the recursive loop ---

    def _ancestors(self, state: _RunState, node: Node) -> list[str]:
        goals = []
        parent = node.parent_id
        while parent is not None and len(goals) < _ANCESTRY_GOALS:
            goals.append(state.nodes[parent].goal)
            parent = state.nodes[parent].parent_id
        return goals[::-1]

    async def _solve(self, state: _RunState, node_id: str, inherited: tuple, dep_results: tuple) -> None:
        """Solve one node; all outcomes (including failures) end up on ``state.nodes[node_id]``.

        ``inherited`` are dependency results the ancestors received (so a planned node's children
        still see what their parent depended on); ``dep_results`` are this node's own.
        """
        node = state.update(node_id, status="running")
        context = _render_context(self._ancestors(state, node), inherited + dep_results)
        try:
            if node.depth >= self.max_depth:
                state.update(node_id, forced_atomic=True)
                atomic = True
            else:
                out = await self._call(state, node_id, "atomizer", self.atomizer, goal=node.goal, context=context)
                if not isinstance(out["is_atomic"], bool):
                    raise RoleError("atomizer", f"is_atomic must be a bool, got {out['is_atomic']!r}")
                atomic = out["is_atomic"]
                task_type = out["task_type"]
                if task_type in self.task_types:
                    state.update(node_id, is_atomic=atomic, task_type=task_type)
                else:
                    state.update(node_id, is_atomic=atomic)
                    state.add_warning(node_id, f"atomizer gave unknown task type {task_type!r}; kept "
                                               f"{state.nodes[node_id].task_type!r}")
            plan = () if atomic else await self._plan(state, node_id, context)
            if plan:
                output = await self._expand(state, node_id, plan, context, inherited + dep_results)
            else:
                output = await self._verified(state, node_id, context, self._executor_step(state, node_id))
        except (RoleError, _NothingToAggregate) as err:
            state.update(node_id, status="failed", error=str(err))
            return
        state.update(node_id, status="completed", output=output)

    async def _plan(self, state: _RunState, node_id: str, context: str) -> tuple[Subtask, ...]:
        """Validated plan; re-asks once when nothing usable came back, then falls back to executing."""
        goal = state.nodes[node_id].goal
        ask_context = context
        for attempt in (1, 2):
            try:
                out = await self._call(state, node_id, "planner", self.planner, goal=goal, context=ask_context)
            except RoleError as err:  # output that would not parse is an unusable plan too: re-ask once
                problems = [f"the planner's reply was unusable ({err.message})"]
            else:
                check = validate_plan(out["subtasks"], task_types=self.task_types, default_type=self.default_type,
                                      max_subtasks=self.max_subtasks)
                if check.subtasks:
                    for w in check.warnings:
                        state.add_warning(node_id, f"plan (attempt {attempt}): {w}")
                    return check.subtasks
                problems = list(check.warnings)
            for w in problems:
                state.add_warning(node_id, f"plan (attempt {attempt}): {w}")
            ask_context = (f"{context}\n\nA previous plan for this goal was unusable ({'; '.join(problems)}). "
                           f"Return between 1 and {self.max_subtasks} subtasks.").strip()
        state.add_warning(node_id, "planner gave no usable plan twice; executing the goal directly")
        return ()

    def _executor_step(self, state: _RunState, node_id: str) -> Callable[[str], Any]:
        async def execute(context: str) -> str:
            node = state.nodes[node_id]
            out = await self._call(state, node_id, f"executor:{node.task_type}", self.executors[node.task_type],
                                   goal=node.goal, context=context)
            return str(out["output"])
        return execute

    async def _expand(self, state: _RunState, node_id: str, plan: Sequence[Subtask], context: str,
                      inherited: tuple) -> str:
        parent = state.nodes[node_id]
        ids = [f"{node_id}.{i}" for i in range(len(plan))]
        for child_id, sub in zip(ids, plan, strict=True):
            state.nodes[child_id] = Node(id=child_id, parent_id=node_id, depth=parent.depth + 1, goal=sub.goal,
                                         task_type=sub.task_type, depends_on=tuple(ids[j] for j in sub.depends_on))
            state.update(child_id)

        tasks: list[asyncio.Task] = []

        async def run_child(i: int) -> None:
            deps = [tasks[j] for j in plan[i].depends_on]  # always earlier siblings, already created
            if deps:
                await asyncio.wait(deps)
            missing = [ids[j] for j in plan[i].depends_on if state.nodes[ids[j]].status != "completed"]
            if missing:
                state.update(ids[i], status="skipped", error=f"dependencies did not complete: {', '.join(missing)}")
                return
            results = tuple((state.nodes[ids[j]].goal, state.nodes[ids[j]].output) for j in plan[i].depends_on)
            await self._solve(state, ids[i], inherited=inherited, dep_results=results)

        for i in range(len(plan)):
            tasks.append(asyncio.create_task(run_child(i)))
        await asyncio.gather(*tasks)

        children = [state.nodes[i] for i in ids]
        done = [c for c in children if c.status == "completed"]
        if not done:
            raise _NothingToAggregate(f"none of the {len(children)} subtasks completed; nothing to aggregate")
        if len(done) < len(children):
            missing = ", ".join(f"{c.id} ({c.status})" for c in children if c.status != "completed")
            state.add_warning(node_id, f"aggregated {len(done)} of {len(children)} subtasks; missing: {missing}")
        results = [{"goal": c.goal, "task_type": c.task_type, "status": c.status,
                    "output": c.output if c.status == "completed" else f"MISSING: {c.error}"} for c in children]

        async def aggregate(ctx: str) -> str:
            out = await self._call(state, node_id, "aggregator", self.aggregator,
                                   goal=parent.goal, context=ctx, subtask_results=results)
            return str(out["output"])

        return await self._verified(state, node_id, context, aggregate)

    async def _verified(self, state: _RunState, node_id: str, context: str, produce: Callable[[str], Any]) -> str:
        """Produce a result; with a verifier, a rejected result is re-produced once with the feedback."""
        output = await produce(context)
        if self.verifier is None:
            return output
        goal = state.nodes[node_id].goal
        verdict = await self._call(state, node_id, "verifier", self.verifier, goal=goal, context=context,
                                   candidate=output)
        if not isinstance(verdict["verdict"], bool):
            raise RoleError("verifier", f"verdict must be a bool, got {verdict['verdict']!r}")
        if verdict["verdict"]:
            return output
        state.add_warning(node_id, f"verifier rejected the result: {verdict['feedback']}")
        retry_context = f"{context}\n\nA reviewer rejected a previous attempt: {verdict['feedback']}".strip()
        output = await produce(retry_context)
        verdict = await self._call(state, node_id, "verifier", self.verifier, goal=goal, context=retry_context,
                                   candidate=output)
        if verdict["verdict"] is not True:  # a non-bool second verdict counts as a rejection
            state.add_warning(node_id, f"verifier still rejects after one re-execution: {verdict['feedback']}")
        return output
