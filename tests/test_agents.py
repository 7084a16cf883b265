"""The agent room (issue 11): each OAgents design choice does what it claims, on scripted models.

Scripted models answer as a function of the request (roma_lab.lm.ScriptedEngine), dispatched on the
output fields DSPy asks for, so each test states exactly what every role replies.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import replace

import dspy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roma_lab.lm import ScriptedEngine
from roma_lab.agents import (
    Agent,
    AgentConfig,
    AgentTask,
    PlanTips,
    SplitLeakError,
    SuiteGrader,
    Tool,
    ToolError,
    is_non_answer,
    mine_tips,
    pick_best_score,
    sampling_seed,
)
from roma_lab.agents._select import vote_selection as vote
from roma_lab.bench import Item, StringMatchGrader, normalize_answer
from roma_lab.trace import RoleCall, Run, ToolCall, Trajectory

from evaluations import run_agent

ACTOR = ("action", "arguments", "answer")
ROLE_OF = {ACTOR: "actor", ("thought", *ACTOR): "actor", ("plan",): "planner", ("revised_plan",): "reviser", ("summary",): "summarizer",
           ("updated_memory",): "memory", ("critique",): "step_reflector", ("critique", "acceptable"): "answer_reflector",
           ("analysis", "index"): "selector", ("analysis", "score"): "scorer", ("improved_query",): "query_rewriter",
           ("tips",): "tips_miner", ("is_atomic", "task_type"): "atomizer", ("subtasks",): "roma_planner",
           ("output",): "aggregator", ("answer",): "answerer"}
DEFAULTS = {"planner": {"plan": "initial plan"}, "reviser": {"revised_plan": "revised plan"},
            "summarizer": {"summary": "a summary"}, "memory": {"updated_memory": "long-term notes"},
            "step_reflector": {"critique": "fine step"}, "answer_reflector": {"critique": "ok", "acceptable": True},
            "selector": {"analysis": "a", "index": 0}, "scorer": {"analysis": "a", "score": 5},
            "query_rewriter": {"improved_query": "better query"}, "tips_miner": {"tips": ["a tip"]},
            "answerer": {"answer": ""}}


class CounterEnv:
    """A toy environment with state: ``count`` increments a counter, ``lookup`` needs a query,
    ``boom`` fails as a tool, ``crash`` raises an unexpected exception."""

    tools = (Tool("count", "add one to the counter"), Tool("lookup", "look a word up", ("query",)),
             Tool("boom", "always fails"), Tool("crash", "raises"))

    def __init__(self):
        self.n = 0

    def call(self, name, arguments):
        if name == "count":
            self.n += 1
            return f"counter is now {self.n}"
        if name == "lookup":
            return f"definition of {arguments['query']}"
        if name == "boom":
            raise ToolError("boom is broken")
        raise ZeroDivisionError("division by zero")


def toy_task(item_id="t1", answer="42", split="dev", env=CounterEnv) -> AgentTask:
    item = Item("toy", item_id, f"Toy task {item_id}: what is the answer?", answer)
    return AgentTask(item=item, split=split, stratum="toy", environment=lambda context: env(), grader=StringMatchGrader())


def steps_done(memory: str) -> int:
    return max((int(n) for n in re.findall(r"^Step (\d+):", memory, re.MULTILINE)), default=0)


def act(action="count", answer="", arguments=None, thought="go"):
    return {"thought": thought, "action": action, "arguments": json.dumps(arguments or {}), "answer": answer}


class SeedEngine(ScriptedEngine):
    """The shared scripted engine, also logging the seed of each request."""

    def __init__(self, respond):
        super().__init__(respond)
        self.seeds, self.max_tokens = [], []

    def complete(self, request):
        self.seeds.append(request.config.seed)
        self.max_tokens.append(request.config.max_tokens)
        return super().complete(request)


def scripted(actor, name="toy", **roles):
    """A dspy.LM whose actor is ``actor(inputs)`` and whose other roles reply ``roles[role](inputs)``
    (or a fixed default); returns (lm, engine)."""

    def respond(request):

        model, inputs, outputs, system = request.model, request.inputs, request.outputs, request.system
        role = ROLE_OF[outputs]
        if role == "actor":
            return actor(inputs)
        if role in roles:
            return roles[role](inputs)
        return DEFAULTS[role]

    engine = SeedEngine(respond)
    return dspy.LM(f"scripted/{name}", engine=engine, cache=False), engine


def count_then_answer(k, answer="42"):
    return lambda inputs: act() if steps_done(inputs["memory"]) < k else act("final_answer", answer)


def role_inputs(engine, role):
    return [inputs for outputs, inputs in ((r.outputs, r.inputs) for r in engine.requests) if ROLE_OF[outputs] == role]


# --- configuration -------------------------------------------------------------------------------


def test_config_json_round_trip_with_tips_and_models():
    tips = PlanTips(("check the latest record",), ("train",), ("train-a", "train-b"), "scripted/miner")
    config = AgentConfig(name="full", planning="revise", revise_every=2, subtasks=True, tips=tips, memory="long_term",
                         tts="best_of_n", n_rollouts=3, selection="score", temperature=0.7,
                         query_optimization="reflect+expand", models={"selector": "local:smollm2-135m"})
    again = AgentConfig.from_json(config.to_json())
    assert again == config and again.tips == tips and isinstance(again.tips.tips, tuple)
    assert AgentConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown_field"):
        AgentConfig.from_dict(config.to_dict() | {"unknown_field": 1})


@pytest.mark.parametrize("changes, message", [
    ({"planning": "dynamic"}, "planning must be one of"),
    ({"tts": "best_of_n", "n_rollouts": 4}, "temperature > 0"),
    ({"n_rollouts": 2}, "n_rollouts > 1 exactly when"),
    ({"tts": "best_of_n", "temperature": 0.5}, "n_rollouts > 1 exactly when"),
    ({"revision_visibility": "official"}, "planning='revise' only"),
    ({"tips_usage": "official"}, "needs tips"),
    ({"rollout_isolation": "official"}, "best_of_n' only"),
    ({"models": {"judge": "local"}}, "unknown roles"),
    ({"max_steps": 0}, "max_steps must be an integer >= 1"),
    ({"temperature": 3.0}, "temperature must be in"),
])
def test_config_rejects_inconsistent_choices(changes, message):
    with pytest.raises(ValueError, match=message):
        AgentConfig(**changes)


def test_config_hash_ignores_the_name_and_follows_every_other_field():
    from roma_lab.agents import config_hash

    base = AgentConfig()
    assert config_hash(AgentConfig(name="other")) == config_hash(base)
    assert config_hash(AgentConfig(memory_window=3)) != config_hash(base)
    assert config_hash(AgentConfig(models={"scorer": "local"})) != config_hash(base)


# --- trajectories --------------------------------------------------------------------------------


def test_trajectory_json_round_trip_keeps_every_record():
    lm, _ = scripted(count_then_answer(3))
    config = AgentConfig(planning="revise", revise_every=2, memory="long_term", tts="reflection", reflect_at="step")
    trajectory = Agent(config, lm=lm).run(toy_task(), long_term="notes from earlier tasks")
    again = Trajectory.from_json(trajectory.to_json())
    assert again == trajectory
    assert again.answer == "42" and again.status == "answered" and again.n_tool_calls == 3
    assert [p.kind for p in again.rollouts[0].plans] == ["initial", "revision"]
    data = json.loads(trajectory.to_json())
    data["rollouts"][0]["steps"][0]["surprise"] = 1
    with pytest.raises(ValueError, match="surprise"):
        Trajectory.from_json(json.dumps(data))


def test_every_model_call_is_a_role_call_with_its_inputs_usage_and_time_on_the_run_clock():
    lm, _ = scripted(count_then_answer(2))
    trajectory = Agent(AgentConfig(planning="revise", revise_every=2), lm=lm).run(toy_task())
    steps = trajectory.rollouts[0].steps
    actor = steps[0].calls[0]
    assert isinstance(actor, RoleCall) and actor.role == "actor" and actor.model == "scripted/toy"
    assert actor.inputs["task"] == toy_task().item.question and set(actor.inputs) >= {"tools", "plan", "memory"}
    assert actor.context_chars == sum(len(v) for v in actor.inputs.values())
    assert actor.input_tokens > 0 and actor.output_tokens > 0 and actor.cost == 0.0  # in-process model: no bill
    # the request as sent, read as the controller reads a role call's
    (exchange,) = actor.exchanges
    assert toy_task().item.question in json.dumps(exchange.messages) and exchange.completions
    assert exchange.cached is False
    plan = trajectory.rollouts[0].plans[0].calls[0]
    starts = [plan.started_s, *(s.calls[0].started_s for s in steps)]
    assert 0 <= starts[0] and starts == sorted(starts) and starts[-1] <= trajectory.wall_s
    tool = steps[0].tool_call
    assert isinstance(tool, ToolCall) and tool.started_s >= actor.started_s + actor.latency_s
    assert tool.server is None and tool.status == "ok" and tool.result_chars == len(steps[0].observation)


def test_a_trajectory_as_run_is_the_task_its_rollouts_and_their_steps():
    trajectory, _ = best_of_n(["7", "8", "7"], selection="score")
    run = trajectory.as_run()
    assert run.root.id == "task" and run.root.goal == trajectory.question and run.output == trajectory.answer
    assert [c.role for c in run.root.calls] == ["scorer"] * 3  # the selection's calls, on the task
    assert [n.id for n in run.children("task")] == ["r0", "r1", "r2"]
    assert {n.task_type for n in run.children("task")} == {"best_of_n"}
    assert [n.id for n in run.children("r1")] == ["r1.1", "r1.2", "r1.3"]
    step = run.node("r1.1")
    assert step.goal == "count" and step.output == "counter is now 1" and step.status == "completed"
    assert step.calls[0].tools == (trajectory.rollouts[1].steps[0].tool_call,)  # the actor call's tool call
    assert run.node("r1.3").output == "8" and run.node("r1").output == "8" and run.status == "completed"
    calls = run.calls_df()
    n_calls = len(trajectory.selection.calls) + sum(len(s.calls) for r in trajectory.rollouts for s in r.steps)
    assert len(calls) == n_calls and trajectory.usage_df().iloc[-1]["calls"] == n_calls
    assert trajectory.usage_df().iloc[-1]["input_tokens"] == calls["input_tokens"].sum()
    assert trajectory.tools_df()["node_id"].tolist() == ["r0.1", "r0.2", "r1.1", "r1.2", "r2.1", "r2.2"]


def test_failed_steps_and_rollouts_are_failed_nodes_saying_why():
    lm, _ = scripted(lambda inputs: act("nope") if steps_done(inputs["memory"]) == 0 else act("boom"))
    trajectory = Agent(AgentConfig(reanswer=False, max_steps=2), lm=lm).run(toy_task())
    run = trajectory.as_run()
    assert run.node("r0.1").status == "failed" and run.node("r0.1").error.startswith("unknown_tool: unknown tool")
    assert run.node("r0.2").error == "tool_error: boom is broken" and run.node("r0.2").output is None
    assert run.node("r0.2").calls[0].tools[0].status == "error"
    assert run.node("r0").status == "failed" and run.node("r0").error.startswith("step_limit")
    assert (run.status, run.root.status, run.output) == ("failed", "failed", None)
    assert run.root.error == run.node("r0").error


# --- planning ------------------------------------------------------------------------------------


def revising_run(every, visibility="paper", max_steps=6):
    revision = iter(range(1, 100))
    lm, engine = scripted(count_then_answer(max_steps), reviser=lambda inputs: {"revised_plan": f"plan v{next(revision)}"})
    config = AgentConfig(planning="revise", revise_every=every, revision_visibility=visibility, max_steps=max_steps + 1)
    return Agent(config, lm=lm).run(toy_task()), engine


def test_plan_is_revised_every_n_steps_from_recent_observations_and_the_actor_reads_it():
    trajectory, engine = revising_run(every=2)
    rollout = trajectory.rollouts[0]
    assert [(p.after_step, p.kind, p.visible) for p in rollout.plans] == [
        (0, "initial", True), (2, "revision", True), (4, "revision", True), (6, "revision", True)]
    shown = [s.plan_shown for s in rollout.steps]
    assert shown == ["initial plan"] * 2 + ["plan v1"] * 2 + ["plan v2"] * 2 + ["plan v3"]
    # the actor's prompt itself carried the revision, and the reviser saw the last N observations
    assert [i["plan"] for i in role_inputs(engine, "actor")][2] == "plan v1"
    revision = rollout.plans[2]
    assert len(revision.observations) == 2 and "counter is now 3" in revision.observations[0]
    assert "counter is now 4" in role_inputs(engine, "reviser")[1]["observations"]
    assert "counter is now 2" not in role_inputs(engine, "reviser")[1]["observations"]


def test_interval_one_revises_after_every_step():
    trajectory, _ = revising_run(every=1, max_steps=3)
    assert [p.after_step for p in trajectory.rollouts[0].plans] == [0, 1, 2, 3]


def test_official_variant_revises_but_the_actor_never_reads_it():
    trajectory, engine = revising_run(every=2, visibility="official")
    rollout = trajectory.rollouts[0]
    assert [p.visible for p in rollout.plans] == [True, False, False, False]
    assert {s.plan_shown for s in rollout.steps} == {"initial plan"}
    assert {i["plan"] for i in role_inputs(engine, "actor")} == {"initial plan"}


def test_official_variant_never_revises_at_interval_one():
    trajectory, engine = revising_run(every=1, visibility="official", max_steps=3)
    assert [p.kind for p in trajectory.rollouts[0].plans] == ["initial"]
    assert role_inputs(engine, "reviser") == []


def test_static_workflow_is_the_same_fixed_plan_for_every_task():
    from roma_lab.agents import STATIC_WORKFLOW

    lm, engine = scripted(count_then_answer(1))
    agent = Agent(AgentConfig(planning="static"), lm=lm)
    for task in (toy_task("a"), toy_task("b")):
        assert {s.plan_shown for s in agent.run(task).rollouts[0].steps} == {STATIC_WORKFLOW}
    assert role_inputs(engine, "planner") == []


# --- memory --------------------------------------------------------------------------------------


def memory_run(mode, steps=5, window=2, k=2, **roles):
    summaries = {"summarizer": lambda i: {"summary": "summary of " + i["step"].splitlines()[-1]}} | roles
    lm, engine = scripted(count_then_answer(steps), **summaries)
    config = AgentConfig(memory=mode, memory_window=window, retrieval_k=k, max_steps=steps + 1)
    return Agent(config, lm=lm).run(toy_task()), engine


def test_current_memory_shows_only_the_window_and_counts_the_rest():
    trajectory, _ = memory_run("current")
    last = trajectory.rollouts[0].steps[-1].memory_shown
    assert "(3 earlier step(s) not shown.)" in last
    assert "counter is now 5" in last and "counter is now 4" in last and "counter is now 3" not in last
    assert "summary of" not in last


def test_summary_memory_shows_a_summary_of_every_older_step():
    trajectory, engine = memory_run("summary")
    last = trajectory.rollouts[0].steps[-1].memory_shown
    for n in (1, 2, 3):
        assert f"summary of Result: counter is now {n}" in last
    assert len(role_inputs(engine, "summarizer")) == 5  # every step but the final answer
    assert trajectory.rollouts[0].steps[0].summary == "summary of Result: counter is now 1"


def test_retrieval_memory_shows_only_the_k_most_relevant_older_summaries():
    def summarize(inputs):
        return {"summary": "note on giraffes" if "now 2" in inputs["step"] else "note on bricks"}

    task = toy_task()
    task = AgentTask(item=Item("toy", "g", "Which giraffes?", "42"), split="dev", stratum="toy",
                     environment=task.environment, grader=task.grader)
    shown = {}
    for mode in ("summary", "retrieval"):
        lm, _ = scripted(count_then_answer(4), summarizer=summarize)
        config = AgentConfig(memory=mode, memory_window=1, retrieval_k=1)
        shown[mode] = Agent(config, lm=lm).run(task).rollouts[0].steps[-1].memory_shown
    assert shown["summary"].count("note on bricks") == 2 and "note on giraffes" in shown["summary"]
    # 3 older summaries, k = 1: BM25 keeps the one matching the task
    assert "note on giraffes" in shown["retrieval"] and "note on bricks" not in shown["retrieval"]
    assert "counter is now 4" in shown["retrieval"]  # the window still shows the latest step in full


def test_long_term_memory_reaches_the_actor_prompt():
    lm, engine = scripted(count_then_answer(2), memory=lambda i: {"updated_memory": f"LTM after: {i['step'][-20:]}"})
    trajectory = Agent(AgentConfig(memory="long_term"), lm=lm).run(toy_task(), long_term="carried insight")
    prompts = [i["memory"] for i in role_inputs(engine, "actor")]
    assert "carried insight" in prompts[0]
    assert "LTM after" in prompts[1] and "carried insight" not in prompts[1]  # fused, then replaced
    assert trajectory.rollouts[0].long_term_before == "carried insight"
    assert trajectory.rollouts[0].long_term_after.startswith("LTM after")


def test_long_term_memory_is_carried_across_the_tasks_of_one_run_and_resumes(tmp_path):
    lm, engine = scripted(count_then_answer(1), memory=lambda i: {"updated_memory": "seen " + i["step"].split(":")[1]})
    config = AgentConfig(memory="long_term")
    tasks = [toy_task("a"), toy_task("b"), toy_task("c")]
    run_agent(config, tasks[:2], out_dir=tmp_path, lm=lm, progress=False)  # interrupted after two tasks
    run_agent(config, tasks, out_dir=tmp_path, lm=lm, progress=False)
    fresh_lm, fresh_engine = scripted(count_then_answer(1), memory=lambda i: {"updated_memory": "seen " + i["step"].split(":")[1]})
    run_agent(config, tasks, out_dir=tmp_path / "fresh", lm=fresh_lm, progress=False)
    first_prompts = [i["memory"] for i in role_inputs(engine, "actor") if "task c" in i["task"]]
    assert "seen  Toy task b" in first_prompts[0]  # the memory left by task b reached task c's prompt
    assert [i["memory"] for i in role_inputs(fresh_engine, "actor") if "task c" in i["task"]] == first_prompts


def test_official_long_term_memory_is_computed_then_discarded(tmp_path):
    lm, engine = scripted(count_then_answer(1), memory=lambda i: {"updated_memory": "SECRET-LTM"})
    config = AgentConfig(memory="long_term", long_term_visibility="official")
    run_agent(config, [toy_task("a"), toy_task("b")], out_dir=tmp_path, lm=lm, progress=False)
    assert len(role_inputs(engine, "memory")) == 4  # computed every step of both tasks
    assert not any("SECRET-LTM" in i["memory"] for i in role_inputs(engine, "actor"))


# --- best-of-N and selection ---------------------------------------------------------------------


class BonEngine(SeedEngine):
    """Like SeedEngine, but the actor's final answer depends on the request's seed (one per rollout)."""

    def __init__(self, respond, answer_of_seed):
        super().__init__(respond)
        self.answer_of_seed = answer_of_seed
        self.current = threading.local()  # rollouts run at once: each request's seed, in its own thread

    def complete(self, request):
        self.current.seed = request.config.seed
        return super().complete(request)


def best_of_n(answers, selection="vote", isolation="paper", gate=lambda role: None, task=None, **roles):
    """A best-of-N run; ``gate(role)`` is called as each request arrives (before it is answered)."""
    engine_box = {}

    def respond(request):

        model, inputs, outputs, system = request.model, request.inputs, request.outputs, request.system
        role = ROLE_OF[outputs]
        gate(role)
        if role == "actor":
            if steps_done(inputs["memory"]) < 2:
                return act()
            return act("final_answer", engine_box["engine"].answer_of_seed[engine_box["engine"].current.seed])
        return roles[role](inputs) if role in roles else DEFAULTS[role]

    engine = BonEngine(respond, {sampling_seed(0, i): a for i, a in enumerate(answers)})
    engine_box["engine"] = engine
    lm = dspy.LM("scripted/bon", engine=engine, cache=False)
    config = AgentConfig(tts="best_of_n", n_rollouts=len(answers), temperature=0.8, selection=selection,
                         rollout_isolation=isolation)
    return Agent(config, lm=lm).run(task or toy_task()), engine


def test_best_of_n_rollouts_are_isolated_tool_state_memory_and_seed():
    trajectory, engine = best_of_n(["7", "8", "7"])
    rollouts = trajectory.rollouts
    assert [r.seed for r in rollouts] == [0, 1000, 2000]
    for r in rollouts:  # each rollout's counter starts from zero and its memory from nothing
        assert [s.observation for s in r.steps if s.tool_call] == ["counter is now 1", "counter is now 2"]
        assert r.steps[0].memory_shown == "No steps yet."
    assert set(engine.seeds) == {0, 1000, 2000}
    assert trajectory.answer == "7" and trajectory.selection.votes == {"7": 2, "8": 1}


def test_official_shared_state_leaks_tool_state_between_rollouts():
    trajectory, _ = best_of_n(["7", "8"], isolation="official")
    observations = [s.observation for s in trajectory.rollouts[1].steps if s.tool_call]
    assert observations == ["counter is now 3", "counter is now 4"]


def test_vote_majority_on_the_grader_s_key_and_deterministic_tie_break():
    assert vote(["a", "b", "b"]).chosen == 1
    assert vote(["1,000", "1000", "999"]) == vote(["1,000", "1000", "999"])
    # exact by default: answers an exact grader tells apart never pool their votes
    assert vote(["1,000", "1000", "999"]).votes == {"1,000": 1, "1000": 1, "999": 1}
    assert vote([" 7 ", "7", "8"]).votes == {"7": 2, "8": 1}  # the exact evaluator trims whitespace
    # a string-match grader cannot tell "1,000" from "1000": its key pools them
    assert vote(["1,000", "1000", "999"], key=StringMatchGrader.answer_key).votes == {"1000": 2, "999": 1}
    tie = vote(["x", "y", "y", "x"])
    assert (tie.chosen, tie.tie) == (0, True)  # tied: the answer given first, at its first rollout
    assert vote(["y", "x", "x", "y"]).chosen == 0
    assert vote(["", "Unable to determine", "b", "a"]).chosen == 2  # non-answers do not vote
    assert vote([None, ""]).chosen == 0 and vote([None, ""]).votes == {}
    assert is_non_answer("I was unable to determine it") and not is_non_answer("0")


@given(st.lists(st.sampled_from(["a", "A", "b", "c", "", "unable to determine", None]), min_size=1, max_size=8))
def test_vote_picks_a_most_frequent_answer_and_the_earliest_among_ties(answers):
    result = vote(answers)
    valid = [(i, a.strip()) for i, a in enumerate(answers) if not is_non_answer(a)]
    if not valid:
        assert (result.chosen, result.votes) == (0, {})
        return
    counts = {k: sum(1 for _, x in valid if x == k) for _, k in valid}
    top = max(counts.values())
    first_of = {k: min(i for i, x in valid if x == k) for k in counts}
    winner = min((k for k in counts if counts[k] == top), key=first_of.get)
    assert result.chosen == first_of[winner] and result.votes == counts
    assert result.tie == (sum(c == top for c in counts.values()) > 1)


def test_a_wrong_sign_never_wins_on_the_votes_of_the_right_one():
    # issue 24: keyed by normalize_answer, '44.2%' and '-44.2%' were one ballot and rollout 0 won
    suite_key = SuiteGrader.answer_key
    assert vote(["44.2%", "-44.2%", "-44.2%", "7%"], key=suite_key).chosen == 1
    assert vote(["8383.57", "8,383.57", "8,383.57"], key=suite_key).chosen == 1
    assert vote(["A", "B", "B"], key=suite_key).votes == {"A": 1, "B": 2}  # "A" is no empty key (an article)
    assert normalize_answer("A") == ""  # what the old key made of it


class ExactGrader:
    """A grader that says nothing of its key: votes then keep every distinct text apart."""

    name = "exact"

    def __call__(self, item, prediction):
        from roma_lab.bench import Grade

        ok = str(getattr(prediction, "answer", prediction)).strip() == item.answer
        return Grade(label="CORRECT" if ok else "INCORRECT", score=float(ok), grader=self.name)


def test_best_of_n_votes_on_the_task_s_grader_key():
    exact = replace(toy_task(answer="-44.2%"), grader=ExactGrader())
    trajectory, _ = best_of_n(["44.2%", "-44.2%", "-44.2%"], task=exact)
    assert trajectory.answer == "-44.2%" and trajectory.selection.votes == {"44.2%": 1, "-44.2%": 2}
    # under string match (the toy task's grader) the two are one answer, as that grader sees them
    pooled, _ = best_of_n(["1,000", "1000", "999"])
    assert pooled.selection.votes == {"1000": 2, "999": 1}


def test_score_pick_breaks_ties_to_the_lowest_index_and_ignores_missing_scores():
    assert pick_best_score([3, 9, 9]) == (1, True)
    assert pick_best_score([None, 2, 1]) == (1, False)
    assert pick_best_score([None, None]) == (0, False)


def test_selectors_pick_what_they_should_on_hand_made_rollouts():
    voted, _ = best_of_n(["b", "a", "a"])
    assert voted.selection.method == "vote" and voted.selection.chosen == 1

    def score(inputs):  # scores the attempt by its answer: "good" answers get 9
        return {"analysis": "", "score": 9 if "'good'" in inputs["attempt"] else 2}

    scored, _ = best_of_n(["bad", "good", "bad"], selection="score", scorer=score)
    assert (scored.selection.chosen, scored.answer) == (1, "good")
    assert scored.selection.scores == (2.0, 9.0, 2.0)

    def pick(inputs):  # list-wise: sees every attempt, numbered, and names the one with "c"
        numbers = re.findall(r"Attempt (\d+):\n.*?Final answer: '(\w)'", inputs["attempts"], re.DOTALL)
        return {"analysis": "", "index": int(next(n for n, answer in numbers if answer == "c"))}

    listed, _ = best_of_n(["a", "b", "c"], selection="list", selector=pick)
    assert (listed.selection.chosen, listed.answer) == (2, "c")
    invalid, _ = best_of_n(["a", "b"], selection="list", selector=lambda i: {"analysis": "", "index": 7})
    assert invalid.selection.chosen == 0 and "no valid index" in invalid.selection.note


# --- reflection and re-answering -----------------------------------------------------------------


def test_end_reflection_retries_once_with_the_critique_only_when_rejected():
    def actor(inputs):
        if steps_done(inputs["memory"]) < 1:
            return act()
        return act("final_answer", "42" if "judged wrong" in inputs["feedback"] else "41")

    reject = {"answer_reflector": lambda i: {"critique": "count again", "acceptable": "'41'" not in i["attempt"]}}
    lm, engine = scripted(actor, **reject)
    trajectory = Agent(AgentConfig(tts="reflection", reflect_at="end"), lm=lm).run(toy_task())
    assert [r.kind for r in trajectory.rollouts] == ["main", "reflection_retry"]
    assert "count again" in trajectory.rollouts[1].note and trajectory.answer == "42"
    accept = {"answer_reflector": lambda i: {"critique": "fine", "acceptable": True}}
    lm, _ = scripted(actor, **accept)
    trajectory = Agent(AgentConfig(tts="reflection", reflect_at="end"), lm=lm).run(toy_task())
    assert len(trajectory.rollouts) == 1 and trajectory.answer == "41"


def test_step_reflection_critique_is_shown_at_the_next_step():
    lm, _ = scripted(count_then_answer(2), step_reflector=lambda i: {"critique": f"critique of {i['step'][:6]}"})
    steps = Agent(AgentConfig(tts="reflection", reflect_at="step"), lm=lm).run(toy_task()).rollouts[0].steps
    assert steps[0].critique == "critique of Step 1"
    assert "critique of Step 1" in steps[1].feedback_shown and "critique of Step 2" in steps[2].feedback_shown


def test_reanswer_only_on_an_empty_or_unable_to_determine_answer_and_logged():
    def actor(first):
        return lambda i: act("final_answer", "42" if "without an answer" in i["feedback"] else first)

    whole = AgentConfig(reanswer_with="rollout")
    for first in ("Unable to determine.", ""):
        lm, _ = scripted(actor(first))
        trajectory = Agent(whole, lm=lm).run(toy_task())
        assert trajectory.reanswered and [r.kind for r in trajectory.rollouts] == ["main", "reanswer"]
        assert trajectory.answer == "42" and "re-answered" in trajectory.selection.note
    for config in (whole, AgentConfig()):
        lm, _ = scripted(actor("41"))  # a wrong answer is never re-asked
        trajectory = Agent(config, lm=lm).run(toy_task())
        assert not trajectory.reanswered and len(trajectory.rollouts) == 1
        lm, _ = scripted(actor("Unable to determine"))
        assert not Agent(replace(config, reanswer=False), lm=lm).run(toy_task()).reanswered


def test_the_default_reanswer_is_one_answerer_call_from_the_failed_attempt_s_steps():
    lm, engine = scripted(lambda i: act() if steps_done(i["memory"]) < 2 else act("final_answer", "Unable to determine."),
                          answerer=lambda inputs: {"answer": "42"})
    trajectory = Agent(AgentConfig(), lm=lm).run(toy_task())
    assert trajectory.reanswered and [r.kind for r in trajectory.rollouts] == ["main", "reanswer"]
    assert trajectory.answer == "42" and trajectory.status == "answered"
    assert len(role_inputs(engine, "actor")) == 3  # the main rollout's three steps, none repeated
    (asked,) = role_inputs(engine, "answerer")
    # the answerer reads the failed attempt's memory, its last step included
    assert "counter is now 2" in asked["memory"] and "Unable to determine." in asked["memory"]
    reanswer = trajectory.rollouts[1]
    assert len(reanswer.steps) == 1 and reanswer.steps[0].answer == "42" and "without an answer" in reanswer.note


def test_no_reanswer_call_repeats_the_answerer_call_that_ended_the_attempt():
    lm, engine = scripted(lambda i: act())  # never answers: the step limit, then the answerer's empty reply
    trajectory = Agent(AgentConfig(max_steps=2), lm=lm).run(toy_task())
    assert trajectory.status == "step_limit" and not trajectory.reanswered and len(trajectory.rollouts) == 1
    assert len(role_inputs(engine, "answerer")) == 1


# --- typed failures ------------------------------------------------------------------------------


@pytest.mark.parametrize("reply, kind", [
    ({"answer": "only an answer"}, "malformed_output"),
    (act("teleport"), "unknown_tool"),
    (act("lookup"), "bad_arguments"),
    (act("boom"), "tool_error"),
    (act("crash"), "tool_error"),
])
def test_repeated_failures_end_the_rollout_with_a_typed_status(reply, kind):
    lm, _ = scripted(lambda inputs: reply)
    trajectory = Agent(AgentConfig(reanswer=False, max_consecutive_errors=3), lm=lm).run(toy_task())
    steps = trajectory.rollouts[0].steps
    assert trajectory.status == kind and len(steps) == 3 and {s.error_kind for s in steps} == {kind}
    assert trajectory.answer is None and trajectory.rollouts[0].error
    assert "failed" in steps[1].feedback_shown  # the actor was told about the error


def test_a_failing_tool_is_an_observed_error_and_the_agent_recovers():
    def actor(inputs):
        return act("boom") if steps_done(inputs["memory"]) == 0 else act("final_answer", "42")

    lm, _ = scripted(actor)
    trajectory = Agent(AgentConfig(), lm=lm).run(toy_task())
    first = trajectory.rollouts[0].steps[0]
    assert first.error_kind == "tool_error" and first.tool_call.error == "boom is broken"
    assert (first.tool_call.status, first.tool_call.result_chars, first.observation) == ("error", None, None)
    assert "boom is broken" in trajectory.rollouts[0].steps[1].memory_shown
    assert trajectory.status == "answered" and trajectory.answer == "42"


def test_the_actor_reply_schema_is_sent_so_a_local_grammar_can_enforce_it():
    from roma_lab.lm._engine import SUPPORTED_PARAMS

    class SchemaEngine(SeedEngine):  # declares what the local engine declares
        supports_response_schema = True
        supported_params = SUPPORTED_PARAMS

        def complete(self, request):
            self.formats = getattr(self, "formats", []) + [request.config.response_format]
            return super().complete(request)

    engine = SchemaEngine(lambda request: act("final_answer", "42"))
    Agent(AgentConfig(), lm=dspy.LM("scripted/schema", engine=engine, cache=False)).run(toy_task())
    (response_format,) = engine.formats
    assert response_format["schema"]["required"] == ["action", "arguments", "answer"]
    engine.formats = []
    Agent(AgentConfig(thought=True), lm=dspy.LM("scripted/schema", engine=engine, cache=False)).run(toy_task())
    (response_format,) = engine.formats
    assert response_format["schema"]["required"] == ["thought", "action", "arguments", "answer"]  # thought first


def test_the_thought_variant_records_the_thought_and_memory_shows_it():
    lm, engine = scripted(lambda inputs: act(thought=f"thinking {steps_done(inputs['memory'])}")
                          if steps_done(inputs["memory"]) < 1 else act("final_answer", "42", thought="done"))
    trajectory = Agent(AgentConfig(thought=True), lm=lm).run(toy_task())
    steps = trajectory.rollouts[0].steps
    assert [s.thought for s in steps] == ["thinking 0", "done"]
    assert "Step 1: thinking 0" in steps[1].memory_shown
    plain = Agent(AgentConfig(), lm=scripted(count_then_answer(1))[0]).run(toy_task())
    assert [s.thought for s in plain.rollouts[0].steps] == ["", ""]


def test_the_last_step_tells_the_actor_to_answer_now_and_only_the_last():
    from roma_lab.agents._agent import AT_LIMIT, LAST_STEP

    lm, engine = scripted(lambda inputs: act())
    trajectory = Agent(AgentConfig(max_steps=3, reanswer=False), lm=lm).run(toy_task())
    shown = [s.feedback_shown for s in trajectory.rollouts[0].steps]
    assert [LAST_STEP in f for f in shown] == [False, False, True, False] and shown[-1] == AT_LIMIT
    assert LAST_STEP in role_inputs(engine, "actor")[-1]["feedback"]


def test_at_the_step_limit_the_answerer_answers_from_memory_with_no_tool():
    # issue 24's pilot: the 1.5B actor searched at all six steps, the last one included, and no
    # rollout gave an answer; smolagents (the official code's base) asks for one at the limit
    lm, engine = scripted(lambda inputs: act(), answerer=lambda inputs: {"answer": "42"})
    trajectory = Agent(AgentConfig(max_steps=3, reanswer=False), lm=lm).run(toy_task())
    last = trajectory.rollouts[0].steps[-1]
    assert trajectory.status == "answered" and trajectory.answer == "42" and len(trajectory.rollouts[0].steps) == 4
    assert last.action == "final_answer" and last.tool_call is None and [c.role for c in last.calls] == ["answerer"]
    asked = role_inputs(engine, "answerer")
    assert len(asked) == 1 and "Step 3" in asked[0]["memory"] and set(asked[0]) == {"task", "memory"}
    off = Agent(AgentConfig(max_steps=3, reanswer=False, answer_at_limit=False), lm=lm).run(toy_task())
    assert off.status == "step_limit" and len(off.rollouts[0].steps) == 3 and len(role_inputs(engine, "answerer")) == 1
    early = Agent(AgentConfig(reanswer=False), lm=scripted(count_then_answer(1))[0]).run(toy_task())
    assert [c.role for s in early.rollouts[0].steps for c in s.calls] == ["actor", "actor"]  # answered: no answerer


def test_long_observations_are_trimmed_in_memory_but_kept_whole_in_the_trajectory():
    from roma_lab.agents._agent import trim_observation

    text = "\n".join(f"line {i}" for i in range(30))
    trimmed = trim_observation(text)
    assert trimmed.splitlines()[:9] == [f"line {i}" for i in range(9)]
    assert trimmed.splitlines()[-3:] == ["... (19 more lines)", "line 28", "line 29"]
    assert len(trimmed.splitlines()) == 12 and trim_observation("a\nb") == "a\nb"

    class LongEnv(CounterEnv):
        def call(self, name, arguments):
            return text

    lm, _ = scripted(count_then_answer(1))
    trajectory = Agent(AgentConfig(), lm=lm).run(toy_task(env=LongEnv))
    first, second = trajectory.rollouts[0].steps
    assert first.observation == text
    assert "line 20" not in second.memory_shown and "19 more lines" in second.memory_shown


def test_arguments_text_parses_leniently_and_a_missing_required_one_is_typed():
    from roma_lab.agents._agent import parse_arguments

    lookup, count = CounterEnv.tools[1], CounterEnv.tools[0]
    assert parse_arguments('{"query": "ox"}', lookup) == {"query": "ox"}
    assert parse_arguments("{'query': 'ox',}", lookup) == {"query": "ox"}  # repaired like DSPy repairs replies
    assert parse_arguments("ox", lookup) == {"query": "ox"}  # a bare value for a one-argument tool
    assert parse_arguments("[1, 2]", Tool("pair", "", ("a", "b"))) == {}
    assert parse_arguments("anything", count) == {}
    assert parse_arguments("query='a, b', k=3", lookup) == {"query": "a, b", "k": "3"}  # keyword pairs

    def actor(inputs):
        return {"thought": "", "action": "lookup", "arguments": "", "answer": ""}

    lm, _ = scripted(actor)
    trajectory = Agent(AgentConfig(reanswer=False), lm=lm).run(toy_task())
    assert trajectory.status == "bad_arguments" and "needs the argument(s) query" in trajectory.rollouts[0].error


def test_a_call_written_into_the_action_field_is_carried_out():
    def actor(inputs):
        if steps_done(inputs["memory"]) == 0:
            return {"thought": "", "action": "lookup(query='ox')", "arguments": "{}", "answer": ""}
        return {"thought": "", "action": 'final_answer("42")', "arguments": "{}", "answer": ""}

    lm, _ = scripted(actor)
    trajectory = Agent(AgentConfig(), lm=lm).run(toy_task())
    first = trajectory.rollouts[0].steps[0]
    assert (first.action, first.observation) == ("lookup", "definition of ox")
    assert trajectory.answer == "42" and trajectory.status == "answered"


def test_non_string_arguments_reach_the_tool_as_json_text():
    def actor(inputs):
        if steps_done(inputs["memory"]) == 0:
            return act("lookup", arguments={"query": {"word": "ox", "lang": "en"}, "limit": 3})
        return act("final_answer", "42")

    lm, _ = scripted(actor)
    step = Agent(AgentConfig(), lm=lm).run(toy_task()).rollouts[0].steps[0]
    assert step.tool_call.arguments == {"query": '{"word": "ox", "lang": "en"}', "limit": "3"}
    assert step.observation == 'definition of {"word": "ox", "lang": "en"}'
    assert (step.tool_call.status, step.tool_call.result_chars) == ("ok", len(step.observation))


def test_model_errors_step_limit_and_timeout_are_statuses_not_crashes():
    def down(inputs):
        raise RuntimeError("engine down")

    lm, _ = scripted(down)
    assert Agent(AgentConfig(reanswer=False), lm=lm).run(toy_task()).status == "model_error"
    lm, _ = scripted(lambda inputs: act())
    limited = Agent(AgentConfig(reanswer=False, max_steps=4), lm=lm).run(toy_task())
    # four actor steps, then the answerer's (an empty answer leaves the limit the status)
    assert limited.status == "step_limit" and len(limited.rollouts[0].steps) == 5
    timed = Agent(AgentConfig(max_wall_s=1e-9), lm=lm).run(toy_task())
    assert timed.status == "timeout" and timed.rollouts[0].steps == () and not timed.reanswered


# --- models, seeds and the completion cache ------------------------------------------------------


def test_every_role_defaults_to_the_actor_model_and_a_named_role_uses_its_own(monkeypatch):
    lm, _ = scripted(count_then_answer(1), name="actor")
    config = AgentConfig(planning="revise", revise_every=1, memory="summary")
    calls = Agent(config, lm=lm).run(toy_task()).calls_df()
    assert set(calls["role"]) == {"actor", "planner", "reviser", "summarizer"}
    assert set(calls["model"]) == {"scripted/actor"}

    judge, _ = scripted(count_then_answer(1), name="judge")
    monkeypatch.setattr("roma_lab.lm.resolve_lm", lambda name=None, **kw: {"judge-model": judge}[name])
    named = Agent(config.__class__(**{**config.to_dict(), "models": {"summarizer": "judge-model"}}), lm=lm)
    calls = named.run(toy_task()).calls_df()
    by_role = dict(zip(calls["role"], calls["model"], strict=True))
    assert by_role["summarizer"] == "scripted/judge" and by_role["actor"] == "scripted/actor"


def test_run_index_seeds_every_call_when_sampling_and_reaches_the_cache_key(tmp_path):
    from roma_lab.lm import CachingEngine

    inner = SeedEngine(lambda request: act("final_answer", "42"))
    engine = CachingEngine(inner, model_id="scripted", directory=tmp_path)
    lm = dspy.LM("local/scripted", engine=engine, cache=False)
    sampled = Agent(AgentConfig(temperature=0.7), lm=lm)
    for run in (0, 1):
        assert sampled.run(toy_task(), run=run).rollouts[0].seed == run
    assert inner.seeds == [0, 1] and len(list(tmp_path.rglob("*.json"))) == 2  # two runs, two cache entries
    for run in (0, 1):  # a warm rerun repeats no call
        sampled.run(toy_task(), run=run)
    assert inner.seeds == [0, 1]
    greedy = Agent(AgentConfig(temperature=0.0), lm=lm)
    for run in (0, 1):  # greedy decoding ignores seeds; the rollout id keeps the runs apart in the cache
        assert greedy.run(toy_task(), run=run).rollouts[0].seed is None
    assert inner.seeds == [0, 1, None, None] and len(list(tmp_path.rglob("*.json"))) == 4
    assert {r.temperature for r in inner.requests} == {0.7, 0.0} and set(inner.max_tokens) == {512}


# --- plan tips -----------------------------------------------------------------------------------


def graded_trajectories(tmp_path, tasks, answer="41"):
    lm, _ = scripted(lambda inputs: act("final_answer", answer))
    run_agent(AgentConfig(), tasks, out_dir=tmp_path, lm=lm, progress=False)
    from roma_lab.trace import read_trajectories

    return read_trajectories(tmp_path)


def test_tips_are_mined_from_failures_of_the_allowed_split_only(tmp_path):
    train = [toy_task(f"train-{i}", split="train") for i in range(3)]
    test = [toy_task(f"test-{i}", split="test") for i in range(2)]
    trajectories = graded_trajectories(tmp_path, train + test)
    lm, engine = scripted(lambda i: act(), tips_miner=lambda i: {"tips": ["count before answering", "x", "x"]})
    with pytest.raises(SplitLeakError, match="test-0"):
        mine_tips(trajectories, lm=lm)
    tips = mine_tips([t for t in trajectories if t.split == "train"], lm=lm)
    assert tips.tips == ("count before answering", "x") and tips.source_splits == ("train",)
    assert set(tips.source_task_ids) == {"train-0", "train-1", "train-2"}
    (miner_input,) = role_inputs(engine, "tips_miner")
    assert "train-1" in miner_input["failures"] and "test-" not in miner_input["failures"]
    assert tips.error is None
    broken, _ = scripted(lambda i: act(), tips_miner=lambda i: {"tips": "not a list"})
    failed = mine_tips([t for t in trajectories if t.split == "train"], lm=broken)
    assert failed.tips == () and failed.error.startswith("AdapterParseError")  # a typed, visible failure


def test_run_agent_refuses_to_evaluate_the_split_or_tasks_tips_came_from(tmp_path):
    tips = PlanTips(("a tip",), ("train",), ("dev-7",), "scripted")
    lm, _ = scripted(count_then_answer(0))
    with pytest.raises(SplitLeakError):
        run_agent(AgentConfig(tips=tips), [toy_task("x", split="train")], out_dir=tmp_path, lm=lm, progress=False)
    with pytest.raises(SplitLeakError):
        run_agent(AgentConfig(tips=tips), [toy_task("dev-7", split="dev")], out_dir=tmp_path, lm=lm, progress=False)
    rows = run_agent(AgentConfig(tips=tips), [toy_task("dev-1")], out_dir=tmp_path, lm=lm, progress=False)
    assert rows["score"].tolist() == [1.0]


def test_tips_reach_planner_and_actor_and_the_gold_retry_variant_is_labelled():
    tips = PlanTips(("always count first",), ("train",), (), "scripted")
    lm, engine = scripted(count_then_answer(0))
    Agent(AgentConfig(planning="revise", tips=tips), lm=lm).run(toy_task())
    assert "always count first" in role_inputs(engine, "planner")[0]["tips"]
    assert "always count first" in role_inputs(engine, "actor")[0]["tips"]

    def actor(inputs):  # right only when shown the tip
        return act("final_answer", "42" if "always count first" in inputs["tips"] else "41")

    lm, engine = scripted(actor)
    gold = Agent(AgentConfig(tips=tips, tips_usage="official"), lm=lm).run(toy_task())
    assert gold.uses_gold_answers and [r.kind for r in gold.rollouts] == ["main", "tips_retry"]
    assert gold.rollouts[0].tips_shown == () and gold.answer == "42" and "gold check failed" in gold.selection.note
    right = Agent(AgentConfig(tips=tips, tips_usage="official"), lm=lm).run(toy_task(answer="41"))
    assert right.uses_gold_answers and len(right.rollouts) == 1  # passed the gold check: no retry


# --- subtasks through ROMA -----------------------------------------------------------------------


def test_subtask_decomposition_delegates_to_roma_with_the_same_tools():
    plan = [{"goal": "count once", "task_type": "think", "depends_on": []},
            {"goal": "count twice", "task_type": "think", "depends_on": [0]}]

    def actor(inputs):
        if inputs["task"].startswith("count"):  # a subtask: count, then report the counter
            seen = re.findall(r"counter is now (\d+)", inputs["memory"])
            return act("final_answer", seen[-1]) if seen else act()
        return act("final_answer", "42") if "ROMA" in inputs["memory"] else act()

    lm, engine = scripted(actor, atomizer=lambda i: {"is_atomic": False, "task_type": "think"},
                          roma_planner=lambda i: {"subtasks": plan},
                          aggregator=lambda i: {"output": "subtasks done"})
    trajectory = Agent(AgentConfig(subtasks=True), lm=lm).run(toy_task())
    rollout = trajectory.rollouts[0]
    sub = [s for s in rollout.steps if s.subtask]
    assert [s.subtask for s in sub] == ["count once", "count once", "count twice", "count twice"]
    # the second subtask ran after the first, on the same tool state, with its result in context
    assert sub[2].observation == "counter is now 2"
    roma_inputs = [r.inputs for r in engine.requests if r.outputs == ACTOR and r.inputs["task"].startswith("count twice")]
    assert "count once" in roma_inputs[0]["task"]
    assert rollout.delegation["status"] == "completed" and rollout.delegation["output"] == "subtasks done"
    # as a run: ROMA's nodes below the rollout with its decomposer calls (executors' work is the steps),
    # and each subtask's steps below the ROMA node of that subtask
    run = trajectory.as_run()
    grafted = [n for n in run.nodes if n.id.startswith("r0/")]
    assert {c.role for n in grafted for c in n.calls} == {"decomposer:atomizer", "decomposer:planner",
                                                          "decomposer:aggregator"}
    below = {n.goal: [k.id for k in run.children(n.id)] for n in grafted if n.goal.startswith("count")}
    assert below == {"count once": ["r0.1", "r0.2"], "count twice": ["r0.3", "r0.4"]}
    assert run.node("r0/0").parent_id == "r0" and run.node("r0/0").depth == 2
    # ROMA's clock starts at delegation_started_s on the trajectory's: grafted times are moved by it
    later = replace(trajectory, rollouts=(replace(rollout, delegation_started_s=100.0),), wall_s=200.0)
    own = Run.from_json(json.dumps(rollout.delegation)).root
    moved = later.as_run().node("r0/0")
    assert moved.calls[0].started_s == own.calls[0].started_s + 100.0 and moved.ended_s == own.ended_s + 100.0
    main = [s for s in rollout.steps if s.subtask is None]
    assert "Subtask decomposition (ROMA): subtasks done" in main[0].memory_shown and trajectory.answer == "42"


# --- independent work at once (issue 23) ---------------------------------------------------------


def untimed(trajectory):
    """A trajectory's JSON data without what depends on the clock (keys ending in ``_s``)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not k.endswith("_s")}
        return [strip(v) for v in value] if isinstance(value, list) else value
    return strip(json.loads(trajectory.to_json()))


