"""roma_lab.stats against known values and direct re-implementations."""

import math

import numpy as np
import pytest

from roma_lab.stats import (
    CI,
    SignTest,
    bootstrap_ci,
    majority_vote,
    no_spread_ci,
    paired_bootstrap_ci,
    paired_ci,
    pass_at_k,
    sign_test,
)

SCORES = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0.5, 1], dtype=float)


def numpy_percentile_ci(values, n_resamples, level, seed):
    """The percentile task bootstrap written out with plain numpy, as the reference."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.size, size=(n_resamples, values.size))
    means = values[idx].mean(axis=1)
    alpha = (1 - level) / 2
    return np.quantile(means, [alpha, 1 - alpha])


# --- bootstrap_ci -------------------------------------------------------------------------------


def test_percentile_ci_matches_numpy_reimplementation():
    ci = bootstrap_ci(SCORES, n_resamples=500, level=0.9, seed=7)
    low, high = numpy_percentile_ci(SCORES, 500, 0.9, 7)
    assert ci.low == pytest.approx(low, abs=1e-12)
    assert ci.high == pytest.approx(high, abs=1e-12)
    assert ci.estimate == pytest.approx(SCORES.mean())
    assert ci.low <= ci.estimate <= ci.high
    assert ci.low < ci.high
    assert (ci.method, ci.n_resamples, ci.seed, ci.n_tasks, ci.level) == ("percentile", 500, 7, 12, 0.9)


def test_tiny_sample_hand_computed():
    # Two tasks scored 0 and 1: every resample mean is 0, 0.5 or 1, with probabilities 1/4, 1/2, 1/4.
    # With 4000 draws the 2.5% and 97.5% quantiles are therefore exactly 0 and 1,
    # and the 30%/70% quantiles (level 0.4) both fall on 0.5.
    ci = bootstrap_ci([0, 1], n_resamples=4000, seed=3)
    assert (ci.low, ci.estimate, ci.high) == (0.0, 0.5, 1.0)
    narrow = bootstrap_ci([0, 1], n_resamples=4000, level=0.4, seed=3)
    assert (narrow.low, narrow.high) == (0.5, 0.5)


def test_same_seed_same_ci_and_different_seed_differs():
    values = np.random.default_rng(11).random(60)
    assert bootstrap_ci(values, seed=5) == bootstrap_ci(values, seed=5)
    others = {bootstrap_ci(values, seed=s).low for s in range(6, 10)}
    assert others - {bootstrap_ci(values, seed=5).low}


def test_all_ones_gives_degenerate_interval():
    ci = bootstrap_ci(np.ones(108))
    assert (ci.low, ci.estimate, ci.high) == (1.0, 1.0, 1.0)
    assert ci.method == "percentile"


@pytest.mark.filterwarnings("error")  # the fallback must not leak scipy/numpy warnings
def test_bca_on_constant_sample_falls_back_and_says_so():
    ci = bootstrap_ci(np.full(30, 0.25), method="BCa")
    assert ci.method == "percentile (BCa degenerate)"
    assert ci.low == ci.high == ci.estimate == pytest.approx(0.25)


def test_bca_on_ordinary_sample_is_reported_as_bca():
    values = np.random.default_rng(2).integers(0, 2, 80)
    ci = bootstrap_ci(values, method="bca")
    assert ci.method == "BCa"
    assert ci.low < ci.estimate < ci.high


def test_runs_are_averaged_per_task_before_resampling():
    runs = np.random.default_rng(4).integers(0, 2, size=(25, 3))
    assert bootstrap_ci(runs, seed=1) == bootstrap_ci(runs.mean(axis=1), seed=1)


def test_global_numpy_rng_untouched():
    np.random.seed(123)
    before = np.random.get_state()
    bootstrap_ci(SCORES, method="BCa")
    paired_bootstrap_ci(SCORES, SCORES[::-1])
    after = np.random.get_state()
    assert before[0] == after[0]
    assert np.array_equal(before[1], after[1])
    assert before[2:] == after[2:]


def test_as_dict_round_trips():
    ci = bootstrap_ci(SCORES, n_resamples=100)
    assert CI(**ci.as_dict()) == ci
    assert set(ci.as_dict()) == {
        "estimate", "low", "high", "level", "method", "n_resamples", "seed", "n_tasks"
    }


@pytest.mark.parametrize(
    "values, match",
    [
        ([], "empty"),
        ([1.0, float("nan"), 0.0], "NaN"),
        ([1.0, float("inf")], "NaN/inf"),
        ([1.0], "at least 2 tasks"),
        (np.zeros((2, 2, 2)), "1-D"),
        (np.zeros((3, 0)), "empty"),
    ],
)
def test_bad_values_raise(values, match):
    with pytest.raises(ValueError, match=match):
        bootstrap_ci(values)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"level": 1.0}, ValueError),
        ({"level": 0}, ValueError),
        ({"n_resamples": 0}, ValueError),
        ({"n_resamples": 10.5}, TypeError),
        ({"seed": -1}, ValueError),
        ({"seed": True}, TypeError),
        ({"method": "studentized"}, ValueError),
    ],
)
def test_bad_settings_raise(kwargs, error):
    with pytest.raises(error):
        bootstrap_ci(SCORES, **kwargs)


# --- paired_bootstrap_ci ------------------------------------------------------------------------


def test_paired_ci_equals_one_sample_ci_of_differences():
    rng = np.random.default_rng(8)
    a, b = rng.integers(0, 2, 108), rng.integers(0, 2, 108)
    paired = paired_bootstrap_ci(a, b, seed=4)
    assert paired == bootstrap_ci(a - b, seed=4)
    assert paired.estimate == pytest.approx(a.mean() - b.mean())


def test_paired_ci_resamples_tasks_jointly():
    # Identical conditions: every joint resample has difference 0. Resampling a and b
    # independently would give a wide interval instead.
    a = np.random.default_rng(9).integers(0, 2, 50)
    ci = paired_bootstrap_ci(a, a.copy())
    assert (ci.low, ci.estimate, ci.high) == (0.0, 0.0, 0.0)


def test_paired_length_mismatch_raises():
    with pytest.raises(ValueError, match="same tasks"):
        paired_bootstrap_ci([1, 0, 1], [1, 0])


# --- paired_ci (the tables' paired CI) ---------------------------------------------------------


def test_paired_t_interval_is_scipys_on_the_differences():
    from scipy import stats

    rng = np.random.default_rng(12)
    a, b = rng.integers(0, 2, (45, 3)), rng.integers(0, 2, (45, 3))  # runs averaged per task first
    d = a.mean(axis=1) - b.mean(axis=1)
    for level in (0.95, 0.8):
        ci = paired_ci(a, b, method="t", level=level, seed=5)
        expected = stats.ttest_1samp(d, 0.0).confidence_interval(confidence_level=level)
        assert (ci.low, ci.high) == pytest.approx((expected.low, expected.high), abs=1e-12)
        assert (ci.estimate, ci.method, ci.n_resamples, ci.seed, ci.n_tasks, ci.level) == \
            (pytest.approx(d.mean()), "t", 0, 5, 45, level)


def test_paired_t_interval_without_spread_is_the_value_and_says_so():
    ci = paired_ci(np.ones(20), np.zeros(20), method="t")
    assert (ci.low, ci.estimate, ci.high, ci.method) == (1.0, 1.0, 1.0, "t (no spread)")


def test_no_spread_ci_is_clopper_pearsons_bound_and_not_zero_width():
    from scipy import stats

    for n in (2, 6, 30):
        # n of n scores 1: the exact one-sided bound, scipy's two-sided 90% Clopper-Pearson lower end
        ones = no_spread_ci(1.0, n, low=0.0, high=1.0)
        assert ones.low == pytest.approx(stats.binomtest(n, n).proportion_ci(0.90, method="exact").low, abs=1e-12)
        assert (ones.high, ones.estimate, ones.method, ones.n_resamples) == (1.0, 1.0, "exact bound (no spread)", 0)
        # every pair tied: the difference is within the share of tasks that may differ, either way
        tied = no_spread_ci(0.0, n, low=-1.0, high=1.0)
        assert (tied.low, tied.high) == pytest.approx((ones.low - 1, 1 - ones.low)) and tied.high > 0.095
    moved = no_spread_ci(0.5, 6, low=-1.0, high=1.0, level=0.8)
    share = 1 - 0.2 ** (1 / 6)  # the tasks that may move otherwise, anywhere in [-1, 1]
    assert (moved.low, moved.high, moved.level) == pytest.approx((0.5 - share * 1.5, 0.5 + share * 0.5, 0.8))


def test_no_spread_ci_misses_with_at_most_one_minus_its_level():
    # A difference that is 1 on a share psi of tasks and 0 elsewhere, psi just past the bound for n = 6: the
    # interval from an all-tied sample misses psi, and all six tie with probability just under 5%.
    bound = no_spread_ci(0.0, 6, low=-1.0, high=1.0).high
    psi = bound * 1.01
    tied = (np.random.default_rng(9).random((40_000, 6)) >= psi).all(axis=1)
    assert tied.mean() == pytest.approx((1 - psi) ** 6, abs=0.004) and (1 - psi) ** 6 < 0.05 < (1 - bound * 0.99) ** 6


@pytest.mark.parametrize(("args", "message"), [((1.5, 6), "outside its range"), ((0.0, 1), "n_tasks"),
                                               ((0.0, 6, 1.0), "level")])
def test_no_spread_ci_refuses_what_it_cannot_bound(args, message):
    value, n, *level = args
    with pytest.raises(ValueError, match=message):
        no_spread_ci(value, n, low=-1.0, high=1.0, **({"level": level[0]} if level else {}))


def test_paired_ci_keeps_the_bootstrap_by_name():
    a, b = np.random.default_rng(3).integers(0, 2, (2, 60))
    assert paired_ci(a, b, method="percentile", seed=2) == paired_bootstrap_ci(a, b, seed=2)
    assert paired_ci(a, b, method="bca", seed=2).method == "BCa"
    assert paired_ci(a, b).method == "t"  # the default (StatsSettings.paired_ci)
    with pytest.raises(ValueError, match="method must be one of"):
        paired_ci(a, b, method="normal")


# --- sign_test ----------------------------------------------------------------------------------


def test_sign_test_known_value_nine_three():
    result = sign_test([1] * 9 + [0] * 3, [0] * 9 + [1] * 3)
    assert result == SignTest(wins=9, losses=3, ties=0, p_value=pytest.approx(0.1460, abs=5e-5))
    # Exact value: 2 * P(X >= 9 | n=12, p=.5) = 2 * 299 / 4096.
    assert result.p_value == pytest.approx(2 * 299 / 4096, rel=1e-12)


def test_sign_test_counts_ties_and_ignores_them_in_p():
    with_ties = sign_test([1] * 9 + [0] * 3 + [1, 0] * 5, [0] * 9 + [1] * 3 + [1, 0] * 5)
    assert (with_ties.wins, with_ties.losses, with_ties.ties) == (9, 3, 10)
    assert with_ties.p_value == pytest.approx(2 * 299 / 4096, rel=1e-12)


def test_sign_test_all_ties_p_is_one():
    assert sign_test([1, 0, 1], [1, 0, 1]) == SignTest(wins=0, losses=0, ties=3, p_value=1.0)


def test_sign_test_direction_and_mismatch():
    result = sign_test([0] * 6, [1] * 6)
    assert (result.wins, result.losses) == (0, 6)
    assert result.p_value == pytest.approx(2 / 64)
    with pytest.raises(ValueError, match="same tasks"):
        sign_test([1, 0], [1, 0, 1])


# --- pass_at_k ----------------------------------------------------------------------------------


def test_pass_at_k_known_values():
    assert pass_at_k(10, 1, 1) == pytest.approx(0.1)
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 3) == 1.0
    assert pass_at_k(10, 1, 10) == 1.0
    assert pass_at_k(10, 8, 3) == 1.0  # n - c < k: every draw of 3 contains a correct attempt
    assert isinstance(pass_at_k(5, 2, 2), float)


def test_pass_at_k_matches_brute_force_combinatorics():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                expected = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)


def test_pass_at_k_vectorised_equals_elementwise():
    n = np.array([10, 10, 20, 5, 7])
    c = np.array([0, 3, 20, 1, 6])
    result = pass_at_k(n, c, 3)
    assert result.shape == (5,)
    assert np.allclose(result, [pass_at_k(int(x), int(y), 3) for x, y in zip(n, c)])
    assert np.allclose(pass_at_k(10, np.array([0, 10]), 2), [0.0, 1.0])  # scalar n broadcasts


def test_pass_at_k_stable_for_large_n():
    # C(1000, 500) overflows float; the product form does not.
    expected = 1 - math.comb(900, 500) / math.comb(1000, 500)
    assert pass_at_k(1000, 100, 500) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "n, c, k, error",
    [
        (10, 11, 1, ValueError),
        (10, -1, 1, ValueError),
        (10, 2, 0, ValueError),
        (10, 2, 11, ValueError),
        ([10, 3], [1, 1], 5, ValueError),
        (10.0, 2, 1, TypeError),
        (10, 2, 1.5, TypeError),
        ([], [], 1, ValueError),
    ],
)
def test_pass_at_k_rejects_bad_input(n, c, k, error):
    with pytest.raises(error):
        pass_at_k(n, c, k)


# --- majority_vote ------------------------------------------------------------------------------


def test_majority_vote_most_frequent():
    assert majority_vote(["4", "5", "4", "6"]) == "4"


def test_majority_vote_ties_broken_by_first_occurrence():
    assert majority_vote(["b", "a", "a", "b"]) == "b"
    assert majority_vote(["x", "y", "z"]) == "x"


def test_majority_vote_key_normalises_and_returns_original():
    answers = [" Paris", "london", "paris ", "London", "PARIS"]
    assert majority_vote(answers, key=lambda s: s.strip().lower()) == " Paris"


def test_majority_vote_empty_raises():
    with pytest.raises(ValueError, match="at least one"):
        majority_vote([])
    with pytest.raises(ValueError):
        majority_vote(iter(()))


def test_paired_inputs_may_have_different_run_counts():
    a = np.array([[1, 1, 0], [0, 0, 0], [1, 1, 1]])
    b = np.array([[1], [1], [0]])
    ci = paired_bootstrap_ci(a, b, n_resamples=200)
    # Per-task means a = [2/3, 0, 1], b = [1, 1, 0]: differences [-1/3, -1, 1].
    assert ci.estimate == pytest.approx(-1 / 9)
    assert sign_test(a, b) == SignTest(wins=1, losses=2, ties=0, p_value=pytest.approx(1.0))
