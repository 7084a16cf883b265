"""roma_lab.stats rates per hour: correct answers per hour with a task-bootstrap interval, and two
systems' ratio of it on the same tasks (the unit speed is judged in: issue 54)."""

from __future__ import annotations

import numpy as np
import pytest

from roma_lab.stats import StatsSettings, paired_rate_ratio_ci, per_hour_ci

FAST = StatsSettings(n_resamples=400, seed=0)


def test_a_rate_is_the_sum_of_counts_over_the_sum_of_hours_and_its_interval_holds_it():
    ci = per_hour_ci([1, 0, 1, 1], [60, 120, 60, 120], stats=FAST)
    assert ci.estimate == pytest.approx(3 / 360 * 3600)  # 30 correct answers an hour, not the mean of per-task rates
    assert ci.low < ci.estimate < ci.high and ci.n_tasks == 4 and ci.n_resamples == 400
    same = per_hour_ci([1, 1, 1], [60, 60, 60], stats=FAST)  # every resample is the sample: the interval is the rate
    assert (same.estimate, same.low, same.high) == pytest.approx((60.0, 60.0, 60.0))


@pytest.mark.parametrize(("counts", "seconds", "message"), [
    ([1, 0], [60, 0], "positive seconds"),
    ([1, float("nan")], [60, 60], "finite count and time"),
    ([1, 0, 1], [60, 60], "one count and one time per task"),
    ([1], [60], "at least 2 tasks"),
])
def test_a_bad_sample_is_refused_with_what_is_wrong(counts, seconds, message):
    with pytest.raises(ValueError, match=message):
        per_hour_ci(counts, seconds, stats=FAST)


def test_the_ratio_resamples_each_task_for_both_systems_at_once():
    rng = np.random.default_rng(3)
    counts, seconds = rng.integers(0, 2, 40), rng.uniform(20, 200, 40)
    same = paired_rate_ratio_ci(counts, seconds, counts, seconds, stats=FAST)
    # paired: every resample draws the same tasks for both, so identical systems have ratio 1 exactly;
    # drawn apart, the ratio would spread around 1
    assert (same.estimate, same.low, same.high) == (1.0, 1.0, 1.0)
    twice = paired_rate_ratio_ci(counts, seconds / 2, counts, seconds, stats=FAST)
    assert twice.estimate == pytest.approx(2.0) and twice.low == pytest.approx(2.0)
    with pytest.raises(ValueError, match="same tasks"):
        paired_rate_ratio_ci(counts, seconds, counts[:-1], seconds[:-1], stats=FAST)


def test_the_rate_interval_covers_the_true_rate_about_as_often_as_it_says():
    """Calibrated by simulation: 200 samples of 40 tasks from a known population (success .6, a task's
    seconds lognormal and longer when it fails), each with its 95% interval; the share covering the
    population's rate must be near 95% (binomial sd at 200 draws: 1.5 points)."""
    rng = np.random.default_rng(7)
    population_success = rng.random(200_000) < 0.6
    population_seconds = rng.lognormal(4, 0.5, 200_000) * np.where(population_success, 1.0, 1.8)
    truth = population_success.sum() / population_seconds.sum() * 3600
    covered = 0
    for seed in range(200):
        chosen = np.random.default_rng(seed).integers(0, population_success.size, 40)
        ci = per_hour_ci(population_success[chosen], population_seconds[chosen],
                         stats=StatsSettings(n_resamples=400, seed=seed))
        covered += ci.low <= truth <= ci.high
    assert 0.89 <= covered / 200 <= 0.99, covered
