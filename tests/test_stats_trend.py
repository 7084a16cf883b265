"""stats.level_trend: the rule 'difficulty rises with level' (design/world_benchmark.md), checked
against hypergeometric tail sums written out with math.comb."""

import math

import pytest

from roma_lab.stats import level_trend


def upper_tail(first, n_first, last, n_last):
    """P(X >= first) for X the first group's successes, margins fixed: Fisher's one-sided p."""
    total = first + last
    return sum(math.comb(n_first, x) * math.comb(n_last, total - x)
               for x in range(first, min(n_first, total) + 1)) / math.comb(n_first + n_last, total)


def levels(*counts, n=5):
    return {f"L{i + 1}": [1] * c + [0] * (n - c) for i, c in enumerate(counts)}


def test_four_of_five_against_none_rises_and_three_does_not():
    four = level_trend(levels(4, 1, 0))
    assert four.p_value == pytest.approx(upper_tail(4, 5, 0, 5)) == pytest.approx(5 / 210)
    assert four.monotone and four.falls
    assert four.successes == (4, 1, 0) and four.n == (5, 5, 5) and four.rates == (0.8, 0.2, 0.0)
    three = level_trend(levels(3, 0, 0))
    assert three.p_value == pytest.approx(upper_tail(3, 5, 0, 5)) == pytest.approx(10 / 120)
    assert three.monotone and not three.falls


def test_the_test_is_one_sided_easiest_over_hardest():
    # the same counts the wrong way round are no evidence at all (a two-sided test would give .048)
    reversed_ = level_trend(levels(0, 1, 4))
    assert reversed_.p_value == pytest.approx(1.0)
    assert not reversed_.monotone and not reversed_.falls


def test_a_later_level_above_an_earlier_one_is_not_a_rise_whatever_the_end_points():
    trend = level_trend(levels(5, 0, 1))
    assert trend.p_value == pytest.approx(upper_tail(5, 5, 1, 5)) and trend.p_value < 0.05
    assert not trend.monotone and not trend.falls


def test_alpha_sets_the_verdict_and_unequal_levels_count_as_they_are():
    trend = level_trend({"L1": [1, 1, 1, 0], "L2": [0, 1], "L3": [0, 0, 0, 0, 0, 0]}, alpha=0.01)
    assert trend.p_value == pytest.approx(upper_tail(3, 4, 0, 6))
    assert trend.p_value < 0.05 and not trend.falls  # .033: a rise at .05, not at .01


@pytest.mark.parametrize("outcomes, message", [
    ({"L1": [1, 0.5], "L3": [0, 0]}, "0 or 1 per task"),
    ({"L1": [1, float("nan")], "L3": [0, 0]}, "0 or 1 per task"),
    ({"L1": [1, 0]}, "at least two levels"),
    ({"L1": [1, 0], "L3": []}, "has no task"),
])
def test_what_cannot_be_counted_is_refused(outcomes, message):
    with pytest.raises(ValueError, match=message):
        level_trend(outcomes)
