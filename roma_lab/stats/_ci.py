"""Task-bootstrap confidence intervals for a mean score, delegated to ``scipy.stats.bootstrap``."""

import dataclasses
import warnings
from dataclasses import dataclass

import numpy as np

from roma_lab.stats._power import _check_n
from roma_lab.stats._scores import paired_scores, per_task_scores
from roma_lab.stats._settings import DEFAULT_STATS, PAIRED_CI_METHODS

# Accepted spellings (lower case) -> the name recorded in ``CI.method``.
_METHODS = {"percentile": "percentile", "basic": "basic", "bca": "BCa"}


@dataclass(frozen=True, slots=True)
class CI:
    """A bootstrap confidence interval together with everything needed to recompute it.

    ``method`` records what was actually used: ``"percentile (BCa degenerate)"`` means BCa was
    asked for but undefined on this sample (e.g. all scores equal), so the percentile interval of
    the same resamples is reported instead.
    """

    estimate: float
    low: float
    high: float
    level: float
    method: str
    n_resamples: int
    seed: int
    n_tasks: int

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def bootstrap_ci(
    values, *, n_resamples: int = DEFAULT_STATS.n_resamples, level: float = DEFAULT_STATS.level,
    seed: int = DEFAULT_STATS.seed, method: str = "percentile"
) -> CI:
    """Task-bootstrap CI of the mean score over a finite task suite.

    ``values`` holds one score per task (1-D) or ``(n_tasks, n_runs)`` scores, averaged per task
    first so that tasks, not runs, are resampled. NaN/inf or empty input raises ``ValueError``.
    """
    return _task_bootstrap(
        per_task_scores(values),
        n_resamples=n_resamples,
        level=level,
        seed=seed,
        method=method,
    )


def paired_bootstrap_ci(
    a, b, *, n_resamples: int = DEFAULT_STATS.n_resamples, level: float = DEFAULT_STATS.level,
    seed: int = DEFAULT_STATS.seed, method: str = "percentile"
) -> CI:
    """Task-bootstrap CI of ``mean(a - b)`` for two conditions run on the same tasks.

    Resampling task indices jointly for ``a`` and ``b`` is the same as resampling the per-task
    differences, so that is what is done; ``a`` and ``b`` may have different numbers of runs but
    must list the same tasks in the same order.
    """
    a_scores, b_scores = paired_scores(a, b)
    return _task_bootstrap(
        a_scores - b_scores,
        n_resamples=n_resamples,
        level=level,
        seed=seed,
        method=method,
    )


def paired_ci(
    a, b, *, method: str = DEFAULT_STATS.paired_ci, n_resamples: int = DEFAULT_STATS.n_resamples,
    level: float = DEFAULT_STATS.level, seed: int = DEFAULT_STATS.seed
) -> CI:
    """CI of ``mean(a - b)`` for two conditions on the same tasks, by ``method`` (PAIRED_CI_METHODS).

    ``"t"``: the t-interval on the per-task differences, ``mean +- t_{n-1} sd / sqrt(n)`` (what
    scipy's ``ttest_1samp(...).confidence_interval`` gives, written out: this runs once per table
    row and per simulated study); no resampling, so the CI records ``n_resamples`` 0.
    When every difference is the same the interval is that value (as the bootstrap gives) and the
    method says ``"t (no spread)"``. Any other method is :func:`paired_bootstrap_ci`'s. The
    calibration study (design/calibration.md) measured why ``"t"`` is the default.
    """
    if not isinstance(method, str) or method.lower() not in {m.lower() for m in PAIRED_CI_METHODS}:
        raise ValueError(f"method must be one of {list(PAIRED_CI_METHODS)}, got {method!r}")
    if method.lower() != "t":
        return paired_bootstrap_ci(a, b, n_resamples=n_resamples, level=level, seed=seed, method=method)
    from scipy import stats

    # the settings are checked as for a bootstrap: they are recorded with the CI even when unused
    _check_settings(n_resamples=n_resamples, level=level, seed=seed, method="percentile")
    a_scores, b_scores = paired_scores(a, b)
    differences = a_scores - b_scores
    if differences.size < 2:
        raise ValueError(f"a t-interval needs at least 2 tasks, got {differences.size}")
    estimate = float(differences.mean())
    if np.ptp(differences) == 0:
        low = high = estimate
        name = "t (no spread)"
    else:
        n = differences.size
        half = float(stats.t.ppf((1 + level) / 2, n - 1) * differences.std(ddof=1) / np.sqrt(n))
        low, high, name = estimate - half, estimate + half, "t"
    return CI(estimate=estimate, low=low, high=high, level=float(level), method=name, n_resamples=0,
              seed=int(seed), n_tasks=int(differences.size))


