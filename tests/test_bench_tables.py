"""ROMA paper Tables 1-6 (roma_lab.bench._roma_tables): resume, labels, paper rows, AbGen, Table 5."""

import json
import math
import re
import warnings

import pandas as pd
import pytest

from roma_lab import bench
from roma_lab.bench import SCRIPTED_LABEL, STRING_MATCH, ScriptedEngine
from roma_lab.controller import Node, RoleCall, Run
from roma_lab.lm import AsyncEngine


class CountingEngine(ScriptedEngine):
    """The scripted engine, counting calls; raises KeyboardInterrupt on call number ``interrupt_at``."""

    def __init__(self, interrupt_at=None):
        self.calls = 0
        self.interrupt_at = interrupt_at

    def complete(self, request):
        self.calls += 1
        if self.calls == self.interrupt_at:
            raise KeyboardInterrupt
        return super().complete(request)


def counting_lm(engine):
    import dspy

    return dspy.LM("scripted/test-double", engine=engine, async_engine=AsyncEngine(engine), cache=False)


def run_seal0(out, **kwargs):
    return bench.run_roma_table("seal0", out, n_items=4, seed=1, progress=False, n_resamples=50, **kwargs)


def raw_rows(path):
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def test_interrupted_run_resumes_without_losing_or_repeating_items(tmp_path):
    engine = CountingEngine(interrupt_at=3)  # base system: one call per item, so items 1-2 finish
    with pytest.raises(KeyboardInterrupt):
        run_seal0(tmp_path, lm=counting_lm(engine), systems=("base",))
    assert len(raw_rows(tmp_path / "seal0_results.csv")) == 2

    engine = CountingEngine()
    tables = run_seal0(tmp_path, lm=counting_lm(engine), systems=("base",))
    assert engine.calls == 2  # only the two unfinished items were asked
    rows = raw_rows(tmp_path / "seal0_results.csv")
    assert len(rows) == 4 and rows["item_id"].is_unique
    assert set(rows["item_id"]) == set(tables["seal0_results"]["item_id"])

    engine = CountingEngine()
    run_seal0(tmp_path, lm=counting_lm(engine), systems=("base",))
    assert engine.calls == 0  # everything finished: a rerun asks nothing


def test_roma_rows_resume_after_a_torn_write(tmp_path):
    run_seal0(tmp_path, lm="scripted")
    path = tmp_path / "seal0_results.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == 9  # header + 4 roma + 4 base
    path.write_text("".join(lines[:3]) + lines[3][:20], encoding="utf-8")  # killed mid-row
    engine = CountingEngine()
    with pytest.warns(UserWarning, match="cut mid-write"):
        tables = run_seal0(tmp_path, lm=counting_lm(engine))
    rows = raw_rows(path)
    assert len(rows) == 8 and not rows.duplicated(["item_id", "system"]).any()
    roma_calls = 5  # atomizer, planner, 2 executors, aggregator per item at depth 1
    assert engine.calls == 2 * roma_calls + 4  # 2 roma items re-run, 4 base items
    assert len(list((tmp_path / "seal0_runs").glob("*.json"))) == 4
    assert tables["seal0_summary"]["n_items"].tolist() == [4, 4]


def test_string_match_fallback_is_labelled_everywhere(tmp_path):
    tables = run_seal0(tmp_path, lm="scripted")
    assert set(tables["seal0_results"]["grader"]) == {STRING_MATCH}
    assert set(tables["seal0_summary"]["grader"]) == {STRING_MATCH}
    measured = tables["seal0_vs_paper"].query("origin == 'measured'")
    assert set(measured["judge"]) == {STRING_MATCH}
    assert set(measured["model"]) == {SCRIPTED_LABEL}
    assert set(measured["setting"]) == {bench.CLOSED_BOOK, "closed-book (single call)"}
    assert "2026 revision" in measured["source"].iloc[0]
    paired = tables["seal0_paired"].iloc[0]
    assert (paired["system_a"], paired["system_b"], paired["n_paired"]) == ("roma", "base", 4)


