"""The evaluation protocol in one call: every statistic of design/protocol.md, as long rows.

Input: tidy per-(condition, subset, task, run) 0/1 scores (NaN = not scored). Output: the rows of
the results vocabulary (``roma_lab.results.summarize`` / ``compare``), one per condition x subset x
metric, so any of them can meet a paper figure in ``beside_paper``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from roma_lab.stats import (
    DEFAULT_STATS,
    holm_adjust,
    pass_at_k,
    variance_components,
    vote,
)

if TYPE_CHECKING:
    import pandas as pd

    from roma_lab.stats import StatsSettings

#: Columns after the condition and ``by`` columns.
PROTOCOL_COLUMNS: tuple[str, ...] = ("metric", "unit", "value", "ci_low", "ci_high", "ci_method", "n", "n_missing",
                                     "runs", "wins", "losses", "ties", "method")
TIE_RULE = "a tie goes to the answer of the lowest-numbered run"
# Units as beside_paper reads them (it converts our fractions to a paper's percent or points).
_UNITS = {"sign_test_p": "p-value", "sign_test_p_holm": "p-value", "var_run_to_run": "squared fraction",
          "var_task_to_task": "squared fraction"}


def summarize_protocol(
    scores: pd.DataFrame,
    *,
    baseline: str | None = None,
    metric: str = "success",
    by: Sequence[str] = ("subset",),
    condition: str = "condition",
    task: str = "task_id",
    run: str = "run",
    answer: str | None = None,
    ks: Sequence[int] | None = None,
    stats: StatsSettings = DEFAULT_STATS,
) -> pd.DataFrame:
    """The whole protocol row set for R runs of every condition on the same tasks.

    Per condition x ``by`` group: ``pass@1`` (mean over tasks of each task's mean over runs, with a
    task-bootstrap CI) and ``pass@1_run_sd`` (sd of the R per-run accuracies); unbiased
    ``pass@k`` for each k in ``ks`` (default R); ``maj@R``, the plurality vote over each task's
    answers (the ``answer`` column; without one, over its 0/1 scores), with ``maj@R_tie_rate``
    (TIE_RULE); ``var_run_to_run`` and ``var_task_to_task`` (:func:`variance_components`).
    With a ``baseline``, every other condition is compared with it per group: ``pass@1_diff``
    (paired CI by ``stats.paired_ci``, sign-test wins/losses/ties), ``sign_test_p``, ``sign_test_p_holm``
    (Holm over the conditions compared in that group: one table column), ``mde`` and ``mde_bound`` (the
    study planner's minimum detectable effects at ``stats.alpha`` and ``stats.power``, at the observed
    discordance, or sd with R > 1 runs, and at the worst case; NaN where n detects nothing: ``compare``'s
    rule). ``method`` says how each row was computed (for the MDE rows: the test, the discordance or sd,
    and what n detects).

    Scores must be 0, 1 or NaN; every group must have the same runs; (condition, by, task, run)
    must be unique (``ValueError`` otherwise). NaN scores are left out (vocabulary NaN policy).
    A ``model`` column in ``scores`` comes through last (``roma_lab.results.summarize``'s rule).
    """
    from ._summary import MODEL, models_of, summarize

    by = list(by)
    keys = [condition, *by]
    needed = [*keys, task, run, metric] + ([answer] if answer else [])
    missing = [c for c in dict.fromkeys(needed) if c not in scores.columns]
    if missing:
        raise ValueError(f"scores lack column(s) {missing}; have {list(scores.columns)}")
    values = scores[metric].to_numpy(dtype=float)
    bad = sorted(set(values[~np.isnan(values) & (values != 0) & (values != 1)]))
    if bad:
        raise ValueError(f"protocol statistics need 0/1 scores (NaN = not scored); {metric!r} has {bad[:5]}")
    duplicated = scores.duplicated([*keys, task, run])
    if duplicated.any():
        first = scores.loc[duplicated, [*keys, task, run]].iloc[0].to_dict()
        raise ValueError(f"{int(duplicated.sum())} duplicate (condition, {', '.join(by)}, task, run) rows, "
                         f"e.g. {first}")
    runs = sorted(scores[run].unique())
    for key, group in scores.groupby(keys, sort=False):
        if sorted(group[run].unique()) != runs:
            raise ValueError(f"every condition needs the same runs {runs}; {key} has {sorted(group[run].unique())}")
    n_runs = len(runs)
    ks = (n_runs,) if ks is None and n_runs > 1 else tuple(ks or ())
    if any(isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= n_runs for k in ks):
        raise ValueError(f"ks must be ints in [2, {n_runs}] (pass@1 is always reported), got {ks}")

    import pandas as pd

    model = [MODEL] if MODEL in scores.columns and MODEL not in keys else []
    per_task, extra = [], []
    for key, group in scores.groupby(keys, sort=False):
        labels = dict(zip(keys, key)) | ({MODEL: models_of(group[MODEL])} if model else {})
        frame, rows = _group_statistics(group, task=task, run=run, metric=metric, answer=answer, runs=runs, ks=ks)
        per_task.append(frame.assign(**labels))
        extra += [labels | row for row in rows]
    per_task = pd.concat(per_task, ignore_index=True)

    maj = f"maj@{n_runs}"
    names = ["pass@1", *(f"pass@{k}" for k in ks)] + ([maj, f"{maj}_tie_rate"] if n_runs > 1 else [])
    summary = summarize(per_task, names, by=keys, task=task, run=None, stats=stats).assign(runs=n_runs)
    vote_over = "answers" if answer else "0/1 scores"
    methods = {"pass@1": "mean over tasks of each task's mean over its scored runs",
               maj: f"plurality vote over each task's scored {vote_over} in run order; {TIE_RULE}",
               f"{maj}_tie_rate": f"share of tasks whose {maj} vote was tied"}
    methods |= {f"pass@{k}": f"unbiased pass@{k} (Chen et al. 2021) per task from its scored runs, mean over tasks"
                for k in ks}
    summary["method"] = summary["metric"].map(methods)
    parts = [summary, pd.DataFrame(extra)]

    if baseline is not None:
        parts.append(_comparison_rows(scores, baseline, metric=metric, condition=condition, by=by, task=task,
                                      n_runs=n_runs, stats=stats))

    table = pd.concat(parts, ignore_index=True)
    for column in ("ci_low", "ci_high", "n_missing", "wins", "losses", "ties"):
        if column not in table:
            table[column] = math.nan
    table["ci_method"] = table["ci_method"].fillna("")
    table["unit"] = table["metric"].map(_UNITS).fillna("fraction")
    return table[[*keys, *PROTOCOL_COLUMNS, *model]]


def _group_statistics(group, *, task, run, metric, answer, runs, ks):
    """Per-task metrics of one condition x subset, and its rows that are not task means."""
    import pandas as pd

    matrix = group.pivot(index=task, columns=run, values=metric).reindex(columns=runs)
    scores = matrix.to_numpy(dtype=float)
    scored = ~np.isnan(scores)
    n = scored.sum(axis=1)
    c = np.nansum(scores, axis=1).astype(int)
    with np.errstate(invalid="ignore", divide="ignore"):
        frame = pd.DataFrame({task: matrix.index, "pass@1": np.where(n > 0, c / np.maximum(n, 1), np.nan)})
    for k in ks:
        frame[f"pass@{k}"] = [pass_at_k(int(ni), int(ci), k) if ni >= k else math.nan for ni, ci in zip(n, c)]
    if len(runs) > 1:
        said = (group.pivot(index=task, columns=run, values=answer).reindex(index=matrix.index, columns=runs)
                .fillna("").to_numpy(dtype=object) if answer else scores)
        majority, tied = [], []
        for row_scores, row_answers, row_scored in zip(scores, said, scored):
            if not row_scored.any():
                majority.append(math.nan)
                tied.append(math.nan)
                continue
            outcome = vote(row_answers[row_scored])
            first = int(np.flatnonzero(row_answers[row_scored] == outcome.answer)[0])
            majority.append(row_scores[row_scored][first])
            tied.append(float(outcome.tied))
        frame[f"maj@{len(runs)}"] = majority
        frame[f"maj@{len(runs)}_tie_rate"] = tied
    return frame, _spread_rows(scores, n, c, len(matrix))


def _spread_rows(scores, n, c, n_tasks):
    rows = []
    if scores.shape[1] < 2:
        return rows
    with np.errstate(invalid="ignore"):
        per_run = np.nanmean(scores, axis=0)  # a run with no scored task gives NaN and is left out
    per_run = per_run[~np.isnan(per_run)]
    rows.append({"metric": "pass@1_run_sd", "value": float(per_run.std(ddof=1)) if per_run.size >= 2 else math.nan,
                 "n": n_tasks, "runs": int(per_run.size),
                 "method": "sd (ddof 1) of the per-run accuracies (each run's mean over its scored tasks)"})
    repeated = n >= 2
    parts = variance_components(n[repeated], c[repeated]) if repeated.sum() >= 2 else None
    common = {"n": int(repeated.sum()), "n_missing": int(n_tasks - repeated.sum()), "runs": scores.shape[1]}
    rows.append(common | {"metric": "var_run_to_run", "value": parts.within if parts else math.nan,
                          "method": "run-to-run: mean over tasks of the ddof-1 variance of each task's 0/1 scores "
                                    "(tasks with >= 2 scored runs)"})
    rows.append(common | {"metric": "var_task_to_task", "value": parts.between if parts else math.nan,
                          "method": "task-to-task: var(task success rates, ddof 1) - mean_i s_i^2 / n_i "
                                    "(unbiased; may be < 0)"})
    return rows


def _comparison_rows(scores, baseline, *, metric, condition, by, task, n_runs, stats):
    """Every other condition against ``baseline`` per group, as long rows (diff, p, Holm p, MDE)."""
    import pandas as pd

    from ._summary import MODEL, compare

    paired = scores.rename(columns={metric: "pass@1"})
    tables = []
    for name in dict.fromkeys(scores[condition]):
        if name == baseline:
            continue
        table = compare(paired, name, baseline, "pass@1", by=by, condition=condition, task=task, stats=stats)
        tables.append(table)
    if not tables:
        raise ValueError(f"baseline {baseline!r} is the only condition; nothing to compare")
    diffs = pd.concat(tables, ignore_index=True)
    p = diffs.groupby(by, sort=False)["sign_test_p"] if by else diffs["sign_test_p"]
    # One family per group (one column of one table): the conditions compared with the baseline there.
    diffs["holm"] = p.transform(holm_adjust) if by else holm_adjust(diffs["sign_test_p"])
    diffs["family"] = p.transform("count") if by else diffs["sign_test_p"].count()
    rows = []
    for r in diffs.to_dict("records"):
        common = {condition: r["condition"], **{column: r[column] for column in by}, "n": r["n"], "runs": n_runs,
                  **({MODEL: r[MODEL]} if MODEL in r else {})}
        rows += [
            common | {"metric": "pass@1_diff", "value": r["value"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                      "ci_method": r["ci_method"], "wins": r["wins"], "losses": r["losses"], "ties": r["ties"],
                      "method": "mean of per-task differences (each task's mean over its scored runs)"},
            common | {"metric": "sign_test_p", "value": r["sign_test_p"],
                      "method": "exact two-sided sign test over per-task means (ties dropped)"},
            common | {"metric": "sign_test_p_holm", "value": r["holm"],
                      "method": f"Holm over the {r['family']} conditions compared with {baseline!r} in this group"},
            common | {"metric": "mde", "value": r["mde"], "method": f"study planner (plan_paired): {r['mde_method']}"},
            common | {"metric": "mde_bound", "value": r["mde_bound"],
                      "method": f"study planner (plan_paired): {r['mde_method']}"},
        ]
    return pd.DataFrame(rows)
