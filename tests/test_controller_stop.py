"""Stopping a run (issue 9 §1): the whole-run deadline holds even when a role blocks the event loop or
swallows cancellation; KeyboardInterrupt, SystemExit and the caller's cancellation re-raise with the
partial trace attached as ``.run``. Every test is bounded by its own deadline or a thread guard, and
none asserts on wall-clock speed."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from types import SimpleNamespace

import pytest

from roma_lab.trace import Run
from roma_lab.controller import Roma, ScriptedRoles, Subtask

PLAN = {"root": (Subtask("a", "think"), Subtask("b", "think"), Subtask("c", "think", (1,)))}


def roles_with(executor) -> dict:
    return ScriptedRoles(dict(PLAN)).role_kwargs() | {"executors": {"think": executor}}


def guarded(fn, seconds: float = 20.0):
    """Call ``fn`` on a daemon thread; fail (instead of hanging the suite) if it does not return."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - inspected by the test
            box["error"] = err

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "the run hung"
    return box


async def done(goal):
    return SimpleNamespace(output=f"done({goal})")


def test_deadline_returns_the_trace_when_a_role_blocks_the_event_loop():
    unblocked = threading.Event()

    async def executor(goal, context):
        if goal == "b":
            time.sleep(3)  # blocks the loop: no asyncio timeout can fire
            unblocked.set()
        return await done(goal)

    events = []
    box = guarded(lambda: Roma(**roles_with(executor), max_depth=1, run_timeout_s=0.5, call_timeout_s=0.1).run(
        "root", on_event=events.append))
    run = box["value"]
    assert not unblocked.is_set()  # returned while the role still blocked the loop
    assert run.status == "timed_out" and run.output is None
    assert run.root.status == "cancelled" and "run deadline of 0.5 s" in run.root.error
    assert run.node("0.1").status == "cancelled"
    assert run.settings.run_timeout_s == 0.5
    # the live view was told where the run stopped, and hears nothing after the run returned
    assert events[-1].node.status == "cancelled"
    seen = len(events)
    assert unblocked.wait(10)  # the blocked role ends and the abandoned loop unwinds
    time.sleep(0.5)
    assert len(events) == seen
    assert Run.from_json(run.to_json()) == run


def test_deadline_holds_when_a_role_swallows_cancellation_in_arun():
    async def executor(goal, context):
        end = time.monotonic() + 3
        while time.monotonic() < end:
            try:
                await asyncio.sleep(0.02)
            except asyncio.CancelledError:
                pass  # a role that ignores every cancellation
        return await done(goal)

    roma = Roma(**roles_with(executor), max_depth=1, run_timeout_s=0.5, call_timeout_s=60)

    async def main():
        return await roma.arun("root")

    run = guarded(lambda: asyncio.run(main()))["value"]
    assert run.status == "timed_out"
    assert {n.status for n in run.nodes} == {"cancelled"}


def test_a_call_time_limit_does_not_wait_for_a_role_that_swallows_cancellation():
    gave_up = threading.Event()

    async def executor(goal, context):
        if goal != "b":
            return await done(goal)
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                await asyncio.sleep(0.02)
            except asyncio.CancelledError:
                pass
        gave_up.set()
        return await done(goal)

    run = guarded(lambda: Roma(**roles_with(executor), max_depth=1, call_timeout_s=0.2).run("root"))["value"]
    assert not gave_up.is_set()  # the run did not wait for the role to stop ignoring its cancellation
    assert run.node("0.1").status == "failed" and "timed out after 0.2 s" in run.node("0.1").error
    assert run.node("0.2").status == "skipped" and run.status == "partial"


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(2)], ids=["KeyboardInterrupt", "SystemExit"])
@pytest.mark.parametrize("sync", [False, True], ids=["async role", "sync role"])
def test_interrupt_from_a_role_is_reraised_with_the_partial_trace(exc, sync):
    def sync_executor(goal, context):
        if goal == "b":
            raise exc
        return SimpleNamespace(output=f"done({goal})")

    async def async_executor(goal, context):
        return sync_executor(goal, context)

    roma = Roma(**roles_with(sync_executor if sync else async_executor), max_depth=1, max_concurrency=1)
    box = guarded(lambda: roma.run("root"))
    err = box["error"]
    assert type(err) is type(exc)
    run = err.run
    assert run.status == "interrupted" and run.output is None
    assert run.node("0.0").status == "completed"  # what finished before the stop is kept
    b = run.node("0.1")
    assert b.status == "cancelled" and type(exc).__name__ in b.error
    assert b.calls[-1].error.startswith(type(exc).__name__)
    assert any("attached as .run" in note for note in err.__notes__)
    assert Run.from_json(run.to_json()) == run


