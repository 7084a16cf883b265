"""The study planner against statsmodels' power functions, exact enumeration and seeded simulation."""

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.power import TTestPower
from statsmodels.stats.proportion import proportion_confint, samplesize_confint_proportion

from roma_lab.stats import (
    PairedPlan,
    RatePlan,
    min_detectable_effect,
    n_for_half_width,
    n_for_mde,
    plan_paired,
    plan_rate,
    sign_test,
    sign_test_power,
    t_test_power,
    variance_components,
)


def enumerated_sign_test_power(n, psi, delta, alpha):
    """Every outcome of n tasks (wins, losses, ties multinomial) through roma_lab's own sign_test."""
    win, loss = (psi + delta) / 2, (psi - delta) / 2
    total = 0.0
    for w in range(n + 1):
        for l in range(n + 1 - w):
            a = np.r_[np.ones(w), np.zeros(l), np.zeros(n - w - l)]
            b = np.r_[np.zeros(w), np.ones(l), np.zeros(n - w - l)]
            if sign_test(a, b).p_value <= alpha:
                t = n - w - l  # (scipy's multinomial gives NaN when a probability is 0; 0 ** 0 is 1 here)
                total += (math.factorial(n) / (math.factorial(w) * math.factorial(l) * math.factorial(t))
                          * win**w * loss**l * (1 - psi) ** t)
    return total


@pytest.mark.parametrize("n, psi, delta", [(12, 0.5, 0.3), (15, 0.3, 0.0), (10, 1.0, 0.6), (14, 0.4, -0.2)])
def test_sign_test_power_is_the_exact_rejection_rate_of_sign_test(n, psi, delta):
    assert sign_test_power(n, psi, delta, alpha=0.05) == pytest.approx(enumerated_sign_test_power(n, psi, delta, 0.05),
                                                                      abs=1e-12)


def test_sign_test_power_matches_a_seeded_simulation():
    n, psi, delta, studies = 60, 0.35, 0.18, 4000
    rng = np.random.default_rng(42)
    counts = rng.multinomial(n, [(psi + delta) / 2, (psi - delta) / 2, 1 - psi], size=studies)
    p = {}  # one sign_test per distinct (wins, losses): the simulation repeats them
    for w, l, _ in counts:
        if (w, l) not in p:
            p[w, l] = sign_test(np.r_[np.ones(w), np.zeros(n - w)], np.r_[np.zeros(w), np.ones(l), np.zeros(n - w - l)])
    rejected = [p[w, l].p_value <= 0.05 for w, l, _ in counts]
    expected = sign_test_power(n, psi, delta)
    assert abs(np.mean(rejected) - expected) < 3 * math.sqrt(expected * (1 - expected) / studies)


def test_sign_test_size_never_exceeds_alpha():
    for n in (5, 30, 100, 400):
        for psi in (0.05, 0.3, 1.0):
            assert sign_test_power(n, psi, 0.0, alpha=0.05) <= 0.05


@pytest.mark.parametrize("n, sd, delta, alpha", [(40, 0.6, 0.2, 0.05), (8, 1.0, 0.5, 0.1), (200, 0.3, 0.03, 0.01)])
def test_t_test_power_is_statsmodels_power(n, sd, delta, alpha):
    expected = TTestPower().power(effect_size=delta / sd, nobs=n, alpha=alpha, alternative="two-sided")
    assert t_test_power(n, sd, delta, alpha=alpha) == pytest.approx(expected, rel=1e-8)


def test_paired_t_plan_solves_as_statsmodels_does():
    plan = plan_paired(50, sd_diff=0.6, alpha=0.05, power=0.8)
    effect_size = TTestPower().solve_power(nobs=50, alpha=0.05, power=0.8, alternative="two-sided")
    assert plan.mde == pytest.approx(effect_size * 0.6, rel=1e-6)
    assert plan.test == "paired t-test" and math.isnan(plan.discordance) and plan.sd_diff == 0.6
    needed = n_for_mde(0.1, sd_diff=0.6)
    nobs = TTestPower().solve_power(effect_size=0.1 / 0.6, alpha=0.05, power=0.8, alternative="two-sided")
    assert needed.n == math.ceil(nobs) and needed.mde <= 0.1 and needed.target == 0.1
    # the CI half-width is the t-interval's at the given spread
    assert plan.ci_half_width == pytest.approx(sps.t.ppf(0.975, 49) * 0.6 / math.sqrt(50))


