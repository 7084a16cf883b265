"""Per-system summaries and paired comparisons of graded runs, with task-bootstrap CIs."""

from __future__ import annotations

import math

_THREE_WAY = {"CORRECT", "INCORRECT", "NOT_ATTEMPTED"}


def _scored(group):
    """Scores used for statistics: a system error scores 0 (no answer); grader errors are dropped.

    The grader failing is not the system's fault, so that item is left out and counted instead.
    """
    system_failed = group["error_stage"] == "system"
    kept = group[system_failed | group["score"].notna()]
    return kept["score"].fillna(0.0), kept


def _three_way(labels, n: int) -> dict[str, float]:
    # simple-evals aggregation: shares over all items; F1 of accuracy and accuracy-given-attempted.
    correct = float((labels == "CORRECT").sum()) / n
    incorrect = float((labels == "INCORRECT").sum()) / n
    attempted = correct + incorrect
    given = correct / attempted if attempted > 0 else 0.0
    f1 = 2 * given * correct / (given + correct) if (given + correct) > 0 else 0.0
    return {"is_correct": correct, "is_incorrect": incorrect, "is_not_attempted": 1.0 - attempted,
            "accuracy_given_attempted": given, "f1": f1}


def summarize_df(results, *, n_resamples: int = 2000, level: float = 0.95, seed: int = 0):
    """One row per (benchmark, system): mean score with a task-bootstrap CI, error counts, and for
    three-way graders (SimpleQA, SEAL-0, string match) simple-evals' metrics.

    ``mean_score`` is accuracy for 0/1 graders. System errors count as score 0 and as not
    attempted; grader errors are excluded and counted in ``n_grader_errors`` (design/grading.md).
    """
    import pandas as pd

    from roma_lab.stats import bootstrap_ci

    rows = []
    for (benchmark, system), group in results.groupby(["benchmark", "system"], sort=False):
        scores, kept = _scored(group)
        row = {
            "benchmark": benchmark,
            "system": system,
            "grader": "; ".join(sorted(group["grader"].dropna().unique())),
            "n_items": len(group),
            "n_scored": len(kept),
            "n_system_errors": int((group["error_stage"] == "system").sum()),
            "n_grader_errors": int((group["error_stage"] == "grader").sum()),
            "mean_score": float(scores.mean()) if len(scores) else math.nan,
            "ci_low": math.nan,
            "ci_high": math.nan,
            "ci_method": "",
        }
        if len(scores) >= 2:
            ci = bootstrap_ci(scores.to_numpy(), n_resamples=n_resamples, level=level, seed=seed)
            row.update(ci_low=ci.low, ci_high=ci.high, ci_method=f"task bootstrap {ci.method}, {ci.level:.0%}")
        labels = kept["label"].where(kept["error_stage"] != "system", "NOT_ATTEMPTED")
        if len(kept) and labels.notna().any() and set(labels.dropna()) <= _THREE_WAY:
            row.update(_three_way(labels, len(kept)))
        rows.append(row)
    return pd.DataFrame(rows)


def compare_df(results, system_a: str, system_b: str, *, n_resamples: int = 2000, level: float = 0.95,
               seed: int = 0):
    """Paired comparison of ``system_a`` against ``system_b`` per benchmark, on the items both have
    scores for: mean difference (a - b) with a paired task-bootstrap CI and the exact sign test."""
    import pandas as pd

    from roma_lab.stats import paired_bootstrap_ci, sign_test

    rows = []
    for benchmark, group in results.groupby("benchmark", sort=False):
        per_system = {}
        for name in (system_a, system_b):
            mine = group[group["system"] == name]
            scores, kept = _scored(mine)
            per_system[name] = pd.Series(scores.to_numpy(), index=kept["item_id"].to_numpy())
        a, b = per_system[system_a], per_system[system_b]
        common = a.index.intersection(b.index)
        row = {"benchmark": benchmark, "system_a": system_a, "system_b": system_b, "n_paired": len(common),
               "mean_a": math.nan, "mean_b": math.nan, "diff": math.nan, "ci_low": math.nan,
               "ci_high": math.nan, "wins": 0, "losses": 0, "ties": 0, "p_value": math.nan}
        if len(common) >= 2:
            a_vals, b_vals = a.loc[common].to_numpy(), b.loc[common].to_numpy()
            ci = paired_bootstrap_ci(a_vals, b_vals, n_resamples=n_resamples, level=level, seed=seed)
            test = sign_test(a_vals, b_vals)
            row.update(mean_a=float(a_vals.mean()), mean_b=float(b_vals.mean()), diff=ci.estimate,
                       ci_low=ci.low, ci_high=ci.high, wins=test.wins, losses=test.losses, ties=test.ties,
                       p_value=test.p_value)
        rows.append(row)
    return pd.DataFrame(rows)
