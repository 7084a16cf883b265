"""Rates per hour with task-bootstrap intervals: correct answers per hour, and two systems' ratio of it.

Speed is judged in correct answers per hour (tasks per hour and tokens beside it): a speed-up that costs
accuracy is not one. A rate over a sample of tasks is a ratio estimator, ``sum(successes) /
sum(seconds)``; its interval resamples tasks (each task's success and time together), and two systems
run on the same tasks resample the same task indices for both (``paired_rate_ratio_ci``)."""

from __future__ import annotations

import warnings

import numpy as np

from ._ci import CI, _check_settings
from ._settings import DEFAULT_STATS, StatsSettings

HOUR_S = 3600.0


def _arrays(counts, seconds) -> tuple[np.ndarray, np.ndarray]:
    counts, seconds = np.asarray(counts, dtype=float), np.asarray(seconds, dtype=float)
    if counts.shape != seconds.shape or counts.ndim != 1:
        raise ValueError(f"one count and one time per task, got shapes {counts.shape} and {seconds.shape}")
    if counts.size < 2:
        raise ValueError(f"a rate's interval needs at least 2 tasks, got {counts.size}")
    if not np.isfinite(counts).all() or not np.isfinite(seconds).all():
        raise ValueError("every task needs a finite count and time (no answer is a count of 0, never a gap)")
    if (seconds <= 0).any():
        raise ValueError("every task's time must be positive seconds")
    return counts, seconds


def _bootstrap(samples: tuple[np.ndarray, ...], statistic, estimate: float, stats: StatsSettings) -> CI:
    from scipy import stats as st

    method = _check_settings(n_resamples=stats.n_resamples, level=stats.level, seed=stats.seed,
                             method="percentile")
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", st.DegenerateDataWarning)
        result = st.bootstrap(samples, statistic, paired=True, vectorized=True, n_resamples=stats.n_resamples,
                              confidence_level=stats.level, method=method, rng=np.random.default_rng(stats.seed))
    interval = result.confidence_interval
    return CI(estimate=float(estimate), low=float(interval.low), high=float(interval.high), level=float(stats.level),
              method=method, n_resamples=int(stats.n_resamples), seed=int(stats.seed), n_tasks=int(samples[0].size))


def per_hour_ci(counts, seconds, *, stats: StatsSettings = DEFAULT_STATS) -> CI:
    """``sum(counts) / sum(seconds)`` per hour (e.g. correct answers per hour, with each task's 0/1
    score and wall seconds; tasks per hour with counts of 1), with a task-bootstrap percentile interval."""
    c, s = _arrays(counts, seconds)
    return _bootstrap((c, s), lambda c, s, axis=-1: c.sum(axis) / s.sum(axis) * HOUR_S,
                      c.sum() / s.sum() * HOUR_S, stats)


def paired_rate_ratio_ci(counts_a, seconds_a, counts_b, seconds_b, *, stats: StatsSettings = DEFAULT_STATS) -> CI:
    """The ratio of system a's rate per hour to system b's on the same tasks (listed in the same order),
    with a task-bootstrap percentile interval resampling each task for both. A ratio with no success for
    b is undefined: the estimate is then inf or NaN, and so may the interval's ends be."""
    ca, sa = _arrays(counts_a, seconds_a)
    cb, sb = _arrays(counts_b, seconds_b)
    if ca.size != cb.size:
        raise ValueError(f"a paired ratio needs the same tasks for both systems, got {ca.size} and {cb.size}")

    def ratio(ca, sa, cb, sb, axis=-1):
        return (ca.sum(axis) / sa.sum(axis)) / (cb.sum(axis) / sb.sum(axis))

    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = ratio(ca, sa, cb, sb)
    return _bootstrap((ca, sa, cb, sb), ratio, estimate, stats)
