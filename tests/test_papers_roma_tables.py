"""ROMA paper Tables 1-6 (roma_lab.papers.roma, on roma_lab.bench): the registry, resume, labels, the results vocabulary
(summary, paired comparison, paper beside ours), AbGen, Table 5 and the item picker."""

import json
import math
import re
import warnings
from types import SimpleNamespace

import dspy
import pandas as pd
import pytest
from probe_integrity import RUN_FILE_CASES

from roma_lab import bench
from roma_lab.bench import LONGFORM_TASK, STRING_MATCH, ScriptedJudge, compare_systems, scores_df, summarize_results
from roma_lab.trace import Node, RoleCall, Run
from roma_lab.controller import RomaSettings
from roma_lab.lm import ScriptedEngine, model_label, script_reply, scripted_lm
from roma_lab.papers import roma

from evaluations import attempts, graded_rows, saved_ids, saved_run, trace_file
from roma_lab.evaluate import SystemStalledError
from roma_lab.results import DamagedFileError
from roma_lab.papers.roma._benchmark_tables import OTHER_SYSTEM
from roma_lab.papers.roma._component_cost import PAPER_NAME, _beside_paper, component_cost_df
from roma_lab.papers.roma._systems import CLOSED_BOOK, SINGLE_CALL, SYSTEMS, TaskWording
from roma_lab.results import DIFFERS, NOT_IN_PAPER, NOT_MEASURED, PAPER_COLUMNS
from roma_lab.stats import StatsSettings
from roma_lab.widgets import ItemRunPicker

TABLE_BENCHMARKS = {"seal0", "frames", "simpleqa", "simpleqa_verified", "eqbench_longform", "abgen"}


SCRIPTED_LABEL = "scripted (test double, not a measurement)"


def counting_lm(interrupt_at=None):
    """The scripted model of ``lm="scripted"``, raising KeyboardInterrupt on call number ``interrupt_at``;
    ``len(lm.engine.requests)`` counts its calls (the interrupted one too). One slot: items run one at a
    time, so the call number says which items finished."""
    def respond(request):
        if len(lm.engine.requests) == interrupt_at:
            raise KeyboardInterrupt
        return script_reply(request)

    lm = scripted_lm(respond, slots=1)
    return lm


SEAL0_STATS = StatsSettings(n_resamples=50, seed=1)


def run_seal0(out, stats=SEAL0_STATS, **kwargs):
    return roma.run_roma_table("seal0", out, n_items=4, seed=1, progress=False, stats=stats, **kwargs)


def raw_rows(path):
    return pd.read_csv(path, dtype=str, keep_default_na=False)


# --- the registry --------------------------------------------------------------------------------------------------

def test_every_table_benchmark_names_paper_rows_that_exist():
    paper = roma.paper_reported_roma_df()
    tables = {name for name, spec in bench.BENCHMARKS.items() if spec.artefact}
    assert tables == TABLE_BENCHMARKS
    for name in tables:
        spec = bench.BENCHMARKS[name]
        figures = paper[paper["artefact"] == spec.artefact]
        assert set(spec.paper_names) <= set(SYSTEMS)
        for paper_name in spec.paper_names.values():  # a typo would leave our row "not in paper" forever
            assert paper_name in set(figures["condition"]), (name, paper_name)
        if spec.unmeasured == "":  # the paper reports the metric one item scores
            assert set(figures["metric"]) == {spec.metric}, name


def test_registry_specs_are_frozen_and_lookups_fail_clearly(tmp_path):
    spec = bench.BENCHMARKS["seal0"]
    with pytest.raises(AttributeError):
        spec.metric = "f1"
    with pytest.raises(TypeError):
        spec.paper_names["roma"] = "x"
    with pytest.raises(ValueError, match="unknown benchmark 'gaia'"):
        roma.run_roma_table("gaia", tmp_path, lm="scripted")
    with pytest.raises(ValueError, match="not in a ROMA paper table"):
        roma.run_roma_table("hotpotqa", tmp_path, lm="scripted")


def test_task_wording_fills_the_spec_template():
    assert TaskWording()("What is 2+2?") == "What is 2+2?"
    assert TaskWording()("a {brace} in a question") == "a {brace} in a question"
    story = TaskWording(LONGFORM_TASK, n_chapters=2, chapter_words=50)("A dragon.")
    assert "2 chapters of about 50 words" in story and "A dragon." in story
    with pytest.raises(ValueError, match="n_chapters"):
        TaskWording(LONGFORM_TASK, n_chapters=0)


# --- resume and labels ---------------------------------------------------------------------------------------------

def test_interrupted_run_resumes_without_losing_or_repeating_items(tmp_path):
    lm = counting_lm(interrupt_at=3)  # base system: one call per item, so items 1-2 finish
    with pytest.raises(KeyboardInterrupt):
        run_seal0(tmp_path, lm=lm, systems=("single",))
    assert len(attempts(tmp_path / "seal0_runs")) == 2

    lm = counting_lm()
    tables = run_seal0(tmp_path, lm=lm, systems=("single",))
    assert len(lm.engine.requests) == 2  # only the two unfinished items were asked
    rows = attempts(tmp_path / "seal0_runs")
    assert len(rows) == 4 and rows["task_id"].is_unique
    assert set(rows["task_id"]) == set(tables["seal0_results"]["task_id"])

    lm = counting_lm()
    run_seal0(tmp_path, lm=lm, systems=("single",))
    assert len(lm.engine.requests) == 0  # everything finished: a rerun asks nothing


