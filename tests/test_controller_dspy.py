"""Default DSPy roles (DummyLM, JSON adapter) and usage accounting through DSPy (issue 3, item 7)."""

from __future__ import annotations

import threading

import dspy
import pytest
from dspy.utils import DummyLM

from roma_lab.trace import Run
from roma_lab.controller import Roma
from roma_lab.lm import ScriptedEngine


def dummy(*answers):
    return DummyLM(list(answers), adapter=dspy.JSONAdapter())


def test_default_roles_run_a_planned_tree_on_dummy_lm():
    lm = dummy(
        {"is_atomic": False, "task_type": "write"},
        {"subtasks": [{"goal": "list facts", "task_type": "write", "depends_on": []},
                      {"goal": "summarise facts", "task_type": "write", "depends_on": [0]}]},
        {"output": "fact one"},
        {"output": "summary of fact one"},
        {"output": "final answer"},
    )
    run = Roma(lm=lm, max_depth=1, max_concurrency=1).run("explain")
    assert run.status == "completed", [n.error for n in run.nodes]
    assert run.output == "final answer"
    assert [n.goal for n in run.nodes] == ["explain", "list facts", "summarise facts"]
    assert run.node("0.1").depends_on == ("0.0",)
    summarise = run.node("0.1").calls[0]
    assert summarise.role == "executor:write" and "fact one" in summarise.inputs["context"]
    assert run.settings.models["planner"] == "dummy"


def test_oversized_plan_with_unknown_type_from_the_dspy_planner_is_repaired_not_fatal():
    plan = [{"goal": f"part {i}", "task_type": "dance" if i == 0 else "write", "depends_on": []} for i in range(9)]
    lm = dummy({"is_atomic": False, "task_type": "write"}, {"subtasks": plan},
               *[{"reasoning": "r", "output": f"text {i}"} for i in range(8)], {"output": "final"})
    run = Roma(lm=lm, max_depth=1, max_concurrency=1, max_subtasks=8).run("write it")
    assert run.status == "completed", [n.error for n in run.nodes]
    warnings = " ".join(run.node("0").warnings)
    assert "9 subtasks; kept the first 8" in warnings and "unknown task type 'dance'" in warnings
    assert len(run.nodes) == 9 and run.output == "final"


def test_unparseable_plan_is_reasked_once_then_executed_directly():
    lm = dummy({"is_atomic": False, "task_type": "write"}, {"subtasks": "not a list"}, {"subtasks": 7},
               {"output": "direct answer"})
    run = Roma(lm=lm, max_depth=1, max_concurrency=1).run("write it")
    assert run.status == "partial" and run.output == "direct answer"
    root = run.node("0")
    assert root.status == "degraded"
    assert [c.role for c in root.calls] == ["atomizer", "planner", "planner", "executor:write"]
    assert any("attempt 1" in w and "unusable" in w for w in root.warnings)
    assert "executed directly" in root.error


def test_think_executor_records_its_reasoning():
    lm = dummy({"reasoning": "2 and 2 make 4", "output": "4"})
    run = Roma(lm=lm, max_depth=0).run("add 2 and 2")
    (call,) = run.root.calls
    assert call.outputs == {"output": "4", "reasoning": "2 and 2 make 4"}


def test_code_executor_runs_model_code_in_the_sandbox():
    lm = dummy({"is_atomic": True, "task_type": "code"}, {"code": "```python\nprint(6 * 7)\n```"})
    run = Roma(lm=lm, max_depth=1).run("compute six times seven")
    assert run.status == "completed", run.root.error
    assert run.output == "42"
    assert run.root.calls[-1].outputs["code"] == "print(6 * 7)"


def test_failing_model_code_fails_the_node_visibly():
    lm = dummy({"is_atomic": True, "task_type": "code"}, {"code": "raise SystemExit(3)"})
    run = Roma(lm=lm, max_depth=1).run("compute")
    assert run.status == "failed" and "CodeExecutionError" in run.root.error


def test_search_executor_answers_from_the_bm25_corpus():
    corpus = ["The Eiffel Tower is 330 metres tall.", "Bananas are yellow.", "Paris is in France."]
    lm = dummy({"is_atomic": True, "task_type": "search"}, {"output": "330 metres"})
    run = Roma(lm=lm, max_depth=1, corpus=corpus).run("How tall is the Eiffel Tower?")
    assert run.output == "330 metres"
    assert run.root.calls[-1].outputs["passages"][0] == corpus[0]