def test_paper_rows_never_in_measured_columns(tmp_path):
    tables = run_seal0(tmp_path, lm="scripted")
    vs = tables["seal0_vs_paper"]
    paper, measured = vs[vs["origin"] == "paper"], vs[vs["origin"] == "measured"]
    assert paper[["measured_value", "ci_low", "ci_high", "n_items"]].isna().all().all()
    assert measured["paper_value"].isna().all() and measured["measured_value"].notna().all()
    assert set(measured["system"]) == {"roma", "base"}
    reported = bench.paper_reported_roma_df().query("artefact == 'table1'")
    assert paper["paper_value"].tolist() == reported["value"].tolist()
    assert paper.loc[paper["system"] == "ROMA (GLM-4.6)", "paper_value"].item() == 45.9


_TABLE5_CELLS = {"cost_usd": 1, "input_tokens": 2, "output_tokens": 3, "latency_s": 4}  # seed Table 5 columns


def test_paper_figures_agree_with_the_seed_lines_they_quote():
    # Each row quotes its seed line; value, system, mark and search flag must be what that line says,
    # so a mistyped figure fails here instead of being compared with a copy of itself.
    df = bench.paper_reported_roma_df()
    assert set(df["artefact"]) == {"table1", "table2", "table3", "table4", "table5", "table6"}
    for row in df.itertuples():
        match = re.fullmatch(r"seed line \d+( \([^)]*\))?: (.+)", row.source)
        assert match, row.source
        line = match.group(2)
        if row.artefact == "table6":  # ranks stated in prose: "leading on X" or "ranking 4th ..."
            rank = re.fullmatch(r"leading on (\w+)|ranking (\d+)\w\w among .*", line)
            assert rank, line
            assert row.value == (1.0 if rank.group(1) else float(rank.group(2)))
            assert not rank.group(1) or row.metric == f"{rank.group(1).lower()}_rank"
        elif not line.startswith("|"):  # a figure stated in prose
            assert f"{row.value:g}" in line, (row.value, line)
        else:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if row.artefact == "table5":
                assert cells[0].lower() == row.component, cells
                assert float(cells[_TABLE5_CELLS[row.metric]].replace(",", "")) == row.value, (row.metric, cells)
            else:
                assert cells[0].startswith(row.system) and (row.mark == "" or row.mark in cells[0]), cells
                assert float(cells[-1]) == row.value, cells
                if len(cells) == 3:  # model | search | figure
                    assert row.search == str("checkmark" in cells[1]), cells
    marked = df[df["mark"] != ""]
    assert (marked["mark_meaning"] != "").all()
    meanings = marked.groupby(["artefact", "mark"])["mark_meaning"].nunique()
    assert (meanings == 1).all()  # one meaning per mark within a table
    assert df.loc[(df["artefact"] == "table1") & (df["mark"] == "⋆"), "mark_meaning"].iloc[0] == "SEAL-0 leaderboard"


def test_changed_settings_refuse_to_resume_into_the_same_folder(tmp_path):
    run_seal0(tmp_path, lm="scripted")
    with pytest.raises(bench.RunConfigMismatchError, match="max_depth"):
        run_seal0(tmp_path, lm="scripted", max_depth=2)


def test_rubric_benchmark_needs_a_judge(tmp_path):
    with pytest.raises(ValueError, match="judge"):
        bench.run_roma_table("eqbench_longform", tmp_path, lm="scripted", n_items=1, progress=False)


def test_eqbench_scores_stories_with_the_rubric(tmp_path):
    tables = bench.run_roma_table("eqbench_longform", tmp_path, lm="scripted", judge_lm="scripted", n_items=2,
                                  n_chapters=2, chapter_words=50, progress=False, n_resamples=50)
    results = tables["eqbench_longform_results"]
    assert results["error"].isna().all()
    assert results["grader"].str.contains("final-piece-only").all()
    summary = tables["eqbench_longform_summary"]
    assert "f1" not in summary  # no three-way metrics for rubric scores
    assert summary["mean_score"].between(0, 100).all()
    run = bench.load_item_run(tmp_path, "eqbench_longform", results["item_id"].iloc[0])
    assert "2 chapters of about 50 words" in run.goal


