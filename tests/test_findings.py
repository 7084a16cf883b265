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


GUARD = FINDINGS / "44_compare_repeat_guard"


def guard_tables(rows: pd.DataFrame, record: dict) -> dict:
    """Notebook 44's tables recomputed from its rows through the study's own code paths: each arm's rates
    per hour, the paired accuracy difference (``results.compare`` on the scores ``Evaluation.scores`` gives)
    and the ratios of the rates (``stats.paired_rate_ratio_ci``), then the protocol's rule."""
    from roma_lab.evaluate import ROW_COLUMNS
    from roma_lab.stats import paired_rate_ratio_ci, per_hour_ci
    from roma_lab.studies import ARMS, guard_decision

    stats = StatsSettings(**record["stats"])
    evaluation = Evaluation(rows=rows[list(ROW_COLUMNS)], out=GUARD, systems=ARMS, grader=record["grader"],
                            models=dict.fromkeys(ARMS, record["model"]), stats=stats)
    accuracy = compare(evaluation.scores(), ARMS[0], ARMS[1], "score", stats=stats).iloc[0]
    def arms(rows: pd.DataFrame) -> dict:
        correct = rows["score"].astype(float).fillna(0.0).eq(1.0)  # no answer is a wrong answer
        return {arm: (correct[rows["condition"] == arm].to_numpy(float),
                      rows.loc[rows["condition"] == arm, "latency_s"].to_numpy(float),
                      rows.loc[rows["condition"] == arm, "task_id"].tolist()) for arm in ARMS}

    per_arm = arms(rows)  # each arm's rate resamples its rows in the evaluation's order, as the study does
    paired_arms = arms(rows.sort_values(["condition", "task_id"], kind="stable"))  # the pairs in task-id order
    assert paired_arms[ARMS[0]][2] == paired_arms[ARMS[1]][2]  # the same tasks in the same order: pairs hold
    (c_on, s_on, _), (c_off, s_off, _) = paired_arms[ARMS[0]], paired_arms[ARMS[1]]
    ratio = paired_rate_ratio_ci(c_on, s_on, c_off, s_off, stats=stats)
    table = pd.DataFrame([{"metric": "score_diff", "value": accuracy["value"], "ci_low": accuracy["ci_low"],
                           "ci_high": accuracy["ci_high"]},
                          {"metric": "correct_per_hour_ratio", "value": ratio.estimate, "ci_low": ratio.low,
                           "ci_high": ratio.high}])
    return {"accuracy": accuracy, "ratio": ratio, "decision": guard_decision(table),
            "per_hour": {arm: per_hour_ci(c, s, stats=stats) for arm, (c, s, _) in per_arm.items()}}


def test_the_repeat_guard_s_rates_and_differences_recompute_from_its_committed_rows():
    """Notebook 44's claim: correct answers per hour on / off with its interval, the accuracy difference
    with its interval and sign test, each arm's rate, and the default the protocol's rule gives."""
    record = json.loads((GUARD / "finding.json").read_text())
    rows = read_table(GUARD, "guard_rows")
    again = guard_tables(rows, record)
    paired = read_table(GUARD, "guard_paired").set_index("metric")
    said = paired.loc["score_diff"]
    for figure in FIGURES:
        assert again["accuracy"][figure] == pytest.approx(said[figure], abs=1e-12), figure
    ratio = paired.loc["correct_per_hour_ratio"]
    assert (again["ratio"].estimate, again["ratio"].low, again["ratio"].high) == pytest.approx(
        (ratio["value"], ratio["ci_low"], ratio["ci_high"]), abs=1e-12)
    speed = read_table(GUARD, "guard_speed").set_index("arm")
    for arm, ci in again["per_hour"].items():
        assert (ci.estimate, ci.low, ci.high) == pytest.approx(
            tuple(speed.loc[arm, ["correct_per_hour", "correct_per_hour_low", "correct_per_hour_high"]]), abs=1e-9)
    decision = read_table(GUARD, "guard_decision").iloc[0]
    assert again["decision"]["default"] == decision["default"] == "guard on"
    assert rows.groupby("condition").size().eq(30).all()  # the protocol's n, every task graded in both arms

    from roma_lab.agents import AgentConfig

    assert AgentConfig().repeat_guard is (decision["default"] == "guard on")  # the default follows the finding


def test_a_changed_guard_row_changes_the_recomputed_figures():
    """The recomputation can fail: one unguarded answer flipped moves the accuracy difference and the ratio."""
    record = json.loads((GUARD / "finding.json").read_text())
    rows = read_table(GUARD, "guard_rows")
    target = rows.index[(rows["condition"] == "guard off") & (rows["score"] == 1.0)][0]
    rows.loc[target, "score"] = 0.0
    again = guard_tables(rows, record)
    paired = read_table(GUARD, "guard_paired").set_index("metric")
    assert again["accuracy"]["value"] != pytest.approx(paired.loc["score_diff", "value"])
    assert again["ratio"].estimate != pytest.approx(paired.loc["correct_per_hour_ratio", "value"])