def test_items_run_at_once_up_to_the_models_bound_and_the_tables_are_the_serial_ones(tmp_path):
    import threading
    import time

    def tables(slots, out):
        flight = {"now": 0, "peak": 0}
        lock = threading.Lock()

        def respond(request):  # the default script, held a moment so that items running at once overlap
            with lock:
                flight["now"] += 1
                flight["peak"] = max(flight["peak"], flight["now"])
            time.sleep(0.05)
            with lock:
                flight["now"] -= 1
            return script_reply(request)

        result = run_seal0(out, lm=scripted_lm(respond, slots=slots))
        return flight["peak"], {name: df.drop(columns=[c for c in df.columns if "latency" in c or c.endswith("_s")])
                                for name, df in result.items()}

    serial_peak, serial = tables(1, tmp_path / "serial")
    wide_peak, wide = tables(8, tmp_path / "wide")
    assert serial_peak == 1 and wide_peak > 1  # the items of a table ran at once
    assert serial.keys() == wide.keys()
    for name in serial:
        pd.testing.assert_frame_equal(serial[name], wide[name], obj=name)


def test_roma_rows_resume_after_a_torn_write(tmp_path):
    run_seal0(tmp_path, lm="scripted")
    path = tmp_path / "seal0_runs" / "attempts.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == 9  # header + 4 roma + 4 single
    path.write_text("".join(lines[:3]) + lines[3][:20], encoding="utf-8")  # killed mid-row
    lm = counting_lm()
    with pytest.warns(UserWarning, match="cut mid-write"):
        tables = run_seal0(tmp_path, lm=lm)
    rows = attempts(path.parent)
    assert len(rows) == 8 and not rows.duplicated(["task_id", "condition"]).any()
    roma_calls = 5  # atomizer, planner, 2 executors, aggregator per item at depth 1
    assert len(lm.engine.requests) == 2 * roma_calls + 4  # 2 roma items re-run, 4 single items
    assert len(saved_ids(tmp_path, "seal0")) == 4
    accuracy = tables["seal0_summary"].query("metric == 'accuracy'")
    assert (accuracy["n"] + accuracy["n_missing"]).tolist() == [4, 4]


def test_string_match_fallback_and_scripted_model_are_labelled_everywhere(tmp_path):
    tables = run_seal0(tmp_path, lm="scripted")
    assert set(tables["seal0_results"]["grader"]) == {STRING_MATCH}
    assert list(tables["seal0_results"]["condition"].unique()) == ["roma", "single"]
    summary = tables["seal0_summary"]
    assert set(summary["grader"]) == {STRING_MATCH} and set(summary["model"]) == {SCRIPTED_LABEL}
    assert set(summary["setting"]) == {CLOSED_BOOK, SINGLE_CALL}
    measured = tables["seal0_vs_paper"].dropna(subset=["ours"])
    assert len(measured) == 2
    for row in measured.itertuples():  # model, system setting, judge and n are on every measured row
        assert SCRIPTED_LABEL in row.setting and STRING_MATCH in row.setting and "4 of 111 items" in row.setting
        assert row.agreement == DIFFERS
        assert "string match" in row.why and "2026 revision" in row.why and SCRIPTED_LABEL in row.why
        assert "closed-book here" in row.why and "4 scored items of 111" in row.why
    paired = tables["seal0_paired"].iloc[0]
    assert (paired["condition"], paired["metric"], paired["n"]) == ("roma - single", "accuracy_diff", 4)


# --- paper beside ours ---------------------------------------------------------------------------------------------

def test_a_table_is_one_frozen_tables_type_whose_stats_reach_the_provenance(tmp_path):
    from roma_lab.results import read_provenance, write_provenance

    tables = run_seal0(tmp_path, lm="scripted")
    assert isinstance(tables, roma.RomaTables) and tables.out_dir == tmp_path
    assert tables.stats == StatsSettings(n_resamples=50, seed=1)  # the CIs' resamples and seed
    assert set(tables) == {"seal0_results", "seal0_summary", "seal0_paired", "seal0_vs_paper"}
    assert set(tables.vs_paper["table"]) == {"seal0_vs_paper"}
    write_provenance(tmp_path, parameters={}, root=tmp_path)  # as the runner does after the notebook
    assert read_provenance(tmp_path).stats.model_dump() == tables.stats.as_dict()
    structure = roma.measure_repair(tmp_path / "repair", latency_s=0.0)  # the studies too, without statistics
    assert isinstance(structure, roma.RomaTables) and set(structure) == {"repair", "repair_nodes"}
    assert structure.stats is None


def test_the_level_given_is_the_level_computed_with_and_recorded(tmp_path):
    from roma_lab.results import read_provenance, write_provenance

    gold = {it.question: str(it.answer) for it in bench.load_seal0()}
    calls = []

    def half_right(request):  # every other item right: a spread for the interval to show
        calls.append(request)
        return gold_reply(gold)(request) if len(calls) % 2 else {"answer": "no idea"}

    widths = {}
    for level in (0.95, 0.9):
        out = tmp_path / str(level)
        tables = roma.run_roma_table("seal0", out, lm=scripted_lm(half_right), n_items=8, seed=1, systems=("single",),
                                     progress=False, stats=StatsSettings(level=level))
        row = tables["seal0_summary"].set_index("metric").loc["accuracy"]
        assert row["value"] == 0.5 and f"{level:.0%}" in row["ci_method"]
        widths[level] = row["ci_high"] - row["ci_low"]
        write_provenance(out, parameters={}, root=out)  # as the runner does after the notebook
        assert read_provenance(out).stats.level == level == tables.stats.level
    assert widths[0.9] < widths[0.95]


