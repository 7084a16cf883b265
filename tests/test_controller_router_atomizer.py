"""RouterAtomizer: ROMA's atomizer decided by the calibrated meta-router, with zero LM calls."""

import pandas as pd
import pytest

from roma_lab import router
from roma_lab.papers import routing
from roma_lab.controller import Roma, RouterAtomizer, tree_plans
from roma_lab.controller._router_atomizer import decision_for
from roma_lab.controller._scripted import ScriptedRoles
from roma_lab.stats import StatsSettings


@pytest.fixture(scope="module")
def model():
    return routing.RouterStudy.build().model


@pytest.mark.parametrize("route, atomic, task_type", [
    ((), True, "think"), (("T",), True, "search"), (("C",), True, "code"), (("G",), True, "think"),
    (("V",), True, "think"), (("D",), False, "think"), (("T", "V"), False, "search"), (("T", "C"), False, "code"),
    (("D", "T", "C"), False, "code"), (("D", "C"), False, "code"), (("T", "C", "V"), False, "code"),
])
def test_a_route_maps_to_atomic_and_an_executor_type(route, atomic, task_type):
    assert decision_for(route) == (atomic, task_type)


def test_the_atomizer_follows_the_routers_route(model):
    atomizer = RouterAtomizer(model)
    suite = router.generate_suite()
    for task in router.split_tasks(suite, "train")[::9]:
        decision = atomizer(goal=task.prompt, context="")
        route = model.route(task.prompt)
        assert (decision.is_atomic, decision.task_type) == decision_for(route)
        assert f"router route {''.join(route) or '(answer only)'}" in decision.reasoning


def _roles():
    plans = tree_plans((2,), root="Which region has the highest average revenue across the sales table?")
    return ScriptedRoles(plans)


def test_roma_runs_with_the_router_atomizer_and_no_lm_behind_it(model):
    roles = _roles()
    kwargs = roles.role_kwargs() | {"atomizer": RouterAtomizer(model)}
    kwargs["executors"] = {t: kwargs["executors"]["think"] for t in ("think", "search", "code")}
    goal = "Which region has the highest average revenue across the sales table?"
    run = Roma(**kwargs, max_depth=1).run(goal)
    assert run.status == "completed"
    # the train prompt routes T, C: a composition, so ROMA plans (children at max_depth are atomic)
    assert model.route(goal) == ("T", "C") and run.root.is_atomic is False and len(run.nodes) == 3
    atomizer_calls = [c for n in run.nodes for c in n.calls if c.role == "atomizer"]
    assert len(atomizer_calls) == 1 and not atomizer_calls[0].input_tokens and not atomizer_calls[0].output_tokens
    assert "router route TC" in atomizer_calls[0].outputs["reasoning"]
    assert not [e for e in roles.log if e.role == "atomizer"]    # the scripted LM atomizer was never asked


def test_a_goal_the_router_cannot_read_fails_its_node_with_the_routers_message(model):
    roles = _roles()
    kwargs = roles.role_kwargs() | {"atomizer": RouterAtomizer(model)}
    run = Roma(**kwargs).run("sum these \x07 values")
    assert run.status == "failed" and "control character U+0007" in run.root.error


def test_compare_atomizers_counts_the_lm_calls_each_condition_made(model, tmp_path):
    tables = routing.compare_atomizers(tmp_path, model, lm="scripted", n_items=3, stats=StatsSettings(n_resamples=20))
    runs = tables["atomizer_runs"].set_index(["condition", "task_id"])
    lm, rt = runs.loc["lm_atomizer"], runs.loc["router_atomizer"]
    # the scripted LM atomizer always plans: atomize, plan, 2 executors, aggregate = 5 LM calls
    assert (lm["role_calls"] == 5).all() and (lm["lm_calls"] == 5).all() and (lm["atomizer_lm_calls"] == 1).all()
    assert (rt["atomizer_lm_calls"] == 0).all()
    assert (rt["lm_calls"] == rt["role_calls"] - 1).all()     # max_depth 1: the root's decision only
    failed = tables["atomizer_runs"][tables["atomizer_runs"]["error"].notna()]
    assert not failed.empty and (failed["score"] == 0).all()   # a run that failed to answer scores 0, not NaN
    paired = tables["atomizer_paired"].set_index("metric")
    assert paired.loc["lm_calls_diff", "value"] == pytest.approx((rt["lm_calls"] - lm["lm_calls"]).mean())
    assert set(pd.read_csv(tmp_path / "atomizer_runs.csv")["condition"]) == {"lm_atomizer", "router_atomizer"}
    # resumable: a rerun runs no answered item again (only the failed one is retried)
    routing.compare_atomizers(tmp_path, model, lm="scripted", n_items=3, stats=StatsSettings(n_resamples=20))
    rows = pd.read_csv(tmp_path / "atomizer_runs" / "attempts.csv", dtype={"task_id": str})  # every attempt
    answered = rows[rows["error"].isna()]
    assert not answered.duplicated(["condition", "task_id"]).any()
    assert len(rows) == 6 + len(failed)
