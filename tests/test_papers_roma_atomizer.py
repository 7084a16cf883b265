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
