"""The ROMA control loop (paper §2.1, Algorithm 1) with dependency-aware scheduling.

Every node runs atomize -> (execute | plan -> children -> aggregate) -> optional verify. Each child is
its own asyncio task that waits only for its own dependencies, so there are no level barriers.
One semaphore bounds concurrent *role calls*; a parent never holds a slot while its children run,
so deep trees cannot deadlock. No role can hang a run: every call has a time limit that does not
depend on the role honouring cancellation, and the tree runs on an event loop of its own, so the
caller's whole-run deadline holds even against a role that blocks or stops that loop, and an observer
(fed from a queue) cannot stall it. See design/scheduling.md.

This file reads in that order: ``Roma``'s public entry points, the algorithm (``_solve`` ->
``_solve_fresh`` -> ``_plan`` / ``_expand`` -> ``_verified``, and ``_call``, the one role call), then a
run's life; the loop thread, a call's thread or task, the observers and the run's live state are
``_loop.py``'s, and what a call's record says (its output contract, a time-out) ``_call_record.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from os import PathLike
from typing import Any

from roma_lab.tools import (
    RUN_STORE,
    RUN_TOOLS,
    ArtifactError,
    ArtifactMissingError,
    ArtifactStore,
    McpConnections,
    McpServer,
    McpServerError,
    ToolLog,
)
from roma_lab.trace import (
    MODEL_KEYS,
    OUTPUT_STATUSES,
    TASK_TYPES,
    ArtifactRef,
    Node,
    RepairRecord,
    RoleCall,
    RomaSettings,
    Run,
    RunStatus,
    clip,
    reference,
    run_status,
    show,
)

from ._call_record import CallHead, ended_call, late_call, timed_out, timed_out_call
from ._loop import (
    LoopObserver,
    Observer,
    RunLoop,
    RunState,
    Stopped,
    ThreadObserver,
    abandon,
    describe,
    dispatch,
    ended_within,
    launch,
    with_trace,
)
from ._plan import Subtask, validate_plan
from ._repair import RepairPlan, plan_repair, repair_stores

class RoleError(RuntimeError):
    """A role call raised, timed out or broke its output contract. The node becomes ``failed``."""

    def __init__(self, role: str, message: str):
        super().__init__(f"{role}: {message}")
        self.role = role
        self.message = message


class _NothingToAggregate(Exception):
    """Every subtask of a planned node failed, was skipped or cancelled."""


def _result_text(node: Node, limit: int | None) -> str:
    """A dependency result as a context shows it: the output cut to ``limit``, or for an artifact
    its summary and reference."""
    if node.artifact is None:
        return clip(node.output, limit)
    return f"{node.output}\n{reference(node.artifact)}"


def _render_context(ancestors: Sequence[str], results: Sequence[Node], settings: RomaSettings) -> str:
    parts = []
    cut = settings.goal_chars
    if ancestors:
        lines = "\n".join(f"- {g[:cut]}" for g in ancestors)
        parts.append(f"This task is part of (outermost first):\n{lines}")
    if results:
        blocks = "\n\n".join(f"[{n.goal[:cut]}]\n{_result_text(n, settings.max_result_chars)}" for n in results)
        parts.append(f"Results of prerequisite tasks:\n{blocks}")
    return "\n\n".join(parts)


def _summary(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"


class Roma:
    """A recursive ROMA agent. Any role may be replaced by a callable with the same keyword contract.

    Args:
        atomizer: ``(goal, context) -> .is_atomic (bool), .task_type``
        planner: ``(goal, context) -> .subtasks`` (items with goal, task_type, depends_on)
        executors: ``{task_type: (goal, context) -> .output (str)}`` for task types search/think/write/code
        aggregator: ``(goal, context, subtask_results) -> .output (str)``
        verifier: optional ``(goal, context, candidate) -> .verdict (bool), .feedback``
        lm: model for every role: a ``dspy.LM`` or a name for ``roma_lab.lm.resolve_lm``. ``None``:
            the LM configured in DSPy, else (when default roles are used) ``resolve_lm()``.
        role_lms: per-role models, keys ``atomizer``, ``planner``, ``executor``,
            ``executor:<task_type>``, ``aggregator``, ``verifier``.
        corpus: texts or a folder/.jsonl for the default ``search`` executor's BM25 retriever.
        web: a ``roma_lab.web.Web`` the default ``search`` executor searches instead (a search, then its
            first hits read; every web call a tool call of the trace, with its price). Not with ``corpus``.
        artifacts: the artifact store (an :class:`ArtifactStore`, an fsspec URL or a folder) where
            outputs longer than ``artifact_chars`` are kept and passed on by reference.
        mcp_servers: :class:`McpServer` s whose tools the executors may call. Each run starts (or
            reaches) them when it begins and closes them when it ends; one that cannot be reached
            within ``mcp_start_timeout_s`` fails the run's root, naming it. With default roles, the
            search, think and code executors become a ``ToolExecutor`` (ReAct over the built-in
            search, sandboxed Python and artifact tools plus the MCP tools).
        settings: a :class:`RomaSettings` (default: its defaults).
        **keywords: any field of :class:`RomaSettings` but ``models``, applied over ``settings``:
            ``max_depth``, ``max_concurrency``, ``max_subtasks``, ``call_timeout_s``,
            ``run_timeout_s``, ``max_result_chars``, ``ancestor_goals``, ``goal_chars``, ``verify``,
            ``artifact_chars``, ``summary_chars``, ``tool_timeout_s``, ``mcp_start_timeout_s``,
            ``max_tool_result_chars``, ``plan_root``. When ``run_timeout_s`` passes, ``run`` and ``arun`` return a
            ``timed_out`` run with the trace so far, even if a role blocks or stops the run's event
            loop, ignores cancellation, or the observer blocks (the tree runs on a loop of its own). A ``verifier`` given turns
            ``verify`` on; ``verify=True`` without one uses the default DSPy ``Verifier``.
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
        web: Any = None,
        artifacts: ArtifactStore | str | PathLike[str] | None = None,
        mcp_servers: Sequence[McpServer] = (),
        settings: RomaSettings | None = None,
        **keywords: Any,
    ):
        settings = RomaSettings.from_keywords(settings, keywords)
        if corpus is not None and web is not None:
            raise ValueError("search reads a corpus or the web, not both: give corpus= or web=")
        if artifacts is not None and not isinstance(artifacts, ArtifactStore):
            artifacts = ArtifactStore(artifacts)
        if settings.artifact_chars is not None and artifacts is None:
            raise ValueError("artifact_chars is set but there is no artifact store: pass artifacts=<folder or URL>")
        mcp_servers = tuple(mcp_servers)
        if not all(isinstance(m, McpServer) for m in mcp_servers):
            raise TypeError("mcp_servers must be McpServer objects (McpServer.stdio(...) or McpServer.http(...))")
        names = [m.name for m in mcp_servers]
        if len(set(names)) < len(names):
            raise ValueError(f"MCP server names must be unique, got {names}")
        if verifier is not None:
            if keywords.get("verify") is False:
                raise ValueError("verify=False, but a verifier was given")
            settings = replace(settings, verify=True)
        if executors is not None:
            unknown = set(executors) - set(TASK_TYPES)
            if unknown or not executors:
                raise ValueError(f"executors must map some of {TASK_TYPES} to callables; got {sorted(executors)}")
        valid_lm_keys = {*MODEL_KEYS, "executor"}
        bad = set(role_lms or {}) - valid_lm_keys
        if bad:
            raise ValueError(f"unknown role_lms keys {sorted(bad)}; valid: {sorted(valid_lm_keys)}")

        self.uses_default_roles = None in (atomizer, planner, executors, aggregator) or (
            settings.verify and verifier is None)
        if self.uses_default_roles:
            from ._roles import (
                Aggregator,
                Atomizer,
                Planner,
                Verifier,
                default_executors,
            )

            atomizer = atomizer or Atomizer()
            planner = planner or Planner()
            aggregator = aggregator or Aggregator()
            executors = executors or default_executors(corpus, web=web, tools=bool(mcp_servers))
            if settings.verify:
                verifier = verifier or Verifier()
        self.atomizer = atomizer
        self.planner = planner
        self.executors = dict(executors)
        self.aggregator = aggregator
        self.verifier = verifier
        self.lm = lm
        self.role_lms = dict(role_lms or {})
        self.settings = settings
        self.artifacts = artifacts
        self.mcp_servers = mcp_servers
        self.task_types = tuple(t for t in TASK_TYPES if t in self.executors)
        self.default_type = "think" if "think" in self.executors else self.task_types[0]

    def run(self, goal: str, *, on_event: Observer | None = None) -> Run:
        """Run to the end or to ``run_timeout_s``, on a loop in a thread of its own (also in Jupyter).

        If a role raises KeyboardInterrupt or SystemExit, or the user interrupts while waiting, that
        exception is re-raised with the partial trace attached as ``.run`` (status ``interrupted``).
        """
        return self._run_blocking(self._start(goal, on_event))

    async def arun(self, goal: str, *, on_event: Observer | None = None) -> Run:
        """Await the run from the caller's event loop. The tree runs on a loop of its own (so a role
        that blocks or stops its loop holds neither the caller nor the deadline); ``on_event`` is
        called on the caller's loop, in order, and has seen every event when this returns.
        Cancelling this coroutine cancels the run; the CancelledError then carries ``.run``."""
        return await self._run_async(self._start(goal, on_event))

    def repair(self, run: Run, *, also: Sequence[str] = (), on_event: Observer | None = None,
               source_store: ArtifactStore | str | PathLike[str] | None = None) -> Run:
        """Re-execute only what ``run`` (a finished or loaded run) did not complete: its failed,
        skipped and cancelled nodes (and, with ``also``, its ``degraded`` / ``unverified`` ones),
        the dependents of anything re-executed, and the aggregations above them; every other node
        is reused with its output, never recomputed. This Roma's roles, models and settings do the
        re-execution, so a repair can use a bigger model only where the run failed.

        The new run marks reused nodes (``Node.reused``, no calls), links to ``run`` by the SHA-256
        of its JSON (``Run.repair``; with an artifact store, ``run`` is kept there under that key)
        and checks first that every reused artifact is readable and intact (else an
        :class:`ArtifactError` naming the node, before any role is called). See design/repair.md.

        The artifact store ``run`` names is used only when the caller names it too: as this Roma's
        ``artifacts`` (the repair writes there), or as ``source_store`` (the reused artifacts are
        copied from it into this Roma's store); else :class:`UntrustedStoreError`, before any I/O.
        """
        return self._run_blocking(self._start_repair(run, also, on_event, source_store))

    async def arepair(self, run: Run, *, also: Sequence[str] = (), on_event: Observer | None = None,
                      source_store: ArtifactStore | str | PathLike[str] | None = None) -> Run:
        """:meth:`repair` inside the caller's event loop (as :meth:`arun`)."""
        return await self._run_async(self._start_repair(run, also, on_event, source_store))

    # --- the algorithm (paper §2.1, Algorithm 1): solve a node, plan it, expand and aggregate ---

    async def _solve(self, state: RunState, node_id: str, inherited: tuple, dep_results: tuple) -> None:
        """Solve one node; all outcomes (including failures) end up on ``state.nodes[node_id]``.

        ``inherited`` are dependency results (nodes) the ancestors received (so a planned node's
        children still see what their parent depended on); ``dep_results`` are this node's own. In
        a repair, a node may instead be reused whole, or re-aggregated over its kept plan.
        """
        action = "fresh" if state.repair is None else state.repair.action(node_id)
        if action == "reuse":
            for n in state.repair.reused_subtree(node_id):
                state.put(replace(n, reused=True, calls=(), created_s=None, started_s=None, ended_s=None))
            return
        node = state.update(node_id, status="running", started_s=state.now())
        context = _render_context(self._ancestors(state, node), inherited + dep_results, self.settings)
        degraded = None
        try:
            if action == "kept_plan":
                source = state.repair.source.node(node_id)
                state.update(node_id, is_atomic=source.is_atomic, task_type=source.task_type,
                             forced_atomic=source.forced_atomic)
                state.add_warning(node_id, "repair: kept the atomizer's decision and the plan of the repaired run")
                ids, plan = state.repair.kept_plan(node_id)
                producer, rejected = await self._expand(state, node_id, plan, context, inherited + dep_results, ids)
            else:
                producer, rejected, degraded = await self._solve_fresh(state, node_id, context, inherited + dep_results)
            artifact = await self._keep_artifact(state, node_id, producer)
        except (RoleError, _NothingToAggregate, ArtifactError) as err:
            state.update(node_id, status="failed", error=str(err), ended_s=state.now())
            return
        output = producer.outputs["output"]
        if artifact is not None:
            output = _summary(output, self.settings.summary_chars)
        if rejected is not None:
            state.update(node_id, status="unverified", output=output, artifact=artifact, error=rejected,
                         ended_s=state.now())
        elif degraded is not None:
            state.update(node_id, status="degraded", output=output, artifact=artifact, error=degraded,
                         ended_s=state.now())
        else:
            state.update(node_id, status="completed", output=output, artifact=artifact, ended_s=state.now())

    async def _solve_fresh(self, state: RunState, node_id: str, context: str,
                           inherited: tuple) -> tuple[RoleCall, str | None, str | None]:
        """Atomize, then execute or plan-expand-aggregate: the call that produced the output, why the
        verifier rejected it (or None) and why it is degraded (or None)."""
        node = state.nodes[node_id]
        if node.depth >= self.settings.max_depth:
            state.update(node_id, forced_atomic=True)
            atomic = True
        elif node.depth == 0 and self.settings.plan_root:  # the run's settings record why no atomizer was asked
            state.update(node_id, is_atomic=False)
            atomic = False
        else:
            out = (await self._call(state, node_id, "atomizer", self.atomizer, goal=node.goal, context=context)).outputs
            atomic = out["is_atomic"]
            task_type = out["task_type"]
            if task_type in self.task_types:
                state.update(node_id, is_atomic=atomic, task_type=task_type)
            else:
                state.update(node_id, is_atomic=atomic)
                state.add_warning(node_id, f"atomizer gave unknown task type {show(task_type)}; kept "
                                           f"{state.nodes[node_id].task_type!r}")
        plan = () if atomic else await self._plan(state, node_id, context)
        degraded = None
        if plan is None:
            degraded = "the planner gave no usable plan twice; the goal was executed directly"
        if plan:
            producer, rejected = await self._expand(state, node_id, plan, context, inherited)
        else:
            producer, rejected = await self._verified(state, node_id, context, self._executor_step(state, node_id))
        return producer, rejected, degraded

    async def _plan(self, state: RunState, node_id: str, context: str) -> tuple[Subtask, ...] | None:
        """Validated plan; re-asks once when nothing usable came back; ``None`` after two failures
        (the caller then executes the goal directly and marks the node ``degraded``)."""
        goal = state.nodes[node_id].goal
        ask_context = context
        for attempt in (1, 2):
            try:
                plan = await self._call(state, node_id, "planner", self.planner, goal=goal, context=ask_context)
            except RoleError as err:  # output that would not parse is an unusable plan too: re-ask once
                problems = [f"the planner's reply was unusable ({err.message})"]
            else:
                check = validate_plan(plan.outputs["subtasks"], task_types=self.task_types,
                                      default_type=self.default_type, max_subtasks=self.settings.max_subtasks)
                if check.subtasks:
                    for w in check.warnings:
                        state.add_warning(node_id, f"plan (attempt {attempt}): {w}")
                    return check.subtasks
                problems = list(check.warnings)
            for w in problems:
                state.add_warning(node_id, f"plan (attempt {attempt}): {w}")
            ask_context = (f"{context}\n\nA previous plan for this goal was unusable ({'; '.join(problems)}). "
                           f"Return between 1 and {self.settings.max_subtasks} subtasks.").strip()
        return None

    def _executor_step(self, state: RunState, node_id: str) -> Callable[[str], Any]:
        async def execute(context: str) -> RoleCall:
            node = state.nodes[node_id]
            return await self._call(state, node_id, f"executor:{node.task_type}", self.executors[node.task_type],
                                    goal=node.goal, context=context)
        return execute

    async def _expand(self, state: RunState, node_id: str, plan: Sequence[Subtask], context: str,
                      inherited: tuple, ids: Sequence[str] | None = None) -> tuple[RoleCall, str | None]:
        """Create the subtasks (``ids``: kept from the repaired run, else numbered under this node),
        solve each when its dependencies end, then aggregate."""
        parent = state.nodes[node_id]
        ids = list(ids) if ids is not None else [f"{node_id}.{i}" for i in range(len(plan))]
        planned = state.now()
        for child_id, sub in zip(ids, plan, strict=True):
            state.put(Node(id=child_id, parent_id=node_id, depth=parent.depth + 1, goal=sub.goal,
                           task_type=sub.task_type, depends_on=tuple(ids[j] for j in sub.depends_on),
                           created_s=planned))

        tasks: list[asyncio.Task] = []

        async def run_child(i: int) -> None:
            deps = [tasks[j] for j in plan[i].depends_on]  # always earlier siblings, already created
            if deps:
                await asyncio.wait(deps)
            # a dependency without an output (failed, skipped, cancelled) skips this node; its own
            # dependents then see a skipped node and are skipped too: the skip is transitive
            missing = [ids[j] for j in plan[i].depends_on if state.nodes[ids[j]].status not in OUTPUT_STATUSES]
            if missing:
                state.update(ids[i], status="skipped", error=f"dependencies have no output: {', '.join(missing)}",
                             ended_s=state.now())
                return
            results = tuple(state.nodes[ids[j]] for j in plan[i].depends_on)
            await self._solve(state, ids[i], inherited=inherited, dep_results=results)

        for i in range(len(plan)):
            tasks.append(asyncio.create_task(run_child(i)))
        try:
            await asyncio.gather(*tasks)
        except BaseException:  # a stop or a cancellation: siblings must not run on unobserved
            for t in tasks:
                t.cancel()
            raise

        children = [state.nodes[i] for i in ids]
        done = [c for c in children if c.status in OUTPUT_STATUSES]
        if not done:
            raise _NothingToAggregate(f"none of the {len(children)} subtasks has an output; nothing to aggregate")
        if len(done) < len(children):
            missing = ", ".join(f"{c.id} ({c.status})" for c in children if c.status not in OUTPUT_STATUSES)
            state.add_warning(node_id, f"aggregated {len(done)} of {len(children)} subtasks; missing: {missing}")
        results = [{"goal": c.goal, "task_type": c.task_type, "status": c.status,
                    "output": c.output if c.status in OUTPUT_STATUSES else f"MISSING: {c.error}",
                    **({} if c.artifact is None else {"artifact": c.artifact.id})} for c in children]

        async def aggregate(ctx: str) -> RoleCall:
            return await self._call(state, node_id, "aggregator", self.aggregator,
                                    goal=parent.goal, context=ctx, subtask_results=results)

        return await self._verified(state, node_id, context, aggregate)

    async def _verified(self, state: RunState, node_id: str, context: str,
                        produce: Callable[[str], Any]) -> tuple[RoleCall, str | None]:
        """Produce a result; with a verifier, a rejected result is re-produced once with the feedback.
        Returns the call that produced the output and, if the verifier rejected both attempts, why
        (the node is then ``unverified``: the last attempt is kept and passed on, marked)."""
        goal = state.nodes[node_id].goal
        ask_context = context
        for attempt in (1, 2):
            producer = await produce(ask_context)
            if self.verifier is None:
                return producer, None
            verdict = (await self._call(state, node_id, "verifier", self.verifier, goal=goal, context=ask_context,
                                        candidate=producer.outputs["output"])).outputs
            if verdict["verdict"]:
                return producer, None
            feedback = show(verdict["feedback"]) if not isinstance(verdict["feedback"], str) else verdict["feedback"]
            state.add_warning(node_id, f"verifier rejected attempt {attempt}: {feedback}")
            ask_context = f"{context}\n\nA reviewer rejected a previous attempt: {feedback}".strip()
        return producer, f"the verifier rejected both attempts; the last one is kept (feedback: {feedback})"

    async def _keep_artifact(self, state: RunState, node_id: str, producer: RoleCall) -> ArtifactRef | None:
        """Store a long output (not the root's: that is the run's answer) and return its reference.
        The call that produced it (that record: another call may have returned the same text) then
        records the reference and summary too, not the text."""
        output = producer.outputs["output"]
        limit = self.settings.artifact_chars
        if limit is None or state.nodes[node_id].parent_id is None or len(output) <= limit:
            return None
        try:
            ref = await asyncio.to_thread(state.store.put, output)
        except ArtifactError as err:
            raise ArtifactError(f"node {node_id}: {err}") from err
        outputs = {**producer.outputs, "output": _summary(output, self.settings.summary_chars), "artifact": ref.id}
        state.replace_call(node_id, producer, replace(producer, outputs=outputs))
        return ref

    def _ancestors(self, state: RunState, node: Node) -> list[str]:
        goals = []
        parent = node.parent_id
        while parent is not None and len(goals) < self.settings.ancestor_goals:
            goals.append(state.nodes[parent].goal)
            parent = state.nodes[parent].parent_id
        return goals[::-1]

    async def _call(self, state: RunState, node_id: str, role: str, fn: Callable[..., Any], **inputs: Any) -> RoleCall:
        """One role call, in steps: it waits for a slot, runs on a thread or task of its own for at
        most ``call_timeout_s`` (``dispatch``, ``ended_within``), and its record goes on the node
        (``_call_record.py``). Returns that record, whose ``outputs`` kept the role's contract;
        :class:`RoleError` when the call raised, broke the contract or timed out (a timed-out
        call's usage is counted if it ends while the run goes on)."""
        lm = state.lms.get(role)
        waiting = state.call_queued(node_id, role)
        async with state.slots:
            started = state.call_started(node_id, waiting)
            tools = ToolLog(state.t0, self.settings.tool_timeout_s,
                            max_result_chars=self.settings.max_tool_result_chars)
            pending = dispatch(fn, inputs, lm, tools)
            ended = await ended_within(pending, self.settings.call_timeout_s)
            head = CallHead(role, inputs, waiting.queued_s, started - state.t0, time.monotonic() - started,
                            getattr(lm, "model", None), tools)
        if not ended:
            raise self._timed_out(state, node_id, head, pending)
        outcome = pending.result()
        call = ended_call(head, outcome)
        state.record_call(node_id, call)
        if outcome.stops_run:
            raise Stopped(outcome.error)
        if call.error is not None:
            raise RoleError(role, call.error)
        return call

    def _timed_out(self, state: RunState, node_id: str, head: CallHead, pending: asyncio.Future) -> RoleError:
        """A call at its time limit: recorded with its usage unknown until it ends, if it does; the
        error that fails its node."""
        limit = self.settings.call_timeout_s
        call = timed_out_call(head, limit)
        state.record_call(node_id, call)
        abandon(pending, lambda outcome: state.replace_call(
            node_id, call, late_call(call, head, outcome, limit, state.now() - head.started_s)))
        return RoleError(head.role, timed_out(limit))

    # --- a run's life: its loop thread, deadline, start and finish (the plumbing is in _loop.py) ---

    def _run_blocking(self, state: RunState) -> Run:
        finished = threading.Event()
        state.attach(ThreadObserver(state.on_event) if state.on_event is not None else None)
        handle = None
        try:
            handle = launch(self._drive(state), finished.set)
            if not finished.wait(self.settings.run_timeout_s):
                handle.cancel()  # the loop may be blocked by a role: do not wait for it
                return self._finish(state, "timed_out", self._deadline_reason(state))
        except BaseException as err:  # Ctrl-C (KeyboardInterrupt) while the run was going
            if handle is not None:
                handle.cancel()
            raise with_trace(err, self._finish(state, "interrupted", f"{type(err).__name__} while running"))
        return self._result(state, handle)

    async def _run_async(self, state: RunState) -> Run:
        """As :meth:`_run_blocking`, awaited: the tree runs on a loop of its own (so a role that
        blocks or stops its loop cannot hold or break the caller's), the observer on the caller's."""
        caller = asyncio.get_running_loop()
        finished = caller.create_future()

        def ended() -> None:
            with contextlib.suppress(RuntimeError):  # the caller's loop is gone: nobody waits any more
                caller.call_soon_threadsafe(lambda: finished.done() or finished.set_result(None))

        observer = LoopObserver(state.on_event, caller) if state.on_event is not None else None
        state.attach(observer)
        handle = launch(self._drive(state), ended)
        try:
            try:
                done, _ = await asyncio.wait({finished}, timeout=self.settings.run_timeout_s)
            except asyncio.CancelledError as err:
                handle.cancel()
                raise with_trace(err, self._finish(state, "interrupted", "the caller cancelled the run"))
            if not done:
                handle.cancel()  # a role may ignore it; the run returns regardless
                return self._finish(state, "timed_out", self._deadline_reason(state))
            return self._result(state, handle)
        finally:
            if observer is not None:  # every event sent reaches the observer before arun returns
                observer.finish()
                await asyncio.shield(observer.flushed)

    def _deadline_reason(self, state: RunState) -> str:
        return f"run deadline of {self.settings.run_timeout_s:g} s reached{state.in_flight()}"

    def _start(self, goal: str, on_event: Observer | None, *, root_id: str = "0", store: ArtifactStore | None = None,
               repair: RepairPlan | None = None) -> RunState:
        if not isinstance(goal, str) or not goal.strip():
            raise ValueError("goal must be a non-empty string")
        root = Node(id=root_id, parent_id=None, depth=0, goal=goal.strip(), task_type=self.default_type,
                    created_s=0.0)
        lms = self._resolve_lms()  # before the clock starts: loading a local model is not run time
        state = RunState(time.monotonic(), asyncio.Semaphore(self.settings.max_concurrency), lms, {}, on_event,
                          store=store or self.artifacts, repair=repair)
        state.put(root)  # announce the root as pending
        return state

    def _start_repair(self, run: Run, also: Sequence[str], on_event: Observer | None,
                      source_store: ArtifactStore | str | PathLike[str] | None) -> RunState:
        plan = plan_repair(run, also)
        store, source = repair_stores(run, self.artifacts, source_store)
        reused = [n for node_id, action in plan.actions.items() if action == "reuse"
                  for n in plan.reused_subtree(node_id)]
        for n in reused:
            if n.artifact is not None:
                _ensure_artifact(n, store, source)
        if store is not None:  # the link to the repaired run resolves in the store
            store.put(run.to_json(), media_type="application/json")
        return self._start(run.goal, on_event, root_id=run.root.id, store=store, repair=plan)

    async def _drive(self, state: RunState) -> BaseException | None:
        """Connect the MCP servers, solve the tree, close the servers. Returns what stopped the run
        early (KeyboardInterrupt/SystemExit from a role, or a bug in this controller), never raises
        it: a BaseException must not escape a task."""
        root_id = next(iter(state.nodes))
        RUN_STORE.set(state.store)  # this task's context: every role call of the run inherits both
        connections = state.connections = McpConnections()
        try:
            tools = []
            for server in self.mcp_servers:
                tools.extend(await connections.open(server, self.settings.mcp_start_timeout_s))
                names = [t.name for t in tools]
                clashes = sorted({n for n in names if names.count(n) > 1})
                if clashes:  # ReAct keys tools by name: one server's tool would silently replace the other's
                    raise McpServerError(server.name, f"lists tools another server lists too: {clashes}")
            RUN_TOOLS.set(tuple(tools))
            await self._solve(state, root_id, inherited=(), dep_results=())
        except McpServerError as err:  # nothing ran yet: the root fails, naming the server
            state.update(root_id, status="failed", error=describe(err), started_s=state.now(), ended_s=state.now())
        except Stopped as stop:
            return stop.cause
        except Exception as err:  # noqa: BLE001 - a controller bug still hands back its trace
            return err
        finally:
            await connections.close()
        return None

    def _result(self, state: RunState, handle: RunLoop) -> Run:
        task = handle.task
        if not task.done() or task.cancelled():  # user code broke the run's loop from inside
            why = ("a role stopped the run's event loop (loop.stop())" if handle.loop_stopped else
                   "the run's task was cancelled from inside the run (a role cancelled a task it does not own)")
            return self._finish(state, "failed", f"{why}{state.in_flight()}")
        stopped_by = task.result()
        if stopped_by is None:
            return self._finish(state, None, None)
        run = self._finish(state, "interrupted", f"the run stopped: {describe(stopped_by)}")
        raise with_trace(stopped_by, run)

    def _finish(self, state: RunState, stop: RunStatus | None, reason: str | None) -> Run:
        """The run as it stands: unfinished nodes become ``cancelled`` (or ``failed``, when user code
        broke the run from inside), the observer is given the last events and the MCP servers'
        processes end (a run that returns at its deadline does not wait for its loop to do it)."""
        nodes = state.close(reason, "failed" if stop == "failed" else "cancelled")
        if stop == "failed" or stop is None or not any(n.status == "cancelled" for n in nodes):
            stop = None  # the run ended before the stop took effect: it finished normally
        if state.connections is not None:
            state.connections.end_processes()
        problem = state.observer.finish() if state.observer is not None else None
        if problem is not None:  # nothing silent: the trace says the live view missed the end
            warnings.warn(problem, stacklevel=3)
            nodes = (replace(nodes[0], warnings=nodes[0].warnings + (problem,)), *nodes[1:])
        status = stop or run_status(nodes)
        repair = None
        if state.repair is not None:
            source = state.repair.source
            repair = RepairRecord(hashlib.sha256(source.to_json().encode()).hexdigest(), source.status,
                                  state.repair.redone)
        stored = any(n.artifact is not None or any(t.artifact for c in n.calls for t in c.tools) for n in nodes)
        return Run(goal=nodes[0].goal, status=status, output=nodes[0].output, nodes=nodes,
                   wall_s=time.monotonic() - state.t0, settings=self._settings(state.lms),
                   artifact_store=state.store.url if stored else None, repair=repair)

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

    def _settings(self, lms: Mapping[str, Any]) -> RomaSettings:
        """This Roma's settings with the model each role called (a name, whatever ``lm`` was given as)."""
        models = {k: None if getattr(v, "model", None) is None else str(v.model) for k, v in lms.items()}
        return replace(self.settings, models=models)


def _ensure_artifact(node: Node, store: ArtifactStore, source: ArtifactStore) -> None:
    """Before a repair reuses ``node``, its artifact must be readable and intact in the repair's
    store: copied there from the repaired run's store (``source``, named by the caller) when only
    that one has it."""
    try:
        store.read_bytes(node.artifact)
        return
    except ArtifactMissingError as err:
        if source is store:
            raise ArtifactMissingError(f"node {node.id} cannot be reused: {err}") from None
    except ArtifactError as err:
        raise type(err)(f"node {node.id} cannot be reused: {err}") from None
    try:
        data = source.read_bytes(node.artifact)
    except ArtifactError as err:
        raise type(err)(f"node {node.id} cannot be reused: {err}") from None
    store.put(data, node.artifact.media_type)