def test_paper_file_is_in_the_vocabulary_schema_with_marks_in_the_note():
    df = roma.paper_reported_roma_df()
    assert tuple(df.columns) == PAPER_COLUMNS and len(df) == 105
    assert df["source"].str.startswith("seed line").all() and not df["derived"].any()
    fig = df.set_index(["artefact", "condition", "subset", "metric"])["value"]
    assert fig[("table1", "ROMA (GLM-4.6)", "seal0", "accuracy")] == 45.9
    assert fig[("table2", "ROMA (GLM-4.6)", "frames", "accuracy")] == 82.3
    assert fig[("table3", "ROMA (GLM-4.6)", "simpleqa", "accuracy")] == 93.9
    assert fig[("table4", "ROMA w/ GEPA+ (DeepSeek-V3.1)", "eqbench_longform", "score")] == 79.8
    assert fig[("table4", "ROMA default prompts (DeepSeek-V3)", "eqbench_longform", "score")] == 71.9
    assert fig[("table5", "ROMA (DeepSeek-V3.1)", "total", "input_tokens")] == 74423.71
    assert fig[("table6", "ROMA", "abgen", "faithfulness_rank")] == 4
    assert df.query("artefact == 'table1' and note.str.contains('mark: ⋄')")["condition"].tolist() == [
        "Perplexity Sonar Reasoning Pro", "Perplexity Deep Research", "Open Deep Search (DeepSeek-R1)"]
    # one form for the paper's columns: search only where the paper has the column, the mark with its meaning
    assert df.query("artefact in ['table1', 'table2', 'table3']")["note"].str.contains("; search: (?:yes|no)").all()
    assert not df.query("artefact not in ['table1', 'table2', 'table3']")["note"].str.contains("search:").any()
    marked = df[df["note"].str.contains("; mark: ")]
    assert marked["note"].str.contains(r"mark: [⋆⋄♠] = \w").all() and len(marked) == 56
    gpt4o = df.query("artefact == 'table2' and condition == 'GPT-4o'")["note"].item()
    assert gpt4o == "group: closed-source; search: no; mark: ⋆ = taken from Alzubi et al. (2025a)"


def test_every_paper_figure_appears_once_and_never_in_our_columns(tmp_path):
    tables = run_seal0(tmp_path, lm="scripted")
    vs = tables["seal0_vs_paper"]
    reported = roma.paper_reported_roma_df().query("artefact == 'table1'")
    assert sorted(vs["condition"]) == sorted(reported["condition"])  # our two systems meet the paper's rows
    paper_only = vs[~vs["condition"].isin(["ROMA (GLM-4.6)", "GLM-4.6"])]
    assert paper_only["ours"].isna().all() and (paper_only["agreement"] == NOT_MEASURED).all()
    assert (paper_only["why"] == OTHER_SYSTEM).all()
    merged = vs.merge(reported, on=["condition", "subset", "metric"])
    assert (merged["paper"] == merged["value"]).all() and (merged["paper_source"] == merged["source"]).all()
    summary = tables["seal0_summary"].query("metric == 'accuracy'").set_index("condition")
    ours = vs.set_index("condition")
    for system, paper_name in (("roma", "ROMA (GLM-4.6)"), ("single", "GLM-4.6")):
        assert ours.loc[paper_name, "ours"] == 100 * summary.loc[system, "value"]  # fraction read as percent
        assert ours.loc[paper_name, "n"] == summary.loc[system, "n"]
    assert ours.loc["ROMA (GLM-4.6)", "paper"] == 45.9


_TABLE5_CELLS = {"cost_usd": 1, "input_tokens": 2, "output_tokens": 3, "latency_s": 4}  # seed Table 5 columns


def _note(note, key):
    """The value of ``key`` in a paper row's note (``key: value; ...``), or ""."""
    return dict(part.split(": ", 1) for part in note.split("; ")).get(key, "")


def test_paper_figures_agree_with_the_seed_lines_they_quote():
    # Each row quotes its seed line; value, system, mark and search flag must be what that line says,
    # so a mistyped figure fails here instead of being compared with a copy of itself.
    df = roma.paper_reported_roma_df()
    assert set(df["artefact"]) == {"table1", "table2", "table3", "table4", "table5", "table6"}
    for row in df.itertuples():
        match = re.fullmatch(r"seed line \d+( \([^)]*\))?: (.+)", row.source)
        assert match, row.source
        line = match.group(2)
        mark = _note(row.note, "mark").split(" = ")[0]
        if row.artefact == "table6":  # ranks stated in prose: "leading on X" or "ranking 4th ..."
            rank = re.fullmatch(r"leading on (\w+)|ranking (\d+)\w\w among .*", line)
            assert rank, line
            assert row.value == (1.0 if rank.group(1) else float(rank.group(2)))
            assert not rank.group(1) or row.metric == f"{rank.group(1).lower()}_rank"
        elif not line.startswith("|"):  # a figure stated in prose
            assert f"{row.value:g}" in line, (row.value, line)
        else:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if row.artefact == "table5":  # the components are subsets
                assert cells[0].lower() == row.subset, cells
                assert float(cells[_TABLE5_CELLS[row.metric]].replace(",", "")) == row.value, (row.metric, cells)
            else:
                assert cells[0].startswith(row.condition) and (mark == "" or mark in cells[0]), cells
                assert float(cells[-1]) == row.value, cells
                if len(cells) == 3:  # model | search | figure
                    assert _note(row.note, "search") == ("yes" if "checkmark" in cells[1] else "no"), cells
    marks = df.assign(mark=[_note(n, "mark") for n in df["note"]]).query("mark != ''")
    symbols = marks["mark"].str.split(" = ").str[0]
    meanings = marks.groupby(["artefact", symbols])["mark"].nunique()
    assert (meanings == 1).all()  # one meaning per mark within a table
    assert marks.query("artefact == 'table1'").loc[symbols == "⋆", "mark"].iloc[0] == "⋆ = SEAL-0 leaderboard"


