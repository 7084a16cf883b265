"""Usage accounting (issue 8 §3): a failed or timed-out call is counted with what it consumed, a
timed-out thread that ends while the run goes on is accounted late, one that ends after the run is
marked unknown, and sums with an unknown term are unknown (NaN / <NA>), never a smaller number."""

from __future__ import annotations

import asyncio
import math
import threading
from types import SimpleNamespace

import dspy
import pandas as pd
import pytest

from roma_lab.trace import Node, RoleCall, Run
from roma_lab.controller import Roma, ScriptedRoles, Subtask
from roma_lab.lm import ScriptedEngine

PLAN = {"root": (Subtask("a", "think"), Subtask("b", "think"), Subtask("c", "think", (1,)))}


def token_engine():
    """The scripted engine answering "ok" to any prompt, every completion reporting 1,000 input and 10
    output tokens; ``len(engine.requests)`` counts the calls begun."""
    return ScriptedEngine(lambda request: "ok", usage=lambda request, text: (1000, 10))


def engine_lm(engine):
    return dspy.LM("local/tokens", engine=engine, cache=False)


def ask_model():
    dspy.settings.lm("hello")  # inside a role call: the call's own LM copy, under its own usage tracker


def test_a_failed_call_counts_what_it_consumed():
    engine = token_engine()

    def executor(goal, context):
        ask_model()
        ask_model()
        raise RuntimeError("the reply would not parse")

    atomizer = lambda goal, context: SimpleNamespace(is_atomic=True, task_type="think")  # noqa: E731
    run = Roma(atomizer=atomizer, planner=atomizer, aggregator=atomizer, executors={"think": executor},
               lm=engine_lm(engine), max_depth=0).run("x")
    (call,) = run.root.calls
    assert run.status == "failed" and call.error.startswith("RuntimeError")
    assert len(engine.requests) == 2
    assert call.input_tokens == 2000 and call.output_tokens == 20 and call.cost == 0.0
    assert run.usage_df().set_index("component").loc["total", "input_tokens"] == 2000


def gated_b_roles(engine: ScriptedEngine, release: threading.Event, finished: threading.Event) -> dict:
    """b (a sync role, on its own thread) waits for ``release``, asks the model, sets ``finished``."""
    def executor(goal, context):
        if goal == "b":
            release.wait(10)
            ask_model()
            finished.set()
        return SimpleNamespace(output=f"done({goal})")

    return ScriptedRoles(dict(PLAN)).role_kwargs() | {"executors": {"think": executor}, "lm": engine_lm(engine)}


def test_a_timed_out_thread_that_ends_during_the_run_is_accounted_late():
    engine, release, finished = token_engine(), threading.Event(), threading.Event()

    async def aggregator(goal, context, subtask_results):  # runs after b timed out, while b's thread lives
        release.set()
        while not finished.is_set():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the thread's result reaches the loop
        return SimpleNamespace(output="joined")

    kwargs = gated_b_roles(engine, release, finished) | {"aggregator": aggregator}
    run = Roma(**kwargs, max_depth=1, call_timeout_s=0.3).run("root")
    b = run.node("0.1")
    assert b.status == "failed" and "timed out after 0.3 s" in b.error
    (call,) = b.calls
    assert call.input_tokens == 1000 and call.output_tokens == 10
    assert "ended" in call.error and "after it started" in call.error
    assert run.usage_df().set_index("component").loc["total", "input_tokens"] == 1000 and len(engine.requests) == 1


def test_a_timed_out_thread_still_running_when_the_run_ends_is_unknown_not_zero():
    engine, release, finished = token_engine(), threading.Event(), threading.Event()
    run = Roma(**gated_b_roles(engine, release, finished), max_depth=1, call_timeout_s=0.2).run("root")
    (call,) = run.node("0.1").calls
    assert call.input_tokens is None and call.output_tokens is None and call.cost is None
    assert "usage unknown" in call.error
    usage = run.usage_df().set_index("component")
    assert usage.loc["executor", "input_tokens"] is pd.NA and usage.loc["total", "input_tokens"] is pd.NA
    assert usage.loc["atomizer", "input_tokens"] == 0  # the known parts stay known
    assert run.calls_df()["input_tokens"].isna().sum() == 1
    release.set()
    assert finished.wait(10)  # the thread ends after the run; the returned run is a frozen record
    assert run.node("0.1").calls[0].input_tokens is None
    assert Run.from_json(run.to_json()) == run


def test_an_async_role_cancelled_at_its_time_limit_is_accounted():
    engine = token_engine()

    async def executor(goal, context):
        if goal == "b":
            ask_model()
            await asyncio.sleep(30)  # cancelled at the time limit; what it consumed is still counted
        return SimpleNamespace(output=f"done({goal})")

    async def aggregator(goal, context, subtask_results):
        await asyncio.sleep(0.05)  # b's cancelled task ends meanwhile
        return SimpleNamespace(output="joined")

    kwargs = ScriptedRoles(dict(PLAN)).role_kwargs() | {"executors": {"think": executor},
                                                         "aggregator": aggregator, "lm": engine_lm(engine)}
    run = Roma(**kwargs, max_depth=1, call_timeout_s=0.2).run("root")
    (call,) = run.node("0.1").calls
    assert call.input_tokens == 1000 and "timed out" in call.error


