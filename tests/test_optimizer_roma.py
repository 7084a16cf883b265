"""GEPA / GEPA+ on the ROMA controller (issue 4): its roles are the program's named predictors.

Scripted task model: the root is never atomic; the planner makes one "spell <word>" subtask, and
writes "spell <word> in UPPERCASE" only when its instruction says "UPPERCASE"; the write
executor spells the word in upper case only when its goal says so; the aggregator joins its
subtask outputs. Gold answers are upper case, so the seed scores 0 and a planner edit adding
"UPPERCASE" scores 1. Every scripted answer is a function of the request, never of call order.
"""

import asyncio
import json

import dspy
import pandas as pd
import pytest
from dspy.teleprompt.bootstrap_trace import bootstrap_trace_data

from roma_lab.controller import Roma
from roma_lab.controller._roles import PlannerSignature
from roma_lab.lm import model_label, scripted_lm
from roma_lab.optimizer import GepaPlusConfig, RomaProgram, compile, roma_contracts

ROLES = ["atomizer.predict", "planner.predict", "executor_search.answer.predict", "executor_think.predict",
         "executor_write.predict", "executor_code.write.predict", "aggregator.predict"]
CALLED = {"atomizer.predict", "planner.predict", "executor_write.predict", "aggregator.predict"}


def roles_respond(request):
    inputs, outputs = request.inputs, request.outputs
    goal = inputs["goal"]
    if outputs == ("is_atomic", "task_type"):
        return {"is_atomic": False, "task_type": "write"}
    if outputs == ("subtasks",):
        upper = " in UPPERCASE" if "UPPERCASE" in request.system else ""
        return {"subtasks": [{"goal": f"spell {goal}{upper}", "task_type": "write", "depends_on": []}]}
    if "subtask_results" in inputs:
        return {"output": " ".join(r["output"] for r in json.loads(inputs["subtask_results"]))}
    word = goal.split()[1]
    return {"output": word.upper() if goal.endswith("UPPERCASE") else word}


def reflection_respond(request):
    current = request.inputs["current_instruction"]
    if request.model.endswith("breaker"):  # drops the planner's task types and dependency rule
        return {"new_instruction": "List subtasks in UPPERCASE."}
    return {"new_instruction": current + " Reply in UPPERCASE."}


def scripted(name, respond):
    lm = scripted_lm(respond, name=f"scripted/{name}")
    return lm, lm.engine


def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
    ok = pred.answer == gold.answer
    return dspy.Prediction(score=float(ok), feedback="correct" if ok else f"expected {gold.answer}, got {pred.answer}")


WORDS = ["apple", "berry", "cherry", "date", "elder", "fig"]
TRAIN = [dspy.Example(goal=w, answer=w.upper()).with_inputs("goal") for w in WORDS[:4]]
VAL = [dspy.Example(goal=w, answer=w.upper()).with_inputs("goal") for w in WORDS[4:]]


@pytest.fixture
def lms():
    task, task_engine = scripted("task", roles_respond)
    good, good_engine = scripted("good", reflection_respond)
    breaker, _ = scripted("breaker", reflection_respond)
    with dspy.context(lm=task):
        yield {"task": task, "task_engine": task_engine, "good": good, "good_engine": good_engine,
               "breaker": breaker}


def program():
    return RomaProgram(max_depth=1, max_concurrency=2)


def instructions(prog):
    return {name: p.signature.instructions for name, p in prog.named_predictors()}


def optimise(lms, prog, method="gepa+", components="planner.predict", proposers=None, budget=16):
    config = GepaPlusConfig(proposers=proposers or ((lms["good"], 0.7),), k=len(proposers or [0]), n=1, alpha=0.0)
    return compile(prog, trainset=TRAIN, valset=VAL, metric=metric, config=config, max_metric_calls=budget,
                   method=method, components=components,
                   reflection_minibatch_size=2, seed=0)


def test_roles_are_named_predictors_and_forward_runs_roma_on_them(lms):
    prog = program()
    assert [name for name, _ in prog.named_predictors()] == ROLES
    roma = prog.roma()
    assert roma.planner is prog.planner and roma.executors["write"] is prog.executor_write
    pred = prog(goal="kiwi")
    assert pred.answer == "kiwi" and pred.run.status == "completed"
    assert {n.id: [c.role for c in n.calls] for n in pred.run.nodes} == {
        "0": ["atomizer", "planner", "aggregator"], "0.0": ["executor:write"]}


def test_role_calls_are_recorded_in_dspy_trace_as_gepa_captures_it(lms):
    prog = program()
    names = {id(p): name for name, p in prog.named_predictors()}
    # dspy's GEPA adapter captures traces with exactly this function (worker threads, dspy.context(trace=[])).
    trajectories = bootstrap_trace_data(program=prog, dataset=TRAIN[:2], metric=metric, num_threads=2)
    assert len(trajectories) == 2
    for t in trajectories:
        assert sorted(names[id(pred)] for pred, _, _ in t["trace"]) == sorted(CALLED)
        planner_inputs = next(inputs for pred, inputs, _ in t["trace"] if pred is prog.planner.predict)
        assert planner_inputs["goal"] == t["example"].goal

    async def inside_a_running_loop():  # as in Jupyter: Roma.run moves to its own thread and loop
        with dspy.context(trace=[]):
            prog(goal="kiwi")
            return [names[id(pred)] for pred, _, _ in dspy.settings.trace]

    assert sorted(asyncio.run(inside_a_running_loop())) == sorted(CALLED)


