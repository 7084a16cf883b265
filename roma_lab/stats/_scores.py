"""Validation shared by the statistics: turn per-task scores into one finite value per task."""

import numpy as np


def per_task_scores(values, name: str = "values") -> np.ndarray:
    """Return a 1-D float array with one score per task.

    ``values`` is 1-D (one score per task) or 2-D ``(n_tasks, n_runs)``; repeated runs are averaged
    per task first, because the task, not the run, is the unit we resample and compare.
    Empty input or any NaN/inf raises ``ValueError``: a missing score must be decided by the caller
    (usually "failed" = 0), never dropped silently.
    """
    scores = np.asarray(values, dtype=float)
    if scores.ndim not in (1, 2):
        raise ValueError(
            f"{name} must be 1-D (n_tasks,) or 2-D (n_tasks, n_runs), got shape {scores.shape}"
        )
    if scores.size == 0:
        raise ValueError(f"{name} is empty: need at least one task (and one run per task)")
    if not np.all(np.isfinite(scores)):
        bad = int(np.count_nonzero(~np.isfinite(scores)))
        raise ValueError(
            f"{name} contains {bad} NaN/inf value(s); score missing outcomes explicitly "
            "(e.g. a failed run as 0) before computing statistics"
        )
    return scores.mean(axis=1) if scores.ndim == 2 else scores


def paired_scores(a, b) -> tuple[np.ndarray, np.ndarray]:
    """Per-task scores of two conditions run on the same tasks in the same order."""
    a_scores = per_task_scores(a, "a")
    b_scores = per_task_scores(b, "b")
    if a_scores.shape != b_scores.shape:
        raise ValueError(
            f"paired comparison needs the same tasks in the same order: a has {a_scores.size} "
            f"tasks, b has {b_scores.size}"
        )
    return a_scores, b_scores