def gold_reply(gold):
    """A script answering with the gold answer of the question it sees."""
    return lambda request: {"answer": next(a for q, a in gold.items() if q in "\n".join(request.messages))}


def test_measured_accuracy_is_read_in_the_papers_percent(tmp_path):
    gold = {it.question: str(it.answer) for it in bench.load_seal0()}
    tables = run_seal0(tmp_path, lm=scripted_lm(gold_reply(gold)), systems=("single",))
    summary = tables["seal0_summary"].set_index("metric")
    assert summary.loc["accuracy", "value"] == 1.0 and summary.loc["accuracy", "unit"] == "fraction"
    row = tables["seal0_vs_paper"].set_index("condition").loc["GLM-4.6"]
    assert (row["ours"], row["unit"], row["paper"], row["agreement"]) == (100.0, "percent", 14.5, DIFFERS)
    assert not row["paper_in_ci"] and "outside our 95% CI" in row["why"]  # our CI is [100, 100]


def test_a_system_not_run_and_a_benchmark_the_paper_lacks_are_said_so(tmp_path):
    vs = run_seal0(tmp_path / "base", lm="scripted", systems=("single",))["seal0_vs_paper"].set_index("condition")
    assert vs.loc["ROMA (GLM-4.6)", "agreement"] == NOT_MEASURED
    assert vs.loc["ROMA (GLM-4.6)", "why"] == "not run: this call's systems were ['single']"
    assert vs.loc["GLM-4.6", "agreement"] == DIFFERS

    tables = roma.run_roma_table("simpleqa_verified", tmp_path / "v", lm="scripted", n_items=3, progress=False,
                                  stats=StatsSettings(n_resamples=50))
    vs = tables["simpleqa_verified_vs_paper"]
    ours = vs[vs["subset"] == "simpleqa_verified"]
    assert sorted(ours["condition"]) == ["GLM-4.6", "ROMA (GLM-4.6)"] and (ours["agreement"] == NOT_IN_PAPER).all()
    assert ours["unit"].eq("fraction").all()  # no paper unit to read ours in
    counterparts = vs[(vs["subset"] == "simpleqa") & vs["condition"].isin(["GLM-4.6", "ROMA (GLM-4.6)"])]
    assert len(counterparts) == 2 and counterparts["why"].str.contains("not SimpleQA Verified").all()


# --- NaN policy, three-way metrics, paired comparison --------------------------------------------------------------

def items(n):
    return [bench.Item(benchmark="simpleqa", item_id=str(i), question=f"q{i}", answer=f"a{i}") for i in range(n)]


def half_right(fail_on=()):
    def system(question):
        i = int(question[1:])
        if question in fail_on:
            raise RuntimeError(f"cannot answer {question}")
        return f"a{i}" if i % 2 == 0 else "no idea"

    return system


def two_systems(tmp_path):
    return graded_rows(tmp_path / "ev", items(10), {"roma": lambda q: q.replace("q", "a"),
                                                    "single": half_right(fail_on={"q9"})}, bench.StringMatchGrader())


SIMPLEQA = bench.BENCHMARKS["simpleqa"]


def test_system_errors_score_zero_and_count_as_not_attempted(tmp_path):
    summary = summarize_results(two_systems(tmp_path), SIMPLEQA, stats=StatsSettings(n_resamples=200)).set_index(["condition", "metric"])
    good, half = summary.loc[("roma", "accuracy")], summary.loc[("single", "accuracy")]
    assert good["value"] == 1.0 and good["ci_low"] == good["ci_high"] == 1.0
    assert half["n_system_errors"] == 1 and half["n"] == 10 and half["n_missing"] == 0
    assert half["value"] == pytest.approx(0.5)  # items 0,2,4,6,8 right; 9 failed -> 0
    assert half["ci_low"] < 0.5 < half["ci_high"]
    assert summary.loc[("single", "is_not_attempted"), "value"] == pytest.approx(0.1)
    assert summary.loc[("single", "accuracy_given_attempted"), "value"] == pytest.approx(5 / 9)
    assert summary.loc[("single", "f1"), "value"] == pytest.approx(2 * (5 / 9) * 0.5 / (5 / 9 + 0.5))
    assert summary.loc[("single", "f1"), "n"] == 10 and math.isnan(summary.loc[("single", "f1"), "ci_low"])
    assert set(summary["grader"]) == {STRING_MATCH} and set(summary["unit"]) == {"fraction"}


def test_grader_errors_are_not_scored_but_counted(tmp_path):
    replies = iter(["A", "unparseable", "B"])
    df = graded_rows(tmp_path / "ev", items(3), {"roma": str}, bench.SimpleQAGrader(lambda p, system=None: next(replies)))
    summary = summarize_results(df, SIMPLEQA, stats=StatsSettings(n_resamples=100)).set_index("metric")
    assert summary.loc["accuracy", "n"] == 2 and summary.loc["accuracy", "n_missing"] == 1
    assert summary.loc["accuracy", "value"] == 0.5 and summary.loc["is_correct", "value"] == 0.5
    assert summary.loc["accuracy", "n_system_errors"] == 0


