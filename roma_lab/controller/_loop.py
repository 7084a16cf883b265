"""The plumbing under the ROMA loop (``_roma.py`` holds the algorithm): the loop thread each run gets
(``launch``), a role call on its own thread or task with its own metered call and tool log
(``dispatch``), waited for within its time limit (``ended_within``) or given up on (``abandon``), the
observers fed from a queue so none can stall a run, and the run's live state (``RunState``). Why a
run has a loop of its own and no role can hang it: design/scheduling.md.

What ``_roma.py`` uses is named without an underscore; the rest is this file's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import queue
import threading
import time
import warnings
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from roma_lab.tools import TOOL_LOG, ArtifactStore, McpConnections, ToolLog
from roma_lab.trace import (
    CallInFlight,
    Node,
    NodeEvent,
    RoleCall,
    Run,
)

from ._repair import RepairPlan

_STOP = (KeyboardInterrupt, SystemExit)  # raised by a role: the run stops (see Stopped)

Observer = Callable[[NodeEvent], None]


class Stopped(Exception):
    """A role raised KeyboardInterrupt or SystemExit. Carried up the tree as an ordinary exception
    (raised as itself inside a task, asyncio would tear the loop down), then re-raised as ``cause``."""

    def __init__(self, cause: BaseException):
        super().__init__(repr(cause))
        self.cause = cause


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one role call returned or raised, and what it consumed either way."""

    result: Any
    error: BaseException | None
    usage: dict
    history: list

    @property
    def stops_run(self) -> bool:
        """The role raised KeyboardInterrupt or SystemExit: the whole run stops (:class:`Stopped`)."""
        return isinstance(self.error, _STOP)


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


@contextlib.contextmanager
def _call_setting(lm: Any, tools: ToolLog) -> Iterator[Callable[[Any, BaseException | None], Outcome]]:
    """One role call's metered model call (``lm.metered_call``: its own LM copy and usage tracker) and
    its own tool log, so concurrent calls never mix. Yields the function that makes the call's
    outcome from what it returned or raised."""
    from roma_lab.lm import metered_call

    TOOL_LOG.set(tools)  # the call's thread or task runs in a copy of the run's context: the setting stays there
    with metered_call(lm) as meter:
        yield lambda result, error: Outcome(result, error, meter.tokens(), meter.history())


def _tracked_call(fn: Callable[..., Any], inputs: Mapping[str, Any], lm: Any, tools: ToolLog) -> Outcome:
    """Run one sync role in its own call setting (:func:`_call_setting`)."""
    result, error = None, None
    with _call_setting(lm, tools) as outcome:
        try:
            result = fn(**inputs)
        except BaseException as err:  # noqa: BLE001 - judged by the caller, after usage is read
            error = err
    return outcome(result, error)


async def _atracked_call(fn: Callable[..., Any], inputs: Mapping[str, Any], lm: Any, tools: ToolLog) -> Outcome:
    """Run one async role in its own call setting (:func:`_call_setting`)."""
    result, error = None, None
    with _call_setting(lm, tools) as outcome:
        try:
            result = await fn(**inputs)
        except BaseException as err:  # noqa: BLE001 - also our own cancellation after a time-out:
            error = err  # this task then ends with what the call consumed, for late accounting
    return outcome(result, error)