def test_arun_stops_on_a_role_interrupt_and_cancels_the_siblings():
    started = []

    async def executor(goal, context):
        started.append(goal)
        if goal == "b":
            raise KeyboardInterrupt
        await asyncio.sleep(0.5)
        return await done(goal)

    plans = {"root": (Subtask("a", "think"), Subtask("b", "think"), Subtask("after a", "think", (0,)))}
    roma = Roma(**ScriptedRoles(plans).role_kwargs() | {"executors": {"think": executor}}, max_depth=1)

    async def main():
        try:
            await roma.arun("root")
        except KeyboardInterrupt as err:
            await asyncio.sleep(1)  # the siblings would have finished by now had they not been cancelled
            return err

    err = guarded(lambda: asyncio.run(main()))["value"]
    assert err.run.status == "interrupted"
    assert err.run.node("0.0").status == "cancelled" and started == ["a", "b"]  # "after a" never ran


def test_cancelling_arun_cancels_the_run_and_attaches_the_trace():
    async def executor(goal, context):
        await asyncio.sleep(30)

    roma = Roma(**roles_with(executor), max_depth=1)

    async def main():
        task = asyncio.ensure_future(roma.arun("root"))
        await asyncio.sleep(0.2)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as err:
            return err

    err = guarded(lambda: asyncio.run(main()))["value"]
    assert err.run.status == "interrupted"
    assert err.run.root.status == "cancelled" and "the caller cancelled the run" in err.run.root.error


def test_ctrl_c_while_run_waits_gives_the_partial_trace():
    # runs in the main thread: SIGINT is what a terminal or Jupyter's interrupt sends
    def executor(goal, context):
        if goal == "b":
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(1)
        return SimpleNamespace(output=f"done({goal})")

    roma = Roma(**roles_with(executor), max_depth=1, max_concurrency=1, run_timeout_s=10)
    with pytest.raises(KeyboardInterrupt) as caught:
        roma.run("root")
    run = caught.value.run
    assert run.status == "interrupted"
    assert run.node("0.0").status == "completed" and run.node("0.1").status == "cancelled"
    assert "KeyboardInterrupt while running" in run.node("0.1").error


def test_the_observer_hears_nothing_after_arun_returned():
    release, finished = threading.Event(), threading.Event()

    def executor(goal, context):  # sync: its thread outlives its time limit and the run
        if goal == "b":
            release.wait(10)
            finished.set()
        return SimpleNamespace(output=f"done({goal})")

    events = []
    roma = Roma(**roles_with(executor), max_depth=1, call_timeout_s=0.2)

    async def main():
        run = await roma.arun("root", on_event=events.append)
        seen = len(events)
        release.set()
        assert finished.wait(10)
        await asyncio.sleep(0.3)  # the loop lives on: the late thread's result reaches it
        return run, seen

    run, seen = guarded(lambda: asyncio.run(main()))["value"]
    assert len(events) == seen
    assert run.node("0.1").calls[0].input_tokens is None  # the returned run is a frozen record


def test_a_role_raising_cancelled_error_fails_only_its_node():
    async def executor(goal, context):
        if goal == "a":
            raise asyncio.CancelledError
        return await done(goal)

    run = guarded(lambda: Roma(**roles_with(executor), max_depth=1).run("root"))["value"]
    assert run.node("0.0").status == "failed" and "CancelledError" in run.node("0.0").error
    assert run.status == "partial"


def test_a_run_that_ends_before_its_deadline_is_not_marked_timed_out():
    run = Roma(**ScriptedRoles(dict(PLAN)).role_kwargs(), max_depth=1, run_timeout_s=30).run("root")
    assert run.status == "completed"


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), "5", True])
def test_bad_run_timeout_is_a_clear_error(value):
    with pytest.raises(ValueError, match="run_timeout_s"):
        Roma(**ScriptedRoles({}).role_kwargs(), run_timeout_s=value)


# --- the deadline holds whatever user code does, and the trace comes back (issue 21 §3) ---

def stop_the_loop():
    asyncio.get_running_loop().stop()


def cancel_every_other_task():
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task():
            task.cancel()


