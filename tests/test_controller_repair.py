"""Repair (issue 14 §3): from a saved or live run, re-execute only the failed, skipped or cancelled
nodes, the dependents of anything re-executed and the aggregations above them; reuse every other
output. Role calls are counted exactly, from the scripted roles' own call log."""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from roma_lab.tools import ArtifactCorruptedError, ArtifactMissingError, ArtifactStore
from roma_lab.trace import InvalidRunError, RepairRecord, Run
from roma_lab.controller import Roma, ScriptedRoles, plan_repair, tree_plans

RUNS = Path(__file__).parent / "fixtures" / "runs"
PLANS = tree_plans((4, 3))  # 1 -> 4 -> (4 x 3): 17 nodes, 27 role calls when nothing fails


def roma(roles: ScriptedRoles, **kwargs) -> Roma:
    return Roma(**roles.role_kwargs(), max_depth=2, max_subtasks=4, **kwargs)


def run_bounded(roma: Roma, goal: str = "task") -> Run:
    """A hung controller fails the test instead of hanging it."""
    return asyncio.run(asyncio.wait_for(roma.arun(goal), 30))


def repair_bounded(roma: Roma, run: Run, **kwargs) -> Run:
    return asyncio.run(asyncio.wait_for(roma.arepair(run, **kwargs), 30))


def started(roles: ScriptedRoles) -> list[tuple[str, str]]:
    """Every call the roles themselves saw, as (role, goal), sorted."""
    return sorted((e.role, e.goal) for e in roles.log if e.event == "start")


def saved(run: Run) -> Run:
    return Run.from_json(run.to_json())  # every repair below starts from the file, as after a restart


# --- exactly the failed subtree, its dependents and the aggregations above ---------------------

def test_one_failing_leaf_reexecutes_exactly_that_leaf_and_the_aggregations_on_its_path():
    source = run_bounded(roma(ScriptedRoles(PLANS, fail={"task.1.2"})))
    assert source.status == "partial" and source.node("0.1.2").status == "failed"
    fixed_roles = ScriptedRoles(PLANS)
    fixed = repair_bounded(roma(fixed_roles), saved(source))
    assert started(fixed_roles) == [("aggregator", "task"), ("aggregator", "task.1"), ("executor:think", "task.1.2")]
    assert fixed.status == "completed"
    assert {n.id for n in fixed.nodes if not n.reused} == {"0", "0.1", "0.1.2"}
    assert sum(len(n.calls) for n in fixed.nodes) == 3  # the trace agrees with the roles' log
    # reused outputs are the source's, and the result is what a run without the failure gives
    assert all(n.output == source.node(n.id).output for n in fixed.nodes if n.reused)
    assert fixed.output == run_bounded(roma(ScriptedRoles(PLANS))).output


def test_dependents_of_a_reexecuted_node_are_reexecuted_whole():
    plans = tree_plans((4, 3), chain_every=3)  # child 2 depends on child 1, at both levels
    source = run_bounded(roma(ScriptedRoles(plans, fail={"task.1.1"})))
    assert source.node("0.1.2").status == "skipped"  # it needed task.1.1
    fixed_roles = ScriptedRoles(plans)
    fixed = repair_bounded(roma(fixed_roles), saved(source))
    assert started(fixed_roles) == sorted([
        ("executor:think", "task.1.1"), ("executor:think", "task.1.2"), ("aggregator", "task.1"),
        # task.2 depends on task.1, whose output changed: solved again from scratch
        ("atomizer", "task.2"), ("planner", "task.2"), ("executor:think", "task.2.0"),
        ("executor:think", "task.2.1"), ("executor:think", "task.2.2"), ("aggregator", "task.2"),
        ("aggregator", "task")])
    assert fixed.output == run_bounded(roma(ScriptedRoles(plans))).output
    assert {n.id for n in fixed.nodes if n.reused} == {"0.0", "0.0.0", "0.0.1", "0.0.2", "0.1.0", "0.3", "0.3.0",
                                                      "0.3.1", "0.3.2"}


class FailingAggregator:
    """ScriptedRoles' aggregator, failing for one goal."""

    def __init__(self, roles: ScriptedRoles, goal: str):
        self.roles, self.goal = roles, goal

    async def __call__(self, goal, context, subtask_results):
        if goal == self.goal:
            raise RuntimeError("aggregator down")
        return await self.roles.aggregator(goal, context, subtask_results)


def test_a_failed_aggregation_keeps_its_plan_and_reuses_all_its_subtasks():
    roles = ScriptedRoles(PLANS)
    source = run_bounded(Roma(**{**roles.role_kwargs(), "aggregator": FailingAggregator(roles, "task.3")},
                              max_depth=2, max_subtasks=4))
    assert source.node("0.3").status == "failed" and source.node("0.3.0").status == "completed"
    fixed_roles = ScriptedRoles(PLANS)
    fixed = repair_bounded(roma(fixed_roles), saved(source))
    assert started(fixed_roles) == [("aggregator", "task"), ("aggregator", "task.3")]
    assert fixed.node("0.3").warnings == ("repair: kept the atomizer's decision and the plan of the repaired run",)
    assert all(fixed.node(f"0.3.{i}").reused for i in range(3))


