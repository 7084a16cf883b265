"""One role call, step by step (``Roma._call``): queued, dispatched to a thread or task of its own,
waited for within its time limit or given up on (``_loop.py``), and recorded under its role's output
contract, at its time limit and late (``_call_record.py``). Each step alone, without a run."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from types import SimpleNamespace

import pytest

from roma_lab.controller._call_record import CallHead, ended_call, late_call, read_outputs, timed_out_call
from roma_lab.controller._loop import Outcome, RunState, abandon, dispatch, ended_within
from roma_lab.tools import ToolLog
from roma_lab.trace import Node, ToolCall

USAGE = {"local/m": {"prompt_tokens": 7, "completion_tokens": 3}}  # an in-process model: cost 0


def head(role="executor:think", **inputs) -> CallHead:
    return CallHead(role, inputs or {"goal": "g", "context": "ctx"}, queued_s=1.0, started_s=1.5, latency_s=0.25,
                    model="local/given", tools=ToolLog(0.0, 5.0))


def outcome(result=None, error=None, usage=USAGE) -> Outcome:
    return Outcome(result, error, usage, [])


# --- the output contract ---------------------------------------------------------------------------

@pytest.mark.parametrize(("role", "result", "message"), [
    ("atomizer", SimpleNamespace(is_atomic="yes", task_type="think"), "is_atomic must be a bool, got 'yes' (str)"),
    ("executor:code", SimpleNamespace(output=None), "output must be a str, got None (NoneType)"),
    ("aggregator", SimpleNamespace(), "output has no field 'output' (got SimpleNamespace)"),
    ("verifier", SimpleNamespace(verdict=1, feedback=""), "verdict must be a bool, got 1 (int)"),
    ("planner", object(), "output has no field 'subtasks' (got object)"),
])
def test_an_output_that_breaks_its_roles_contract_is_the_error_that_fails_its_node(role, result, message):
    assert read_outputs(role, outcome(result)) == ({}, message)


def test_an_output_that_keeps_the_contract_is_recorded_with_the_optional_fields_it_exposes():
    result = SimpleNamespace(output="done", reasoning="because", extra="not recorded")
    assert read_outputs("executor:think", outcome(result)) == ({"output": "done", "reasoning": "because"}, None)


def test_an_output_that_breaks_when_read_and_a_role_that_raised_are_named():
    class Broken:
        @property
        def output(self):
            raise ValueError("no")

    assert read_outputs("executor:think", outcome(Broken())) == ({}, "output could not be read: ValueError: no")
    assert read_outputs("atomizer", outcome(error=KeyError("k"))) == ({}, "KeyError: 'k'")


# --- the records -----------------------------------------------------------------------------------

def test_an_ended_call_records_what_it_was_shown_returned_and_consumed():
    call = ended_call(head(), outcome(SimpleNamespace(output="done")))
    assert (call.role, call.inputs, call.context_chars) == ("executor:think", {"context": "ctx"}, 4)  # goal on the node
    assert (call.queued_s, call.started_s, call.latency_s) == (1.0, 1.5, 0.25)
    assert (call.outputs, call.error) == ({"output": "done"}, None)
    assert (call.input_tokens, call.output_tokens, call.cost, call.model) == (7, 3, 0.0, "local/m")


def test_a_call_that_raised_is_recorded_with_its_error_and_what_it_consumed_on_the_model_it_was_given():
    call = ended_call(head(), outcome(error=RuntimeError("boom"), usage={}))
    assert (call.outputs, call.error, call.model) == ({}, "RuntimeError: boom", "local/given")
    assert (call.input_tokens, call.output_tokens) == (0, 0)


def test_a_timed_out_call_is_unknown_at_its_limit_and_what_it_consumed_once_it_ends():
    h = head()
    call = timed_out_call(h, 2.0)
    assert (call.input_tokens, call.output_tokens, call.cost) == (None, None, None)
    assert call.error == "timed out after 2 s; usage unknown (still running)" and call.model == "local/given"
    h.tools.calls.append(ToolCall(name="search", server=None, arguments={}, status="ok", result_chars=1,
                                  latency_s=0.1, started_s=2.0))  # made after the limit, before it ended
    late = late_call(call, h, outcome(SimpleNamespace(output="too late")), 2.0, 3.25)
    assert (late.input_tokens, late.output_tokens, late.cost, late.model) == (7, 3, 0.0, "local/m")
    assert late.error == "timed out after 2 s; ended 3.25 s after it started"
    assert late.outputs == {} and [t.name for t in late.tools] == ["search"] and call.tools == ()


# --- dispatch, the time limit, giving up -----------------------------------------------------------

SETTING = contextvars.ContextVar("setting", default="unset")


def test_a_sync_role_runs_on_a_thread_of_its_own_in_a_copy_of_the_context_an_async_one_on_the_loop():
    seen = {}

    def sync_role(goal):
        seen["sync"] = (threading.current_thread().name, SETTING.get())
        return SimpleNamespace(output=goal)

    async def async_role(goal):
        seen["async"] = (threading.current_thread().name, SETTING.get())
        raise LookupError("judged later")

    async def main():
        SETTING.set("the caller's")
        one = await dispatch(sync_role, {"goal": "s"}, None, ToolLog(0.0, 5.0))
        two = await dispatch(async_role, {"goal": "a"}, None, ToolLog(0.0, 5.0))
        return one, two

    one, two = asyncio.run(main())
    assert one.result.output == "s" and one.error is None and isinstance(two.error, LookupError)
    assert seen["sync"] == ("roma-role", "the caller's") and seen["async"] == (threading.main_thread().name,
                                                                               "the caller's")


def test_a_role_that_raises_keyboard_interrupt_stops_the_run_others_do_not():
    assert outcome(error=KeyboardInterrupt()).stops_run and outcome(error=SystemExit(1)).stops_run
    assert not outcome(error=asyncio.CancelledError()).stops_run and not outcome(SimpleNamespace()).stops_run


def test_ended_within_says_whether_the_call_ended_in_time_and_never_waits_for_a_role_that_ignores_it():
    async def stubborn():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:  # swallowed: wait_for would wait for it to end
            await asyncio.sleep(10)

    async def main():
        quick = asyncio.ensure_future(asyncio.sleep(0, "done"))
        slow = asyncio.ensure_future(stubborn())
        start = time.monotonic()
        results = (await ended_within(quick, 5), await ended_within(slow, 0.2))
        took = time.monotonic() - start
        slow.cancel()  # once more: it then ends, and so can this loop
        return results, took

    (quick, slow), took = asyncio.run(asyncio.wait_for(main(), 10))
    assert (quick, slow) == (True, False) and took < 3


def test_a_call_waited_for_is_cancelled_with_the_run():
    async def main():
        pending = asyncio.ensure_future(asyncio.sleep(30))
        waiter = asyncio.ensure_future(ended_within(pending, 60))
        await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await asyncio.sleep(0)
        return pending.cancelled()

    assert asyncio.run(main())


def test_an_abandoned_call_is_cancelled_if_async_and_reported_late_if_it_ends_after_all():
    late = []

    async def role():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:  # as _atracked_call does: the outcome says what it consumed
            return outcome(error=asyncio.CancelledError())

    async def main():
        task = asyncio.ensure_future(role())
        thread_call = asyncio.get_running_loop().create_future()  # a thread cannot be cancelled
        never = asyncio.get_running_loop().create_future()
        await asyncio.sleep(0.01)  # the role is running when its limit passes
        abandon(task, late.append)
        abandon(thread_call, late.append)
        abandon(never, late.append)
        await asyncio.sleep(0.05)
        thread_call.set_result(outcome(SimpleNamespace(output="x")))
        never.cancel()  # the run's loop went away first: nothing is reported
        await asyncio.sleep(0.05)

    asyncio.run(main())
    assert [type(o.error).__name__ if o.error else o.result.output for o in late] == ["CancelledError", "x"]


# --- the node's live state -------------------------------------------------------------------------

def test_a_call_shows_on_its_node_as_queued_then_running_then_recorded():
    async def main():
        state = RunState(time.monotonic(), asyncio.Semaphore(1), {}, {}, None)
        state.put(Node(id="0", parent_id=None, depth=0, goal="g", task_type="think", created_s=0.0))
        waiting = state.call_queued("0", "atomizer")
        queued = state.nodes["0"].in_flight
        started = state.call_started("0", waiting)
        running = state.nodes["0"].in_flight
        call = ended_call(head("atomizer"), outcome(SimpleNamespace(is_atomic=True, task_type="think")))
        state.record_call("0", call)
        return queued, running, started - state.t0, state.nodes["0"]

    queued, running, started_s, node = asyncio.run(main())
    assert queued.role == "atomizer" and queued.started_s is None
    assert running.queued_s == queued.queued_s and running.started_s == pytest.approx(started_s)
    assert node.in_flight is None and [c.role for c in node.calls] == ["atomizer"]


def test_a_call_record_is_replaced_by_identity_not_by_equal_fields():
    async def main():
        state = RunState(time.monotonic(), asyncio.Semaphore(1), {}, {}, None)
        state.put(Node(id="0", parent_id=None, depth=0, goal="g", task_type="think", created_s=0.0))
        first = timed_out_call(head(), 1.0)
        twin = timed_out_call(head(), 1.0)  # equal field by field, another call
        assert first == twin and first is not twin
        state.record_call("0", first)
        state.record_call("0", twin)
        state.replace_call("0", twin, late_call(twin, head(), outcome(), 1.0, 2.0))
        return state.nodes["0"].calls

    first, twin = asyncio.run(main())
    assert "usage unknown" in first.error and "ended 2 s after" in twin.error