SABOTAGE = [(stop_the_loop, "a role stopped the run's event loop (loop.stop())"),
            (cancel_every_other_task, "the run's task was cancelled from inside the run")]


@pytest.mark.parametrize("entry", ["run", "arun"])
@pytest.mark.parametrize("sabotage, reason", SABOTAGE, ids=["loop.stop()", "cancels the run's tasks"])
def test_a_role_that_breaks_the_runs_loop_gives_a_failed_run_with_the_trace(sabotage, reason, entry):
    async def executor(goal, context):
        if goal == "b":
            sabotage()
            await asyncio.sleep(5)
        return await done(goal)

    roma = Roma(**roles_with(executor), max_depth=1, max_concurrency=1, run_timeout_s=20)
    box = guarded(lambda: roma.run("root") if entry == "run" else asyncio.run(roma.arun("root")), 30)
    assert "error" not in box, repr(box.get("error"))
    run = box["value"]
    assert run.status == "failed" and run.output is None
    assert run.node("0.0").status == "completed"  # what finished before is kept
    b = run.node("0.1")
    assert b.status == "failed" and reason in b.error and "executor:think of node 0.1" in b.error
    assert run.root.status == "failed" and reason in run.root.error
    assert Run.from_json(run.to_json()) == run


@pytest.mark.parametrize("sync", [False, True], ids=["async role blocks its loop", "sync role blocks its thread"])
def test_arun_deadline_holds_when_a_role_blocks(sync):
    release = threading.Event()

    def sync_executor(goal, context):
        if goal == "b":
            release.wait(60)  # never yields: no asyncio timeout can fire in this thread or loop
        return SimpleNamespace(output=f"done({goal})")

    async def async_executor(goal, context):
        return sync_executor(goal, context)

    roma = Roma(**roles_with(sync_executor if sync else async_executor), max_depth=1, max_concurrency=1,
                run_timeout_s=1, call_timeout_s=60)
    try:
        box = guarded(lambda: asyncio.run(roma.arun("root")), 30)
    finally:
        release.set()
    run = box["value"]
    assert run.status == "timed_out" and run.node("0.0").status == "completed"
    assert run.node("0.1").status == "cancelled" and "in flight: executor:think of node 0.1" in run.node("0.1").error
    assert Run.from_json(run.to_json()) == run


def test_a_blocking_observer_cannot_stall_the_run_and_the_trace_says_so():
    release = threading.Event()
    events = []

    def observer(event):
        events.append(event)
        if event.node.id == "0.1":
            release.wait(120)  # a view stuck on a lock: it never returns by itself

    roma = Roma(**ScriptedRoles(dict(PLAN)).role_kwargs(), max_depth=1, run_timeout_s=20)
    try:
        with pytest.warns(UserWarning, match="was stuck in one event"):
            box = guarded(lambda: roma.run("root", on_event=observer), 60)
        seen = len(events)
    finally:
        release.set()
    run = box["value"]
    assert run.status == "completed"  # the run did not wait for its view
    assert any("run observer" in w and "given no more events" in w for w in run.root.warnings)
    time.sleep(0.5)
    assert len(events) == seen  # released, the observer hears nothing after the run returned
    assert Run.from_json(run.to_json()) == run


@pytest.mark.parametrize("entry", ["run", "arun"])
def test_an_observer_raising_system_exit_is_warned_and_the_run_goes_on(entry):
    def observer(event):
        raise SystemExit(3)

    roma = Roma(**ScriptedRoles(dict(PLAN)).role_kwargs(), max_depth=1, run_timeout_s=20)
    with pytest.warns(UserWarning, match="gets no more events"):
        box = guarded(lambda: roma.run("root", on_event=observer) if entry == "run" else
                      asyncio.run(roma.arun("root", on_event=observer)), 30)
    assert "error" not in box, repr(box.get("error"))
    assert box["value"].status == "completed"


def test_observer_events_arrive_in_order_and_all_before_run_returns():
    events = []

    def observer(event):
        time.sleep(0.001)  # a slow view: it lags behind the run but misses nothing
        events.append(event)

    run = Roma(**ScriptedRoles(dict(PLAN)).role_kwargs(), max_depth=1).run("root", on_event=observer)
    assert events[0].kind == "pending" and events[0].node.id == "0"
    assert events[-1].node == run.root
    for node in run.nodes:
        kinds = [e.kind for e in events if e.node.id == node.id]
        assert kinds[0] == "pending" and kinds[-1] == "completed" and "running" in kinds