@pytest.mark.parametrize("n, psi", [(30, 0.35), (100, 0.35), (100, 0.1), (400, 0.6)])
def test_sign_test_mde_reaches_the_power_and_sits_near_the_normal_approximation(n, psi):
    plan = plan_paired(n, discordance=psi)
    assert sign_test_power(n, psi, plan.mde) == pytest.approx(0.8, abs=1e-8)
    normal = min_detectable_effect(n, discordance=psi).effect
    # the exact test is more conservative than McNemar's normal approximation, and not by much
    assert normal < plan.mde < normal * 1.15
    assert plan.mde_worst >= plan.mde and plan.discordance == psi and plan.test == "exact sign test"


def test_no_pilot_is_the_worst_case_discordance():
    assert plan_paired(60) == plan_paired(60, discordance=1.0)
    assert plan_paired(60).mde == plan_paired(60).mde_worst
    # a difference of mde_worst is detected with the power whatever the discordance (which is >= it)
    worst = plan_paired(60).mde_worst
    for psi in np.linspace(worst, 1.0, 25):
        assert sign_test_power(60, psi, worst) >= 0.8 - 1e-9
    assert plan_paired(60, discordance=0.5).mde < worst


def test_nothing_detectable_is_nan_not_a_number_beyond_the_design():
    assert math.isnan(plan_paired(5, discordance=0.2).mde)  # 5 tasks, at most one discordant on average
    assert math.isnan(plan_paired(2, sd_diff=1.0).mde)  # a difference of 0/1 scores never exceeds 1


@pytest.mark.parametrize("target, psi", [(0.1, 0.35), (0.3, 0.5), (0.2, 0.2)])
def test_n_for_mde_is_the_first_n_reaching_the_power(target, psi):
    plan = n_for_mde(target, discordance=psi)
    assert isinstance(plan, PairedPlan) and plan.target == target and plan.mde <= target
    assert sign_test_power(plan.n, psi, target) >= 0.8 > sign_test_power(plan.n - 1, psi, target)
    assert plan == plan_paired(plan.n, discordance=psi).__class__(**{**plan_paired(plan.n, discordance=psi).as_dict(),
                                                                     "target": target})


def test_n_for_mde_refuses_what_no_design_detects():
    with pytest.raises(ValueError, match="cannot exceed the discordance"):
        n_for_mde(0.3, discordance=0.2)
    with pytest.raises(ValueError, match="positive"):
        n_for_mde(0.0, discordance=0.2)
    with pytest.raises(ValueError, match="at most one"):
        plan_paired(30, discordance=0.3, sd_diff=0.5)
    with pytest.raises(ValueError, match="discordance"):
        plan_paired(30, discordance=0.0)
    with pytest.raises(ValueError, match="n_tasks"):
        plan_paired(1, discordance=0.3)


def test_rate_half_width_is_the_normal_interval_and_statsmodels_sizes_it():
    plan = plan_rate(30)
    low, high = proportion_confint(15, 30, alpha=0.05, method="normal")
    assert isinstance(plan, RatePlan) and plan.half_width == pytest.approx((high - low) / 2, rel=1e-9)
    for half, rate in ((0.1, 0.5), (0.05, 0.2), (0.03, 0.9)):
        needed = n_for_half_width(half, rate=rate)
        assert needed.n == math.ceil(samplesize_confint_proportion(rate, half, alpha=0.05))
        assert needed.half_width <= half < plan_rate(needed.n - 1, rate=rate).half_width


def test_rate_plan_with_runs_predicts_the_spread_of_a_simulated_mean():
    """R runs per task: a pilot's variance components give the sd of the mean over tasks."""
    rng = np.random.default_rng(7)
    n, runs, studies = 40, 3, 3000
    p = rng.beta(0.8, 0.8, size=(studies, n, 1))  # heterogeneous tasks
    means = (rng.random((studies, n, runs)) < p).mean(axis=(1, 2))
    pilot_p = rng.beta(0.8, 0.8, size=4000)
    parts = variance_components(np.full(4000, runs), rng.binomial(runs, pilot_p))
    plan = plan_rate(n, runs=runs, between=parts.between, within=parts.within)
    z = sps.norm.ppf(0.975)
    assert plan.half_width / z == pytest.approx(means.std(ddof=1), rel=0.05)
    # more runs shrink only the run-to-run part; no pilot is the bound for any number of runs
    assert plan_rate(n, runs=10, between=parts.between, within=parts.within).half_width < plan.half_width
    assert plan_rate(n, runs=runs).half_width >= plan.half_width
    with pytest.raises(ValueError, match="both"):
        plan_rate(n, between=0.1)


@pytest.mark.parametrize("mde", [1e-300, 1e-4])
def test_a_target_no_n_reaches_is_a_value_error_not_an_overflow(mde):
    # 1e-300 squared its normal-approximation n into an OverflowError
    with pytest.raises(ValueError, match="more than 1000000 tasks"):
        n_for_mde(mde)