def test_planner_signature_accepts_new_instructions_with_the_same_schema():
    # DSPy's own with_instructions rejects the planner's `Plan` type alias; optimizers need it.
    from dspy.adapters.json_adapter import _get_structured_outputs_response_format as schema

    edited = PlannerSignature.with_instructions("Plan it.").with_instructions("Plan it twice.")
    assert edited.instructions == "Plan it twice."
    assert list(edited.fields) == list(PlannerSignature.fields)
    assert schema(edited).model_json_schema() == schema(PlannerSignature).model_json_schema()
    assert PlannerSignature.instructions.startswith("Split the goal")


@pytest.mark.parametrize("method", ["gepa+", "gepa"])
def test_optimising_one_role_changes_only_that_role(lms, method):
    prog = program()
    before = instructions(prog)
    planner_signature = prog.planner.predict.signature
    res = optimise(lms, prog, method=method)
    assert res.val_scores[0] == 0.0 and res.best_val_score == 1.0
    after = instructions(res.program)
    assert after["planner.predict"] != before["planner.predict"] and "UPPERCASE" in after["planner.predict"]
    assert {k: v for k, v in after.items() if k != "planner.predict"} == {
        k: v for k, v in before.items() if k != "planner.predict"}
    assert set(res.records_df().query("event == 'draft'").component) == {"planner.predict"}
    # the input program is untouched
    assert instructions(prog) == before and prog.planner.predict.signature is planner_signature
    # the optimised program is a working RomaProgram
    assert isinstance(res.program, RomaProgram) and res.program(goal="kiwi").answer == "KIWI"


def test_reflection_sees_the_planner_calls_made_inside_roma(lms):
    optimise(lms, program())
    asked = [r.inputs for r in lms["good_engine"].requests if r.outputs == ("new_instruction",)]
    assert asked and all("Split the goal" in a["current_instruction"] for a in asked)
    # the reflective examples are the planner's own inputs and outputs, taken from the trace
    assert any("spell" in a["examples_with_feedback"] and "expected" in a["examples_with_feedback"] for a in asked)


def test_all_components_proposes_every_role_that_ran(lms):
    prog = program()
    before = instructions(prog)
    res = optimise(lms, prog, components="all")
    first = res.records_df().query("event == 'draft'").groupby("round").component.apply(set).iloc[0]
    assert first == CALLED  # roles that never ran have no reflective examples, so GEPA leaves them
    for cand in res.candidates:
        assert all(cand[name] == before[name] for name in set(ROLES) - CALLED)
    assert res.best_val_score == 1.0 and instructions(prog) == before


def test_round_robin_cycles_through_the_roles_in_loop_order(lms):
    res = optimise(lms, program(), components="round_robin", budget=30)
    drafts = res.records_df().query("event == 'draft'")
    order = list(dict.fromkeys(drafts.sort_values("round").component))
    assert order[:2] == ["atomizer.predict", "planner.predict"]
    assert res.best_val_score == 1.0 and res.gepa_metric_calls <= 30


def test_roma_contracts_protect_the_planner_and_aggregator(lms):
    prog = program()
    contracts = roma_contracts(prog)
    assert set(contracts) == set(ROLES)
    planner = contracts["planner.predict"].required_terms
    assert {"subtasks", "search", "think", "write", "code", "depends_on"} <= set(planner)
    assert "subtask_results" in contracts["aggregator.predict"].required_terms
    # the seed keeps its own contracts; a rewrite that drops the task types does not
    assert all(contracts[name].violations(text) == () for name, text in instructions(prog).items())
    assert "missing required term 'depends_on'" in contracts["planner.predict"].violations("List subtasks.")

    res = optimise(lms, prog, proposers=((lms["breaker"], 0.5), (lms["good"], 0.5)))
    drafts = res.records_df().query("event == 'draft'")
    broken = drafts[drafts.proposer_model == model_label("scripted/breaker")]
    assert not broken.empty and broken.note.str.contains("rejected: contract violation").all()
    assert not broken.selected.any()
    for cand in res.candidates:
        assert all(contracts[name].violations(text) == () for name, text in cand.items())


def test_models_are_shared_not_copied_and_explicit_lm_is_used(lms):
    prog = RomaProgram(lm=lms["task"], max_depth=1)
    copy = prog.deepcopy()
    assert copy.models is prog.models and copy.planner is not prog.planner
    with dspy.context(lm=None):
        assert copy(goal="kiwi").answer == "kiwi"


def test_bad_settings_fail_at_construction():
    with pytest.raises(ValueError, match="max_depth"):
        RomaProgram(max_depth=-1)
    with pytest.raises(ValueError, match="role_lms"):
        RomaProgram(role_lms={"boss": "local"})
    with pytest.raises(TypeError, match="RomaProgram"):
        roma_contracts(Roma())


def test_same_seed_same_result(lms):
    a, b = optimise(lms, program(), components="all"), optimise(lms, program(), components="all")
    assert a.candidates == b.candidates and a.total_metric_calls == b.total_metric_calls
    pd.testing.assert_frame_equal(a.records_df(), b.records_df())
