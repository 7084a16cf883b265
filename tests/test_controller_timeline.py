"""What the trace records for the execution-tree viewer (issue 13 §3): when each node was planned,
began and ended, when each role call asked for a concurrency slot and got one, which call a running
node is in (queued or holding a slot), and each call's model requests as sent with their completions
and whether a completion cache served them. All of it must be true of the run, not drawn."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace

import dspy
import pytest
from schedules import most_at_once, scheduled_run

from roma_lab.trace import InvalidRunError, Run
from roma_lab.controller import Roma, ScriptedRoles, Subtask
from roma_lab.lm import CachingEngine
from roma_lab.lm import ScriptedEngine

EPS = 1e-9


def call_intervals(run: Run) -> list[tuple[float, float]]:
    return sorted((c.started_s, c.started_s + c.latency_s) for n in run.nodes for c in n.calls)


@pytest.mark.parametrize("slots", [1, 2])
def test_recorded_calls_never_exceed_the_concurrency_bound_and_queueing_is_recorded(slots):
    run = scheduled_run(slots)
    assert run.status == "completed"
    assert most_at_once(call_intervals(run)) == slots  # the bound is reached and never passed
    calls = [c for n in run.nodes for c in n.calls]
    assert all(c.queued_s is not None and c.queued_s <= c.started_s for c in calls)
    # eight leaves ask for a slot together: with few slots some wait for at least one 10 ms call
    assert max(c.started_s - c.queued_s for c in calls) >= 0.009


def test_node_times_follow_the_schedule():
    run = scheduled_run(8)
    by_id = {n.id: n for n in run.nodes}
    assert run.root.created_s == 0.0
    for n in run.nodes:
        assert n.created_s <= n.started_s <= n.ended_s <= run.wall_s
        if n.calls:
            assert n.started_s <= min(c.queued_s for c in n.calls) + EPS
            assert max(c.started_s + c.latency_s for c in n.calls) <= n.ended_s + EPS
        if n.parent_id is not None:  # planned when its parent's planner call had ended
            planner = next(c for c in by_id[n.parent_id].calls if c.role == "planner")
            assert n.created_s >= planner.started_s + planner.latency_s - EPS
        for d in n.depends_on:  # began only after its dependency ended: the wait is in the trace
            assert n.started_s >= by_id[d].ended_s
    dependent = by_id["0.0.2"]  # after 0.0.1, created with its siblings
    assert dependent.started_s - dependent.created_s >= 0.009


def test_a_skipped_node_never_began_and_ended_when_its_dependency_did():
    async def fail(goal, context):
        raise ValueError("boom")

    kwargs = ScriptedRoles({"root": (Subtask("a", "think"), Subtask("b", "think", (0,)))}).role_kwargs()
    run = Roma(**kwargs | {"executors": {"think": fail}}, max_depth=1).run("root")
    a, b = run.node("0.0"), run.node("0.1")
    assert (a.status, b.status) == ("failed", "skipped")
    assert b.started_s is None and a.ended_s <= b.ended_s <= run.root.ended_s


@pytest.mark.parametrize("slots", [1, 2])
def test_live_nodes_say_whether_they_wait_for_a_slot_or_hold_one(slots):
    holding, queued, snapshots = [], [], {}

    def observe(event):
        snapshots[event.node.id] = event.node
        flights = [n.in_flight for n in snapshots.values() if n.in_flight is not None]
        holding.append(sum(f.started_s is not None for f in flights))
        queued.append(sum(f.started_s is None for f in flights))

    run = scheduled_run(slots, on_event=observe)
    assert max(holding) == slots  # exactly the semaphore's bound, never more
    assert max(queued) >= 2  # siblings wait for a slot, and the trace says so
    assert all(n.in_flight is None for n in run.nodes)


def test_a_stopped_run_ends_its_unfinished_nodes_at_the_deadline():
    async def slow(goal, context):
        await asyncio.sleep(5)
        return SimpleNamespace(output="late")

    kwargs = ScriptedRoles({"root": (Subtask("a", "think"), Subtask("b", "think", (0,)))}).role_kwargs()
    run = Roma(**kwargs | {"executors": {"think": slow}}, max_depth=1, run_timeout_s=0.3).run("root")
    assert run.status == "timed_out"
    a, b = run.node("0.0"), run.node("0.1")
    assert a.status == b.status == "cancelled" and a.in_flight is None
    assert a.started_s is not None and b.started_s is None  # b never began: it waited on a
    assert 0.25 <= a.ended_s == b.ended_s <= run.wall_s
    assert Run.from_json(run.to_json()) == run


# --- the model requests of a call, and the cached mark ---

def answer(request):
    return {name: f"answer to {request.inputs.get('goal', '?')}" for name in request.outputs}


def cached_lm(directory, engine):
    return dspy.LM("local/fake", engine=CachingEngine(engine, model_id="fake", directory=directory), cache=False)


def test_calls_keep_their_prompts_and_completions_and_say_when_a_cache_served_them(tmp_path):
    engine = ScriptedEngine(answer)
    first = Roma(lm=cached_lm(tmp_path, engine), max_depth=0).run("Name three noble gases")
    (call,) = first.root.calls
    (exchange,) = call.exchanges
    assert [m["role"] for m in exchange.messages] == ["system", "user"]
    assert "Name three noble gases" in exchange.messages[-1]["content"]
    assert "answer to Name three noble gases" in exchange.completions[0]
    assert call.cached is False and len(engine.requests) == 1
    again = Roma(lm=cached_lm(tmp_path, ScriptedEngine(answer)), max_depth=0).run("Name three noble gases")
    assert again.root.calls[0].cached is True and again.root.calls[0].exchanges[0].messages == exchange.messages
    assert Run.from_json(again.to_json()) == again


def test_a_role_without_a_model_records_no_request_and_no_cached_mark():
    run = scheduled_run(4)
    assert all(c.exchanges == () and c.cached is None for n in run.nodes for c in n.calls)


def test_a_timed_out_call_records_no_request():
    def stuck(goal, context):
        time.sleep(1)
        return SimpleNamespace(output="late")

    roles = ScriptedRoles({}).role_kwargs() | {"executors": {"think": stuck}}
    run = Roma(**roles, max_depth=0, call_timeout_s=0.05).run("x")
    (call,) = run.root.calls
    assert call.error.startswith("timed out") and call.exchanges == () and call.cached is None


# --- the file: new fields are checked; files written before them still load (test_controller_settings) ---

def saved() -> dict:
    return json.loads(scheduled_run(2).to_json())


@pytest.mark.parametrize("corrupt, message", [
    (lambda d: d["nodes"][1].update(started_s=d["nodes"][1]["ended_s"] + 1), "in order"),
    (lambda d: d["nodes"][1].update(created_s=float("nan")), "in order"),
    (lambda d: d["nodes"][1]["calls"][0].update(queued_s=d["nodes"][1]["calls"][0]["started_s"] + 1),
     "started before it was queued"),
    (lambda d: d["nodes"][1].update(in_flight={"role": "planner", "queued_s": 0.0, "started_s": None}),
     "not a ROMA run trace"),  # live state is never written
])
def test_a_file_with_impossible_times_is_refused(corrupt, message):
    data = saved()
    corrupt(data)
    with pytest.raises(InvalidRunError, match=message):
        Run.from_json(json.dumps(data))


def test_a_run_built_with_a_call_still_in_flight_is_refused():
    from dataclasses import replace

    from roma_lab.trace import CallInFlight

    run = scheduled_run(2)
    stuck = replace(run.nodes[1], in_flight=CallInFlight("executor:think", queued_s=0.1))
    with pytest.raises(InvalidRunError, match="still in a executor:think call"):
        replace(run, nodes=(run.root, stuck, *run.nodes[2:]))