def test_best_of_n_rollouts_and_their_scorer_calls_run_at_once_and_select_as_in_serial():
    from roma_lab.lm import set_max_concurrency

    def score(inputs):  # "good" answers get 9
        return {"analysis": "", "score": 9 if "'good'" in inputs["attempt"] else 2}

    barriers = {"actor": threading.Barrier(3, timeout=10), "scorer": threading.Barrier(3, timeout=10)}
    lock, arrived = threading.Lock(), []

    def gate(role):  # the three rollouts' first actor calls, and the three scorer calls, must meet
        with lock:
            arrived.append(role)
            first = arrived.count(role) <= 3
        if role in barriers and first:
            barriers[role].wait()

    together, _ = best_of_n(["bad", "good", "bad"], selection="score", gate=gate, scorer=score)
    assert together.selection.scores == (2.0, 9.0, 2.0) and together.answer == "good"
    set_max_concurrency("scripted/bon", 1)  # the same run, one call at a time
    try:
        serial, engine = best_of_n(["bad", "good", "bad"], selection="score", scorer=score)
    finally:
        set_max_concurrency("scripted/bon", None)
    assert untimed(together) == untimed(serial)  # rollouts, scores and selection in index order


def test_shared_tool_state_keeps_official_rollouts_one_after_the_other():
    trajectory, _ = best_of_n(["7", "8", "9"], isolation="official")  # the model would allow 8 at once
    observations = [[s.observation for s in r.steps if s.tool_call] for r in trajectory.rollouts]
    assert observations == [["counter is now 1", "counter is now 2"], ["counter is now 3", "counter is now 4"],
                            ["counter is now 5", "counter is now 6"]]


