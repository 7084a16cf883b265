"""Every finding the project claims has its rows committed under ``findings/`` (beside the command,
commit and machine that produced them), and each claimed interval is recomputed here from those rows
through the code the study used: a row edited, dropped or added changes a figure and fails the test."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from roma_lab.evaluate import Evaluation
from roma_lab.results import compare, read_table
from roma_lab.stats import StatsSettings
from roma_lab.studies import replay_web_calls

FINDINGS = Path(__file__).resolve().parents[1] / "findings"
WEB = FINDINGS / "42_measure_offline_web"
FIGURES = ("value", "ci_low", "ci_high", "n", "wins", "losses", "ties", "sign_test_p", "mean_a", "mean_b")


def web_scores(rows: pd.DataFrame, record: dict) -> pd.DataFrame:
    """Notebook 42's scores: each setting's rows scored as its evaluation scored them (``Evaluation.scores``),
    the system named with its setting as the study names it."""
    parts = []
    for setting, suffix in (("web", " (web)"), ("bm25", " (bm25)")):
        mine = rows[rows["setting"] == record["settings"][setting]].drop(columns=["setting", "model"])
        systems = tuple(dict.fromkeys(mine["condition"]))
        evaluation = Evaluation(rows=mine.reset_index(drop=True), out=WEB, systems=systems, grader=record["grader"],
                                models=dict.fromkeys(systems, record["model"]), stats=StatsSettings(**record["stats"]))
        parts.append(evaluation.scores().assign(condition=lambda d, s=suffix: d["condition"] + s))
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def web_finding():
    record = json.loads((WEB / "finding.json").read_text())
    return record, read_table(WEB, "web_rows"), read_table(WEB, "web_paired")


def test_the_offline_web_study_s_paired_differences_recompute_from_its_committed_rows(web_finding):
    record, rows, claimed = web_finding
    scores = web_scores(rows, record)
    stats = StatsSettings(**record["stats"])
    assert len(claimed) == len(record["systems"])
    for system in record["systems"]:
        again = compare(scores, f"{system} (web)", f"{system} (bm25)", "score", stats=stats).iloc[0]
        said = claimed[claimed["condition"] == f"{system} (web) - {system} (bm25)"].iloc[0]
        for figure in FIGURES:
            assert again[figure] == pytest.approx(said[figure], abs=1e-12), (system, figure)
    assert record["n_tasks"] == scores["task_id"].nunique() >= 30  # the protocol's n, every task graded
    assert scores.groupby("condition")["score"].size().eq(record["n_tasks"]).all()


def test_the_replay_verdict_is_what_its_rows_show(web_finding):
    record, rows, _ = web_finding
    verdict = read_table(WEB, "web_replay")
    keep = ["condition", "run", "task_id", "prediction", "status", "score", "error"]
    recorded = rows[rows["setting"] == record["settings"]["web"]][keep].reset_index(drop=True)
    replayed = rows[rows["setting"] == record["settings"]["replay"]][keep].reset_index(drop=True)
    assert verdict["rows_identical"].all() == recorded.equals(replayed)
    assert verdict["requests_made"].eq(0).all() and verdict["served_from_snapshot"].eq(verdict["web_calls"]).all()


def test_a_changed_row_changes_the_recomputed_interval(web_finding):
    """The recomputation can fail: one BM25 answer flipped moves the web-minus-BM25 difference."""
    record, rows, claimed = web_finding
    system = record["systems"][0]
    flipped = rows.copy()
    target = flipped.index[(flipped["setting"] == record["settings"]["bm25"]) & (flipped["condition"] == system)][0]
    flipped.loc[target, "score"] = 1.0 - float(flipped.loc[target, "score"])
    again = compare(web_scores(flipped, record), f"{system} (web)", f"{system} (bm25)", "score",
                    stats=StatsSettings(**record["stats"])).iloc[0]
    said = claimed[claimed["condition"] == f"{system} (web) - {system} (bm25)"].iloc[0]
    assert again["value"] != pytest.approx(said["value"])


def test_the_committed_snapshot_serves_every_web_call_of_the_run_with_the_web_stopped(web_finding):
    """The recorded web goes with the finding: each search and page read of the run (``web_calls.csv``)
    is served again from ``web_snapshot/`` alone (checked by hash; nothing listens on the recorded port)."""
    record, _, _ = web_finding
    calls = read_table(WEB, "web_calls")
    replay = read_table(WEB, "web_replay").set_index("condition")
    assert calls.groupby("condition").size().to_dict() == replay["web_calls"].to_dict()
    assert replay_web_calls(calls, WEB / "web_snapshot", record["web_search"]) == len(calls)


def test_every_finding_folder_is_listed_and_has_its_record():
    folders = sorted(p.name for p in FINDINGS.iterdir() if p.is_dir())
    listing = (FINDINGS / "README.md").read_text()
    assert folders and all(f"`{name}/`" in listing and (FINDINGS / name / "finding.json").is_file() for name in folders)


EVIDENCE = FINDINGS / "43_measure_evidence_flags"


def test_the_evidence_flags_are_what_the_rule_gives_on_the_committed_traces_and_the_rates_recompute():
    """Notebook 43's claim: each goal's flag and support are the rule's (``without_evidence``,
    ``answer_support``) on its saved trace, and the per-kind rates and Wilson intervals follow from the flags;
    a change of the rule that moves a flag fails here, and the issue's targets (>= 90% off, <= 10% on) hold."""
    from statsmodels.stats.proportion import proportion_confint

    from roma_lab.trace import answer_support, load_trace, without_evidence

    record = json.loads((EVIDENCE / "finding.json").read_text())
    flags, rates = read_table(EVIDENCE, "evidence_flags"), read_table(EVIDENCE, "evidence_rates")
    assert len(flags) == 20 and flags["on_corpus"].sum() == 10
    for i, row in flags.iterrows():
        run = load_trace(EVIDENCE / "traces" / f"goal-{i:02d}.json")
        assert run.goal == row["goal"]
        assert bool(row["flagged"]) == (run.root.id in without_evidence(run.nodes)), row["goal"]
        support = answer_support(run.nodes, run.root.id)
        assert (support is None and pd.isna(row["support"])) or support == pytest.approx(row["support"])
    for _, rate in rates.iterrows():
        part = flags[flags["on_corpus"] == (rate["goals"] == "on the corpus")]
        low, high = proportion_confint(int(part["flagged"].sum()), len(part), alpha=1 - record["level"], method="wilson")
        assert (rate["n"], rate["flagged"]) == (len(part), int(part["flagged"].sum()))
        assert (rate["ci_low"], rate["ci_high"]) == pytest.approx((low, high))
    by_kind = rates.set_index("goals")["rate"]
    assert by_kind["off the corpus"] >= 0.9 and by_kind["on the corpus"] <= 0.1
