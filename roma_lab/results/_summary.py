"""Summaries with task-bootstrap CIs and paired comparisons, in one tidy shape for every room.

Input is always per-task scores in long format: one row per (condition, subset, task, run) with a
numeric column per metric. Output is one row per (condition, subset, metric) — the rows
:func:`roma_lab.results.beside_paper` reads. NaN policy (the same everywhere): a NaN score is "not
scored" (e.g. the grader failed); it is left out and counted in ``n_missing``. Runs of the same task
are averaged first, so tasks, not runs, are resampled. See design/results_vocabulary.md.
"""

from __future__ import annotations

import functools
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
                                    "mean_a", "mean_b", "wins", "losses", "ties", "sign_test_p", "mde", "mde_bound",
                                    "mde_method")
#: Per-task differences closer than this count as equal: per-task means of runs differ in the last bit
#: (0.9 - 0.8 != 0.4 - 0.3), and a spread of 1e-17 is none.
_NO_SPREAD = 1e-9


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
    order, so the row order of ``scores`` does not matter), both means, and the exact sign test (wins, losses,
    ties, p) over per-task means. :func:`as_metrics` turns the test columns into metric rows.

    Scores in [0, 1] (every per-task score of the group in it) have differences in [-1, 1], and the
    interval stays there: a t-interval reaching past it (six tasks, five lost: -0.83 +- 0.43) is
    clipped, and ``ci_method`` ends ", clipped to [-1, 1]". When every task's difference is the same
    (all pairs tie, or every task moved alike) the t-interval and the bootstrap have width 0, a
    certainty no sample gives: the interval is then :func:`roma_lab.stats.no_spread_ci`'s exact bound
    (+-0.39 with all six pairs tied, +-0.095 with thirty), and ``ci_method`` says "no discordant task" or
    "every task moved by ...". For other scores no range is known: with no spread there is no interval
    (NaN) and ``ci_method`` says why.

    ``mde`` and ``mde_bound`` are the study planner's (:func:`roma_lab.stats.plan_paired` at
    ``stats.alpha`` and ``stats.power``: the smallest true difference the tables' test detects with
    that power), so the tables and ``experiments plan`` give one MDE. 0/1 per-task scores are planned
    for the exact sign test: ``mde`` at the observed discordance (share of tasks where a and b differ;
    NaN when none does), ``mde_bound`` at discordance 1, the no-pilot worst case, which depends on n
    alone. Other scores in [0, 1] (means over runs, graded fractions), whose mean difference the sign
    test's power does not follow from, are planned as the planner plans R runs: the paired t-test,
    ``mde`` at the observed sd of the differences (NaN with no spread), ``mde_bound`` at sd 1, the
    largest [0, 1] scores allow. Where n detects nothing (no difference up to 1 reaches the power: a
    sign test over 5 tasks never reaches p <= 0.05) the MDE is NaN, never a number above 1, and
    ``mde_method`` says so in words; it always names the test and the discordance or sd used. Scores
    outside [0, 1] get no MDE (NaN, and ``mde_method`` says why): the planner plans differences of
    fractions. A :data:`MODEL` column in ``scores`` comes through last: the models of ``a``'s rows,
    then of ``b``'s.
    """
    import pandas as pd

    from roma_lab.stats import plan_paired, sign_test

    _check_columns(scores, [*by, condition, task, metric])
    model = [MODEL] if _carries_model(scores, [*by, condition]) else []
    plans = functools.cache(lambda n, spread, kind: plan_paired(n, **{kind: spread}, alpha=stats.alpha,
                                                                 power=stats.power))
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
                                    "sign_test_p": math.nan, "mde": math.nan, "mde_bound": math.nan, "mde_method": ""}
        if model:
            row[MODEL] = models_of(pd.concat([group.loc[group[condition] == name, MODEL] for name in (a, b)]))
        if len(common) >= 2:
            test = sign_test(va, vb)
            row.update(mean_a=float(va.mean()), mean_b=float(vb.mean()), wins=test.wins, losses=test.losses,
                       ties=test.ties, sign_test_p=test.p_value, **_interval(va, vb, stats),
                       **_detectable(va, vb, plans, alpha=stats.alpha, power=stats.power))
        else:
            row["ci_method"] = row["mde_method"] = "no comparison: fewer than 2 tasks scored by both"
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


def _in_unit(*values) -> bool:
    return all(bool(((v >= 0) & (v <= 1)).all()) for v in values)


def _interval(va, vb, stats: StatsSettings) -> dict:
    """The paired CI columns (the rule is in :func:`compare`'s docstring)."""
    import numpy as np

    from roma_lab.stats import no_spread_ci, paired_ci

    differences = va - vb
    n = differences.size
    if np.ptp(differences) <= _NO_SPREAD:
        moved = float(differences.mean())
        said, others = ((f"no discordant task (all {n} pairs tie)", "differ") if abs(moved) <= _NO_SPREAD else
                        (f"every task moved by {moved:+.3g}", "move otherwise"))
        if not _in_unit(va, vb):
            return {"value": moved, "ci_method": f"no interval: {said}, no spread to estimate from, no range known"}
        interval = no_spread_ci(moved, n, low=-1.0, high=1.0, level=stats.level)
        return {"value": moved, "ci_low": interval.low, "ci_high": interval.high,
                "ci_method": f"{said}: exact {interval.level:.0%} bound on the share of tasks that {others}"}
    interval = paired_ci(va, vb, method=stats.paired_ci, n_resamples=stats.n_resamples, level=stats.level,
                         seed=stats.seed)
    low, high, method = interval.low, interval.high, f"paired {_method(interval)}"
    if _in_unit(va, vb) and (low < -1 or high > 1):
        low, high, method = max(low, -1.0), min(high, 1.0), f"{method}, clipped to [-1, 1]"
    return {"value": interval.estimate, "ci_low": low, "ci_high": high, "ci_method": method}


def _detectable(va, vb, plans, *, alpha: float, power: float) -> dict:
    """The MDE columns (the rule is in :func:`compare`'s docstring); ``plans(n, spread, kind)`` is
    ``plan_paired``, cached per call: a table of many groups meets few distinct (n, discordance)."""
    import numpy as np

    if not _in_unit(va, vb):
        return {"mde_method": "no MDE: scores outside [0, 1] (the planner plans differences of fractions)"}
    differences = va - vb
    n = differences.size
    level = f"{power:.0%} power, alpha {alpha:g}"
    if np.isin(va, (0, 1)).all() and np.isin(vb, (0, 1)).all():
        discordant = int(np.count_nonzero(differences))
        kind, spread, worst = "discordance", discordant / n, "discordance 1"
        test, observed, none = f"exact sign test, {level}", f"discordance {discordant}/{n}", "no discordant task"
    else:
        kind, worst = "sd_diff", "sd 1"
        spread = float(differences.std(ddof=1)) if np.ptp(differences) > _NO_SPREAD else 0.0
        test, observed, none = f"paired t-test, {level}", f"sd {spread:.3g}", "every task's difference is the same"
    bound = plans(n, 1.0, kind).mde  # the no-pilot worst case: depends on n alone
    mde = plans(n, spread, kind).mde if spread else math.nan

    def said(name: str, at: str, value: float) -> str:
        return f"{name} at {at}" + ("" if math.isfinite(value) else f": n = {n} detects nothing")

    if not math.isfinite(bound) and not math.isfinite(mde):
        return {"mde": mde, "mde_bound": bound, "mde_method": f"{test}; n = {n} detects nothing, even at {worst}"}
    at_observed = said("mde", f"the observed {observed}", mde) if spread else f"mde: {none}, nothing to plan from"
    return {"mde": mde, "mde_bound": bound,
            "mde_method": f"{test}; {at_observed}; {said('mde_bound', f'{worst} (worst case)', bound)}"}


def _method(interval) -> str:
    if interval.method.startswith("t"):
        return f"{interval.method}-interval on per-task differences, {interval.level:.0%}"
    return f"task bootstrap {interval.method}, {interval.level:.0%}, {interval.n_resamples} resamples"


def _check_columns(df: pd.DataFrame, needed: Sequence[str]) -> None:
    missing = [c for c in dict.fromkeys(needed) if c not in df.columns]
    if missing:
        raise ValueError(f"scores lack column(s) {missing}; have {list(df.columns)}")
