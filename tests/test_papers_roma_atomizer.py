"""The atomizer's fixed goal set (issue 26): 40 goals written before any model saw them, split
train / held-out, and the score of an atomizer on them."""

from collections import Counter

import pytest
from dspy import Prediction

from roma_lab.controller import Atomizer
from roma_lab.lm import script_reply, scripted_lm
from roma_lab.papers.roma import atomizer_goals, atomizer_summary, score_atomizer


def test_the_goal_set_is_balanced_and_the_splits_share_no_goal():
    train, heldout = atomizer_goals("train"), atomizer_goals("heldout")
    assert Counter(g.atomic for g in train) == {True: 12, False: 12}
    assert Counter(g.atomic for g in heldout) == {True: 8, False: 8}
    assert not {g.goal for g in train} & {g.goal for g in heldout}
    assert all(g.why for g in train + heldout)
    with pytest.raises(ValueError, match="unknown split 'test'"):
        atomizer_goals("test")


def test_an_atomizer_that_calls_everything_atomic_gets_every_multi_part_goal_wrong():
    goals = atomizer_goals("heldout")
    scores = score_atomizer(lambda goal, context: Prediction(is_atomic=True, task_type="think"), goals)
    assert scores.groupby("kind")["right"].mean().to_dict() == {"atomic": 1.0, "multi-part": 0.0}
    summary = atomizer_summary(scores).set_index("subset")["value"]
    assert summary.to_dict() == {"atomic": 1.0, "multi-part": 0.0, "all": 0.5}


def test_a_failing_call_is_a_wrong_row_with_its_error():
    def broken(goal, context):
        raise RuntimeError("model went away")

    scores = score_atomizer(broken, atomizer_goals("train")[:2])
    assert not scores["right"].any() and scores["error"].str.contains("model went away").all()


def test_the_default_dspy_atomizer_is_asked_with_no_context():
    asked = []

    def respond(request):
        asked.append(request.inputs)
        return script_reply(request) | {"is_atomic": "then" not in request.inputs["goal"]}

    scores = score_atomizer(Atomizer(), atomizer_goals("heldout"), lm=scripted_lm(respond))
    assert all(a["context"] == "" for a in asked) and len(asked) == 16
    assert scores["said_atomic"].notna().all()


# ---- the protocol: before, GEPA+ on train only, after on held-out (design/atomizer.md) ----------

import json  # noqa: E402

import dspy  # noqa: E402

from test_optimizer import scripted_lm as named_scripted_lm  # noqa: E402

from roma_lab.papers.roma import atomizer_metric, atomizer_study, search_halves  # noqa: E402
from roma_lab.papers.roma._atomizer import AtomizerGoal  # noqa: E402

MARK = "Goals joined by then or and that need another part's result are not atomic."


def _atomizer_respond(asked):
    def respond(request):
        goal = request.inputs["goal"]
        asked.append(goal)
        multi = MARK in request.system and any(w in goal for w in (" then ", " and "))
        return {"is_atomic": not multi, "task_type": "think"}
    return respond


def _study_lms(asked, shown):
    def reflect(request):
        shown.append(json.dumps(request.inputs))
        return {"new_instruction": request.inputs["current_instruction"] + " " + MARK}

    def judge(request):
        shown.append(json.dumps(request.inputs))
        return {"score": 0.8}

    def merge(request):
        shown.append(json.dumps(request.inputs))
        return {"merged_instruction": json.loads(request.inputs["ranked_proposals"])[0]}

    return {"lm": named_scripted_lm("task", _atomizer_respond(asked))[0],
            "reflection_lms": [named_scripted_lm("reflect", reflect)[0]], "reflection_temperatures": [1.0],
            "judge_lm": named_scripted_lm("judge", judge)[0], "merger_lm": named_scripted_lm("merge", merge)[0],
            "k": 2, "n": 2, "max_metric_calls": 40, "seed": 0}


def test_search_halves_alternate_within_each_kind_in_file_order():
    train = atomizer_goals("train")
    reflect, select = search_halves(train)
    for atomic in (True, False):
        kind = [g for g in train if g.atomic is atomic]
        assert [g for g in reflect if g.atomic is atomic] == kind[0::2]
        assert [g for g in select if g.atomic is atomic] == kind[1::2]
    assert len(reflect) == len(select) == 12


def test_the_metric_scores_the_kind_and_feeds_back_the_goals_reason():
    gold = dspy.Example(goal="g", context="", atomic=False, why="needs two look-ups")
    wrong = atomizer_metric(gold, Prediction(is_atomic=True, task_type="think"))
    assert wrong.score == 0.0 and "needs two look-ups" in wrong.feedback and "should be false" in wrong.feedback
    assert atomizer_metric(gold, Prediction(is_atomic=False, task_type="think")).score == 1.0
    unread = atomizer_metric(gold, Prediction(is_atomic="no", task_type="think"))
    assert unread.score == 0.0 and "could be read" in unread.feedback


def test_the_study_improves_on_train_and_never_shows_a_held_out_goal_to_the_search(tmp_path):
    asked, shown = [], []
    tables = atomizer_study(tmp_path, **_study_lms(asked, shown))
    heldout = {g.goal for g in atomizer_goals("heldout")}
    # held-out goals reach the task model only in the two scorings (before, after), 16 each
    assert sum(goal in heldout for goal in asked) == 32
    assert not any(goal in text for goal in heldout for text in shown)
    summary = tables["atomizer_summary"].set_index(["condition", "subset"])["value"]
    assert summary[("default", "multi-part")] == 0.0
    assert summary[("gepa+", "multi-part")] > 0.0
    instructions = tables["atomizer_instructions"].set_index("condition")["instruction"]
    assert MARK in instructions["gepa+"] and MARK not in instructions["default"]
    paired = tables["atomizer_paired"].set_index("subset")
    assert paired.loc["multi-part", "value"] == pytest.approx(summary[("gepa+", "multi-part")])
    assert (tables["atomizer_scores"]["model"] == "scripted/task (test double, not a measurement)").all()
    assert {p.name for p in tmp_path.glob("*.csv")} >= {f"{t}.csv" for t in tables}


def test_the_study_takes_its_sizes_from_the_goal_set():
    with pytest.raises(TypeError, match="n_train from the goal set"):
        atomizer_study("unused", n_train=3)
    with pytest.raises(ValueError, match="goals_per_kind"):
        atomizer_study("unused", goals_per_kind=1)


def test_goals_per_kind_keeps_the_first_goals_of_each_kind(tmp_path):
    asked, shown = [], []
    atomizer_study(tmp_path, goals_per_kind=2, **(_study_lms(asked, shown) | {"max_metric_calls": 12}))
    heldout = atomizer_goals("heldout")
    first = {g.goal for g in [g for g in heldout if g.atomic][:2] + [g for g in heldout if not g.atomic][:2]}
    assert {goal for goal in asked if goal in {g.goal for g in heldout}} == first
    assert isinstance(heldout[0], AtomizerGoal)


def test_the_plot_draws_one_bar_per_condition_and_kind(tmp_path):
    from roma_lab.papers.roma import plot_atomizer

    asked, shown = [], []
    tables = atomizer_study(tmp_path, goals_per_kind=2, **(_study_lms(asked, shown) | {"max_metric_calls": 12}))
    figure = plot_atomizer(tables["atomizer_summary"])
    assert len(figure.axes[0].patches) == 2 * 3  # default and gepa+ x atomic, multi-part, all
    with pytest.raises(ValueError, match="no atomizer rows"):
        plot_atomizer(tables["atomizer_summary"].iloc[0:0])
