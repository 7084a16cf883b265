"""ROMA controller semantics (issue 3, items 1-8) with scripted roles. No wall-clock assertions:
ordering comes from call logs and gates, concurrency from in-flight counters."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from roma_lab.trace import Run, schedule_bounds
from roma_lab.controller import Roma, ScriptedRoles, Subtask, fixed_latency_roles


def run_bounded(roma: Roma, goal: str, **kwargs) -> Run:
    """A hung controller fails the test instead of hanging it."""
    return asyncio.run(asyncio.wait_for(roma.arun(goal, **kwargs), 30))


def calls(run: Run, role: str) -> list:
    return [(n, c) for n in run.nodes for c in n.calls if c.role == role]


def executor_context(run: Run, goal: str) -> str:
    (call,) = [c for n in run.nodes if n.goal == goal for c in n.calls if c.role.startswith("executor")]
    return call.inputs["context"]


# 1. dependency results reach dependents, whether the dependency was executed or planned+aggregated

def test_dependency_results_reach_dependents_direct_and_aggregated():
    roles = ScriptedRoles({
        "root": (Subtask("A", "think"), Subtask("B", "think"), Subtask("C", "think", (0, 1)),
                 Subtask("D", "think", (0,))),
        "A": (Subtask("A1", "think"), Subtask("A2", "think")),
        "D": (Subtask("D1", "think"),),
    })
    run = run_bounded(Roma(**roles.role_kwargs(), max_depth=2), "root")
    assert run.status == "completed"
    c_context = executor_context(run, "C")
    assert "done(A1) + done(A2)" in c_context  # A was planned and aggregated
    assert "done(B)" in c_context  # B was executed directly
    # D was planned: its child still sees what D depended on
    assert "done(A1) + done(A2)" in executor_context(run, "D1")
    # and what B or C produced does not leak into D's subtree
    assert "done(B)" not in executor_context(run, "D1")


# 2. dependency-aware scheduling, no level barriers, bounded concurrency, no deadlock

def test_dependent_starts_while_unrelated_slow_sibling_still_runs():
    release = asyncio.Event()
    order: list[str] = []

    async def executor(goal, context):
        order.append(f"start {goal}")
        if goal == "slow":
            await release.wait()  # only the dependent subtask can release it
        if goal == "dependent":
            release.set()
        order.append(f"end {goal}")
        return SimpleNamespace(output=goal)

    roles = ScriptedRoles({"root": (Subtask("slow", "think"), Subtask("first", "think"),
                                    Subtask("dependent", "think", (1,)))})
    kwargs = roles.role_kwargs() | {"executors": {"think": executor}}
    run = run_bounded(Roma(**kwargs, max_depth=1, max_concurrency=4, call_timeout_s=10), "root")
    # With a barrier after the first generation, "slow" would wait forever and time out.
    assert run.status == "completed", [n.error for n in run.nodes]
    assert order.index("start dependent") < order.index("end slow")
    assert order.index("end first") < order.index("start dependent")


@pytest.mark.parametrize("limit", [1, 3])
def test_concurrency_reaches_but_never_exceeds_the_limit(limit):
    roles = fixed_latency_roles((6,), latency_s=0.02)
    run = run_bounded(Roma(**roles.role_kwargs(), max_depth=1, max_concurrency=limit), roles.goal)
    assert run.status == "completed"
    assert roles.max_in_flight == limit


def test_deep_tree_with_one_slot_does_not_deadlock():
    roles = fixed_latency_roles((2, 2, 2), latency_s=0.0, chain_every=2)
    run = run_bounded(Roma(**roles.role_kwargs(), max_depth=3, max_concurrency=1), roles.goal)
    assert run.status == "completed"
    assert roles.max_in_flight == 1
    assert len(run.nodes) == 1 + 2 + 4 + 8


def test_run_works_inside_a_running_event_loop():
    roles = fixed_latency_roles((2,), latency_s=0.0)
    roma = Roma(**roles.role_kwargs(), max_depth=1)

    async def notebook_cell():
        return roma.run(roles.goal)  # what a Jupyter cell does: sync call, loop already running

    assert asyncio.run(notebook_cell()).status == "completed"


# 3. failures are visible, dependents skipped, parent aggregates what exists, never hangs

def _failing_roles(fail_goal: str, executor_error):
    roles = ScriptedRoles({"root": (Subtask("ok", "think"), Subtask("bad", "think"),
                                    Subtask("needs bad", "think", (1,)))})
    scripted = roles.role_kwargs()["executors"]["think"]

    async def executor(goal, context):
        if goal == fail_goal:
            return await executor_error()
        return await scripted(goal=goal, context=context)

    return roles, roles.role_kwargs() | {"executors": {"think": executor}}


async def _raise():
    raise ValueError("boom")


async def _hang():
    await asyncio.sleep(3600)


@pytest.mark.parametrize(("fault", "message"), [(_raise, "ValueError: boom"), (_hang, "timed out")])
def test_failed_node_skips_dependents_and_parent_aggregates_the_rest(fault, message):
    roles, kwargs = _failing_roles("bad", fault)
    run = run_bounded(Roma(**kwargs, max_depth=1, call_timeout_s=0.3), "root")
    by_goal = {n.goal: n for n in run.nodes}
    assert by_goal["bad"].status == "failed" and message in by_goal["bad"].error
    assert by_goal["needs bad"].status == "skipped" and "0.1" in by_goal["needs bad"].error
    assert by_goal["ok"].status == "completed"
    assert run.status == "partial"
    (_, agg), = calls(run, "aggregator")
    statuses = [r["status"] for r in agg.inputs["subtask_results"]]
    assert statuses == ["completed", "failed", "skipped"]
    assert any("missing" in w for w in run.root.warnings)


@pytest.mark.parametrize("length", [2, 3, 5])
def test_skip_is_transitive_along_a_chain(length):
    # s0 fails -> s1 skipped -> s2 must be skipped too (its dependency was skipped, not failed) ...
    plans = {"root": tuple(Subtask(f"s{i}", "think", (i - 1,) if i else ()) for i in range(length + 1))
             + (Subtask("free", "think"),)}
    roles = ScriptedRoles(plans)
    scripted = roles.role_kwargs()["executors"]["think"]

    async def executor(goal, context):
        if goal == "s0":
            raise ValueError("first link broke")
        return await scripted(goal=goal, context=context)

    kwargs = roles.role_kwargs() | {"executors": {"think": executor}}
    run = run_bounded(Roma(**kwargs, max_depth=1, max_subtasks=length + 2), "root")
    chain = [run.node(f"0.{i}") for i in range(length + 1)]
    assert [n.status for n in chain] == ["failed"] + ["skipped"] * length
    for i, node in enumerate(chain[1:]):
        assert node.error == f"dependencies have no output: 0.{i}" and not node.calls
    executed = {n.goal for n in run.nodes if any(c.role.startswith("executor") for c in n.calls)}
    assert executed == {"s0", "free"}  # no skipped node ever reached a role
    assert run.status == "partial" and run.node(f"0.{length + 1}").status == "completed"


def test_a_node_whose_dependency_was_skipped_is_skipped_even_if_another_dependency_completed():
    plans = {"root": (Subtask("bad", "think"), Subtask("good", "think"), Subtask("after bad", "think", (0,)),
                      Subtask("join", "think", (1, 2)))}
    roles = ScriptedRoles(plans)
    scripted = roles.role_kwargs()["executors"]["think"]

    async def executor(goal, context):
        if goal == "bad":
            raise ValueError("x")
        return await scripted(goal=goal, context=context)

    run = run_bounded(Roma(**roles.role_kwargs() | {"executors": {"think": executor}}, max_depth=1), "root")
    assert [n.status for n in run.nodes[1:]] == ["failed", "completed", "skipped", "skipped"]
    assert run.node("0.3").error == "dependencies have no output: 0.2"


@pytest.mark.parametrize("length", range(2, 9))
def test_planner_cycles_of_every_length_never_hang_the_run(length):
    cyclic = [{"goal": f"s{i}", "task_type": "think", "depends_on": [(i + 1) % length]} for i in range(length)]
    roles = ScriptedRoles({})
    atomizer = lambda goal, context: SimpleNamespace(is_atomic=goal != "root", task_type="think")  # noqa: E731
    kwargs = roles.role_kwargs() | {"planner": _planner_from(cyclic), "atomizer": atomizer}
    # run(), not arun(): a repair that spins inside the event loop is caught by the run deadline
    run = Roma(**kwargs, max_depth=1, run_timeout_s=10).run("root")
    assert run.status == "completed", run.status
    assert sum("(a cycle)" in w for w in run.root.warnings) == length - 1
    assert run.node(f"0.{length - 1}").depends_on == ("0.0",)


def test_sync_role_timeout_fails_node_without_waiting_for_the_thread():
    gate = threading.Event()

    def stuck_executor(goal, context):
        gate.wait(60)  # a sync role (like a DSPy module) that never returns in time
        return SimpleNamespace(output="late")

    roles = ScriptedRoles({})
    kwargs = roles.role_kwargs() | {"executors": {"think": stuck_executor}}
    try:
        run = run_bounded(Roma(**kwargs, max_depth=0, call_timeout_s=0.2), "solo")
    finally:
        gate.set()
    assert run.status == "failed"
    assert run.root.status == "failed" and "timed out" in run.root.error


def test_a_stuck_sync_role_does_not_starve_later_calls():
    gate = threading.Event()
    ran = []

    def executor(goal, context):  # sync, like a DSPy module
        ran.append(goal)
        if goal == "stuck":
            gate.wait(60)
        return SimpleNamespace(output=f"did {goal}")

    roles = ScriptedRoles({"root": (Subtask("stuck", "think"), Subtask("after", "think", (0,)),
                                    Subtask("free", "think"))})
    kwargs = roles.role_kwargs() | {"executors": {"think": executor}}
    try:
        run = run_bounded(Roma(**kwargs, max_depth=1, max_concurrency=1, call_timeout_s=0.3), "root")
    finally:
        gate.set()
    by_goal = {n.goal: n for n in run.nodes}
    assert by_goal["stuck"].status == "failed" and "timed out" in by_goal["stuck"].error
    # with one slot, the independent sibling still gets a thread and its whole time limit
    assert by_goal["free"].status == "completed" and "free" in ran
    assert by_goal["after"].status == "skipped" and run.status == "partial"


def test_all_subtasks_failing_fails_the_run():
    roles, kwargs = _failing_roles("ok", _raise)
    kwargs["executors"] = {"think": lambda goal, context: (_ for _ in ()).throw(RuntimeError("down"))}
    run = run_bounded(Roma(**kwargs, max_depth=1), "root")
    assert run.status == "failed"
    assert run.root.status == "failed" and "none of the 3 subtasks" in run.root.error
    assert not calls(run, "aggregator")


def test_contract_violation_is_a_typed_failure():
    roles = ScriptedRoles({})
    kwargs = roles.role_kwargs() | {"atomizer": lambda goal, context: SimpleNamespace(is_atomic="yes", task_type="think")}
    run = run_bounded(Roma(**kwargs, max_depth=1), "x")
    assert run.status == "failed" and "is_atomic must be a bool" in run.root.error
    kwargs = roles.role_kwargs() | {"aggregator": lambda goal, context, subtask_results: SimpleNamespace()}
    roles.plans = {"x": (Subtask("y", "think"),)}
    run = run_bounded(Roma(**kwargs, max_depth=1), "x")
    assert run.status == "failed" and "no field 'output'" in run.root.error


# 4. at max_depth the atomizer is not asked

def test_max_depth_executes_without_atomizer_and_records_it():
    roles = fixed_latency_roles((2, 2), latency_s=0.0)
    run = run_bounded(Roma(**roles.role_kwargs(), max_depth=1), roles.goal)
    depth1 = [n for n in run.nodes if n.depth == 1]
    assert depth1 and all(n.forced_atomic and n.is_atomic is None for n in depth1)
    assert all(c.role != "atomizer" for n in depth1 for c in n.calls)
    assert not any(n.depth > 1 for n in run.nodes)
    assert run.root.forced_atomic is False and run.root.is_atomic is False


def test_plan_root_plans_the_root_whatever_the_atomizer_would_say():
    # issue 26: a teacher's multi-part goal the small model's atomizer calls atomic stayed one node
    roles = ScriptedRoles({"root": (Subtask("a", "think"), Subtask("b", "think", (0,)))})
    asked = []

    async def atomic(goal, context):
        asked.append(goal)
        return SimpleNamespace(is_atomic=True, task_type="think")

    kwargs = roles.role_kwargs() | {"atomizer": atomic}
    run = run_bounded(Roma(**kwargs, max_depth=2, plan_root=True), "root")
    assert [n.goal for n in run.children(run.root.id)] == ["a", "b"] and run.output
    assert sorted(asked) == ["a", "b"]  # below the root the atomizer still decides
    assert all(c.role != "atomizer" for c in run.root.calls) and run.root.is_atomic is False
    assert run.settings.plan_root and Run.from_json(run.to_json()).settings.plan_root
    asked.clear()
    without = run_bounded(Roma(**kwargs, max_depth=2), "root")
    assert len(without.nodes) == 1 and asked == ["root"]  # the same atomizer keeps the root one node
    with pytest.raises(ValueError, match="plan_root needs max_depth >= 1"):
        Roma(**kwargs, max_depth=0, plan_root=True)


# 5. planner output validated inside the loop: repaired or re-asked once, never a crash

def _planner_from(*answers):
    answers = list(answers)

    def planner(goal, context):
        return SimpleNamespace(subtasks=answers.pop(0))

    return planner


def test_cyclic_plan_is_repaired_with_a_warning():
    roles = ScriptedRoles({"root": (Subtask("a", "think"),)})
    cyclic = [{"goal": "a", "task_type": "think", "depends_on": [1]},
              {"goal": "b", "task_type": "think", "depends_on": [0]}]
    kwargs = roles.role_kwargs() | {"planner": _planner_from(cyclic)}
    run = run_bounded(Roma(**kwargs, max_depth=1), "root")
    assert run.status == "completed"
    assert any("cycle" in w for w in run.root.warnings)
    assert run.node("0.1").depends_on == ("0.0",) and run.node("0.0").depends_on == ()


def test_malformed_plan_is_reasked_once():
    roles = ScriptedRoles({"root": (Subtask("a", "think"),)})
    kwargs = roles.role_kwargs() | {"planner": _planner_from("not a list", [{"goal": "a", "task_type": "think"}])}
    run = run_bounded(Roma(**kwargs, max_depth=1), "root")
    planner_calls = calls(run, "planner")
    assert len(planner_calls) == 2
    assert "unusable" in planner_calls[1][1].inputs["context"]
    assert run.status == "completed" and len(run.nodes) == 2


def _raising_planner(goal, context):
    raise RuntimeError("planner down")


@pytest.mark.parametrize("planner", [_planner_from([], [{"task_type": "think"}]), _raising_planner],
                         ids=["unusable twice", "raises twice"])
def test_planner_fallback_executes_directly_and_says_it_degraded(planner):
    roles = ScriptedRoles({"root": (Subtask("a", "think"),)})
    run = run_bounded(Roma(**roles.role_kwargs() | {"planner": planner}, max_depth=1), "root")
    assert len(run.nodes) == 1 and run.output == "done(root)"
    assert [c.role for c in run.root.calls] == ["atomizer", "planner", "planner", "executor:think"]
    # the answer exists, but not the way the design says: a typed status, and the run is not "completed"
    assert run.root.status == "degraded" and "no usable plan twice" in run.root.error
    assert run.status == "partial"


# 6. context stays local and its size is recorded for every call

def test_context_is_local_and_does_not_grow_with_width():
    sizes = {}
    for width in (2, 8):
        roles = fixed_latency_roles((width,), latency_s=0.0)
        run = run_bounded(Roma(**roles.role_kwargs(), max_depth=1), roles.goal)
        leaf_calls = [c for n in run.nodes if n.depth == 1 for c in n.calls]
        assert all(c.context_chars == len(n.goal) + len(c.inputs["context"])
                   for n in run.nodes if n.depth == 1 for c in n.calls)
        assert all("done(" not in c.inputs["context"] for c in leaf_calls)  # no sibling results
        sizes[width] = {c.context_chars for c in leaf_calls}
    assert max(sizes[8]) == max(sizes[2])


def test_dependency_results_are_bounded_for_the_node_and_all_its_descendants():
    long_output = "L" * 5000
    plans = {"root": (Subtask("a", "think"), Subtask("b", "think", (0,))),
             "b": (Subtask("b1", "think"), Subtask("b2", "think", (0,)))}
    roles = ScriptedRoles(plans)
    scripted = roles.role_kwargs()["executors"]["think"]

    async def executor(goal, context):
        if goal == "a":
            return SimpleNamespace(output=long_output)
        return await scripted(goal=goal, context=context)

    kwargs = roles.role_kwargs() | {"executors": {"think": executor}}
    run = run_bounded(Roma(**kwargs, max_depth=2, max_result_chars=100), "root")
    assert run.status == "completed"
    assert (run.settings.ancestor_goals, run.settings.goal_chars, run.settings.max_result_chars) == (3, 200, 100)
    clipped = "L" * 100 + "… [4900 more characters cut]"
    b_calls = [c for c in run.node("0.1").calls if c.role in ("atomizer", "planner")]
    contexts = [c.inputs["context"] for c in b_calls] + [executor_context(run, g) for g in ("b1", "b2")]
    for context in contexts:  # b's own dependency, and the one b1 and b2 inherit from b
        assert clipped in context and "L" * 101 not in context
    # the aggregator of a's parent still sees a's whole output: only contexts are cut
    root_agg = [c for c in run.root.calls if c.role == "aggregator"][0]
    assert root_agg.inputs["subtask_results"][0]["output"] == long_output


def test_ancestry_is_short():
    roles = fixed_latency_roles((1, 1, 1, 1, 1), latency_s=0.0)
    run = run_bounded(Roma(**roles.role_kwargs(), max_depth=5), roles.goal)
    deepest = max(run.nodes, key=lambda n: n.depth)
    context = executor_context(run, deepest.goal)
    assert context.count("\n- ") == 3  # three nearest ancestors, not all five
    assert "- task\n" not in context


# 8. verifier really runs; a rejection triggers exactly one re-execution with its feedback

def test_verifier_rejection_reexecutes_once_with_feedback():
    verdicts = [False, True]

    def verifier(goal, context, candidate):
        return SimpleNamespace(verdict=verdicts.pop(0), feedback="mention the units")

    roles = ScriptedRoles({})
    run = run_bounded(Roma(**roles.role_kwargs(), verifier=verifier, max_depth=0), "measure")
    executions = calls(run, "executor:think")
    assert len(executions) == 2
    assert "mention the units" in executions[1][1].inputs["context"]
    assert [c.outputs["verdict"] for _, c in calls(run, "verifier")] == [False, True]
    assert run.status == "completed"
    assert any("rejected" in w for w in run.root.warnings)


def test_verifier_that_keeps_rejecting_is_bounded_and_marks_the_node_unverified():
    roles = ScriptedRoles({"root": (Subtask("a", "think"),)})
    verifier = lambda goal, context, candidate: SimpleNamespace(verdict=False, feedback="no")  # noqa: E731
    run = run_bounded(Roma(**roles.role_kwargs(), verifier=verifier, max_depth=1), "root")
    # every node: produce, verify, re-produce, verify -- never more
    assert len(calls(run, "verifier")) == 4
    assert len(calls(run, "aggregator")) == 2 and len(calls(run, "executor:think")) == 2
    # the rejected output is kept and passed on, marked: a typed status, never "completed"
    assert [n.status for n in run.nodes] == ["unverified", "unverified"]
    assert "rejected both attempts" in run.root.error and run.output is not None
    (_, agg), _ = calls(run, "aggregator")
    assert agg.inputs["subtask_results"][0]["status"] == "unverified"
    assert run.status == "partial"


@pytest.mark.parametrize("second", ["yes", None, 1])
def test_a_non_bool_second_verdict_fails_like_a_non_bool_first(second):
    for verdicts in ([second], [False, second]):
        answers = list(verdicts)

        def verifier(goal, context, candidate):
            return SimpleNamespace(verdict=answers.pop(0), feedback="fix it")

        run = run_bounded(Roma(**ScriptedRoles({}).role_kwargs(), verifier=verifier, max_depth=0), "x")
        assert run.status == "failed" and run.root.status == "failed", verdicts
        assert "verdict must be a bool" in run.root.error


# trace, observer, JSON, usage table

def test_observer_sees_every_transition_and_a_broken_observer_does_not_stop_the_run():
    roles = fixed_latency_roles((2,), latency_s=0.0)
    events = []
    run = run_bounded(Roma(**roles.role_kwargs(), max_depth=1), roles.goal, on_event=events.append)
    root_kinds = [e.kind for e in events if e.node.id == "0"]
    assert root_kinds[0] == "pending" and root_kinds[-1] == "completed" and "running" in root_kinds
    assert events[-1].node == run.root

    def broken(event):
        raise RuntimeError("view crashed")

    with pytest.warns(UserWarning, match="observer raised"):
        assert run_bounded(Roma(**roles.role_kwargs(), max_depth=1), roles.goal, on_event=broken).status == "completed"


def test_json_round_trip_keeps_everything():
    roles, kwargs = _failing_roles("bad", _raise)
    run = run_bounded(Roma(**kwargs, max_depth=1), "root")
    again = Run.from_json(run.to_json())
    assert again == run
    assert again.node("0.1").error == run.node("0.1").error


def test_usage_table_has_table5_layout():
    roles = fixed_latency_roles((3,), latency_s=0.0)
    run = run_bounded(Roma(**roles.role_kwargs(), max_depth=1), roles.goal)
    table = run.usage_df()
    assert list(table.columns) == ["component", "calls", "cost", "input_tokens", "output_tokens", "latency_s",
                                   "tool_calls", "tool_errors", "replayed_calls"]
    assert list(table["component"]) == ["atomizer", "planner", "executor", "aggregator", "total"]
    assert list(table["calls"]) == [1, 1, 3, 1, 6]


def test_schedule_bounds_of_a_recorded_run():
    # root plans [a (slow), b, c after b]: critical path = slow branch; barrier adds c after a.
    roles = ScriptedRoles({"root": (Subtask("a", "search"), Subtask("b", "think"), Subtask("c", "think", (1,)))},
                          latency_s={"executor:search": 0.05}, default_latency_s=0.01)
    run = run_bounded(Roma(**roles.role_kwargs(), max_depth=1), "root")
    lat = {n.goal: sum(c.latency_s for c in n.calls) for n in run.nodes}
    root_own = sum(c.latency_s for c in run.root.calls)
    b = schedule_bounds(run)
    assert b.critical_path_s == pytest.approx(root_own + max(lat["a"], lat["b"] + lat["c"]))
    assert b.barrier_s == pytest.approx(root_own + max(lat["a"], lat["b"]) + lat["c"])
    assert b.sequential_s == pytest.approx(sum(lat.values()))


@pytest.mark.parametrize("kwargs", [{"max_depth": -1}, {"max_concurrency": 0}, {"max_subtasks": 0},
                                    {"call_timeout_s": 0}, {"executors": {"dance": print}},
                                    {"role_lms": {"judge": "x"}}])
def test_bad_settings_are_clear_errors(kwargs):
    roles = ScriptedRoles({})
    with pytest.raises(ValueError):
        Roma(**(roles.role_kwargs() | kwargs))


def test_empty_goal_is_rejected():
    with pytest.raises(ValueError, match="goal"):
        run_bounded(Roma(**ScriptedRoles({}).role_kwargs()), "  ")