def _in_thread(fn: Callable[..., Outcome], *args: Any) -> asyncio.Future:
    """Run a sync role call on its own daemon thread. A timed-out call cannot be killed, but then it
    holds only its own thread, never a pooled worker that later calls would queue behind (and whose
    queueing time would count against their own time limit)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(outcome: Outcome) -> None:
        if not future.done():
            future.set_result(outcome)

    def target() -> None:
        try:
            outcome = fn(*args)
        except BaseException as err:  # noqa: BLE001 - e.g. the LM copy failed before the role ran
            outcome = Outcome(None, err, {}, [])
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:  # the run's loop is closed: this late call's usage stays unknown
            pass

    threading.Thread(target=target, name="roma-role", daemon=True).start()
    return future


def dispatch(fn: Callable[..., Any], inputs: Mapping[str, Any], lm: Any, tools: ToolLog) -> asyncio.Future:
    """Start one role call in its own call setting: an async role as a task on the run's loop, a sync
    one (a DSPy module) on a daemon thread of its own, in a copy of this context (so
    ``dspy.context(...)`` applies). The future's result is the call's :class:`Outcome`."""
    if _is_async(fn):
        return asyncio.ensure_future(_atracked_call(fn, inputs, lm, tools))
    return _in_thread(contextvars.copy_context().run, _tracked_call, fn, inputs, lm, tools)


async def ended_within(pending: asyncio.Future, timeout_s: float | None) -> bool:
    """Whether the call ``pending`` ended within ``timeout_s``. ``asyncio.wait``, not ``wait_for``:
    ``wait_for`` waits for a cancelled role to finish, forever if the role swallows the cancellation.
    When the run is stopped meanwhile, the call is cancelled too."""
    try:
        done, _ = await asyncio.wait({pending}, timeout=timeout_s)
    except asyncio.CancelledError:
        pending.cancel()
        raise
    return bool(done)


def abandon(pending: asyncio.Future, late: Callable[[Outcome], None]) -> None:
    """Give up on a timed-out call: an async role is cancelled (it sees CancelledError; a thread cannot
    be stopped), and if the call ends after all, ``late`` gets its outcome, to count what it consumed."""
    if isinstance(pending, asyncio.Task):
        pending.cancel()
    pending.add_done_callback(lambda future: None if future.cancelled() else late(future.result()))


def describe(err: BaseException) -> str:
    try:
        text = str(err)
    except Exception:  # an exception whose __str__ raises still gets named
        text = "<message unprintable>"
    return f"{type(err).__name__}: {text}"


def with_trace(err: BaseException, run: Run) -> BaseException:
    """Attach the partial run to an exception that stops it, so an interrupted user keeps the trace."""
    err.run = run  # type: ignore[attr-defined]
    err.add_note(f"ROMA: the partial trace ({len(run.nodes)} nodes, status {run.status}) is attached as .run")
    return err


_OBSERVER_STALL_S = 5.0  # an observer inside one event this long at the run's end is given up on


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


class ThreadObserver:
    """Delivers a ``run()``'s events to its observer in order, on a thread of its own: an observer
    that blocks or is slow holds up neither the run's loop nor the caller, whose deadline holds."""

    def __init__(self, observer: Observer):
        self.observer = observer
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._busy_since: float | None = None  # when the event being delivered was handed over
        self._ended = False
        self._given_up = False
        threading.Thread(target=self._serve, name="roma-observer", daemon=True).start()

    def send(self, event: NodeEvent) -> None:
        self._queue.put(event)

    def _serve(self) -> None:
        while (event := self._queue.get()) is not None:
            with self._cond:
                if self._given_up:
                    return
                self._busy_since = time.monotonic()
            try:
                self.observer(event)
            except Exception as err:  # a broken view must not break the run, but must be seen
                warnings.warn(f"run observer raised {err!r}; the run continues", stacklevel=1)
            except BaseException as err:  # noqa: BLE001 - e.g. SystemExit: the view ends, the run goes on
                warnings.warn(f"run observer raised {err!r}; it gets no more events", stacklevel=1)
                with self._cond:
                    self._given_up = self._ended = True
                    self._cond.notify_all()
                return
            with self._cond:
                self._busy_since = None
                self._cond.notify_all()
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def finish(self) -> str | None:
        """Wait until every event sent is delivered, unless the observer stays inside one event for
        ``_OBSERVER_STALL_S``: then it gets no more events. Returns why it was given up on, or None."""
        self._queue.put(None)
        with self._cond:
            while not self._ended:
                since = self._busy_since
                if since is not None and time.monotonic() - since >= _OBSERVER_STALL_S:
                    self._given_up = True
                    return (f"the run observer {_name(self.observer)} was stuck in one event for "
                            f"{_OBSERVER_STALL_S:g} s; it was given no more events")
                self._cond.wait(_OBSERVER_STALL_S if since is None else since + _OBSERVER_STALL_S - time.monotonic())
        return None