def no_spread_ci(value: float, n_tasks: int, *, low: float, high: float,
                 level: float = DEFAULT_STATS.level) -> CI:
    """CI of a mean when every one of ``n_tasks`` per-task values equals ``value`` and each value is
    known to lie in ``[low, high]`` (a difference of [0, 1] scores in [-1, 1]).

    A t-interval or bootstrap has width 0 here, a certainty no finite sample gives. The rule: if a
    share pi of tasks equal ``value`` and the rest lie anywhere in the range, the mean lies in
    ``[value - (1 - pi)(value - low), value + (1 - pi)(high - value)]``; all n tasks agree with
    probability pi^n, below ``1 - level`` once pi < pi_low = (1 - level)^(1/n) (the exact,
    Clopper-Pearson, one-sided bound for n agreements out of n). The interval is that range at
    pi_low: for a paired difference with every pair tied, +-(1 - pi_low) (+-0.39 at n = 6, +-0.095 at
    n = 30, 95%); for 0/1 scores all 1, [pi_low, 1], Clopper-Pearson's bound. It draws no resamples.
    """
    _check_n(n_tasks)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be strictly between 0 and 1, got {level!r}")
    if not low <= value <= high:
        raise ValueError(f"value {value!r} lies outside its range [{low!r}, {high!r}]")
    slack = 1.0 - (1.0 - level) ** (1.0 / n_tasks)
    return CI(estimate=float(value), low=float(value - slack * (value - low)),
              high=float(value + slack * (high - value)), level=float(level), method="exact bound (no spread)",
              n_resamples=0, seed=0, n_tasks=int(n_tasks))


def _task_bootstrap(scores: np.ndarray, *, n_resamples, level, seed, method) -> CI:
    from scipy import stats

    method_name = _check_settings(n_resamples=n_resamples, level=level, seed=seed, method=method)
    if scores.size < 2:
        raise ValueError(f"a bootstrap needs at least 2 tasks, got {scores.size}")

    def run(chosen_method, n_draws, previous=None):
        return stats.bootstrap(
            (scores,),
            np.mean,
            n_resamples=n_draws,
            confidence_level=level,
            method=chosen_method,
            vectorized=True,
            bootstrap_result=previous,
            rng=np.random.default_rng(seed),
        )

    # BCa is undefined on degenerate samples (0/0 in its acceleration); we detect the resulting
    # NaN ourselves and record the fallback, so scipy's warnings would only be noise.
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = run(method_name, n_resamples)
    interval = result.confidence_interval
    if np.isnan(interval.low) or np.isnan(interval.high):
        # Reuse the same bootstrap distribution (no new draws) for the percentile interval.
        interval = run("percentile", 0, previous=result).confidence_interval
        method_name = f"percentile ({method_name} degenerate)"
    return CI(
        estimate=float(np.mean(scores)),
        low=float(interval.low),
        high=float(interval.high),
        level=float(level),
        method=method_name,
        n_resamples=int(n_resamples),
        seed=int(seed),
        n_tasks=int(scores.size),
    )


def _check_settings(*, n_resamples, level, seed, method) -> str:
    """Validate bootstrap settings; return the canonical method name."""
    for name, value in (("n_resamples", n_resamples), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be strictly between 0 and 1, got {level!r}")
    if not isinstance(method, str) or method.lower() not in _METHODS:
        raise ValueError(f"method must be one of {sorted(_METHODS.values())}, got {method!r}")
    return _METHODS[method.lower()]
