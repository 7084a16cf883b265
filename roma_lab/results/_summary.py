"""Summaries with task-bootstrap CIs and paired comparisons, in one tidy shape for every room.

Input is always per-task scores in long format: one row per (condition, subset, task, run) with a
numeric column per metric. Output is one row per (condition, subset, metric) — the rows
:func:`roma_lab.results.beside_paper` reads. NaN policy (the same everywhere): a NaN score is "not
scored" (e.g. the grader failed); it is left out and counted in ``n_missing``. Runs of the same task
are averaged first, so tasks, not runs, are resampled. See design/results_vocabulary.md.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from roma_lab.stats import DEFAULT_STATS

if TYPE_CHECKING:
    import pandas as pd

    from roma_lab.stats import StatsSettings

#: The name of the condition column in every room (a policy, system, method or configuration).
CONDITION = "condition"
#: The column that names the model a row was measured on, in ``roma_lab.lm.model_label``'s words
#: (so a scripted test double says it is one). Summaries and comparisons carry it from their input
#: rows, as their last column, so every table built from named rows names its model too.
MODEL = "model"
SUMMARY_COLUMNS: tuple[str, ...] = ("metric", "value", "ci_low", "ci_high", "ci_method", "n", "n_missing", "runs")
COMPARE_COLUMNS: tuple[str, ...] = ("condition", "metric", "value", "ci_low", "ci_high", "ci_method", "n",
                                    "mean_a", "mean_b", "wins", "losses", "ties", "sign_test_p", "mde", "mde_bound")


def _carries_model(scores: pd.DataFrame, keys: Sequence[str]) -> bool:
    return MODEL in scores.columns and MODEL not in keys


def models_of(models: pd.Series) -> str:
    """The models named in a model column, each once, in order of appearance ("" for none)."""
    return ", ".join(dict.fromkeys(m for m in models.dropna().astype(str) if m))


def _per_task(group: pd.DataFrame, metric: str, task: str) -> pd.Series:
    # mean() skips NaN: a task is NaN only if no run of it was scored. Sorted by task id: the
    # bootstrap draws positions, so the interval must not depend on the order rows arrive in.
    return group.groupby(task, sort=True)[metric].mean()


def summarize(
    scores: pd.DataFrame,
    metrics: Sequence[str],
    *,
    by: Sequence[str] = (CONDITION, "subset"),
    task: str = "task_id",
    run: str | None = "run",
    ci: bool | Collection[str] = True,
    stats: StatsSettings = DEFAULT_STATS,
) -> pd.DataFrame:
    """Mean of each metric per group, with a task-bootstrap CI for the metrics in ``ci``
    (``stats``: resamples, seed and level).

    Returns one row per group x metric: the ``by`` columns, then :data:`SUMMARY_COLUMNS` (``n`` =
    scored tasks; ``runs`` = distinct runs, 1 when there is no ``run`` column). Fewer than two scored
    tasks give no CI, and ``ci_method`` says so. A :data:`MODEL` column in ``scores`` (not among
    ``by``) comes through last: the models of each group's rows.
    """
    import pandas as pd

    from roma_lab.stats import bootstrap_ci

    _check_columns(scores, [*by, task, *metrics])
    with_ci = set(metrics) if ci is True else set() if ci is False else set(ci)
    unknown = with_ci - set(metrics)
    if unknown:
        raise ValueError(f"ci names metrics that are not summarised: {sorted(unknown)}")
    model = [MODEL] if _carries_model(scores, by) else []
    rows = []
    for key, group in scores.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        runs = group[run].nunique() if run is not None and run in group else 1
        named = {MODEL: models_of(group[MODEL])} if model else {}
        for metric in metrics:
            per_task = _per_task(group, metric, task)
            scored = per_task.dropna().to_numpy(dtype=float)
            row = dict(zip(by, key)) | {"metric": metric, "value": float(scored.mean()) if scored.size else math.nan,
                                        "ci_low": math.nan, "ci_high": math.nan, "ci_method": "",
                                        "n": int(scored.size), "n_missing": int(per_task.isna().sum()), "runs": runs
                                        } | named
            if metric in with_ci:
                if scored.size >= 2:
                    interval = bootstrap_ci(scored, n_resamples=stats.n_resamples, level=stats.level, seed=stats.seed)
                    row.update(ci_low=interval.low, ci_high=interval.high, ci_method=_method(interval))
                else:
                    row["ci_method"] = "no CI: fewer than 2 scored tasks"
            rows.append(row)
    return pd.DataFrame(rows, columns=[*by, *SUMMARY_COLUMNS, *model])


def compare(
    scores: pd.DataFrame,
    a: str,
    b: str,
    metric: str,
    *,
    by: Sequence[str] = ("subset",),
    condition: str = CONDITION,
    task: str = "task_id",
    stats: StatsSettings = DEFAULT_STATS,
) -> pd.DataFrame:
    """Paired comparison ``a - b`` of one metric per group, on the tasks both conditions scored
    (``stats``: the bootstrap's resamples, seed and level, and the MDEs' ``alpha`` and ``power``).

    One row per group: ``condition`` = ``"a - b"``, ``metric`` = ``"<metric>_diff"``, the mean
    difference with a paired CI by ``stats.paired_ci`` (:func:`roma_lab.stats.paired_ci`: the
    t-interval on per-task differences by default, or a task bootstrap; tasks taken in task-id
    order, so the row order of ``scores`` does not matter), both means, and the exact sign test (wins, losses, ties, p) over
    per-task means. :func:`as_metrics` turns the test columns into metric rows.

    Two minimum detectable effects (paired z-test at ``stats.alpha`` with ``stats.power``,
    :func:`roma_lab.stats.min_detectable_effect`) say what the sample size can detect: ``mde`` from
    the observed sd of the per-task differences (NaN when every difference is the same: no spread
    to estimate from), and ``mde_bound`` from the largest sd scores in [0, 1] allow (1), so it
    depends on ``n`` alone and holds whatever the true spread (NaN when a score lies outside [0, 1]);
    the plug-in ``mde`` can exceed it on tiny samples (the sample sd can exceed 1). A :data:`MODEL`
    column in ``scores`` comes through last: the models of ``a``'s rows, then of ``b``'s.
    """
    import pandas as pd

    from roma_lab.stats import paired_ci, sign_test

    _check_columns(scores, [*by, condition, task, metric])
    model = [MODEL] if _carries_model(scores, [*by, condition]) else []
    rows = []
    groups = scores.groupby(list(by), sort=False) if by else [((), scores)]
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        present = set(group[condition])
        if not {a, b} <= present:
            raise ValueError(f"conditions {sorted({a, b} - present)} have no rows in group {dict(zip(by, key))}")
        means = {name: _per_task(group[group[condition] == name], metric, task).dropna() for name in (a, b)}
        # task-id order, not row order: a - b and b - a give mirrored intervals
        common = means[a].index.intersection(means[b].index).sort_values()
        va, vb = means[a].loc[common].to_numpy(float), means[b].loc[common].to_numpy(float)
        row = dict(zip(by, key)) | {"condition": f"{a} - {b}", "metric": f"{metric}_diff", "value": math.nan,
                                    "ci_low": math.nan, "ci_high": math.nan, "ci_method": "", "n": len(common),
                                    "mean_a": math.nan, "mean_b": math.nan, "wins": 0, "losses": 0, "ties": 0,
                                    "sign_test_p": math.nan, "mde": math.nan, "mde_bound": math.nan}
        if model:
            row[MODEL] = models_of(pd.concat([group.loc[group[condition] == name, MODEL] for name in (a, b)]))
        if len(common) >= 2:
            interval = paired_ci(va, vb, method=stats.paired_ci, n_resamples=stats.n_resamples, level=stats.level,
                                 seed=stats.seed)
            test = sign_test(va, vb)
            row.update(value=interval.estimate, ci_low=interval.low, ci_high=interval.high,
                       ci_method=f"paired {_method(interval)}", mean_a=float(va.mean()), mean_b=float(vb.mean()),
                       wins=test.wins, losses=test.losses, ties=test.ties, sign_test_p=test.p_value,
                       **_detectable(va, vb, alpha=stats.alpha, power=stats.power))
        else:
            row["ci_method"] = "no comparison: fewer than 2 tasks scored by both"
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, *COMPARE_COLUMNS, *model])


def as_metrics(table: pd.DataFrame, columns: Sequence[str], *, by: Sequence[str] = (CONDITION, "subset")) -> pd.DataFrame:
    """``table`` plus one metric row per row and column in ``columns``, named ``<metric>_<column>``
    (e.g. ``success_diff_sign_test_p`` of a comparison, ``success_ci_low`` of a summary), so any
    figure a paper reports can meet ours in ``beside_paper``. The row's own metric is in the name so
    that a table of several metrics (success and cost compared) gives each figure its own row."""
    import pandas as pd

    _check_columns(table, [*by, "metric", *columns])
    extra = [table[list(by)].assign(metric=table["metric"] + f"_{column}", value=table[column].astype(float))
             for column in columns]
    return pd.concat([table, *extra], ignore_index=True)


def wide(table: pd.DataFrame, *, by: Sequence[str] = (CONDITION, "subset")) -> pd.DataFrame:
    """A long summary as a paper-style table for display: one row per group, one column per metric
    (its ``value``) in order of first appearance, and ``<metric>_ci_low`` / ``<metric>_ci_high``
    beside each metric that has a CI. Groups without a metric get NaN. A :data:`MODEL` column comes
    right after the ``by`` columns (the models of the group's rows), where a reader sees it first.
    The long table stays the source of truth; this is a view of it."""
    import pandas as pd

    keys = list(by)
    _check_columns(table, [*keys, "metric", "value"])
    if table.duplicated([*keys, "metric"]).any():
        raise ValueError(f"the table lists some ({', '.join(keys)}, metric) twice; a wide view needs one value each")
    columns = {}
    for metric, rows in table.groupby("metric", sort=False):
        rows = rows.set_index(keys)
        columns[metric] = rows["value"]
        if "ci_low" in rows and rows["ci_low"].notna().any():
            columns[f"{metric}_ci_low"], columns[f"{metric}_ci_high"] = rows["ci_low"], rows["ci_high"]
    groups = table[keys].drop_duplicates().set_index(keys).index
    out = pd.DataFrame(columns).reindex(groups).reset_index()
    if _carries_model(table, keys):
        named = table.groupby(keys, sort=False, dropna=False)[MODEL].agg(models_of).reset_index()
        out.insert(len(keys), MODEL, out[keys].merge(named, on=keys, how="left")[MODEL].to_numpy())
    return out


def _detectable(va, vb, *, alpha: float, power: float) -> dict[str, float]:
    import numpy as np

    from roma_lab.stats import min_detectable_effect

    differences = va - vb
    # No spread (every task moved by the same amount): a plug-in MDE of 0 would claim any effect
    # is detectable, so the observed MDE is not estimated. Up to rounding: per-task means of runs
    # differ in the last bit (0.9 - 0.8 != 0.4 - 0.3).
    observed = (math.nan if np.ptp(differences) <= 1e-9 else
                min_detectable_effect(len(differences), sd_diff=float(differences.std(ddof=1)), alpha=alpha,
                                      power=power).effect)
    in_unit = bool(((va >= 0) & (va <= 1) & (vb >= 0) & (vb <= 1)).all())
    bound = min_detectable_effect(len(differences), sd_diff=1.0, alpha=alpha, power=power).effect if in_unit else math.nan
    return {"mde": observed, "mde_bound": bound}


def _method(interval) -> str:
    if interval.method.startswith("t"):
        return f"{interval.method}-interval on per-task differences, {interval.level:.0%}"
    return f"task bootstrap {interval.method}, {interval.level:.0%}, {interval.n_resamples} resamples"


def _check_columns(df: pd.DataFrame, needed: Sequence[str]) -> None:
    missing = [c for c in dict.fromkeys(needed) if c not in df.columns]
    if missing:
        raise ValueError(f"scores lack column(s) {missing}; have {list(df.columns)}")