def test_paired_comparison_uses_items_both_systems_scored(tmp_path):
    results = two_systems(tmp_path)
    cmp = compare_systems(results, SIMPLEQA, "roma", "single", stats=StatsSettings(n_resamples=200)).iloc[0]
    assert cmp["n"] == 10 and cmp["value"] == pytest.approx(0.5)
    assert (cmp["wins"], cmp["losses"], cmp["ties"]) == (5, 0, 5)
    assert cmp["sign_test_p"] == pytest.approx(0.0625) and cmp["ci_low"] > 0
    graded = results.copy()
    graded.loc[(graded["condition"] == "roma") & (graded["task_id"] == "0"), ["score", "error_stage"]] = [math.nan,
                                                                                                     "grader"]
    assert compare_systems(graded, SIMPLEQA, "roma", "single", stats=StatsSettings(n_resamples=50)).iloc[0]["n"] == 9


def story_system(fail_on):
    def system(question):
        if question == fail_on:
            raise RuntimeError("no story")
        return "Chapter 1\n\nOnce upon a time."

    return system


def test_rubric_scores_get_no_three_way_metrics_even_with_a_system_error(tmp_path):
    data = [bench.Item(benchmark="eqbench_longform", item_id=str(i), question=f"prompt {i}", answer="")
            for i in range(3)]
    results = graded_rows(tmp_path / "ev", data, {"roma": story_system(fail_on="prompt 2")},
                          bench.EQBenchLongformGrader(ScriptedJudge()))
    summary = summarize_results(results, bench.BENCHMARKS["eqbench_longform"], stats=StatsSettings(n_resamples=50))
    assert summary["metric"].tolist() == ["score"] and summary["n_system_errors"].item() == 1
    story_score = results["score"].iloc[0]
    assert 0 < story_score and summary["value"].item() == pytest.approx(story_score * 2 / 3)  # failed one scores 0


def abgen_results(rows):
    base = {"benchmark": "abgen", "prediction": "", "label": None, "grader": "g", "error": None, "error_stage": "",
            "latency_s": 0.0, "grader_raw": ""}
    return pd.DataFrame([base | r for r in rows])


def test_abgen_aspects_follow_the_nan_policy_and_overall_is_the_score():
    aspects = {"importance": 4.0, "faithfulness": 2.0, "soundness": 3.0, "overall": 5.0}
    results = abgen_results([
        {"task_id": "a", "condition": "roma", "score": 5.0, "details": json.dumps(aspects)},
        {"task_id": "b", "condition": "roma", "score": None, "details": "", "error": "RuntimeError: x",
         "error_stage": "system"},
        {"task_id": "c", "condition": "roma", "score": None, "details": "", "error": "JudgeReplyError: y",
         "error_stage": "grader"},
    ])
    spec = bench.BENCHMARKS["abgen"]
    scores = scores_df(results, spec).set_index("task_id")
    assert scores.loc["a", "faithfulness"] == 2.0 and scores.loc["b", "faithfulness"] == 0.0
    assert math.isnan(scores.loc["c", "faithfulness"]) and (scores["overall"].fillna(-1) == [5.0, 0.0, -1]).all()
    summary = summarize_results(results, spec, stats=StatsSettings(n_resamples=50)).set_index("metric")
    assert summary.index.tolist() == ["overall", "importance", "faithfulness", "soundness"]
    assert summary.loc["importance", "value"] == 2.0 and (summary["n"] == 2).all() and (summary["n_missing"] == 1).all()


# --- guards and the long-form tables -------------------------------------------------------------------------------

def test_changed_settings_refuse_to_resume_into_the_same_folder(tmp_path):
    run_seal0(tmp_path, lm="scripted")
    with pytest.raises(roma.RunConfigMismatchError, match="max_depth"):
        run_seal0(tmp_path, lm="scripted", max_depth=2)


def test_rubric_benchmark_needs_a_judge(tmp_path):
    with pytest.raises(ValueError, match="judge"):
        roma.run_roma_table("eqbench_longform", tmp_path, lm="scripted", n_items=1, progress=False)


def test_eqbench_scores_stories_with_the_rubric(tmp_path):
    tables = roma.run_roma_table("eqbench_longform", tmp_path, lm="scripted", judge_lm="scripted", n_items=2,
                                  n_chapters=2, chapter_words=50, progress=False, stats=StatsSettings(n_resamples=50))
    results = tables["eqbench_longform_results"]
    assert results["error"].isna().all()
    assert results["grader"].str.contains("final-piece-only").all()
    summary = tables["eqbench_longform_summary"]
    assert summary["metric"].tolist() == ["score", "score"]  # no three-way metrics for rubric scores
    assert summary["value"].between(0, 100).all() and set(summary["unit"]) == {"score"}
    run = saved_run(tmp_path, "eqbench_longform", results["task_id"].iloc[0])
    assert "2 chapters of about 50 words" in run.goal
    vs = tables["eqbench_longform_vs_paper"].set_index("condition")
    assert vs.loc["ROMA default prompts (DeepSeek-V3)", "ours"] == summary.query("condition == 'roma'")["value"].item()
    assert "compact protocol" in vs.loc["ROMA default prompts (DeepSeek-V3)", "why"]
    assert vs.loc["single", "agreement"] == NOT_IN_PAPER  # the paper has no row for ROMA's base model here


