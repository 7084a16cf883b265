"""The generated world as an agent benchmark (issue 24, items 1-3): its tools, its default grader,
and its floors: fixed scripts that must fail while a reader of the evidence scores 100%.
"""

from __future__ import annotations

import json
import re

import dspy
import pytest

from roma_lab.agents import (
    FLOORS,
    WORLD_TOOLS,
    Agent,
    AgentConfig,
    ExactGrader,
    ToolContext,
    ToolError,
    floors_df,
    world_level,
    world_tasks,
)
from roma_lab.bench import GaiaGrader
from roma_lab.lm import ScriptedEngine
from roma_lab.stats import SampleSizeError

CONTEXT = ToolContext(search_sources=1, search_k=3, rewrite_query=None, expand_query=False)
FLOOR_BOUND = 0.10


@pytest.fixture(scope="module", params=(2026, 0, 99))
def floors(request):
    seed = request.param
    return floors_df(world_tasks("test", world_seed=seed), world_tasks("train", world_seed=seed))


def test_floors_fail_and_the_reader_scores_100_percent(floors):
    means = floors.groupby("floor")["score"].mean()
    assert list(dict.fromkeys(floors["floor"])) == list(FLOORS)
    assert means["oracle"] == 1.0
    assert means["do_nothing"] == 0.0
    for floor in FLOORS[:-1]:
        assert means[floor] <= FLOOR_BOUND, (floor, means[floor])
    # no floor reaches a third of any level either
    by_level = floors[floors["floor"] != "oracle"].groupby(["floor", "level"])["score"].mean()
    assert by_level.max() < 1 / 3, by_level.idxmax()


def test_a_benchmark_that_states_answers_would_fail_the_floor_test():
    # The breakage this guards against (the old tool benchmark's "Current answer candidate"): an
    # observation that carries the gold lets a copying script pass. Here copying must score <= 10%.
    tasks = world_tasks("test", 60, world_seed=2026)

    class Telling:
        def __init__(self, task):
            self.task, self.inner = task, task.environment(CONTEXT)
            self.tools = self.inner.tools

        def call(self, name, arguments):
            observation = self.inner.call(name, arguments)
            return f"{observation}\nStated: {self.task.item.answer}" if name == "search" else observation

    from dataclasses import replace

    telling = [replace(t, environment=lambda context, t=t: Telling(t)) for t in tasks]
    leaked = floors_df(telling, world_tasks("train", world_seed=2026))
    assert leaked[leaked["floor"] == "copy_last"]["score"].mean() > 0.5  # the floor test would catch it


def test_grading_is_gaias_quasi_exact_match_with_exact_as_a_named_variant():
    task = next(t for t in world_tasks("dev") if t.item.metadata["template"] == "revenue_total")
    gold = str(task.item.answer)
    spaced = f"{int(gold):,} credits"
    assert isinstance(task.grader, GaiaGrader)
    assert task.grader(task.item, f"{int(gold):,}").score == 1.0
    assert task.grader(task.item, spaced).score == 0.0  # a unit word is not a number
    exact = world_tasks("dev", grader="exact")
    strict = next(t for t in exact if t.item.item_id == task.item.item_id)
    assert isinstance(strict.grader, ExactGrader)
    assert strict.grader(strict.item, f"{int(gold):,}").score == 0.0
    assert strict.grader(strict.item, f" {gold} ").score == 1.0
    town = next(t for t in world_tasks("dev") if t.item.metadata["answer_kind"] == "town")
    assert town.grader(town.item, f"{town.item.answer.lower()}.").score == 1.0


def test_tools_return_evidence_and_bad_calls_are_tool_errors():
    task = next(t for t in world_tasks("dev") if t.item.metadata["level"] == "L3")
    env = task.environment(CONTEXT)
    assert env.tools == WORLD_TOOLS
    found = env.call("search", {"query": task.item.question})
    assert found.startswith("Queries:") and "[world/" in found
    name = re.search(r"ledger-\d{4}\.csv", " ".join(
        env.call("search", {"query": f"{task.item.metadata['plan'].get('org', '')} accounts file"}) for _ in [0]))
    if name:
        assert env.call("read_file", {"name": f"'{name.group(0)}'"}).startswith("year,quarter")
    with pytest.raises(ToolError, match="no file named"):
        env.call("read_file", {"name": "ledger-0000.csv"})
    assert env.call("python", {"code": "print(6 * 7)"}) == "42"


def test_sampling_is_spread_over_levels_and_sizes_are_checked():
    tasks = world_tasks("test", 30, seed=3)
    assert {world_level(t) for t in tasks} == {"L1", "L2", "L3"}
    assert [t.item.item_id for t in world_tasks("test", 12, seed=3)] == [t.item.item_id for t in tasks[:12]]
    with pytest.raises(SampleSizeError, match="362"):
        world_tasks("test", 1000)
    with pytest.raises(ValueError, match="unknown split"):
        world_tasks("challenge")
    with pytest.raises(ValueError, match="unknown levels"):
        world_tasks("dev", levels=("L4",))
    with pytest.raises(ValueError, match="unknown grader"):
        world_tasks("dev", grader="fuzzy")


def test_the_agent_loop_reaches_the_readers_answers():
    # A scripted actor replays the reader's tool calls through Agent.run and answers as the reader
    # did: the agent's plumbing (arguments, observations, grading) carries the evidence through.
    from roma_lab.world import solve
    from roma_lab.agents._worldbench import world_task_of

    tasks = world_tasks("dev", 9, seed=1)
    scripts = {}
    for task in tasks:
        env, calls = task.environment(CONTEXT), []

        def record(name, arguments, env=env, calls=calls):
            calls.append((name, dict(arguments)))
            return env.call(name, arguments)

        scripts[task.item.question] = (calls, solve(world_task_of(task), record))

    done_of: dict[str, int] = {}

    def respond(request):
        calls, answer = scripts[request.inputs["task"]]
        done = done_of[request.inputs["task"]] = done_of.get(request.inputs["task"], -1) + 1
        if done < len(calls):
            name, arguments = calls[done]
            return {"thought": "look", "action": name, "arguments": json.dumps(arguments), "answer": ""}
        return {"thought": "done", "action": "final_answer", "arguments": "{}", "answer": answer}

    lm = dspy.LM("scripted/reader", engine=ScriptedEngine(respond), cache=False)
    agent = Agent(AgentConfig(reanswer=False, max_steps=12), lm=lm)
    for task in tasks:
        trajectory = agent.run(task)
        assert task.grader(task.item, trajectory).score == 1.0, (task.item.item_id, trajectory.answer)
