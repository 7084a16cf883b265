"""The offline tool benchmark (issue 11): the meta-routing suite's operations as agent tools.

An ideal scripted agent (calls its family's minimum route, answers with the last observation's
candidate) must score 100% on every family; dropping any tool of the route must fail; observations
must be text carrying the values the model needs; the suite's four statuses must carry over.
"""

from __future__ import annotations

import re

import dspy
import pytest

from roma_lab.lm import ScriptedEngine
from roma_lab.agents import SUITE_TOOLS, Agent, AgentConfig, ToolUnavailable, suite_tasks
from roma_lab.router import generate_suite, split_tasks
from roma_lab.router._execute import direct_answer
from roma_lab.router._benchmark import FAMILIES
from roma_lab.router._tools import TOOL_NAMES, OperationSession, tool_outcome

EVAL_SPLITS = ("dev", "test", "challenge")


def route_agent(skip: str | None = None) -> Agent:
    """A scripted actor that calls its family's minimum route (minus ``skip``) in order, then answers
    with the last 'Current answer candidate' it saw (or the quoted span for literal tasks)."""
    families = {t.item.question: t.stratum for t in suite_tasks(EVAL_SPLITS + ("train",))}

    def respond(request):

        model, inputs, outputs, system = request.model, request.inputs, request.outputs, request.system
        route = [op for op in FAMILIES[families[inputs["task"]]].route if op != skip]
        done = max((int(n) for n in re.findall(r"^Step (\d+):", inputs["memory"], re.MULTILINE)), default=0)
        if done < len(route):
            return {"thought": "next tool", "action": TOOL_NAMES[route[done]], "arguments": "{}", "answer": ""}
        candidates = re.findall(r"Current answer candidate: (.*)", inputs["memory"])
        answer = candidates[-1] if candidates else direct_answer(inputs["task"]) or ""
        return {"thought": "answer", "action": "final_answer", "arguments": "{}", "answer": answer}

    lm = dspy.LM("scripted/route", engine=ScriptedEngine(respond), cache=False)
    return Agent(AgentConfig(reanswer=False), lm=lm)


def graded(agent, tasks):
    return [(task, trajectory, task.grader(task.item, trajectory))
            for task in tasks for trajectory in [agent.run(task)]]


def test_ideal_scripted_agent_scores_100_percent_on_every_family_and_eval_split():
    tasks = suite_tasks(EVAL_SPLITS)
    results = graded(route_agent(), tasks)
    assert {t.stratum for t in tasks} == set(FAMILIES)
    failures = [(t.item.item_id, tr.answer, t.item.answer) for t, tr, g in results if g.label != "success"]
    assert not failures, failures[:5]
    # the agent really used the tools: one call per route operation, nothing else
    for task, trajectory, _ in results:
        called = [s.tool_call.name for s in trajectory.rollouts[0].steps if s.tool_call]
        assert called == [TOOL_NAMES[op] for op in FAMILIES[task.stratum].route]


@pytest.mark.parametrize("family", [f for f in FAMILIES if FAMILIES[f].route])
def test_skipping_any_needed_tool_fails_every_task_of_the_family(family):
    tasks = suite_tasks(("test",), families=[family])
    for op in FAMILIES[family].route:
        results = graded(route_agent(skip=op), tasks)
        passed = [t.item.item_id for t, _, g in results if g.label == "success"]
        assert not passed, f"{family} without {TOOL_NAMES[op]} still solved {passed}"


def test_observations_are_text_carrying_the_values_the_answer_needs():
    suite = generate_suite()
    by_family = {t.family: t for t in reversed(split_tasks(suite, "dev"))}
    lookup = OperationSession(by_family["record_lookup"]).call("T").text
    assert by_family["record_lookup"].answer in lookup and "revenue=" in lookup

    records = OperationSession(by_family["conflicting_sources"]).call("T").text
    for record in by_family["conflicting_sources"].payload["records"]:
        assert record["value"] in records and str(record["year"]) in records and record["source"] in records

    invoice = OperationSession(by_family["invoice_reconciliation"]).call("T").text
    assert "stated_total" in invoice and all(f"{x:.2f}".rstrip("0").rstrip(".") in invoice
                                             for x in by_family["invoice_reconciliation"].payload["items"])
    for family in ("filtered_computation", "aggregate_computation", "multi_hop", "locale_normalisation"):
        session = OperationSession(by_family[family])
        for op in FAMILIES[family].route:
            text = session.call(op).text
            assert "{" not in text and "'" not in text, text  # never a dict or list repr
    # an operation a family has no handler for says so instead of failing
    assert "no effect on this task" in OperationSession(by_family["statistic"]).call("D").text


