"""Graded runs in the results vocabulary: per-item scores under the bench NaN policy, their summary
(``roma_lab.results.summarize`` plus simple-evals' three-way metrics) and the paired comparison.

NaN policy (design/grading.md): a **system** error (exception or timeout) scores 0 on every metric,
because the system gave no answer; a **grader** error is NaN, "not scored": it says nothing about
the system, so it is left out and counted in ``n_missing``.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from roma_lab.bench._registry import BenchmarkSpec
from roma_lab.stats import DEFAULT_STATS, StatsSettings

if TYPE_CHECKING:
    import pandas as pd

_THREE_WAY = {"CORRECT", "INCORRECT", "NOT_ATTEMPTED"}
THREE_WAY_METRICS = ("is_correct", "is_incorrect", "is_not_attempted", "accuracy_given_attempted", "f1")


def metrics_of(spec: BenchmarkSpec) -> list[str]:
    """The metrics one item of ``spec`` scores: its score metric, then its details."""
    return list(dict.fromkeys((spec.metric, *spec.details)))


def scores_df(results: pd.DataFrame, spec: BenchmarkSpec) -> pd.DataFrame:
    """Per-item scores of an evaluation's rows (``roma_lab.evaluate.ROW_COLUMNS``): ``condition`` (the
    system), ``subset`` (the benchmark), ``task_id`` and one column per metric of ``spec`` (the grade's
    score; details read from the grade), NaN policy applied."""
    import pandas as pd

    failed = (results["error_stage"] == "system").to_numpy()
    scores = pd.DataFrame({"condition": results["condition"].to_numpy(), "subset": results["benchmark"].to_numpy(),
                           "task_id": results["task_id"].to_numpy()})
    details = [json.loads(text) if text else {} for text in results["details"].fillna("")]
    for metric in metrics_of(spec):
        values = (results["score"].to_numpy(dtype=float) if metric == spec.metric
                  else [float(d.get(metric, math.nan)) for d in details])
        scores[metric] = pd.Series(values, dtype=float).mask(failed, 0.0)
    return scores


def _three_way(labels: pd.Series, n: int) -> dict[str, float]:
    # simple-evals aggregation: shares over all items; F1 of accuracy and accuracy-given-attempted.
    correct = float((labels == "CORRECT").sum()) / n
    incorrect = float((labels == "INCORRECT").sum()) / n
    attempted = correct + incorrect
    given = correct / attempted if attempted > 0 else 0.0
    f1 = 2 * given * correct / (given + correct) if (given + correct) > 0 else 0.0
    return {"is_correct": correct, "is_incorrect": incorrect, "is_not_attempted": 1.0 - attempted,
            "accuracy_given_attempted": given, "f1": f1}


def _three_way_rows(results: pd.DataFrame) -> list[dict]:
    """simple-evals' metrics per system, when every label is three-way (a system error counts as
    NOT_ATTEMPTED; grader errors are left out, as for the score)."""
    rows = []
    for (benchmark, system), group in results.groupby(["benchmark", "condition"], sort=False):
        system_failed = group["error_stage"] == "system"
        kept = group[system_failed | group["score"].notna()]
        labels = kept["label"].where(kept["error_stage"] != "system", "NOT_ATTEMPTED")
        if not (len(kept) and labels.notna().any() and set(labels.dropna()) <= _THREE_WAY):
            continue
        shared = {"condition": system, "subset": benchmark, "unit": "fraction", "ci_low": math.nan,
                  "ci_high": math.nan, "ci_method": "no CI: simple-evals aggregate", "n": len(kept),
                  "n_missing": len(group) - len(kept), "runs": 1}
        rows += [shared | {"metric": metric, "value": value} for metric, value in _three_way(labels, len(kept)).items()]
    return rows


def summarize_results(results: pd.DataFrame, spec: BenchmarkSpec, *,
                      stats: StatsSettings = DEFAULT_STATS) -> pd.DataFrame:
    """One row per system x metric (``roma_lab.results.summarize``: mean, task-bootstrap CI, ``n``
    scored items, ``n_missing`` grader errors), with the metric's ``unit``, ``n_system_errors``
    (items scored 0 because the system failed) and the ``grader``; for three-way benchmarks also
    simple-evals' metrics (is_correct ... f1) as extra rows without a CI."""
    import pandas as pd

    from roma_lab.results import summarize

    summary = summarize(scores_df(results, spec), metrics_of(spec), task="task_id", run=None, stats=stats)
    summary.insert(3, "unit", spec.unit)
    if spec.three_way:
        extra = pd.DataFrame(_three_way_rows(results), columns=summary.columns)
        summary = pd.concat([summary, extra], ignore_index=True) if len(extra) else summary
    order = {system: i for i, system in enumerate(dict.fromkeys(results["condition"]))}
    summary = summary.sort_values("condition", key=lambda c: c.map(order), kind="stable", ignore_index=True)
    system_errors = results["error_stage"].eq("system").groupby(results["condition"]).sum()
    graders = results.groupby("condition")["grader"].agg(lambda g: "; ".join(sorted(g.dropna().unique())))
    summary["n_system_errors"] = summary["condition"].map(system_errors).astype(int)
    summary["grader"] = summary["condition"].map(graders)
    return summary


def compare_systems(results: pd.DataFrame, spec: BenchmarkSpec, a: str, b: str, *,
                    stats: StatsSettings = DEFAULT_STATS) -> pd.DataFrame:
    """``a - b`` on the score metric, paired on the items both scored (``roma_lab.results.compare``:
    paired task-bootstrap CI and the exact sign test with ties), under the same NaN policy."""
    from roma_lab.results import compare

    return compare(scores_df(results, spec), a, b, spec.metric, task="task_id", stats=stats)