@pytest.mark.parametrize("path", ["", "missing.json"])
def test_abgen_without_data_writes_a_status_table(tmp_path, path):
    tables = roma.run_roma_table("abgen", tmp_path / "out", lm="scripted", judge_lm="scripted",
                                  data_path=str(tmp_path / path) if path else "", progress=False)
    status = pd.read_csv(tmp_path / "out" / "abgen_status.csv").iloc[0]
    assert status["status"] == "data not available"
    assert "yale-nlp/AbGen" in status["message"] and "ABGEN_PATH" in status["message"]
    vs = tables["abgen_vs_paper"]
    assert len(vs) == 4 and (vs["agreement"] == NOT_MEASURED).all() and vs["why"].str.contains("ranks").all()
    assert not (tmp_path / "out" / "abgen_results.csv").exists()


def abgen_example(i):
    return {"example_id": f"paper/{i}", "research_background": f"Background {i}.", "method": "Our method.",
            "main_experiment": {"experiment_setup": "Setup.", "results": "Results."},
            "ablation_study": {"module_name": f"module {i}", "experiment_setup": "Reference ablation."}}


def test_abgen_runs_on_a_tiny_user_file(tmp_path):
    data = tmp_path / "abgen.json"
    data.write_text(json.dumps([abgen_example(1), abgen_example(2)]), encoding="utf-8")
    tables = roma.run_roma_table("abgen", tmp_path / "out", lm="scripted", judge_lm="scripted",
                                  data_path=str(data), n_items=None, progress=False, stats=StatsSettings(n_resamples=50))
    assert tables["abgen_status"]["status"].item() == "ran"
    results = tables["abgen_results"]
    assert len(results) == 4 and results["error"].isna().all()
    assert (results["score"] == 3.0).all()  # the scripted judge's Likert score, read by AbGen's parser
    summary = tables["abgen_summary"]
    assert sorted(summary["metric"].unique()) == sorted(("importance", "faithfulness", "soundness", "overall"))
    assert (summary["value"] == 3.0).all()
    assert (tables["abgen_vs_paper"]["agreement"] == NOT_MEASURED).all()  # the paper states ranks only
    # ids with a slash still get their own run file
    assert saved_run(tmp_path / "out", "abgen", "paper/2").goal.endswith("module 2 based on the research context above.")


def call(role, inp, out, latency, cost=None, model="local/test"):
    return RoleCall(role=role, inputs={}, outputs={}, context_chars=0, input_tokens=inp, output_tokens=out,
                    cost=cost, latency_s=latency, started_s=0.0, model=model)


def scripted_run(scale=1, model="local/test", cost=None):
    root = Node(id="0", parent_id=None, depth=0, goal="story", task_type="write", status="completed", output="s",
                calls=(call("atomizer", 100 * scale, 10, 1.0, cost, model), call("planner", 200 * scale, 40, 2.0, cost, model),
                       call("aggregator", 400 * scale, 80, 4.0, cost, model)))
    kids = tuple(Node(id=f"0.{i}", parent_id="0", depth=1, goal=f"chapter {i}", task_type="write", status="completed",
                      output="c", calls=(call("executor:write", 50 * scale, 100, 3.0, cost, model),)) for i in range(2))
    return Run(goal="story", status="completed", output="s", nodes=(root, *kids), wall_s=13.0,
               settings=RomaSettings(models={"atomizer": model}))


def test_table5_divides_usage_by_chapters_and_averages_over_stories():
    table = component_cost_df({"a": scripted_run(1), "b": scripted_run(3)}, n_chapters=2).set_index("component")
    assert list(table.index) == ["atomizer", "planner", "executor", "aggregator", "total"]
    # atomizer input: (100 + 300) / 2 stories / 2 chapters
    assert table.loc["atomizer", "input_tokens"] == 100.0
    assert table.loc["executor", "calls_per_chapter"] == 1.0  # two executor calls, two chapters
    assert table.loc["executor", "output_tokens"] == 100.0
    assert table.loc["executor", "latency_s"] == 3.0
    assert table.loc["total", "input_tokens"] == (800 + 2400) / 2 / 2
    assert table.loc["total", "latency_s"] == 13.0 / 2
    assert (table["cost_usd"] == 0.0).all()  # a local model has no API bill
    assert (table["n_stories"] == 2).all()


def test_table5_cost_unknown_stays_nan_and_known_cost_is_kept():
    unknown = component_cost_df({"a": scripted_run(model="openai/x")}, n_chapters=1)
    assert unknown["cost_usd"].isna().all()
    # a scripted run saved before its calls were costed 0 (old files name it "scripted/test-double")
    for name in ("scripted", "scripted/test-double"):
        assert (component_cost_df({"a": scripted_run(model=name)}, n_chapters=1)["cost_usd"] == 0.0).all()
    priced = component_cost_df({"a": scripted_run(model="openai/x", cost=0.01)}, n_chapters=1)
    assert math.isclose(priced.set_index("component").loc["total", "cost_usd"], 0.05)