class LoopObserver:
    """Delivers an ``arun()``'s events to its observer in order on the caller's event loop, where an
    async caller's observer expects to run (it may touch the caller's asyncio objects)."""

    def __init__(self, observer: Observer, loop: asyncio.AbstractEventLoop):
        self.observer = observer
        self._loop = loop
        self._open = True
        self.flushed: asyncio.Future = loop.create_future()  # done once every event sent was delivered

    def send(self, event: NodeEvent) -> None:
        with contextlib.suppress(RuntimeError):  # the caller's loop closed: nobody is listening
            self._loop.call_soon_threadsafe(self._deliver, event)

    def _deliver(self, event: NodeEvent) -> None:
        if not self._open:
            return
        try:
            self.observer(event)
        except Exception as err:  # a broken view must not break the run, but must be seen
            warnings.warn(f"run observer raised {err!r}; the run continues", stacklevel=1)
        except BaseException as err:  # noqa: BLE001 - raised in a loop callback it would end the caller's loop
            warnings.warn(f"run observer raised {err!r}; it gets no more events", stacklevel=1)
            self._open = False

    def _close(self) -> None:
        self._open = False
        if not self.flushed.done():
            self.flushed.set_result(None)

    def finish(self) -> None:
        """Close after the events sent so far (``flushed`` is then done); nothing later is delivered."""
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._close)


@dataclass(slots=True)
class RunState:
    """Everything one run mutates; a fresh one per run so a Roma object can be reused.

    The loop thread writes nodes; the caller's thread may take the final snapshot at a deadline or
    an interrupt, so writes hold a lock; once ``closed``, the observer hears nothing more. Events
    go to the observer through ``observer`` (attached by ``run``/``arun``), never called in place."""

    t0: float
    slots: asyncio.Semaphore
    lms: dict[str, Any]
    nodes: dict[str, Node]
    on_event: Observer | None
    store: ArtifactStore | None = None
    repair: RepairPlan | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False
    observer: ThreadObserver | LoopObserver | None = None
    connections: McpConnections | None = None  # the run's MCP servers, ended at the latest by _finish

    def attach(self, observer: ThreadObserver | LoopObserver | None) -> None:
        """Deliver events to ``observer`` from now on; it first hears the nodes as they are (the root)."""
        with self.lock:
            self.observer = observer
            nodes = list(self.nodes.values())
        for node in nodes:
            self._notify(node)

    def _notify(self, node: Node) -> None:
        if self.observer is not None:
            self.observer.send(NodeEvent(node.status, node))

    def now(self) -> float:
        """Seconds since the run started (the trace's clock)."""
        return time.monotonic() - self.t0

    def put(self, node: Node) -> Node:
        with self.lock:
            self.nodes[node.id] = node  # after close() only the abandoned loop still reads these
            closed = self.closed
        if not closed:
            self._notify(node)
        return node

    def update(self, node_id: str, **changes: Any) -> Node:
        return self.put(replace(self.nodes[node_id], **changes))

    def add_warning(self, node_id: str, message: str) -> None:
        self.update(node_id, warnings=self.nodes[node_id].warnings + (message,))

    def call_queued(self, node_id: str, role: str) -> CallInFlight:
        """A call of ``role`` for the node asks for a slot: the view shows it queued until it gets one."""
        return self.update(node_id, in_flight=CallInFlight(role, queued_s=self.now())).in_flight

    def call_started(self, node_id: str, waiting: CallInFlight) -> float:
        """The call got its slot: the view shows it running. Returns when, on the monotonic clock."""
        started = time.monotonic()
        self.update(node_id, in_flight=replace(waiting, started_s=started - self.t0))
        return started

    def record_call(self, node_id: str, call: RoleCall) -> None:
        """Add an ended (or timed-out) call to its node, which is then in no call."""
        self.update(node_id, calls=self.nodes[node_id].calls + (call,), in_flight=None)

    def replace_call(self, node_id: str, old: RoleCall, new: RoleCall) -> None:
        """Put ``new`` in the place of the record ``old`` (that very record: two calls may be alike)."""
        calls = self.nodes[node_id].calls
        self.update(node_id, calls=tuple(new if c is old else c for c in calls))

    def in_flight(self) -> str:
        """The role calls running now, for a reason that names them (empty if none)."""
        with self.lock:
            calls = [f"{n.in_flight.role} of node {n.id}" for n in self.nodes.values()
                     if n.in_flight is not None and n.in_flight.started_s is not None]
        return f"; in flight: {', '.join(calls)}" if calls else ""

    def close(self, reason: str | None, status: str = "cancelled") -> tuple[Node, ...]:
        """Freeze the nodes; with a ``reason`` (the run was stopped) unfinished ones get ``status``."""
        with self.lock:
            self.closed = True
            unfinished = [n for n in self.nodes.values() if n.status in ("pending", "running")]
            if reason is not None:
                ended = self.now()
                for n in unfinished:
                    self.nodes[n.id] = replace(n, status=status, error=reason, ended_s=ended, in_flight=None)
            nodes = tuple(self.nodes.values())
        for n in unfinished if reason is not None else ():
            self._notify(self.nodes[n.id])  # the live view sees where the run stopped
        return nodes