def call(role, tokens=(1, 1), cost=None) -> RoleCall:
    return RoleCall(role=role, inputs={}, outputs={}, context_chars=0, input_tokens=tokens[0], output_tokens=tokens[1],
                    cost=cost, latency_s=0.1, started_s=0.0)


def run_of(*calls) -> Run:
    root = Node(id="0", parent_id=None, depth=0, goal="g", task_type="think", status="completed", output="o",
                calls=calls)
    return Run(goal="g", status="completed", output="o", nodes=(root,), wall_s=1.0)


def test_usage_total_is_unknown_when_any_cost_is_unknown():
    usage = run_of(call("atomizer", cost=0.5), call("executor:think", cost=None),
                   call("executor:think", cost=0.25)).usage_df().set_index("component")
    assert usage.loc["atomizer", "cost"] == 0.5
    assert math.isnan(usage.loc["executor", "cost"])  # one known, one unknown: unknown
    assert math.isnan(usage.loc["total", "cost"])
    known = run_of(call("atomizer", cost=0.5), call("executor:think", cost=0.25)).usage_df().set_index("component")
    assert known.loc["total", "cost"] == pytest.approx(0.75)


def test_usage_tokens_with_an_unknown_term_are_unknown():
    usage = run_of(call("atomizer", (5, 1)), call("executor:think", (None, None)), call("executor:think", (7, 2))
                   ).usage_df().set_index("component")
    assert usage.loc["atomizer", "input_tokens"] == 5
    assert usage.loc["executor", "input_tokens"] is pd.NA and usage.loc["total", "output_tokens"] is pd.NA
    assert list(usage["calls"]) == [1, 2, 3]


@pytest.mark.parametrize(("history", "expected"), [
    ([{"cost": 0.5, "cached": True}, {"cost": 0.2}], 0.2),  # a cache hit costs nothing now
    ([{"cost": 0.5, "cached": True}], 0.0),
    ([{"cost": 0.2}, {"cost": None}], None),  # one fresh completion without a price: unknown, not 0.2
    ([{"cost": 0.2}, {"cost": None, "model": "local/embedded"}], 0.2),  # an in-process model's completion costs 0
    ([{"cost": 0.2}, {"cost": None, "model": "scripted"}], 0.2),
    ([{"cost": 0.2}, {"cost": None, "model": "openai/other"}], None),
    ([], None),  # no LM history at all: unknown
])
def test_a_calls_cost_is_unknown_when_any_fresh_completion_has_no_price(history, expected):
    def executor(goal, context):  # a sync role whose LM reports these completions
        for h in history:
            dspy.settings.lm.history.append({"cost": h["cost"], "model": h.get("model", "openai/priced-model"),
                                             "response": SimpleNamespace(cache_hit=h.get("cached", False))})
        return SimpleNamespace(output="done")

    priced = dspy.LM("openai/priced-model", cache=False)  # never called: the role writes history itself
    atomizer = lambda goal, context: SimpleNamespace(is_atomic=True, task_type="think")  # noqa: E731
    run = Roma(atomizer=atomizer, executors={"think": executor}, planner=atomizer, aggregator=atomizer,
               lm=priced, max_depth=0).run("job")
    (c,) = run.root.calls
    assert c.cost == (pytest.approx(expected) if expected is not None else None)


def test_a_run_on_the_scripted_model_names_it_and_costs_zero_per_call():
    run = Roma(lm="scripted", max_depth=1, max_concurrency=2).run("write a report")  # resolved by roma_lab.lm
    calls = [c for n in run.nodes for c in n.calls]
    assert run.status == "completed" and len(calls) == 5  # atomize, plan, 2 executors, aggregate
    assert {c.model for c in calls} == {"scripted"} and set(run.settings.models.values()) == {"scripted"}
    assert all(c.cost == 0.0 and c.input_tokens > 0 for c in calls)  # no bill: zero, not unknown


def test_a_call_that_also_used_a_remote_model_without_a_price_is_unknown():
    local = dspy.LM("local/embedded", engine=ScriptedEngine(lambda request: "ok"), cache=False)
    remote = dspy.LM("openai/unpriced", engine=ScriptedEngine(lambda request: "ok"), cache=False)

    def executor(goal, context):
        local("hello")  # in-process: costs 0
        ask_model()  # the call's own LM, remote: its provider reported no price
        return SimpleNamespace(output="done")

    atomizer = lambda goal, context: SimpleNamespace(is_atomic=True, task_type="think")  # noqa: E731
    run = Roma(atomizer=atomizer, executors={"think": executor}, planner=atomizer, aggregator=atomizer,
               lm=remote, max_depth=0).run("job")
    (call,) = run.root.calls
    assert call.input_tokens > 0 and call.cost is None  # unknown, not the local model's 0


def test_each_call_records_only_its_own_model_exchanges():
    # every call runs on its own copy of the run's LM: one shared LM would hand later calls the
    # history (and cost) of the earlier ones
    run = Roma(lm="scripted", max_depth=1, max_concurrency=2).run("write a report")
    calls = [c for n in run.nodes for c in n.calls]
    assert len(calls) == 5 and all(len(c.exchanges) == 1 for c in calls)