def role_reply(name):
    """A script answering every role: a 4-part plan; "part" goals are atomic; executors answer ``name``."""
    def respond(request):
        if "subtasks" in request.outputs:
            return {"subtasks": [{"goal": f"part {i}", "task_type": "write", "depends_on": []} for i in range(4)]}
        if "is_atomic" in request.outputs:
            return {"is_atomic": request.inputs["goal"].startswith("part"), "task_type": "write"}
        return {"output": f"{name} answer"}
    return respond


def counting_engine(name):
    """The scripted engine reporting distinct usage per call: (100 n, n) for its n-th call, in ``reported``."""
    reported, lock = [], threading.Lock()

    def usage(request, text):
        with lock:
            reported.append((100 * (len(reported) + 1), len(reported) + 1))
            return reported[-1]

    engine = ScriptedEngine(role_reply(name), usage=usage)
    return engine, reported


def test_usage_per_call_comes_from_the_lm_and_sums_without_double_counting():
    (main, main_reported), (executor, executor_reported) = counting_engine("main"), counting_engine("exec")
    roma = Roma(lm=dspy.LM("local/main", engine=main, cache=False),
                role_lms={"executor:write": dspy.LM("local/exec", engine=executor, cache=False)},
                max_depth=2, max_concurrency=4)
    run = roma.run("write a report")
    assert run.status == "completed", [n.error for n in run.nodes]
    # per-role models: the executors ran on their own LM, everything else on the main one
    for node in run.nodes:
        for call in node.calls:
            assert call.model == ("local/exec" if call.role == "executor:write" else "local/main")
    # every engine call is attributed to exactly one role call, concurrency notwithstanding
    recorded = sorted((c.input_tokens, c.output_tokens) for n in run.nodes for c in n.calls)
    assert recorded == sorted(main_reported + executor_reported)
    total = run.usage_df().set_index("component").loc["total"]
    assert total["input_tokens"] == sum(t[0] for t in main_reported + executor_reported)
    assert total["output_tokens"] == sum(t[1] for t in main_reported + executor_reported)
    assert total["calls"] == len(main_reported) + len(executor_reported)
    # in-process models report no price: their cost is zero, not unknown
    assert all(c.cost == 0.0 for n in run.nodes for c in n.calls) and total["cost"] == 0.0


def test_unknown_model_name_is_a_clear_error_before_any_call():
    roma = Roma(lm=dummy(), role_lms={"executor": "local:no-such-variant"}, max_depth=0)
    with pytest.raises(Exception, match="no-such-variant"):
        roma.run("x")


def test_quickstart_writes_trace_and_tables(tmp_path):
    from roma_lab.papers.roma import run_quickstart
    from roma_lab.results import read_table

    lm = dummy({"is_atomic": True, "task_type": "write"}, {"output": "hello"})
    run = run_quickstart("say hello", tmp_path, lm=lm)
    assert Run.from_json((tmp_path / "run.json").read_text()) == run
    usage = read_table(tmp_path, "usage")
    assert list(usage["component"]) == ["atomizer", "executor", "total"]
    assert len(read_table(tmp_path, "calls")) == 2


def test_role_schemas_bound_every_list_and_leave_strings_to_the_engine():
    from dspy.adapters.json_adapter import _get_structured_outputs_response_format

    from roma_lab.controller import _roles

    def walk(node):
        if isinstance(node, dict):
            yield node
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    signatures = [_roles.AtomizerSignature, _roles.PlannerSignature, _roles.ExecutorSignature, _roles.ThinkSignature,
                  _roles.SearchSignature, _roles.CodeSignature, _roles.AggregatorSignature, _roles.VerifierSignature]
    for signature in signatures:
        schema = _get_structured_outputs_response_format(signature).model_json_schema()
        parts = list(walk(schema))
        assert all("maxItems" in p for p in parts if p.get("type") == "array"), signature.__name__
        # llama-cpp-python turns maxLength into grammar rules llama.cpp rejects (it crashed the process)
        assert not any("maxLength" in p for p in parts), signature.__name__


def test_cached_completions_cost_nothing_now():
    from types import SimpleNamespace

    def executor(goal, context):  # a sync role whose LM served one cached and one fresh completion
        history = dspy.settings.lm.history
        history.append({"cost": 0.5, "response": SimpleNamespace(cache_hit=True)})
        history.append({"cost": 0.2, "response": SimpleNamespace(cache_hit=False)})
        return SimpleNamespace(output="done")

    priced = dspy.LM("openai/priced-model", cache=False)  # never called: the role writes history itself
    atomizer = lambda goal, context: SimpleNamespace(is_atomic=True, task_type="think")  # noqa: E731
    run = Roma(atomizer=atomizer, executors={"think": executor}, lm=priced, max_depth=1).run("job")
    (call,) = [c for c in run.root.calls if c.role == "executor:think"]
    assert call.cost == pytest.approx(0.2)
