"""Graders a researcher picks by name for their own tasks (issue 25): exact, quasi-exact, numeric,
contains, a wrapped function and the judge, and each one's vote key."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from roma_lab import bench
from roma_lab.bench import (
    GRADER_NAMES,
    CallableGrader,
    ContainsGrader,
    ExactGrader,
    GaiaGrader,
    Grade,
    Item,
    NumericGrader,
    SimpleQAGrader,
    grader_named,
)

from scripted_judge import Scripted


def item(gold, item_id="q1"):
    return Item(benchmark="mine", item_id=item_id, question="What is it?", answer=gold)


def verdict(grader, prediction, gold):
    return grader(item(gold), prediction).label


def outcome(grade):
    # what a vote must not tell apart: the verdict, the score, and whether grading failed
    return grade.label, None if math.isnan(grade.score) else grade.score, grade.error is None


def assert_error_row(grade, grader, *fragments):
    assert grade.label is None and math.isnan(grade.score) and grade.grader == grader.name
    assert grade.error is not None and all(f in grade.error for f in fragments), grade.error


# --- exact vs quasi-exact: the near misses --------------------------------------------------------

NEAR_MISSES = [
    # (prediction, gold, GAIA's verdict: graders/gaia/NOTES.md)
    ("Turku.", "Turku", True), ("turku", "Turku", True), ('"Turku"', "Turku", True),  # text: case, punctuation go
    ("34,122", "34122", True),  # a number gold: the prediction's commas are deleted
    ("34122", "34,122", False),  # a gold with a comma is the list ["34", "122"]: one element is not two
    ("-44.2%", "-44.2", True),  # a number gold: the prediction's % is deleted
    ("-44.2", "-44.2%", True),  # a gold with % is text: "442" both
]


@pytest.mark.parametrize("prediction, gold, gaia", NEAR_MISSES)
def test_exact_misses_every_near_miss_and_quasi_exact_follows_gaia(prediction, gold, gaia):
    assert verdict(ExactGrader(), prediction, gold) == "INCORRECT"
    assert verdict(GaiaGrader(), prediction, gold) == ("CORRECT" if gaia else "INCORRECT")


def test_exact_grader_trims_whitespace_only_and_moved_to_bench():
    from roma_lab.agents import ExactGrader as from_agents

    assert from_agents is ExactGrader
    grade = ExactGrader()(item("Turku"), SimpleNamespace(output="  Turku\n"))
    assert (grade.label, grade.score, grade.grader) == ("CORRECT", 1.0, "exact-match")
    assert verdict(ExactGrader(), "Turku", "Turku ") == "CORRECT"


# --- numeric ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("prediction, gold, tolerance, relative, correct", [
    ("3.14159", "3.14", 0.01, False, True),
    ("3.14159", "3.14", 0.001, False, False),
    ("3.5", "3", 0.5, False, True),  # the bound is inclusive
    ("201", "200", 0.01, True, True),  # |1| <= 0.01 * 200
    ("201", "200", 0.01, False, False),  # the same tolerance taken absolutely
    ("2.03", "2", 0.01, True, False),  # |0.03| > 0.01 * 2
    ("1,322.77", "1322.77", 0.0, False, True),
    ("$1,322.77", "1,322.77", 0.0, False, True),  # the gold is read as GAIA reads it too
    ("12%", "12", 0.0, False, True),
    ("-5", "5", 0.5, False, False),  # the sign matters
    ("-5", "5", 1.0, True, False),
    ("-5", "-5.0", 0.0, False, True),
    ("17 km", "17", 1.0, False, False),  # no number in the prediction
    ("five", "5", 1.0, False, False),
    ("inf", "5", 1.0, True, False),
    ("", "5", 1.0, False, False),
    ("0", "0", 0.01, True, True),
    ("0.001", "0", 0.01, True, False),  # relative to a gold 0: only 0 itself
])
def test_numeric_grader_within_tolerance(prediction, gold, tolerance, relative, correct):
    grader = NumericGrader(tolerance, relative)
    grade = grader(item(gold), prediction)
    assert (grade.label, grade.score, grade.error) == ("CORRECT" if correct else "INCORRECT", float(correct), None)
    assert grade.grader == grader.name


def test_numeric_grader_records_the_number_it_read():
    assert NumericGrader()(item("1322.77"), "$1,322.77").raw == "1322.77"


@pytest.mark.parametrize("gold", ["about 5", "", "5 km", "inf", "nan", "1-2"])
def test_numeric_grader_an_unreadable_gold_is_a_grader_error(gold):
    grader = NumericGrader(0.5)
    assert_error_row(grader(item(gold, item_id="g7"), "5"), grader, "GradingError", "g7", "not a number")


def test_numeric_grader_an_answer_too_long_to_be_a_number_is_wrong_with_the_reason():
    # issue 41: a 5,000-digit answer raised a raw ValueError (an int), or was read as inf in silence
    from roma_lab.bench._graders import MAX_NUMBER_CHARS

    grader = NumericGrader(0.5)
    for prediction, chars in (("1" * 5000, 5000), (10**5000, 5001), (SimpleNamespace(output="-" + "9" * 4999), 5000)):
        grade = grader(item("5"), prediction)
        assert (grade.label, grade.score, grade.error) == ("INCORRECT", 0.0, None)
        assert grade.raw == f"answer of {chars:,} characters, more than the 1,000 a number may have: not read as a number"
        assert dict(grade.details) == {"answer_chars": float(chars)}
    assert MAX_NUMBER_CHARS == 1000
    assert grader(item("5"), "0" * 995 + "5.000").label == "CORRECT"  # 1,000 characters: still a number
    gold = 10**5000 - 1  # 5,000 nines
    assert_error_row(grader(item(gold, item_id="g8"), "5"), grader, "GradingError", "g8", "5,000 characters")


def test_numeric_grader_name_says_its_tolerance():
    assert NumericGrader(0.01, relative=True).name == "numeric(tol=0.01, relative)"
    assert NumericGrader(0.01).name == "numeric(tol=0.01)"
    assert NumericGrader().name == NumericGrader(0).name == "numeric(tol=0.0)"


@pytest.mark.parametrize("tolerance", [-0.1, math.nan, math.inf, True, "0.1"])
def test_numeric_grader_rejects_a_bad_tolerance(tolerance):
    with pytest.raises(ValueError, match="tolerance"):
        NumericGrader(tolerance)


# --- contains ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("prediction, gold, correct", [
    ("I believe it is PARIS, in France.", "Paris", True),
    ("new\n  YORK city", "New York", True),  # whitespace collapsed on both sides
    ("Lyon", "Paris", False),
    ("", "Paris", False),
    ("Pa ris", "Paris", False),  # collapsed, not removed
    ("42", "4", True),  # a substring, not whole words
])
def test_contains_grader(prediction, gold, correct):
    grade = ContainsGrader()(item(gold), prediction)
    assert (grade.label, grade.score, grade.error, grade.grader) == (
        "CORRECT" if correct else "INCORRECT", float(correct), None, "contains")


def test_contains_grader_case_sensitive():
    grader = ContainsGrader(case_sensitive=True)
    assert grader.name == "contains(case-sensitive)"
    assert verdict(grader, "it is PARIS", "Paris") == "INCORRECT"
    assert verdict(grader, "it is  Paris", "Paris") == "CORRECT"


def test_contains_grader_an_empty_gold_is_a_grader_error():
    assert_error_row(ContainsGrader()(item("  "), "anything"), ContainsGrader(), "GradingError", "empty gold")


# --- a wrapped function -------------------------------------------------------------------------------


def test_callable_grader_bool_gets_the_prediction_text_then_the_gold():
    seen = []

    def same_city(prediction, gold):
        seen.append((prediction, gold))
        return prediction.strip().lower() == gold.lower()

    grader = CallableGrader(same_city)
    assert grader(item("Turku"), SimpleNamespace(output=" turku")).label == "CORRECT"
    grade = grader(item("Turku"), "Oulu")
    assert (grade.label, grade.score, grade.error) == ("INCORRECT", 0.0, None)
    assert seen == [(" turku", "Turku"), ("Oulu", "Turku")]


def test_callable_grader_float_is_the_score_without_a_label():
    grade = CallableGrader(lambda p, g: 0.25, name="quarter")(item("x"), "y")
    assert (grade.label, grade.score, grade.error, grade.grader) == (None, 0.25, None, "quarter")
    assert CallableGrader(lambda p, g: np.float64(1.0))(item("x"), "y").score == 1.0


def test_callable_grader_passes_a_grade_through():
    made = Grade(label="PARTIAL", score=0.5, grader="mine", details={"f1": 0.5})
    calls = []

    def grade_fn(item, prediction) -> Grade:
        calls.append((item, prediction))
        return made

    def string_annotated(item, prediction) -> "Grade":  # as under `from __future__ import annotations`
        return made

    prediction, task = SimpleNamespace(output="y", steps=3), item("x")
    assert CallableGrader(grade_fn)(task, prediction) is made
    assert calls == [(task, prediction)]  # called with the item and the prediction itself
    assert CallableGrader(string_annotated)(task, prediction) is made
    assert CallableGrader(lambda p, g: made)(task, "y") is made  # a text function's Grade too


@pytest.mark.parametrize("returned, type_name", [
    ("yes", "str"), (1, "int"), (None, "NoneType"), (1.5, "float"), (-0.1, "float"), (math.nan, "float"),
    (np.bool_(True), "numpy."),
])
def test_callable_grader_another_return_is_an_error_naming_its_type(returned, type_name):
    grader = CallableGrader(lambda p, g: returned, name="odd")
    assert_error_row(grader(item("x"), "y"), grader, "GradingError", f"odd returned {type_name}")


def test_callable_grader_a_raising_function_is_an_error_row():
    def broken(prediction, gold):
        return float(prediction) / 0

    grader = CallableGrader(broken)
    assert_error_row(grader(item("1"), "1"), grader, "ZeroDivisionError")


def test_callable_grader_names():
    def close_enough(p, g):
        return True

    class Judge:
        def __call__(self, p, g):
            return True

    assert CallableGrader(close_enough).name == (
        "callable:test_callable_grader_names.<locals>.close_enough")
    assert CallableGrader(Judge()).name == "callable:test_callable_grader_names.<locals>.Judge"
    assert CallableGrader(close_enough, name="mine").name == "mine"
    assert CallableGrader(close_enough, name="mine")(item("x"), "y").grader == "mine"
    with pytest.raises(TypeError, match="callable"):
        CallableGrader("exact")


# --- grader_named ---------------------------------------------------------------------------------------


def test_grader_named_every_name():
    judge = Scripted()
    assert GRADER_NAMES == ("exact", "quasi-exact", "gaia", "numeric", "contains", "judge")
    assert grader_named("exact") == ExactGrader()
    assert grader_named("quasi-exact") == grader_named("gaia") == GaiaGrader()
    assert grader_named("numeric") == NumericGrader()
    assert grader_named("numeric", tolerance=0.01, relative=True) == NumericGrader(0.01, relative=True)
    assert grader_named("contains") == ContainsGrader()
    named = grader_named("judge", judge=judge)
    assert named == SimpleQAGrader(judge, template="simpleqa")
    assert named.name == "simpleqa-official-template(judge=scripted)"
    assert bench.grader_named is grader_named and bench.GRADER_NAMES is GRADER_NAMES


def test_grader_named_takes_graders_and_functions():
    grader = NumericGrader(0.5)
    assert grader_named(grader) is grader

    def same(p, g):
        return p == g

    assert grader_named(same) == CallableGrader(same)
    with pytest.raises(TypeError, match="a grader name"):
        grader_named(ExactGrader)  # the class, not a grader
    with pytest.raises(TypeError):
        grader_named(3)


def test_grader_named_unknown_name_lists_the_names():
    with pytest.raises(ValueError, match="unknown grader 'fuzzy'") as raised:
        grader_named("fuzzy")
    assert all(n in str(raised.value).split("known names: ")[1] for n in GRADER_NAMES)


def test_grader_named_judge_needs_a_judge():
    with pytest.raises(ValueError, match="judge="):
        grader_named("judge")


@pytest.mark.parametrize("name, options", [
    ("exact", {"tolerance": 0.01}), ("contains", {"relative": True}), ("gaia", {"judge": Scripted()}),
    ("numeric", {"judge": Scripted()}), (len, {"tolerance": 1.0}),
])
def test_grader_named_an_option_the_grader_does_not_take_is_an_error(name, options):
    with pytest.raises(ValueError, match="only"):
        grader_named(name, **options)


# --- the judge shows its prompt ---------------------------------------------------------------------


@pytest.mark.parametrize("template", ["simpleqa", "sealqa"])
def test_judge_prompt_template_is_what_the_judge_is_sent(template):
    judge = Scripted("A")
    grader = SimpleQAGrader(judge, template=template)
    assert "{predicted_answer}" in grader.prompt_template and "{target}" in grader.prompt_template
    grader(Item("simpleqa", "q1", "Capital of Finland?", "Helsinki"), "Helsinki")
    assert judge.calls == [(grader.prompt_template.format(
        question="Capital of Finland?", target="Helsinki", predicted_answer="Helsinki"), None)]


def test_the_two_judge_templates_differ():
    assert SimpleQAGrader(Scripted()).prompt_template != SimpleQAGrader(Scripted(), "sealqa").prompt_template


# --- vote keys: one key, one grade against every gold ----------------------------------------------

PREDICTIONS = ["17", " 17", "17.0", "$17", "17%", "1,7", "-17", "17 km", "seventeen", "", "inf", "nan",
               "3.14", "3.141", "3.135", "3.145", "3.15", "0", "-0", "1e-9", "1,322.77", "1322.77",
               "Paris", " Paris", "paris", "PARIS.", "Paris.", "the  paris", "Pa ris", "Straße", "STRASSE",
               "34122", "34,122", "-44.2", "-44.2%", "44.2%"]
GOLDS = ["17", "-17", "3.14", "3.15", "3.13", "0", "1322.77", "Paris", "paris.", "strasse", "ß", "34,122",
         "-44.2%", "44.2", "seventeen", "17 km", "Paris "]


def exact_text(prediction, gold):
    return prediction == gold  # untrimmed: the key must keep " Paris" and "Paris" apart


@pytest.mark.parametrize("grader", [
    ExactGrader(), NumericGrader(), NumericGrader(0.01), NumericGrader(0.005), NumericGrader(0.01, relative=True),
    ContainsGrader(), ContainsGrader(case_sensitive=True), CallableGrader(exact_text),
], ids=lambda g: g.name)
def test_answers_with_one_key_get_one_grade_against_every_gold(grader):
    key = bench.answer_key(grader)
    outcomes = {p: [outcome(grader(item(g), p)) for g in GOLDS] for p in PREDICTIONS}
    for a in PREDICTIONS:
        for b in PREDICTIONS:
            if key(a) == key(b):
                assert outcomes[a] == outcomes[b], (grader.name, a, b)


def test_vote_keys_pool_what_the_grader_cannot_tell_apart_and_no_more():
    numeric = bench.answer_key(NumericGrader(0.01))
    assert numeric("$17") == numeric("17%") == numeric("17.0") == numeric(" 17")
    assert numeric("3.141") != numeric("3.14")  # the number itself, never rounded to the tolerance
    assert numeric("17 km") == "17 km" and numeric("17 km") != numeric("17")
    contains = bench.answer_key(ContainsGrader())
    assert contains(" PARIS  city") == contains("paris city") and contains("Paris.") != contains("Paris")
    assert bench.answer_key(ContainsGrader(case_sensitive=True))("PARIS") != "paris"
    wrapped = bench.answer_key(CallableGrader(exact_text))
    assert wrapped(" Paris") == " Paris" != wrapped("Paris")