def test_calling_the_out_of_service_tool_stops_the_attempt_as_unavailable_component():
    task = suite_tasks(("dev",), families=["retrieval_outage"])[0]

    def respond(request):

        model, inputs, outputs, system = request.model, request.inputs, request.outputs, request.system
        return {"thought": "look it up", "action": "retrieve", "arguments": "{}", "answer": ""}

    lm = dspy.LM("scripted/outage", engine=ScriptedEngine(respond), cache=False)
    trajectory = Agent(AgentConfig(reanswer=False), lm=lm).run(task)
    assert trajectory.status == "unavailable_tool" and len(trajectory.rollouts[0].steps) == 1
    assert "out of service" in trajectory.rollouts[0].steps[0].error
    assert trajectory.rollouts[0].steps[0].tool_call.status == "disconnected"  # the trace's word for a tool gone
    grade = task.grader(task.item, trajectory)
    assert (grade.label, grade.score) == ("unavailable_component", 0.0)


def test_a_session_stopped_at_an_outage_refuses_later_calls_as_the_executor_stops():
    task = suite_tasks(("dev",), families=["retrieval_outage"])[0]
    session = OperationSession(task.grader.task)
    observation = session.call("T")
    assert observation.unavailable and session.stopped and "unavailable" in observation.text
    with pytest.raises(RuntimeError, match="stopped"):
        session.call("G")
    environment = task.environment(None)  # the agent's view: every later call is out of service too
    with pytest.raises(ToolUnavailable):
        environment.call("retrieve", {})
    with pytest.raises(ToolUnavailable, match="stopped"):
        environment.call("delegate", {})


def test_suite_statuses_carry_over_through_the_grader():
    task = suite_tasks(("dev",), families=["statistic"])[0]
    router_task = task.grader.task
    assert tool_outcome(router_task, router_task.answer, stopped=False) == "success"
    assert tool_outcome(router_task, f" {router_task.answer} ", stopped=False) == "success"  # trimmed, as evaluate
    assert tool_outcome(router_task, router_task.answer + "0", stopped=False) == "incorrect_answer"
    assert tool_outcome(router_task, "  ", stopped=False) == "no_answer"
    assert tool_outcome(router_task, router_task.answer, stopped=True) == "unavailable_component"
    assert task.grader(task.item, router_task.answer).label == "success"
    assert task.grader(task.item, None).error is not None  # not a prediction: a typed grading error, no crash


def test_suite_tasks_are_the_suite_split_by_split_with_family_strata():
    tasks = suite_tasks(("dev", "challenge"))
    assert len(tasks) == 72 + 108 and {t.split for t in tasks} == {"dev", "challenge"}
    assert all(t.stratum == t.item.metadata["family"] for t in tasks)
    assert [t.name for t in SUITE_TOOLS] == ["decompose", "retrieve", "compute", "delegate", "verify"]
    with pytest.raises(ValueError, match="unknown split"):
        suite_tasks(("validation",))
    with pytest.raises(ValueError, match="unknown families"):
        suite_tasks(("dev",), families=["nope"])


@pytest.mark.parametrize("make", ["suite", "world"])
def test_asking_for_more_tasks_than_a_split_holds_names_the_maximum(make):
    from roma_lab.agents import sample_suite_tasks, world_tasks
    from roma_lab.stats import SampleSizeError

    draw = (lambda n: sample_suite_tasks("test", n, seed=0)) if make == "suite" else (lambda n: world_tasks("test", n))
    holds = len(draw(None))
    assert len(draw(holds)) == holds
    with pytest.raises(SampleSizeError, match=f"asked for {holds + 1} .*tasks of the test split, but there are {holds}"):
        draw(holds + 1)
