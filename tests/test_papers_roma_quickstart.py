"""Notebook 01's quickstart: the goal chosen by a stated structural rule, its corpus, its checks and note."""

import pytest

from roma_lab.trace import Run
from roma_lab.lm import script_reply, scripted_lm
from roma_lab.papers.roma import (
    QUICKSTART_GOALS,
    QUICKSTART_RULE,
    quickstart_checks,
    quickstart_corpus,
    quickstart_notes,
    quickstart_rule,
    quickstart_usage_df,
    run_quickstart,
)
from roma_lab.results import read_table, write_table


def lm_for(**kw):
    """The default script, but the atomizer calls goals starting with ``atomic`` atomic; ``outputs``
    maps a text in a subtask's goal to its executor output; ``answer`` is the aggregator's output."""
    return scripted_lm(_respond(**kw))


def _respond(atomic=(), outputs=None, answer=None):
    def respond(request):
        reply = script_reply(request)
        goal = request.inputs.get("goal", "")
        if "is_atomic" in reply:
            reply["is_atomic"] = any(goal.startswith(g) for g in atomic)
        if outputs and "output" in reply and "subtask_results" not in request.inputs:
            reply["output"] = next((text for key, text in outputs.items() if key in goal), reply["output"])
        if answer is not None and "subtask_results" in request.inputs:
            reply["output"] = answer
        return reply

    return respond


def test_the_first_goal_planned_at_the_root_is_kept(tmp_path):
    first, second, third = (g.goal for g in QUICKSTART_GOALS[:3])
    run = run_quickstart(None, tmp_path, lm=lm_for(atomic=(first, second)))
    candidates = read_table(tmp_path, "candidates")
    assert list(candidates["goal"]) == [first, second, third]  # stops at the first planned one
    assert list(candidates["root_planned"]) == [False, False, True]
    assert list(candidates["kept"]) == [False, False, True] and set(candidates["chosen_by"]) == {"rule"}
    assert run.goal == third and Run.from_json((tmp_path / "run.json").read_text()) == run
    checks = read_table(tmp_path, "checks").set_index("check")["value"]
    assert str(checks["root planned (not atomic)"]) == "True" and str(checks["subtasks"]) == "2"
    assert str(checks["dependencies between subtasks"]) == "1"


def test_when_the_model_plans_no_goal_the_first_runs_again_with_its_root_planned(tmp_path):
    lm = lm_for(atomic=tuple(g.goal for g in QUICKSTART_GOALS))
    run = run_quickstart(None, tmp_path, lm=lm)
    candidates = read_table(tmp_path, "candidates")
    n = len(QUICKSTART_GOALS)
    assert list(candidates["goal"]) == [g.goal for g in QUICKSTART_GOALS] + [QUICKSTART_GOALS[0].goal]
    assert list(candidates["atomizer"]) == ["model"] * n + ["skipped at the root"]
    assert list(candidates["root_planned"]) == [False] * n + [True]
    assert list(candidates["kept"]) == [False] * n + [True]
    assert run.goal == QUICKSTART_GOALS[0].goal and len(run.children(run.root.id)) == 2
    # the model still plans, executes and aggregates; only the root's atomizer was not asked
    roles = [c.role for c in run.root.calls]
    assert "atomizer" not in roles and "planner" in roles and "aggregator" in roles and run.settings.plan_root
    assert list(candidates["facts"]) == [len(g.facts) for g in QUICKSTART_GOALS] + [len(QUICKSTART_GOALS[0].facts)]
    assert not candidates["facts_stated"].any()  # the scripted replies state no figure
    note = quickstart_notes(read_table(tmp_path, "checks"), candidates)
    assert "split the goal into 2 subtasks" in note
    assert f"called {n} of {n} goal(s) tried atomic" in note and f"0 of the {sum(len(g.facts) for g in QUICKSTART_GOALS)}" in note


def test_the_note_says_when_a_run_is_a_single_node():
    import pandas as pd

    checks = pd.DataFrame({"check": ["root planned (not atomic)", "plan warnings", "nodes not completed"],
                           "value": ["False", "0", "0"]})
    assert "single node" in quickstart_notes(checks)


def test_a_given_goal_is_run_as_given(tmp_path):
    run = run_quickstart("say hello", tmp_path, lm=lm_for())
    candidates = read_table(tmp_path, "candidates")
    assert list(candidates["goal"]) == ["say hello"] and list(candidates["chosen_by"]) == ["given"]
    assert run.goal == "say hello" and list(read_table(tmp_path, "checks")["check"])[-1] == "nodes not completed"
    assert list(candidates["atomizer"]) == ["model"]


def test_a_given_atomic_goal_stays_one_node(tmp_path):
    run = run_quickstart("say hello", tmp_path, lm=lm_for(atomic=("say hello",)))
    candidates = read_table(tmp_path, "candidates")
    assert list(candidates["atomizer"]) == ["model"] and list(candidates["root_planned"]) == [False]
    assert len(run.nodes) == 1  # no fallback: a goal given is run as given