def test_independent_roma_subtasks_run_at_once_and_their_steps_keep_the_plan_order():
    plan = [{"goal": "first part", "task_type": "think", "depends_on": []},
            {"goal": "second part", "task_type": "think", "depends_on": []}]
    second_answered, finished = threading.Event(), []

    def actor(inputs):
        if inputs["task"].startswith("first part"):  # waits for the second: only possible if both run at once
            assert second_answered.wait(10)
            finished.append("first part")
            return act("final_answer", "1")
        if inputs["task"].startswith("second part"):
            finished.append("second part")
            second_answered.set()
            return act("final_answer", "2")
        return act("final_answer", "42")

    lm, _ = scripted(actor, atomizer=lambda i: {"is_atomic": False, "task_type": "think"},
                     roma_planner=lambda i: {"subtasks": plan}, aggregator=lambda i: {"output": "1 and 2"})
    rollout = Agent(AgentConfig(subtasks=True), lm=lm).run(toy_task()).rollouts[0]
    assert finished == ["second part", "first part"]  # the second ended first...
    assert [s.subtask for s in rollout.steps if s.subtask] == ["first part", "second part"]  # ...listed in plan order
    assert rollout.delegation["status"] == "completed"


class RewritingEnv(CounterEnv):
    """CounterEnv whose lookup first rewrites its query with the model (``query_optimization``)."""

    def __init__(self, context):
        super().__init__()
        self.context = context

    def call(self, name, arguments):
        if name == "lookup":
            return f"definition of {self.context.rewrite_query(arguments['query'])}"
        return super().call(name, arguments)


