"""Notebook 43: does the "no evidence" flag fire where it should? ROMA runs on goals of known kind,
some answerable from the search executor's corpus and some not, and each final answer is checked
against the passages its run read (``roma_lab.trace.without_evidence``; design/evidence.md).

Tables: ``evidence_flags.csv`` (per goal: on the corpus or not, the answer, whether the root's answer is
flagged and why, the share of the answer's content words and numbers the passages hold) and
``evidence_rates.csv`` (per kind of goal: goals, answers flagged, the rate with its Wilson 95% interval).
The runs are an ordinary ``roma_lab.evaluate`` folder (``runs/``), so a rerun resumes and a changed
rule is re-read from the saved traces without a model call.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from roma_lab.stats import DEFAULT_STATS, StatsSettings

__all__ = ["EVIDENCE_GOALS", "measure_evidence_flags"]

#: The twenty goals written for this study before the support rule was (data/evidence_goals/README.md).
EVIDENCE_GOALS = Path(__file__).resolve().parents[2] / "data" / "evidence_goals" / "goals.csv"


def measure_evidence_flags(out_dir: str | Path, corpus: Sequence[str], *, goals: str | Path = EVIDENCE_GOALS,
                           lm: Any = "local", max_depth: int = 1, plan_root: bool = True, max_concurrency: int = 2,
                           run_timeout_s: float | None = 900, stats: StatsSettings = DEFAULT_STATS,
                           progress: bool = False) -> dict[str, Any]:
    """ROMA on ``lm`` (the quickstart's settings: ``max_depth``, ``plan_root``) on each goal of ``goals``
    (a CSV with ``goal``, ``on_corpus`` and ``answer`` columns), searching ``corpus``; the module
    docstring's tables, by name (also written under ``out_dir``)."""
    import pandas as pd

    from roma_lab.evaluate import evaluate, roma, tasks_from
    from roma_lab.results import record_stats, write_table
    from statsmodels.stats.proportion import proportion_confint
    from roma_lab.trace import answer_support, without_evidence

    table = pd.read_csv(goals, dtype={"goal": str, "answer": str})
    kinds = table["on_corpus"].astype(str).str.lower().map({"true": True, "false": False})
    if kinds.isna().any() or table["goal"].isna().any():
        raise ValueError(f"{goals}: every row needs a goal and on_corpus true or false")
    tasks = tasks_from(table.assign(id=[f"goal-{i:02d}" for i in range(len(table))]), name="evidence-goals",
                       question="goal", corpus=list(corpus))
    system = roma(lm, max_depth=max_depth, plan_root=plan_root, max_concurrency=max_concurrency,
                  run_timeout_s=run_timeout_s)
    evaluation = evaluate([system], tasks, out=Path(out_dir) / "runs", progress=progress, stats=stats)
    model = evaluation.models.get(system.label)
    rows = []
    for (_, goal), on_corpus, (_, row) in zip(table.iterrows(), kinds, evaluation.rows.iterrows(), strict=True):
        run = evaluation.trace(row["condition"], row["task_id"], row["run"]) if isinstance(row["trace"], str) else None
        root = run.root if run is not None and run.nodes else None
        flagged = {} if run is None else without_evidence(run.nodes)
        support = None if root is None else answer_support(run.nodes, root.id)
        rows.append({"goal": goal["goal"], "on_corpus": on_corpus, "model": model, "gold": goal["answer"],
                     "answer": row["prediction"], "status": row["status"], "score": row["score"],
                     "flagged": root is None or root.id in flagged,
                     "why": "no run" if root is None else flagged.get(root.id, ""),
                     "support": support})
    flags = pd.DataFrame(rows)
    rates = []
    for on_corpus, part in flags.groupby("on_corpus", sort=False):
        low, high = proportion_confint(int(part["flagged"].sum()), len(part), alpha=1 - stats.level, method="wilson")
        rates.append({"goals": "on the corpus" if on_corpus else "off the corpus", "model": model, "n": len(part),
                      "flagged": int(part["flagged"].sum()), "rate": part["flagged"].mean(),
                      "ci_low": low, "ci_high": high, "ci_method": f"Wilson score, {stats.level:.0%}"})
    tables = {"evidence_flags": flags, "evidence_rates": pd.DataFrame(rates)}
    for name, t in tables.items():
        write_table(t, out_dir, name)
    record_stats(out_dir, stats)
    return tables
