"""roma_lab.studies: the offline web study (notebook 42) records a run through the web, replays it
with the web stopped and says whether the replay matched; a replay that differs is said to differ."""

from __future__ import annotations

import itertools

import dspy
import pandas as pd
import pytest

from roma_lab.controller import ScriptedRoles
from roma_lab.evaluate import FunctionSystem, RomaSystem
from roma_lab.lm import CachingEngine, ScriptedEngine, script_reply
from roma_lab.stats import StatsSettings
from roma_lab.studies import measure_offline_web, replay_web_calls
from roma_lab.web import DamagedRecordingError, ReplayMissError

STATS = StatsSettings(n_resamples=50, seed=0)


def searching_roma(lm="scripted"):
    """ROMA whose scripted roles send each goal to the search executor, so every task searches and reads."""
    roles = ScriptedRoles({}, root_type="search")
    return RomaSystem(lm, "roma", roles={"atomizer": roles.atomizer, "planner": roles.planner,
                                         "aggregator": roles.aggregator}, settings={"max_depth": 1})


def test_a_run_through_the_web_replays_from_its_snapshot_call_for_call(tmp_path):
    tables = measure_offline_web(tmp_path, systems=[searching_roma()], n_tasks=2, port=0, stats=STATS)
    check = tables["web_replay"].set_index("condition").loc["roma"]
    assert check["rows_identical"] and check["traces_identical"]
    assert check["web_calls"] > 0 and check["served_from_snapshot"] == check["web_calls"]
    assert check["requests_made"] == 0
    assert (tmp_path / "web" / "web_snapshot" / "manifest.json").is_file()
    written = pd.read_csv(tmp_path / "web_rows.csv")
    assert set(written["setting"].str.split(" ").str[0]) == {"the", "BM25"}  # web, replay and BM25 rows
    assert len(written) == 3 * 2 and written["model"].notna().all()
    assert len(tables["web_paired"]) == 1  # roma through the web minus roma through BM25
    calls = pd.read_csv(tmp_path / "web_calls.csv")
    assert len(calls) == check["web_calls"] and set(calls["tool"]) == {"web_search", "web_read"}


def test_the_web_calls_table_replays_from_the_snapshot_alone_and_a_changed_snapshot_is_caught(tmp_path):
    tables = measure_offline_web(tmp_path, systems=[searching_roma()], n_tasks=2, port=0, stats=STATS)
    calls = tables["web_calls"]
    spec = tables["web_rows"]["setting"].iloc[0].split("(")[1].split(")")[0]  # the offline web, now stopped
    assert replay_web_calls(calls, tmp_path / "web", spec) == len(calls) > 0
    unseen = calls.head(1).assign(query="a query the run never made", url=None)
    with pytest.raises(ReplayMissError):
        replay_web_calls(unseen, tmp_path / "web", spec)
    entry = next((tmp_path / "web" / "web_snapshot").rglob("*/*.json"))
    entry.write_text(entry.read_text().replace("doc", "dog", 1))
    with pytest.raises(DamagedRecordingError):
        replay_web_calls(calls, tmp_path / "web", spec)


def test_a_replay_whose_model_calls_the_completion_cache_serves_is_still_identical(tmp_path):
    engine = CachingEngine(ScriptedEngine(script_reply), model_id="scripted-cached", directory=tmp_path / "cache")
    lm = dspy.LM("scripted/cached", engine=engine, cache=False)
    tables = measure_offline_web(tmp_path / "out", systems=[searching_roma(lm)], n_tasks=2, port=0, stats=STATS)
    check = tables["web_replay"].set_index("condition").loc["roma"]
    replay = pd.read_csv(tmp_path / "out" / "web_rows.csv").query("setting.str.contains('replayed')")
    assert check["rows_identical"] and check["traces_identical"] and len(replay) == 2


def test_a_replay_that_answers_differently_is_reported_as_not_identical(tmp_path):
    counter = itertools.count()
    drifting = FunctionSystem(lambda question: f"answer {next(counter)}", "drift")
    tables = measure_offline_web(tmp_path, systems=[drifting], n_tasks=2, port=0, stats=STATS)
    check = tables["web_replay"].set_index("condition").loc["drift"]
    assert not check["rows_identical"] and pd.isna(check["traces_identical"])  # a function keeps no trace


def test_an_unknown_system_name_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="some of"):
        measure_offline_web(tmp_path, systems=["roma", "oracle"], n_tasks=1, port=0)
    assert not any(tmp_path.iterdir())


def test_the_evidence_study_flags_each_goal_as_its_saved_trace_shows_and_counts_them_per_kind(tmp_path):
    from roma_lab.studies import measure_evidence_flags
    from roma_lab.trace import load_trace, without_evidence

    goals = tmp_path / "goals.csv"
    pd.DataFrame({"goal": ["Find the year the first Zildjian cymbals were made.", "Who wrote Pride and Prejudice?"],
                  "on_corpus": ["true", "false"], "answer": ["1618", "Jane Austen"]}).to_csv(goals, index=False)
    corpus = ["Q: In what year were the first Zildjian cymbals created? A: 1618"]
    tables = measure_evidence_flags(tmp_path / "out", corpus, goals=goals, lm="scripted", stats=STATS)
    flags = tables["evidence_flags"]
    rows = pd.read_csv(tmp_path / "out" / "runs" / "rows.csv")
    for (_, flag), trace in zip(flags.iterrows(), rows["trace"], strict=True):
        run = load_trace(tmp_path / "out" / "runs" / trace)
        assert flag["flagged"] == (run.root.id in without_evidence(run.nodes))
    rates = tables["evidence_rates"].set_index("goals")
    assert rates["n"].tolist() == [1, 1] and (rates["ci_low"] <= rates["rate"]).all() and (rates["rate"] <= rates["ci_high"]).all()
    assert (tmp_path / "out" / "evidence_rates.csv").is_file()
    bad = tmp_path / "bad.csv"
    bad.write_text("goal,on_corpus,answer\nq,maybe,a\n")
    with pytest.raises(ValueError, match="on_corpus true or false"):
        measure_evidence_flags(tmp_path / "bad", corpus, goals=bad, lm="scripted")