@pytest.mark.parametrize("path", ["", "missing.json"])
def test_abgen_without_data_writes_a_status_table(tmp_path, path):
    tables = bench.run_roma_table("abgen", tmp_path / "out", lm="scripted", judge_lm="scripted",
                                  abgen_path=str(tmp_path / path) if path else "", progress=False)
    status = pd.read_csv(tmp_path / "out" / "abgen_status.csv").iloc[0]
    assert status["status"] == "data not available"
    assert "yale-nlp/AbGen" in status["message"] and "ABGEN_PATH" in status["message"]
    assert set(tables["abgen_vs_paper"]["origin"]) == {"paper"}
    assert not (tmp_path / "out" / "abgen_results.csv").exists()


def abgen_example(i):
    return {"example_id": f"paper/{i}", "research_background": f"Background {i}.", "method": "Our method.",
            "main_experiment": {"experiment_setup": "Setup.", "results": "Results."},
            "ablation_study": {"module_name": f"module {i}", "experiment_setup": "Reference ablation."}}


def test_abgen_runs_on_a_tiny_user_file(tmp_path):
    data = tmp_path / "abgen.json"
    data.write_text(json.dumps([abgen_example(1), abgen_example(2)]), encoding="utf-8")
    tables = bench.run_roma_table("abgen", tmp_path / "out", lm="scripted", judge_lm="scripted",
                                  abgen_path=str(data), n_items=None, progress=False, n_resamples=50)
    assert tables["abgen_status"]["status"].item() == "ran"
    results = tables["abgen_results"]
    assert len(results) == 4 and results["error"].isna().all()
    assert (results["score"] == 3.0).all()  # the scripted judge's Likert score, read by AbGen's parser
    measured = tables["abgen_vs_paper"].query("origin == 'measured'")
    assert sorted(measured["metric"].unique()) == sorted(bench.ABGEN_ASPECTS)
    assert (measured["measured_value"] == 3.0).all()
    # ids with a slash still get their own run file
    assert bench.load_item_run(tmp_path / "out", "abgen", "paper/2").goal.endswith("module 2 based on the research context above.")


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
               settings={"models": {"atomizer": model}})


def test_table5_divides_usage_by_chapters_and_averages_over_stories():
    table = bench.component_cost_df({"a": scripted_run(1), "b": scripted_run(3)}, n_chapters=2).set_index("component")
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
    unknown = bench.component_cost_df({"a": scripted_run(model="openai/x")}, n_chapters=1)
    assert unknown["cost_usd"].isna().all()
    priced = bench.component_cost_df({"a": scripted_run(model="openai/x", cost=0.01)}, n_chapters=1)
    assert math.isclose(priced.set_index("component").loc["total", "cost_usd"], 0.05)


def test_measure_component_cost_writes_table5_beside_the_paper(tmp_path):
    tables = bench.measure_component_cost(tmp_path, lm="scripted", n_items=2, n_chapters=2)
    vs = tables["table5_vs_paper"]
    assert len(vs) == 20 and vs["paper_value"].notna().all() and vs["measured_value"].notna().all()
    assert set(vs["measured_model"]) == {SCRIPTED_LABEL} and set(vs["paper_model"]) == {"ROMA (DeepSeek-V3.1)"}
    assert (tables["table5_runs"]["status"] == "completed").all()
    again = bench.measure_component_cost(tmp_path, lm="scripted", n_items=2, n_chapters=2)  # reuses saved runs
    pd.testing.assert_frame_equal(again["table5_components"], tables["table5_components"])


def test_table5_runs_unfinished_stories_again(tmp_path):
    import json

    bench.measure_component_cost(tmp_path, lm="scripted", n_items=2, n_chapters=2)
    saved = sorted((tmp_path / "table5_runs").glob("*.json"))
    record = json.loads(saved[0].read_text())
    # as if that story had failed last time: the root ended without an output
    record.update(status="failed", output=None)
    record["nodes"][0].update(status="failed", output=None, error="forged failure")
    saved[0].write_text(json.dumps(record))
    saved[1].write_text("{ not a run")               # and a corrupt trace is run again too
    again = bench.measure_component_cost(tmp_path, lm="scripted", n_items=2, n_chapters=2)
    assert (again["table5_runs"]["status"] == "completed").all()
    assert json.loads(saved[0].read_text())["status"] == "completed"
    assert json.loads(saved[1].read_text())["status"] == "completed"


