"""Run-to-run vs task-to-task variance of binary scores (one-way random-effects ANOVA; design/protocol.md)."""

import dataclasses
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class VarianceComponents:
    """Variance of one 0/1 score split into its two sources.

    Task i succeeds with probability p_i on each run. ``within`` estimates mean_i p_i (1 - p_i),
    the run-to-run (Bernoulli) variance of a task's score; ``between`` estimates the variance of
    p_i over the tasks (ddof 1), the task-to-task part. Both are unbiased, so ``between`` can come
    out slightly negative when tasks differ less than run noise suggests (read it as "none").
    """

    within: float
    between: float
    n_tasks: int

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def variance_components(n, c) -> VarianceComponents:
    """Estimate the run-to-run and task-to-task variance from ``c[i]`` successes in ``n[i]`` runs.

    For task i, ``s_i^2 = c_i (n_i - c_i) / (n_i (n_i - 1))`` (the ddof-1 variance of its 0/1 scores)
    is unbiased for p_i (1 - p_i), so ``within = mean_i s_i^2``. The observed rates
    ``p^_i = c_i / n_i`` scatter by var(p_i) plus each task's sampling noise p_i (1 - p_i) / n_i, so
    ``between = var(p^_i, ddof=1) - mean_i s_i^2 / n_i``; with R runs everywhere that is
    ``var(p^) - within / R``, the ANOVA estimator (MSB - MSW) / R. Needs at least two tasks, each
    with at least two runs (``ValueError`` otherwise).
    """
    n_arr, c_arr = (np.atleast_1d(np.asarray(x)) for x in (n, c))
    for name, arr in (("n", n_arr), ("c", c_arr)):
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise TypeError(f"{name} must be a 1-D array of integers, got dtype {arr.dtype} and shape {arr.shape}")
    if n_arr.shape != c_arr.shape:
        raise ValueError(f"n and c must have the same length, got {n_arr.size} and {c_arr.size}")
    if n_arr.size < 2:
        raise ValueError(f"need at least 2 tasks, got {n_arr.size}")
    if np.any(n_arr < 2):
        raise ValueError("every task needs at least 2 runs to separate run-to-run from task-to-task variance")
    if np.any(c_arr < 0) or np.any(c_arr > n_arr):
        raise ValueError("need 0 <= c <= n for every task")
    n_f, c_f = n_arr.astype(float), c_arr.astype(float)
    s2 = c_f * (n_f - c_f) / (n_f * (n_f - 1))
    rates = c_f / n_f
    within = float(s2.mean())
    between = float(rates.var(ddof=1) - (s2 / n_f).mean())
    return VarianceComponents(within=within, between=between, n_tasks=int(n_arr.size))