def test_measure_component_cost_writes_table5_beside_the_paper(tmp_path):
    tables = roma.measure_component_cost(tmp_path, lm="scripted", n_items=2, n_chapters=2)
    vs, components = tables["table5_vs_paper"], tables["table5_components"].set_index("component")
    assert len(vs) == 20 and vs["paper"].notna().all() and vs["ours"].notna().all()
    assert set(vs["condition"]) == {PAPER_NAME} and (vs["n"] == 2).all()
    assert set(vs["subset"]) == {"atomizer", "planner", "executor", "aggregator", "total"}
    for row in vs.itertuples():  # ours is the components table, read in the paper's unit
        assert row.ours == components.loc[row.subset, row.metric]
        assert SCRIPTED_LABEL in row.setting and "2 chapters" in row.setting
        assert row.why == "" or "8 chapter turns of 1000 words" in row.why
    assert (tables["table5_runs"]["status"] == "completed").all()
    again = roma.measure_component_cost(tmp_path, lm="scripted", n_items=2, n_chapters=2)  # reuses saved runs
    pd.testing.assert_frame_equal(again["table5_components"], tables["table5_components"])
    cost_why = vs.query("metric == 'cost_usd' and why != ''")["why"]  # (a figure that matches needs no why)
    assert len(cost_why) and cost_why.str.contains("our model has no API price, so its cost is 0").all()


def test_table5_says_no_api_price_only_of_an_in_process_model():
    priced = component_cost_df({"a": scripted_run(model="openai/x", cost=0.01)}, n_chapters=1)
    vs = _beside_paper(priced, SimpleNamespace(model="openai/x"), TaskWording(LONGFORM_TASK, n_chapters=1))
    why = vs.query("metric == 'cost_usd' and why != ''")["why"]
    assert len(why) and not why.str.contains("no API price").any()


def test_table5_cost_of_a_remote_model_without_a_price_is_unknown_not_zero(tmp_path):
    remote = dspy.LM("openai/unpriced", engine=ScriptedEngine(), cache=False)  # offline: answers from the script
    tables = roma.measure_component_cost(tmp_path, lm=remote, n_items=1, n_chapters=2)
    assert tables["table5_components"]["cost_usd"].isna().all()
    assert tables["table5_components"]["input_tokens"].gt(0).all()  # what it did report is kept
    cost = tables["table5_vs_paper"].query("metric == 'cost_usd'")
    assert cost["ours"].isna().all() and not cost["why"].str.contains("no API price").any()


def forge_ending(path, status):
    """Rewrite a saved story as if its run had ended ``failed`` (root without an output) or ``partial``
    (a subtask degraded), keeping the trace consistent (Run checks its invariants on load)."""
    record = json.loads(path.read_text())
    if status == "failed":
        record.update(status="failed", output=None)
        record["nodes"][0].update(status="failed", output=None, error="forged failure")
    else:
        record["status"] = "partial"
        record["nodes"][1].update(status="degraded", error="forged: no usable plan, executed directly")
    path.write_text(json.dumps(record))


def test_table5_runs_stopped_and_damaged_stories_again(tmp_path):
    with pytest.raises(KeyboardInterrupt):  # story 1 (5 calls) completes, story 2 stops at its 2nd call
        roma.measure_component_cost(tmp_path, lm=counting_lm(interrupt_at=7), n_items=3,
                                     n_chapters=2)
    saved = {json.loads(p.read_text())["status"]: p for p in (tmp_path / "table5_runs" / "traces").rglob("*.json")}
    assert sorted(saved) == ["completed", "interrupted"]  # the interrupted story's trace is kept
    roma.measure_component_cost(tmp_path, lm="scripted", n_items=3, n_chapters=2)
    saved["completed"].write_text("{ not a run")  # a corrupt trace is run again too
    lm = counting_lm()
    with pytest.warns(UserWarning, match="not a trace roma_lab wrote"):
        again = roma.measure_component_cost(tmp_path, lm=lm, n_items=3, n_chapters=2)
    assert len(lm.engine.requests) == 5  # the damaged story only
    assert (again["table5_runs"]["status"] == "completed").all() and again["table5_runs"]["averaged"].all()
    assert all(json.loads(p.read_text())["status"] == "completed" for p in saved.values())


def test_table5_keeps_stories_that_ended_and_averages_completed_ones_only(tmp_path):
    first = roma.measure_component_cost(tmp_path, lm="scripted", n_items=3, n_chapters=2)
    ids = first["table5_runs"]["task_id"].tolist()
    forge_ending(trace_file(tmp_path, "table5", ids[0]), "failed")
    forge_ending(trace_file(tmp_path, "table5", ids[1]), "partial")
    lm = counting_lm()
    again = roma.measure_component_cost(tmp_path, lm=lm, n_items=3, n_chapters=2)
    assert len(lm.engine.requests) == 0  # a story whose run ended is finished: not written again on resume
    runs = again["table5_runs"].set_index("task_id")
    assert runs.loc[ids, "status"].tolist() == ["failed", "partial", "completed"]  # what was left out, and why
    assert runs.loc[ids, "averaged"].tolist() == [False, False, True]
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "table5_runs.csv", dtype={"task_id": str}),
                                  again["table5_runs"])
    only = component_cost_df({ids[2]: saved_run(tmp_path, "table5", ids[2])}, n_chapters=2)
    assert set(again["table5_components"]["model"]) == {model_label(lm)}  # the table names its model
    pd.testing.assert_frame_equal(again["table5_components"].drop(columns="model"), only)
    assert (again["table5_vs_paper"].dropna(subset=["ours"])["n"] == 1).all()

    forge_ending(trace_file(tmp_path, "table5", ids[2]), "partial")  # no completed story left: nothing to average
    with pytest.raises(roma.RomaRunError, match="no story completed"):
        roma.measure_component_cost(tmp_path, lm="scripted", n_items=3, n_chapters=2)
    assert pd.read_csv(tmp_path / "table5_runs.csv")["status"].tolist() == ["failed", "partial", "partial"]