def two_part_plan_agent(actor, **roles):
    plan = [{"goal": "first part", "task_type": "think", "depends_on": []},
            {"goal": "second part", "task_type": "think", "depends_on": []}]
    return scripted(actor, atomizer=lambda i: {"is_atomic": False, "task_type": "think"},
                    roma_planner=lambda i: {"subtasks": plan}, aggregator=lambda i: {"output": "done"}, **roles)


def test_subtasks_at_once_keep_their_own_query_rewrites_and_call_tools_one_at_a_time(monkeypatch):
    def actor(inputs):
        goal = next((g for g in ("first part", "second part") if inputs["task"].startswith(g)), None)
        if goal is None:
            return act("final_answer", "42")
        return act("final_answer", "x") if "Result:" in inputs["memory"] else act("lookup", arguments={"query": goal})

    second_done, lock, inside, most = threading.Event(), threading.Lock(), [0], [0]
    real_use_tool, real_call = Agent._use_tool, RewritingEnv.call
    meet = threading.Barrier(2, timeout=1)

    def use_tool(self, ctx, env, name, arguments):
        out = real_use_tool(self, ctx, env, name, arguments)
        if arguments.get("query") == "second part":
            second_done.set()
        else:  # the first subtask's step collects its calls only after the second's rewrite is made
            assert second_done.wait(10)
        return out

    def call(self, name, arguments):  # two calls inside at once would meet at the barrier
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            meet.wait()
        except threading.BrokenBarrierError:
            pass  # alone, as it should be
        finally:
            with lock:
                inside[0] -= 1
        return real_call(self, name, arguments)

    monkeypatch.setattr(Agent, "_use_tool", use_tool)
    monkeypatch.setattr(RewritingEnv, "call", call)
    lm, _ = two_part_plan_agent(actor, query_rewriter=lambda i: {"improved_query": i["query"] + " rewritten"})
    task = replace(toy_task(), environment=RewritingEnv)
    rollout = Agent(AgentConfig(subtasks=True, query_optimization="reflect"), lm=lm).run(task).rollouts[0]
    lookups = [s for s in rollout.steps if s.subtask and s.tool_call]
    assert [s.subtask for s in lookups] == ["first part", "second part"]
    for step in lookups:  # each step holds its own rewrite, never the other subtask's
        assert [c.role for c in step.calls] == ["actor", "query_rewriter"]
        assert step.calls[1].inputs["query"] == step.subtask
    assert most[0] == 1  # the shared tool state saw one call at a time
    assert rollout.delegation["status"] == "completed"