async def interrupt_when_only(blocked_goal: str, roles: ScriptedRoles, n_completed: int) -> Run:
    """Run ``roles`` with ``blocked_goal``'s executor waiting forever; once ``n_completed`` nodes have
    completed, cancel the run (as a user would) and return the partial trace it carries."""
    never, ready = asyncio.Event(), asyncio.Event()
    think = roles.role_kwargs()["executors"]["think"]
    latest: dict = {}

    async def executor(goal, context):
        if goal == blocked_goal:
            await never.wait()
        return await think(goal, context)

    def watch(event):
        latest[event.node.id] = event.node
        if sum(n.status == "completed" for n in latest.values()) == n_completed:
            ready.set()

    task = asyncio.create_task(Roma(**{**roles.role_kwargs(), "executors": {"think": executor}}, max_depth=2,
                                    max_subtasks=4).arun("task", on_event=watch))
    await asyncio.wait_for(ready.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as stopped:
        await task
    return stopped.value.run


def test_an_interrupted_run_resumes_where_it_stopped():
    source = asyncio.run(interrupt_when_only("task.2.1", ScriptedRoles(PLANS), n_completed=14))
    assert source.status == "interrupted"
    assert {n.id for n in source.nodes if n.status == "cancelled"} == {"0", "0.2", "0.2.1"}
    fixed_roles = ScriptedRoles(PLANS)
    fixed = repair_bounded(roma(fixed_roles), saved(source))
    assert started(fixed_roles) == [("aggregator", "task"), ("aggregator", "task.2"), ("executor:think", "task.2.1")]
    assert fixed.status == "completed" and fixed.repair.source_status == "interrupted"


def test_a_completed_run_is_reused_whole_without_a_call():
    source = run_bounded(roma(ScriptedRoles(PLANS)))
    roles = ScriptedRoles(PLANS)
    fixed = repair_bounded(roma(roles), source)
    assert roles.log == [] and all(n.reused for n in fixed.nodes) and fixed.output == source.output


# --- optional statuses, changed models ----------------------------------------------------------

def test_unverified_nodes_are_redone_only_when_asked():
    roles = ScriptedRoles(PLANS)

    async def strict(goal, context, candidate):
        return SimpleNamespace(verdict=goal != "task.0.1", feedback="too short")

    source = run_bounded(roma(roles, verifier=strict))
    assert source.node("0.0.1").status == "unverified" and source.status == "partial"
    untouched = ScriptedRoles(PLANS)
    assert repair_bounded(roma(untouched, verifier=strict), source).status == "partial" and untouched.log == []
    redo_roles = ScriptedRoles(PLANS)

    async def lenient(goal, context, candidate):
        return SimpleNamespace(verdict=True, feedback="")

    fixed = repair_bounded(roma(redo_roles, verifier=lenient), source, also=("unverified",))
    assert started(redo_roles) == [("aggregator", "task"), ("aggregator", "task.0"), ("executor:think", "task.0.1")]
    assert fixed.status == "completed" and fixed.repair.redone == ("cancelled", "failed", "skipped", "unverified")
    with pytest.raises(ValueError, match=r"also may name \['degraded', 'unverified'\], got \['completed'\]"):
        plan_repair(source, also=("completed",))


def test_a_repair_can_use_another_model_only_where_the_run_failed():
    from roma_lab.lm import script_reply, scripted_lm

    def small(request):  # the small model breaks the second subtask's executor output
        if request.inputs.get("goal", "").startswith("second half") and "output" in request.outputs:
            return "not json"
        return script_reply(request)

    source = Roma(lm=scripted_lm(small, name="scripted/small"), max_depth=1).run("Write about rivers")
    assert source.node("0.1").status == "failed"
    big = scripted_lm(name="scripted/big")
    fixed = Roma(lm=big, max_depth=1).repair(saved(source))
    assert fixed.status == "completed" and fixed.node("0.0").reused
    assert {c.model for n in fixed.nodes for c in n.calls} == {"scripted/big"}
    assert sorted((n.id, c.role) for n in fixed.nodes for c in n.calls) == [("0", "aggregator"), ("0.1", "executor:think")]
    assert len(big.engine.requests) == 2


def test_a_run_file_written_before_repairs_existed_can_be_repaired():
    from roma_lab.lm import scripted_lm

    source = Run.from_json((RUNS / "run_main_f08eb8c.json").read_text())
    fixed = Roma(lm=scripted_lm(), max_depth=1).repair(source)
    assert fixed.status == "completed" and fixed.node("0.0").reused
    assert fixed.repair == RepairRecord(hashlib.sha256(source.to_json().encode()).hexdigest(), "partial",
                                        ("cancelled", "failed", "skipped"))


# --- the record of a repair ---------------------------------------------------------------------

def test_the_repair_links_to_the_run_it_repaired_and_round_trips(tmp_path):
    source = run_bounded(roma(ScriptedRoles(PLANS, fail={"task.0.0"})))
    fixed = repair_bounded(roma(ScriptedRoles(PLANS), artifacts=tmp_path), saved(source))
    assert fixed.repair.source_sha256 == hashlib.sha256(source.to_json().encode()).hexdigest()
    # with a store, the link resolves: the repaired run is kept there under that hash
    kept = ArtifactStore(tmp_path).read_text(fixed.repair.source_sha256)
    assert Run.from_json(kept) == source
    assert Run.from_json(fixed.to_json()) == fixed
    assert all(n.calls == () and n.started_s is None for n in fixed.nodes if n.reused)
    record = json.loads(fixed.to_json())
    assert record["repair"]["source_status"] == "partial"
    assert sorted(n["id"] for n in record["nodes"] if not n["reused"]) == ["0", "0.0", "0.0.0"]


def artifact_run(tmp_path: Path) -> Run:
    """A run whose non-root outputs are artifacts, with one failed leaf."""
    return run_bounded(roma(ScriptedRoles(PLANS, fail={"task.2.0"}), artifacts=tmp_path / "a", artifact_chars=5))


def test_reused_artifacts_are_checked_before_any_call(tmp_path):
    source = artifact_run(tmp_path)
    ref = source.node("0.1").artifact
    stored = tmp_path / "a" / ref.sha256[:2] / ref.sha256
    stored.write_text("changed")
    roles = ScriptedRoles(PLANS)
    with pytest.raises(ArtifactCorruptedError, match=f"node 0.1 cannot be reused: artifact sha256:{ref.sha256}"):
        roma(roles).repair(source, source_store=tmp_path / "a")  # the repaired run's own store
    stored.unlink()
    with pytest.raises(ArtifactMissingError, match=f"node 0.1 cannot be reused: artifact sha256:{ref.sha256}"):
        roma(roles, artifacts=tmp_path / "a").repair(source)
    assert roles.log == []  # nothing ran


def test_a_repair_into_another_store_brings_the_reused_artifacts_along(tmp_path):
    source = artifact_run(tmp_path)
    fixed = repair_bounded(roma(ScriptedRoles(PLANS), artifacts=tmp_path / "b", artifact_chars=5), source,
                           source_store=tmp_path / "a")
    assert fixed.status == "completed" and fixed.artifact_store == str(tmp_path / "b")
    store = ArtifactStore(tmp_path / "b")
    for n in fixed.nodes:
        if n.artifact is not None:
            assert store.read_text(n.artifact).startswith(n.output.rstrip("…"))


# --- invariants of a repaired run ---------------------------------------------------------------

def test_broken_repair_records_are_invalid_runs():
    source = run_bounded(roma(ScriptedRoles(PLANS, fail={"task.0.0"})))
    fixed = repair_bounded(roma(ScriptedRoles(PLANS)), source)
    reused = next(n for n in fixed.nodes if n.reused)
    fresh_call = fixed.root.calls[0]
    cases = [
        (lambda: replace(fixed, repair=None), "is reused but the run is not a repair"),
        (lambda: replace(fixed, nodes=tuple(replace(n, calls=(fresh_call,)) if n is reused else n
                                            for n in fixed.nodes)), "is reused but has calls"),
        (lambda: replace(fixed, nodes=tuple(replace(n, reused=False) if n.id == "0.1.0" else n for n in fixed.nodes)),
         "node 0.1.0 was not reused but its parent 0.1 was"),
        (lambda: replace(fixed, repair=replace(fixed.repair, source_sha256="x")), "source_sha256 must be 64 hex"),
    ]
    for build, message in cases:
        with pytest.raises(InvalidRunError, match=message):
            build()


def test_repair_needs_a_run():
    with pytest.raises(TypeError, match="repair needs a Run, got dict"):
        roma(ScriptedRoles(PLANS)).repair({"status": "failed"})


def test_a_run_with_artifacts_cannot_lose_its_store_url(tmp_path):
    data = json.loads(artifact_run(tmp_path).to_json())
    data["artifact_store"] = None
    with pytest.raises(InvalidRunError, match="names no artifact store"):
        Run.from_json(json.dumps(data))


# --- the study behind notebook 09 ---------------------------------------------------------------

def test_the_repair_study_counts_calls_from_the_traces_and_links_the_files(tmp_path):
    from roma_lab.papers.roma import measure_repair

    tables = measure_repair(tmp_path, latency_s=0.0)
    table, nodes = tables["repair"], tables["repair_nodes"]
    assert table.set_index("run")["role_calls"].to_dict() == {"failed_run": 27, "repair": 3, "full_rerun": 27}
    assert list(table["status"]) == ["partial", "completed", "completed"]
    assert sorted(nodes.loc[nodes["action"] == "re-executed", "node"]) == ["0", "0.1", "0.1.2"]
    repaired = Run.from_json((tmp_path / "repair.json").read_text())
    assert repaired.repair.source_sha256 == hashlib.sha256((tmp_path / "failed_run.json").read_bytes()).hexdigest()
    with pytest.raises(ValueError, match=r"not in the tree: \['task.9'\]"):
        measure_repair(tmp_path, fail=("task.9",))