@dataclass(slots=True)
class RunLoop:
    """The loop thread of one run: its loop, the run's task and whether user code stopped the loop."""

    loop: asyncio.AbstractEventLoop
    task: asyncio.Task
    loop_stopped: bool = False

    def cancel(self) -> None:
        """Cancel the run's task from another thread, without waiting (the loop may be blocked)."""
        with contextlib.suppress(RuntimeError):  # the loop has closed already
            self.loop.call_soon_threadsafe(self.task.cancel)


def launch(drive: Coroutine[Any, Any, Any], ended: Callable[[], None]) -> RunLoop:
    """Run ``drive`` (the tree) on a fresh loop in a daemon thread of its own; ``ended()`` is called
    (from that thread) once its task is done or the loop thread ends, whichever comes first. The
    caller's thread runs no role and no observer, so its deadline holds whatever they do."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(drive)
    task.add_done_callback(lambda _: ended())
    handle = RunLoop(loop, task)
    ctx = contextvars.copy_context()  # keep the caller's dspy.context() settings
    # Thread.start waits for the thread: on a busy machine a role may already have run
    threading.Thread(target=ctx.run, args=(_run_loop, handle, ended), name="roma-run", daemon=True).start()
    return handle


_LOOP_RESTARTS = 3  # a role that stops the loop again while leftovers unwind gets this many more turns


def _run_loop(run: RunLoop, ended: Callable[[], None]) -> None:
    """Body of a run's daemon loop thread: run the tree, then cancel leftover role tasks and wait
    for them. The caller has its Run already; a role that ignores cancellation keeps only this
    thread (like a timed-out sync role keeps its own), instead of being torn down half-way. A role
    that calls ``loop.stop()`` ends ``run_until_complete`` early: the run's task is then cancelled
    with the leftovers and the caller returns a ``failed`` run."""
    loop = run.loop
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(run.task)
    except asyncio.CancelledError:  # deadline or interrupt: the caller already returned the trace
        pass
    except RuntimeError:  # "Event loop stopped before Future completed": user code called loop.stop()
        run.loop_stopped = True
    finally:
        for _ in range(_LOOP_RESTARTS):
            leftovers = asyncio.all_tasks(loop)
            for t in leftovers:
                t.cancel()
            if not leftovers:
                break
            try:
                loop.run_until_complete(asyncio.wait(leftovers))
            except RuntimeError:  # stopped again
                run.loop_stopped = True
        with contextlib.suppress(RuntimeError):
            loop.close()
        ended()  # also when the run's task never finished (the loop was stopped for good)