def test_item_picker_shows_the_chosen_items_tree(tmp_path):
    run_seal0(tmp_path, lm="scripted")
    ids = saved_ids(tmp_path, "seal0")
    picker = ItemRunPicker(tmp_path, "seal0", ids[1])
    assert picker.tree.tree["nodes"]["0"]["goal"] == saved_run(tmp_path, "seal0", ids[1]).goal
    picker.picker.value = ids[0]
    assert picker.tree.tree["nodes"]["0"]["goal"] == saved_run(tmp_path, "seal0", ids[0]).goal
    assert "text/html" in picker._repr_mimebundle_()
    with pytest.raises(ValueError, match="no saved roma trace"):
        ItemRunPicker(tmp_path, "seal0", "not-an-item")


def test_bench_never_imports_widgets():
    import ast
    from pathlib import Path

    for path in Path(bench.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.startswith("roma_lab.widgets") for n in names), path.name


# --- damaged run files: a settings record, a saved trace ------------------------------------------


@pytest.mark.parametrize("case", [c for c in RUN_FILE_CASES if not c.name.startswith("results")],
                         ids=lambda c: c.name)
def test_every_probed_table_file_damage_is_recovered(case, tmp_path):
    assert case.run(tmp_path) == "recovered"  # the integrity probe's cases, so the probe stays runnable


def test_a_damaged_run_config_sets_the_old_results_aside_and_starts_over(tmp_path):
    from roma_lab.results import QuarantineWarning

    run_seal0(tmp_path, lm="scripted", systems=("single",))
    config = tmp_path / "seal0_run_config.json"
    config.write_bytes(b'{"benchmark": "seal0", "model": tru')
    lm = counting_lm()
    with pytest.warns(QuarantineWarning, match="seal0_run_config.json is damaged"):
        run_seal0(tmp_path, lm=lm, systems=("single",))
    assert len(lm.engine.requests) == 4  # results of unknown settings are never resumed: every item runs again
    assert len(attempts(tmp_path / "seal0_runs")) == 4
    assert len(list(tmp_path.glob("seal0_runs.quarantined-*"))) == 1  # kept aside, not deleted
    assert len(list(tmp_path.glob("seal0_run_config.json.quarantined-*"))) == 1
    assert json.loads(config.read_text())["model"] == SCRIPTED_LABEL


def test_a_damaged_trace_runs_that_item_again(tmp_path):
    run_seal0(tmp_path, lm="scripted")
    ids = saved_ids(tmp_path, "seal0")
    damaged = trace_file(tmp_path, "seal0", ids[1])
    damaged.write_bytes(damaged.read_bytes()[:200])
    with pytest.raises(DamagedFileError, match=rf"{ids[1]}\.json: is not JSON"):
        saved_run(tmp_path, "seal0", ids[1])
    trace_file(tmp_path, "seal0", ids[2]).unlink()  # a finished item whose trace is gone
    lm = counting_lm()
    with pytest.warns(UserWarning, match="not a trace roma_lab wrote"):
        run_seal0(tmp_path, lm=lm)
    assert len(lm.engine.requests) == 2 * 5  # items 1 and 2 only: 5 ROMA calls each, no single call
    assert saved_run(tmp_path, "seal0", ids[1]).status == "completed"
    assert saved_run(tmp_path, "seal0", ids[2]).status == "completed"
    rows = attempts(tmp_path / "seal0_runs")
    assert sorted(rows.loc[rows["condition"] == "roma", "task_id"].value_counts().tolist()) == [1, 1, 2, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_seal0(tmp_path, lm=counting_lm())  # repaired: the next rerun is quiet


def test_table5_writes_a_story_with_a_damaged_trace_again(tmp_path):
    roma.measure_component_cost(tmp_path, lm="scripted", n_items=2, n_chapters=2)
    saved = sorted((tmp_path / "table5_runs" / "traces").rglob("*.json"))
    saved[0].write_bytes(b"\x00\xff garbage")
    with pytest.warns(UserWarning, match="not a trace roma_lab wrote; its task runs again"):
        again = roma.measure_component_cost(tmp_path, lm="scripted", n_items=2, n_chapters=2)
    assert (again["table5_runs"]["status"] == "completed").all() and len(again["table5_runs"]) == 2
    assert json.loads(saved[0].read_text())["status"] == "completed"
    assert len(list((tmp_path / "table5_runs").rglob("*.quarantined-*"))) == 1



def test_items_past_their_deadline_in_a_row_stop_the_run_with_finished_rows_kept(tmp_path):
    # ROMA stops an item at item_timeout_s (a timed_out run, trace kept, an error row), and a model that
    # stopped answering does not cost every item its deadline: the stall guard counts ROMA's deadline
    # like the runner's own timeout.
    import threading

    released = threading.Event()

    def respond(request):
        released.wait(30)
        return script_reply(request)

    try:
        with pytest.raises(SystemStalledError, match="3 timeouts in a row"):
            # one slot: the items run one after another, so the first three are the three in a row
            roma.run_roma_table("seal0", tmp_path, lm=scripted_lm(respond, slots=1), n_items=5, seed=1,
                                 progress=False, systems=("roma",), item_timeout_s=0.2)
    finally:
        released.set()
    rows = attempts(tmp_path / "seal0_runs")
    assert len(rows) == 3 and (rows["error_stage"] == "system").all()
    assert rows["error"].str.startswith("RomaTimeoutError: ROMA run timed_out").all()
    traces = list((tmp_path / "seal0_runs" / "traces").rglob("*.json"))  # each stopped item keeps its trace
    assert len(traces) == 3 and {Run.from_json(t.read_text()).status for t in traces} == {"timed_out"}