def test_every_request_names_its_rollout_and_judges_name_the_run():
    from roma_lab.lm import current_rollout

    seen, lock = [], threading.Lock()

    def gate(role):
        with lock:
            seen.append((role, current_rollout()))

    trajectory, _ = best_of_n(["7", "8"], selection="score", gate=gate)
    assert trajectory.run == 0
    assert sorted({(role, rid) for role, rid in seen}) == [("actor", "0:0"), ("actor", "0:1"), ("scorer", "0")]


# --- the repeat guard ----------------------------------------------------------------------------


class LookupEnv(CounterEnv):
    """CounterEnv whose ``lookup`` is idempotent (a fixed dictionary): the repeat guard may skip it."""

    tools = (Tool("count", "add one to the counter"), Tool("lookup", "look a word up", ("query",), idempotent=True))

    def __init__(self):
        super().__init__()
        self.lookups = 0

    def call(self, name, arguments):
        self.lookups += name == "lookup"
        return super().call(name, arguments)


def lookup_then_answer(repeats, answer="42"):
    """The actor looks up "x" ``repeats`` + 1 times, then answers."""
    return lambda inputs: (act("lookup", arguments={"query": "x"}) if steps_done(inputs["memory"]) <= repeats
                           else act("final_answer", answer))


def test_an_identical_idempotent_call_is_not_run_again_the_actor_is_told_and_the_row_counts_it():
    envs = []

    def task():
        return toy_task(env=lambda: envs.append(LookupEnv()) or envs[-1])

    lm, engine = scripted(lookup_then_answer(1), answerer=lambda inputs: {"answer": "42"})
    trajectory = Agent(AgentConfig(reanswer=False), lm=lm).run(task())
    steps = trajectory.rollouts[0].steps
    assert [s.error_kind for s in steps] == [None, "repeated_call", None] and trajectory.answer == "42"
    assert envs[-1].lookups == 1 and trajectory.n_tool_calls == 1 and trajectory.n_repeated_calls == 1
    assert "already called with these arguments at step 1" in steps[1].error
    assert "definition of x" in steps[1].error  # the earlier result, kept in the step
    # the repeat ends the rollout: the answerer is asked at once, shown the step the guard refused
    assert len(role_inputs(engine, "actor")) == 2 and steps[2].calls[0].role == "answerer"
    assert "already called" in role_inputs(engine, "answerer")[0]["memory"]
    facts = trajectory.facts()  # what a table reads of the trajectory beside its row
    assert facts["repeated_calls"] == 1 and facts["tool_calls"] == 1

    lm, _ = scripted(lookup_then_answer(1))
    unguarded = Agent(AgentConfig(reanswer=False, repeat_guard=False), lm=lm).run(task())
    assert envs[-1].lookups == 2 and unguarded.n_repeated_calls == 0