def test_checks_and_note_come_from_the_run(tmp_path):
    goal = QUICKSTART_GOALS[0]
    run = run_quickstart(None, tmp_path, lm=lm_for(outputs={"first half": "Seiko: 1964.", "second half": "Zildjian 1618"},
                                                   answer="They are 346 years apart (1964 and 16180)."))
    checks = read_table(tmp_path, "checks")
    value = dict(zip(checks["check"], checks["value"].astype(str), strict=True))
    assert value["a subtask output states 1964"] == value["a subtask output states 1618"] == "True"
    assert value["a subtask output states 346"] == "False"
    assert value["the final answer states 1964"] == value["the final answer states 346"] == "True"
    assert value["the final answer states 1618"] == "False"  # 16180 is not 1618
    note = quickstart_notes(checks, read_table(tmp_path, "candidates"))
    assert "states 1964, 346" in note and "so 1618 got lost" in note and run.goal == goal.goal
    assert "atomizer called" not in note  # the model planned the first goal: nothing to say about atomic runs
    assert list(read_table(tmp_path, "candidates")["facts_stated"]) == [2]


def test_the_usage_table_shows_seconds_to_a_tenth_and_its_file_keeps_them_as_measured(tmp_path):
    """Issue 52: notebook 01 showed 33.566707 seconds."""
    import pandas as pd

    usage = pd.DataFrame({"component": ["planner", "executor", "total"], "calls": [1, 2, 3],
                          "latency_s": [0.04, 33.526707, 33.566707], "model": "m"})
    write_table(usage, tmp_path, "usage")
    shown = quickstart_usage_df(tmp_path)
    assert list(shown["latency_s"]) == [0.0, 33.5, 33.6]
    assert list(read_table(tmp_path, "usage")["latency_s"]) == [0.04, 33.526707, 33.566707]  # the data stays exact
    assert shown.drop(columns="latency_s").equals(usage.drop(columns="latency_s"))


def test_the_corpus_holds_every_candidates_looked_up_facts():
    corpus = quickstart_corpus()
    assert len(corpus) == 99 and all(doc.startswith("Q: ") and " A: " in doc for doc in corpus)
    for goal in QUICKSTART_GOALS:
        for fact in goal.facts[:2]:  # the two look-ups; the third fact is arithmetic on them
            assert any(doc.endswith(f" A: {fact}") for doc in corpus), (goal.goal, fact)


@pytest.mark.parametrize("spans", [[(0, 2), (1, 3)], [(0, 1), (1, 2)]], ids=["overlap", "back-to-back"])
def test_concurrency_check_counts_overlapping_subtasks(spans):
    from dataclasses import replace

    from roma_lab.controller import Roma

    run = Roma(lm=scripted_lm(), max_depth=1, max_concurrency=2).run("x")
    subtasks = run.children(run.root.id)
    nodes = tuple(replace(n, created_s=0.0, started_s=spans[subtasks.index(n)][0], ended_s=spans[subtasks.index(n)][1])
                  if n in subtasks else replace(n, ended_s=max(n.ended_s, 3.0)) if n.id == run.root.id else n
                  for n in run.nodes)
    checks = quickstart_checks(_with(run, nodes))
    assert dict(zip(checks["check"], checks["value"], strict=True))["most subtasks running at once"] == (
        "2" if spans[0][1] > spans[1][0] else "1")


def _with(run, nodes):
    return Run(goal=run.goal, status=run.status, output=run.output, nodes=nodes, wall_s=max(run.wall_s, 3.0),
               settings=run.settings)


def test_plan_root_plans_a_given_goal_the_model_calls_atomic_and_says_it_is_not_graded(tmp_path):
    goal = "Find the year the Eiffel Tower was completed and the year the Berlin Wall fell, then compute the gap."
    run = run_quickstart(goal, tmp_path, lm=lm_for(atomic=(goal,)), plan_root=True)
    candidates = read_table(tmp_path, "candidates")
    assert list(candidates["goal"]) == [goal] and list(candidates["atomizer"]) == ["skipped at the root"]
    assert list(candidates["root_planned"]) == [True] and len(run.children(run.root.id)) == 2
    named = {m for stem in ("usage", "candidates", "checks") for m in read_table(tmp_path, stem)["model"]}
    assert len(named) == 1 and "test double, not a measurement" in named.pop()  # each table names its model
    note = quickstart_notes(read_table(tmp_path, "checks"), candidates)
    assert note.startswith("**Not graded**") and "0 of the 0" not in note
    assert quickstart_rule(goal, True).startswith("the goal as given; the root plans without asking the atomizer")
    assert quickstart_rule(None, False) == QUICKSTART_RULE


def test_plan_root_with_the_default_goal_runs_the_first_goal_once(tmp_path):
    run = run_quickstart(None, tmp_path, lm=lm_for(atomic=tuple(g.goal for g in QUICKSTART_GOALS)), plan_root=True)
    candidates = read_table(tmp_path, "candidates")
    assert list(candidates["goal"]) == [QUICKSTART_GOALS[0].goal] and list(candidates["chosen_by"]) == ["rule"]
    assert run.goal == QUICKSTART_GOALS[0].goal and len(run.children(run.root.id)) == 2
    assert "Not graded" not in quickstart_notes(read_table(tmp_path, "checks"), candidates)  # its facts are checked

