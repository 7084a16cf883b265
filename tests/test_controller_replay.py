"""A run replayed from the completion cache is re-timed with the latencies the cache recorded
(issue 26): the schedule keeps the recorded parallel structure and the concurrency bound, and a run
with any call not replayed with a recorded time gets no schedule at all (no pretend times)."""

from __future__ import annotations

import json

import pytest
from replayed_runs import SHORT, SLOW, old_digest, record, replay

from roma_lab.trace import Run, replayed_schedule

EPS = 1e-9


def executor(schedule, run: Run, goal: str):
    (node,) = [n for n in run.nodes if n.goal == goal]
    (call,) = schedule.nodes[node.id].calls
    return node, call


def test_a_replay_is_drawn_with_the_recorded_parallel_structure(tmp_path):
    recorded = record(tmp_path)
    again = replay(tmp_path)
    assert again.status == "completed" and all(c.cached for n in again.nodes for c in n.calls)
    assert again.wall_s < 0.25  # lookups only: the run's own clock says nothing of the model's times
    schedule = replayed_schedule(again)
    a_node, a = executor(schedule, again, "A")
    _, b = executor(schedule, again, "B")
    c_node, c = executor(schedule, again, "C")
    for call, goal in ((a, "A"), (b, "B"), (c, "C")):
        assert SLOW[goal] <= call.ended_s - call.started_s < SLOW[goal] + 0.1  # the recorded time, not a lookup
    assert a.started_s < b.ended_s and b.started_s < a.ended_s  # independent subtasks overlap
    assert c.started_s >= a.ended_s - EPS and schedule.nodes[c_node.id].started_s >= schedule.nodes[a_node.id].ended_s
    root = schedule.nodes["0"]
    planner_end = next(t.ended_s for t, call in zip(root.calls, again.root.calls, strict=True)
                       if call.role == "planner")
    assert schedule.nodes[a_node.id].created_s == planner_end <= a.queued_s == a.started_s
    aggregator = next(t for t, call in zip(root.calls, again.root.calls, strict=True) if call.role == "aggregator")
    assert aggregator.queued_s >= max(c.ended_s, b.ended_s) - EPS and root.ended_s == schedule.wall_s
    # the critical path atomizer, planner, A, C, aggregator; no longer than the recorded run itself
    assert 3 * SHORT + SLOW["A"] + SLOW["C"] <= schedule.wall_s <= recorded.wall_s
    assert Run.from_json(again.to_json()) == again  # the recorded latencies are kept in the file
    assert replayed_schedule(Run.from_json(again.to_json())) == schedule


def test_one_slot_serialises_the_replayed_calls(tmp_path):
    record(tmp_path)
    again = replay(tmp_path, max_concurrency=1)
    schedule = replayed_schedule(again)
    calls = sorted((t.started_s, t.ended_s) for n in schedule.nodes.values() for t in n.calls)
    assert all(end <= later + EPS for (_, end), (later, _) in zip(calls, calls[1:]))  # never two at once
    durations = sum(e - s for s, e in calls)
    assert schedule.wall_s == pytest.approx(durations)  # one slot: nothing overlaps, nothing idles
    _, b = executor(schedule, again, "B")
    _, a = executor(schedule, again, "A")
    assert b.started_s >= a.ended_s - EPS and b.queued_s < b.started_s  # B waited for A's slot


def test_a_live_run_gets_no_schedule(tmp_path):
    assert replayed_schedule(record(tmp_path)) is None


def test_entries_written_before_latencies_replay_and_give_no_schedule(tmp_path):
    record(tmp_path)
    for entry in tmp_path.rglob("*.json"):  # as the code before recorded latencies wrote them
        data = json.loads(entry.read_text())
        del data["latency_s"]
        data["digest"] = old_digest(data)
        entry.write_text(json.dumps(data))
    again = replay(tmp_path)
    assert again.status == "completed" and all(c.cached for n in again.nodes for c in n.calls)
    assert {e.recorded_latency_s for n in again.nodes for c in n.calls for e in c.exchanges} == {None}
    assert replayed_schedule(again) is None


def test_one_entry_without_a_latency_is_enough_for_no_schedule(tmp_path):
    record(tmp_path)
    entry = next(tmp_path.rglob("*.json"))
    data = json.loads(entry.read_text())
    del data["latency_s"]
    data["digest"] = old_digest(data)
    entry.write_text(json.dumps(data))
    assert replayed_schedule(replay(tmp_path)) is None


def test_a_run_file_written_before_recorded_latencies_still_loads(tmp_path):
    record(tmp_path)
    data = json.loads(replay(tmp_path).to_json())
    for node in data["nodes"]:
        for call in node["calls"]:
            for exchange in call["exchanges"]:
                del exchange["recorded_latency_s"]
    old = Run.from_json(json.dumps(data))
    assert all(e.recorded_latency_s is None for n in old.nodes for c in n.calls for e in c.exchanges)
    assert replayed_schedule(old) is None