def test_a_stateful_tool_and_new_arguments_are_never_guarded():
    lm, _ = scripted(count_then_answer(3))  # count() three times: the counter moves each time
    counted = Agent(AgentConfig(reanswer=False), lm=lm).run(toy_task(env=LookupEnv))
    assert counted.n_tool_calls == 3 and counted.n_repeated_calls == 0
    queries = iter(["a", "b", "a"])  # "a" again after "b" is a repeat; "b" is not
    lm, _ = scripted(lambda inputs: act("lookup", arguments={"query": next(queries)})
                     if steps_done(inputs["memory"]) < 3 else act("final_answer", "42"))
    mixed = Agent(AgentConfig(reanswer=False, answer_at_limit=False), lm=lm).run(toy_task(env=LookupEnv))
    assert [s.error_kind for s in mixed.rollouts[0].steps] == [None, None, "repeated_call"]


def test_a_rollout_stuck_repeating_is_stopped_and_asked_for_its_answer():
    lm, engine = scripted(lookup_then_answer(99), answerer=lambda inputs: {"answer": "from memory"})
    stuck = Agent(AgentConfig(reanswer=False, max_steps=10, max_consecutive_errors=3), lm=lm).run(
        toy_task(env=LookupEnv))
    kinds = [s.error_kind for s in stuck.rollouts[0].steps]
    # one lookup, one repeat, then the answerer: no error steps burnt up to the error limit, no six more steps
    assert kinds == [None, "repeated_call", None]  # before: [None, "repeated_call" x 3, None]
    assert stuck.answer == "from memory" and stuck.status == "answered"
    assert len(role_inputs(engine, "actor")) == 2