def test_item_picker_shows_the_chosen_items_tree(tmp_path):
    run_seal0(tmp_path, lm="scripted")
    ids = bench.saved_item_ids(tmp_path, "seal0")
    picker = bench.ItemRunPicker(tmp_path, "seal0", ids[1])
    assert picker.tree.tree["nodes"]["0"]["goal"] == bench.load_item_run(tmp_path, "seal0", ids[1]).goal
    picker.picker.value = ids[0]
    assert picker.tree.tree["nodes"]["0"]["goal"] == bench.load_item_run(tmp_path, "seal0", ids[0]).goal
    assert "text/html" in picker._repr_mimebundle_()
    with pytest.raises(ValueError, match="no saved ROMA run"):
        bench.ItemRunPicker(tmp_path, "seal0", "not-an-item")


# --- damaged run files: a settings record, a saved trace ------------------------------------------


def test_a_damaged_run_config_sets_the_old_results_aside_and_starts_over(tmp_path):
    from roma_lab.results import QuarantineWarning

    run_seal0(tmp_path, lm="scripted", systems=("base",))
    config = tmp_path / "seal0_run_config.json"
    config.write_bytes(b'{"benchmark": "seal0", "model": tru')
    engine = CountingEngine()
    with pytest.warns(QuarantineWarning, match="seal0_run_config.json is damaged"):
        run_seal0(tmp_path, lm=counting_lm(engine), systems=("base",))
    assert engine.calls == 4  # results of unknown settings are never resumed: every item runs again
    assert len(raw_rows(tmp_path / "seal0_results.csv")) == 4
    assert len(list(tmp_path.glob("seal0_results.csv.quarantined-*"))) == 1  # kept aside, not deleted
    assert len(list(tmp_path.glob("seal0_run_config.json.quarantined-*"))) == 1
    assert json.loads(config.read_text())["model"] == SCRIPTED_LABEL


def test_a_damaged_trace_runs_that_item_again(tmp_path):
    run_seal0(tmp_path, lm="scripted")
    ids = bench.saved_item_ids(tmp_path, "seal0")
    damaged = tmp_path / "seal0_runs" / f"{ids[1]}.json"
    damaged.write_bytes(damaged.read_bytes()[:200])
    with pytest.raises(bench.RunFileError, match=rf"{ids[1]}\.json is not a saved ROMA run"):
        bench.load_item_run(tmp_path, "seal0", ids[1])
    (tmp_path / "seal0_runs" / f"{ids[2]}.json").unlink()  # a finished item whose trace is gone
    engine = CountingEngine()
    with pytest.warns(UserWarning, match="damaged ROMA trace"):
        run_seal0(tmp_path, lm=counting_lm(engine))
    assert engine.calls == 2 * 5  # items 1 and 2 only: 5 ROMA calls each, no base call
    assert bench.load_item_run(tmp_path, "seal0", ids[1]).status == "completed"
    assert bench.load_item_run(tmp_path, "seal0", ids[2]).status == "completed"
    rows = raw_rows(tmp_path / "seal0_results.csv")
    assert sorted(rows.loc[rows["system"] == "roma", "item_id"].value_counts().tolist()) == [1, 1, 2, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_seal0(tmp_path, lm=counting_lm(CountingEngine()))  # repaired: the next rerun is quiet


def test_table5_writes_a_story_with_a_damaged_trace_again(tmp_path):
    bench.measure_component_cost(tmp_path, lm="scripted", n_items=2, n_chapters=2)
    saved = sorted((tmp_path / "table5_runs").glob("*.json"))
    saved[0].write_bytes(b"\x00\xff garbage")
    with pytest.warns(UserWarning, match="damaged ROMA trace; the story is written again"):
        again = bench.measure_component_cost(tmp_path, lm="scripted", n_items=2, n_chapters=2)
    assert (again["table5_runs"]["status"] == "completed").all() and len(again["table5_runs"]) == 2
    assert json.loads(saved[0].read_text())["status"] == "completed"
    assert len(list((tmp_path / "table5_runs").glob("*.quarantined-*"))) == 1