LEVELS = FINDINGS / "27_measure_levels_table1"
# the same comparison in seven fresh clones' 2-hour make reproduce, at the n each plan or re-plan bought
# (L1 alone: 22, 29, 18, 25, 23, 18, 20)
LEVELS_2H = (FINDINGS / "27_reproduce_2h", FINDINGS / "27_reproduce_2h_run2", FINDINGS / "27_reproduce_2h_run3",
             FINDINGS / "27_reproduce_2h_run6", FINDINGS / "27_reproduce_2h_run7", FINDINGS / "27_reproduce_2h_run8",
             FINDINGS / "27_reproduce_2h_run9")


def levels_recomputed(agent_rows: pd.DataFrame, system_rows: pd.DataFrame, record: dict, folder: Path = LEVELS) -> dict:
    """Notebook 27's trend and paired tables from its committed rows, through the function the study
    calls (``papers.oagents.levels_tables``), the systems' rows scored as their evaluation scored them."""
    from roma_lab.evaluate import ROW_COLUMNS
    from roma_lab.papers.oagents import levels_tables

    stats = StatsSettings(**record["stats"])
    systems = tuple(record["systems"])
    evaluation = Evaluation(rows=system_rows[list(ROW_COLUMNS)], out=folder, systems=systems, grader=record["grader"],
                            models=dict.fromkeys(systems, record["model"]), stats=stats)
    return levels_tables(agent_rows, evaluation.scores(), model=record["model"], stats=stats)


def same_table(again: pd.DataFrame, said: pd.DataFrame) -> None:
    assert list(again.columns) == list(said.columns) and len(again) == len(said)
    for column in said.columns:
        if pd.api.types.is_numeric_dtype(said[column]) and not pd.api.types.is_bool_dtype(said[column]):
            # a one-level run leaves its trend test empty (''), which a CSV reads back as NaN
            assert again[column].replace("", float("nan")).astype(float).to_numpy() == pytest.approx(
                said[column].astype(float).to_numpy(), abs=1e-12, nan_ok=True), column
        else:
            # a CSV reads an empty text back as NaN
            assert again[column].fillna("").astype(str).tolist() == said[column].fillna("").astype(str).tolist(), column


@pytest.fixture(scope="module", params=[LEVELS, *LEVELS_2H], ids=lambda folder: folder.name)
def levels_finding(request):
    folder = request.param
    record = json.loads((folder / "finding.json").read_text())
    return record, read_table(folder, "levels_rows"), read_table(folder, "levels_systems_rows"), folder


def test_the_levels_study_s_paired_differences_and_trend_recompute_from_its_committed_rows(levels_finding):
    """Notebook 27's claim: each system minus the single call per level (difference, t-interval, wins,
    losses, ties, sign test, Holm) and each system's pass@1 per level, from the agent's and the systems'
    rows; the primary comparison's figures are the ones ``finding.json`` states."""
    record, agent_rows, system_rows, folder = levels_finding
    again = levels_recomputed(agent_rows, system_rows, record, folder)
    same_table(again["paired"], read_table(folder, "levels_paired"))
    same_table(again["trend"], read_table(folder, "levels_trend"))
    primary = record["primary"]
    row = again["paired"].set_index(["condition", "level"]).loc[(primary["comparison"], primary["level"])]
    assert (row["diff"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (primary["diff"], primary["ci_low"], primary["ci_high"]), abs=5e-4)
    assert (row["wins"], row["losses"], row["ties"], row["n"]) == (
        primary["wins"], primary["losses"], primary["ties"], primary["n"])
    # the protocol's n, every task graded by every system: no answer is a wrong answer, not a smaller n
    per_level = record["n_tasks"] // len(record["levels"])
    assert agent_rows.groupby("stratum").size().eq(per_level).all()
    assert system_rows.groupby("condition").size().eq(record["n_tasks"]).all()


def test_a_changed_levels_row_changes_the_primary_difference(levels_finding):
    """The recomputation can fail: one of the agent's L1 answers graded the other way moves the
    difference and its interval."""
    record, agent_rows, system_rows, folder = levels_finding
    primary = record["primary"]
    level = agent_rows["stratum"] == primary["level"]
    target = agent_rows.index[level][0]
    agent_rows = agent_rows.copy()
    agent_rows.loc[target, "score"] = 1.0 - float(agent_rows.loc[target, "score"] == 1.0)
    again = levels_recomputed(agent_rows, system_rows, record, folder)
    row = again["paired"].set_index(["condition", "level"]).loc[(primary["comparison"], primary["level"])]
    assert row["diff"] != pytest.approx(primary["diff"], abs=1e-3)
