"""roma_lab.evaluate: tasks from anything, graders by name, systems side by side, resumable rows,
the paired table against hand-computed values, the shell command."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pandas as pd
import pytest

from roma_lab.evaluate import (SHORT_ANSWER, EvaluationMismatchError, TaskFileError, benchmark_tasks, evaluate, export_world_tasks,
                               function, roma, single_call, tasks_from, world_task_set)
from roma_lab.evaluate.__main__ import main
from roma_lab.lm import current_rollout
from roma_lab.trace import load_trace

REPO = Path(__file__).resolve().parents[1]
TASKS = [{"question": "2+2?", "answer": "4"}, {"question": "Capital of France?", "answer": "Paris"},
         {"question": "Change?", "answer": "-44.2%"}]


# --- tasks from anything ---------------------------------------------------------------------------


def test_a_list_of_dicts_gets_row_numbers_as_ids_and_keeps_extra_columns_as_metadata():
    tasks = tasks_from([{"question": "q1", "answer": "a1", "topic": "x"}, {"question": "q2", "answer": 7}],
                       name="mine")
    assert [it.item_id for it in tasks.items] == ["1", "2"]
    assert tasks.items[0].metadata == {"topic": "x"} and tasks.items[1].answer == 7
    assert {it.benchmark for it in tasks.items} == {"mine"}


def test_a_csv_keeps_answers_as_written(tmp_path):
    path = tmp_path / "qs.csv"
    path.write_text('id,question,answer\na,Code?,007\nb,Total?,"8,383.57"\nc,None?,NA\n', encoding="utf-8")
    tasks = tasks_from(path)
    assert [it.answer for it in tasks.items] == ["007", "8,383.57", "NA"]  # never parsed as numbers or NaN
    assert tasks.name == "qs" and [it.item_id for it in tasks.items] == ["a", "b", "c"]


def test_jsonl_parquet_and_a_dataframe_give_the_same_items(tmp_path):
    frame = pd.DataFrame(TASKS)
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS), encoding="utf-8")
    frame.to_parquet(tmp_path / "t.parquet")
    items = [tasks_from(source, name="t").items for source in (frame, tmp_path / "t.jsonl", tmp_path / "t.parquet", TASKS)]
    assert items[0] == items[1] == items[2] == items[3]


@pytest.mark.parametrize(("text", "message"), [
    ("question,answer\nq1,a1\nq2,\n", "row 2 (line 3), column 'answer': the answer is empty"),
    ("question,answer\n,a1\n", "row 1 (line 2), column 'question': the question is empty"),
    ("question,gold\nq1,a1\n", "no 'answer' column (found ['gold', 'question']); name the answer column: --answer-column NAME in the shell"),
    ("id,question,answer\nx,q1,a1\nx,q2,a2\n", "row 2 (line 3), column 'id': id 'x' repeats"),
    ("question,answer\nq1,a1\nq1,a2\n", "row 2 (line 3), column 'question': the same question as"),
])
def test_a_malformed_csv_row_is_named_with_its_line_and_column(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TaskFileError) as err:
        tasks_from(path)
    assert message in str(err.value) and str(path) in str(err.value)


@pytest.mark.parametrize(("header", "bad", "at", "fields"), [
    ("id,question,answer", "a2,Add 2, 3 and 4; what is the sum?,9", 2, 4),  # first row: pandas took col 1 as index
    ("id,question,answer", "a2,Add 2, 3 and 4; what is the sum?,9", 7, 4),
    ("id,question,answer,level", "a2,Add 2 3 and 4?,9", 7, 3),  # pandas padded the level with ""
])
def test_a_csv_row_with_more_or_fewer_fields_than_the_header_is_refused_with_its_line(tmp_path, header, bad, at, fields):
    # issue 41: an unquoted comma shifted the columns; the run scored fragments and exited 0
    rows = [f"t{i},What is {i} plus {i}?,{2 * i}" + (",L1" if header.endswith("level") else "") for i in range(1, 17)]
    rows[at - 2] = bad
    path = tmp_path / "sixteen.csv"
    path.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(TaskFileError) as err:
        tasks_from(path)
    n = header.count(",") + 1
    assert str(err.value).startswith(f"{path}: line {at} has {fields} fields, the header (line 1: {header}) has {n}; ")
    assert 'must be quoted: "Add 2, 3 and 4"' in str(err.value)


def test_a_quoted_csv_field_may_hold_commas_quotes_and_line_breaks_and_rows_keep_their_lines(tmp_path):
    path = tmp_path / "quoted.csv"
    path.write_text('id,question,answer\na1,"Add 2, 3 and 4; the ""sum""?",9\n\na2,"two\nlines",x\na3,,y\n',
                    encoding="utf-8")
    with pytest.raises(TaskFileError, match=r"row 3 \(line 6\), column 'question'"):  # a2 spans lines 4-5
        tasks_from(path)
    path.write_text('\ufeffid,question,answer\na1,"Add 2, 3 and 4; the ""sum""?",9\n', encoding="utf-8")
    assert tasks_from(path).items[0].question == 'Add 2, 3 and 4; the "sum"?'  # and a BOM is no part of "id"
    path.write_text('id,question,answer\na1,"open,9\n', encoding="utf-8")
    with pytest.raises(TaskFileError, match=r"line 2: not CSV .*must be quoted"):
        tasks_from(path)


def test_task_files_and_fields_over_their_limits_are_refused_before_being_read(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("question,answer\n" + "".join(f"q{i},{i}\n" for i in range(200)), encoding="utf-8")
    size = path.stat().st_size
    assert len(tasks_from(path, max_bytes=size)) == 200
    with pytest.raises(TaskFileError, match=rf"big.csv: {size:,} bytes, more than the {size - 1:,} a task file may hold"):
        tasks_from(path, max_bytes=size - 1)
    jsonl = tmp_path / "big.jsonl"
    jsonl.write_text(json.dumps({"question": "q" * 50, "answer": "a"}) + "\n", encoding="utf-8")
    with pytest.raises(TaskFileError, match="more than the 20 a task file may hold"):
        tasks_from(jsonl, max_bytes=20)
    with pytest.raises(TaskFileError, match=r"row 1 \(line 1\), column 'question': 50 characters, more than the 49"):
        tasks_from(jsonl, max_field_chars=49)
    with pytest.raises(TaskFileError, match=r"task 1, column 'answer': 5 characters, more than the 4"):
        tasks_from([{"question": "q", "answer": "12345"}], max_field_chars=4)
    with pytest.raises(ValueError, match="max_bytes must be a positive integer"):
        tasks_from(path, max_bytes=0)
    from roma_lab.evaluate import MAX_FIELD_CHARS, MAX_TASK_FILE_BYTES

    assert (MAX_TASK_FILE_BYTES, MAX_FIELD_CHARS) == (64 * 1024 * 1024, 1_000_000)


def test_a_file_that_grows_past_the_limit_is_not_read_whole(tmp_path):
    from roma_lab.results._files import read_regular_bytes

    path = tmp_path / "one_line.csv"
    path.write_bytes(b"x" * (1 << 20))
    with pytest.raises(ValueError, match="holds more than 1,000 bytes"):
        read_regular_bytes(path, max_bytes=1000)
    assert read_regular_bytes(path, max_bytes=1 << 20) == b"x" * (1 << 20)


def test_a_jsonl_number_too_long_for_python_is_a_named_line(tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_text('{"question": "q1", "answer": "a"}\n{"question": "q2", "answer": ' + "9" * 5000 + "}\n")
    with pytest.raises(TaskFileError, match=r"long.jsonl: line 2 cannot be read \(Exceeds the limit"):
        tasks_from(path)


def test_a_malformed_jsonl_line_is_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "q1", "answer": "a"}\n\n{"question": "q2", "answer": \n', encoding="utf-8")
    with pytest.raises(TaskFileError, match=r"line 3 is not JSON"):
        tasks_from(path)
    path.write_text('{"question": "q1", "answer": "a"}\n["q2", "a"]\n', encoding="utf-8")
    with pytest.raises(TaskFileError, match=r"line 2 is a JSON list, not an object"):
        tasks_from(path)
    path.write_text('{"question": "q1", "answer": "a"}\n{"question": "q2", "answer": "b", "metadata": 3}\n')
    with pytest.raises(TaskFileError, match=r"row 2 \(line 2\), column 'metadata': expected a JSON object"):
        tasks_from(path)


def test_a_source_without_tasks_is_named_whole(tmp_path):
    folder = tmp_path / "run:2"  # a ':' in the path must not cut the name short
    folder.mkdir()
    for path, text in ((folder / "qs.csv", "question,answer\n"), (folder / "qs.jsonl", "\n\n")):
        path.write_text(text, encoding="utf-8")
        with pytest.raises(TaskFileError, match=f"^{re.escape(str(path))}: no tasks found$"):
            tasks_from(path)
    with pytest.raises(TaskFileError, match="^mine: no tasks found$"):
        tasks_from(pd.DataFrame(columns=["question", "answer"]), name="mine")
    with pytest.raises(TaskFileError, match="^my_tasks: no tasks found$"):
        tasks_from(pd.DataFrame(columns=["question", "answer"]))


def test_other_sources_are_refused_with_what_is_accepted(tmp_path):
    with pytest.raises(TaskFileError, match="a task file ends in .csv, .jsonl, .parquet"):
        tasks_from(tmp_path / "tasks.txt")
    with pytest.raises(TaskFileError, match="no such task file"):
        tasks_from(tmp_path / "missing.csv")
    with pytest.raises(TaskFileError, match="task 2: expected a mapping"):
        tasks_from([{"question": "q", "answer": "a"}, "q2"])
    with pytest.raises(TaskFileError, match="cannot read tasks from int"):
        tasks_from(3)


def test_registered_benchmarks_and_the_world_are_task_sets_of_the_same_type():
    aime = benchmark_tasks("aime2025", 3)
    assert len(aime) == 3 and aime.grader.name and aime.source == "benchmark:aime2025"
    assert tasks_from("benchmark:aime2025").items[:0] == ()
    world = world_task_set("dev", 4)
    assert len(world) == 4 and world.grader.name == "gaia-quasi-exact-match" and len(world.corpus) > 1000
    assert world.agent_task(world.items[0]).item == world.items[0]
    with pytest.raises(ValueError, match="holds 30 items; asked for 31"):
        benchmark_tasks("aime2025", 31)


def test_the_shipped_example_files_are_what_the_code_writes(tmp_path):
    ours = export_world_tasks(tmp_path)
    for path in ours:
        assert (REPO / "data" / "tasks" / path.name).read_bytes() == path.read_bytes(), path.name
    tasks = tasks_from(REPO / "data" / "tasks" / "world_questions.csv", corpus=REPO / "data" / "tasks" / "world_corpus.jsonl")
    assert len(tasks) == 12 and {it.metadata["level"] for it in tasks.items} == {"L1", "L2"}


# --- evaluate ------------------------------------------------------------------------------------


def _answers(table: dict[str, str], label: str, calls: list | None = None):
    def answer(question: str) -> str:
        if calls is not None:
            calls.append(question)
        return table[question]

    return function(answer, label=label)


RIGHT = {"2+2?": "4", "Capital of France?": "paris.", "Change?": "-44.2%"}


def test_rows_are_one_per_system_task_and_run_in_a_fixed_order(tmp_path):
    wrong = function(lambda q: "5", label="wrong")
    result = evaluate([_answers(RIGHT, "right"), wrong], TASKS, runs=2, out=tmp_path, progress=False)
    rows = result.rows
    assert len(rows) == 2 * 3 * 2
    assert list(zip(rows["condition"], rows["run"], rows["task_id"]))[:4] == [
        ("right", 0, "1"), ("right", 0, "2"), ("right", 0, "3"), ("right", 1, "1")]
    assert rows.loc[rows["condition"] == "right", "status"].eq("correct").all()
    assert set(rows["grader"]) == {"gaia-quasi-exact-match"}  # the default, named on every row
    assert (tmp_path / "rows.csv").is_file() and (tmp_path / "provenance.json").is_file()


def test_the_rows_export_escapes_formulas_while_the_rows_and_a_resume_stay_exact(tmp_path):
    # issue 41: text starting with =, +, - or @ went to the CSV as is (a formula in a spreadsheet)
    tasks = [{"question": "2+2?", "answer": "=4"}, {"question": "Change?", "answer": "-44.2%"}]
    answers = {"2+2?": "=4", "Change?": "@-44.2%"}
    first = evaluate([_answers(answers, "mine")], tasks, "exact", out=tmp_path, progress=False)
    assert first.rows["gold"].tolist() == ["=4", "-44.2%"] and first.rows["prediction"].tolist() == ["=4", "@-44.2%"]
    import csv

    with (tmp_path / "rows.csv").open(newline="", encoding="utf-8") as f:
        exported = list(csv.DictReader(f))
    assert [(r["gold"], r["prediction"]) for r in exported] == [("'=4", "'=4"), ("'-44.2%", "'@-44.2%")]
    calls = []
    again = evaluate([_answers(answers, "mine", calls)], tasks, "exact", out=tmp_path, progress=False)
    assert calls == [] and again.rows["prediction"].tolist() == ["=4", "@-44.2%"]  # resumed from the exact run file
    assert again.rows["score"].tolist() == [1.0, 0.0]


def test_the_grader_is_chosen_by_name_and_changes_the_score(tmp_path):
    quasi = evaluate([_answers(RIGHT, "right")], TASKS, "quasi-exact", out=tmp_path / "q", progress=False)
    exact = evaluate([_answers(RIGHT, "right")], TASKS, "exact", out=tmp_path / "e", progress=False)
    assert quasi.rows["score"].tolist() == [1.0, 1.0, 1.0]
    assert exact.rows["score"].tolist() == [1.0, 0.0, 1.0]  # "paris." is not "Paris" for the exact grader
    assert set(exact.rows["grader"]) == {"exact-match"}
    own = evaluate([_answers(RIGHT, "right")], TASKS, lambda prediction, gold: prediction.startswith(gold[:1]),
                   out=tmp_path / "c", progress=False)
    assert own.rows["score"].tolist() == [1.0, 0.0, 1.0]


def test_the_paired_table_matches_hand_computed_values(tmp_path):
    tasks = [{"question": f"q{i}", "answer": "yes"} for i in range(6)]
    a = function(lambda q: "yes" if q in {"q0", "q1", "q2", "q3", "q4"} else "no", label="a")
    b = function(lambda q: "yes" if q in {"q0"} else "no", label="b")
    result = evaluate([b, a], tasks, out=tmp_path, progress=False)
    row = result.paired("a", "b").iloc[0]
    # a - b per task: 0, 1, 1, 1, 1, 0 -> mean 4/6; 4 wins, 0 losses, 2 ties; sign test p = 2 * 0.5**4
    assert row["value"] == pytest.approx(4 / 6) and (row["wins"], row["losses"], row["ties"]) == (4, 0, 2)
    assert row["sign_test_p"] == pytest.approx(0.125)
    assert row["mean_a"] == pytest.approx(5 / 6) and row["mean_b"] == pytest.approx(1 / 6)
    summary = result.summary().set_index("condition")
    assert summary.loc["a", "value"] == pytest.approx(5 / 6) and summary.loc["b", "n"] == 6
    assert result.paired_all().iloc[0]["condition"] == "a - b"


def test_a_rerun_resumes_running_only_what_failed(tmp_path):
    calls: list[str] = []
    broken = {"on": True}

    def flaky(question: str) -> str:
        calls.append(question)
        if broken["on"] and question == "Capital of France?":
            raise RuntimeError("model went away")
        return RIGHT[question]

    first = evaluate([function(flaky, label="s")], TASKS, out=tmp_path, progress=False)
    assert first.rows["status"].tolist() == ["correct", "system_error", "correct"]
    assert "model went away" in first.rows["error"].iloc[1]
    broken["on"] = False
    calls.clear()
    second = evaluate([function(flaky, label="s")], TASKS, out=tmp_path, progress=False)
    assert calls == ["Capital of France?"]  # finished rows are kept, not asked again
    assert second.rows["status"].tolist() == ["correct", "correct", "correct"]
    assert second.summary()["value"].iloc[0] == 1.0
    calls.clear()
    evaluate([function(flaky, label="s")], TASKS, out=tmp_path, progress=False)
    assert calls == []


def test_a_system_error_scores_zero_in_the_summary(tmp_path):
    def fails(question: str) -> str:
        raise RuntimeError("no")

    result = evaluate([function(fails, label="f")], TASKS, out=tmp_path, progress=False)
    assert result.rows["status"].eq("system_error").all()
    summary = result.summary().iloc[0]
    assert summary["value"] == 0.0 and summary["n"] == 3


def test_a_rerun_under_another_protocol_is_refused(tmp_path):
    evaluate([_answers(RIGHT, "right")], TASKS, "exact", out=tmp_path, progress=False)
    with pytest.raises(EvaluationMismatchError, match="other grader"):
        evaluate([_answers(RIGHT, "right")], TASKS, "quasi-exact", out=tmp_path, progress=False)
    with pytest.raises(EvaluationMismatchError, match="other tasks"):
        evaluate([_answers(RIGHT, "right")], tasks_from(TASKS, name="renamed"), "exact", out=tmp_path, progress=False)
    changed = [dict(TASKS[0], answer="5"), *TASKS[1:]]
    with pytest.raises(EvaluationMismatchError, match=r"tasks \['1'\] with another question or gold answer"):
        evaluate([_answers(RIGHT, "right")], changed, "exact", out=tmp_path, progress=False)
    # fewer or more tasks reuse the rows they share: only the new task is asked
    assert len(evaluate([_answers(RIGHT, "right")], TASKS[:2], "exact", out=tmp_path, progress=False).rows) == 2
    calls: list[str] = []
    more = [*TASKS, {"question": "3+3?", "answer": "6"}]
    grown = evaluate([_answers(RIGHT | {"3+3?": "6"}, "right", calls)], more, "exact", out=tmp_path, progress=False)
    assert len(grown.rows) == 4 and calls == ["3+3?"]
    # a new system joins the folder; the same label with other settings does not
    evaluate([_answers(RIGHT, "right"), single_call("scripted")], TASKS, "exact", out=tmp_path, progress=False)
    with pytest.raises(EvaluationMismatchError, match="system 'single' was run with"):
        evaluate([roma("scripted", label="single")], TASKS, "exact", out=tmp_path, progress=False)


def test_each_run_is_its_own_rollout(tmp_path):
    seen: list[tuple[str, str | None]] = []
    lock = threading.Lock()

    def record(question: str) -> str:
        with lock:
            seen.append((question, current_rollout()))
        return "4"

    evaluate([function(record, label="r")], TASKS, runs=3, out=tmp_path, progress=False)
    assert sorted({rollout for _, rollout in seen}) == ["0", "1", "2"] and len(seen) == 9


def test_bad_arguments_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="distinct, non-empty labels"):
        evaluate([function(str, label="x"), function(str, label="x")], TASKS, out=tmp_path)
    with pytest.raises(ValueError, match="runs must be a positive integer"):
        evaluate([function(str, label="x")], TASKS, runs=0, out=tmp_path)
    with pytest.raises(ValueError, match="unknown grader"):
        evaluate([function(str, label="x")], TASKS, "fuzzy", out=tmp_path)
    with pytest.raises(TypeError, match="unknown settings"):
        roma("scripted", max_dept=2)
    assert not (tmp_path / "rows.csv").exists()


def test_roma_and_single_call_save_traces_with_usage_and_open_in_the_viewer(tmp_path):
    from roma_lab.widgets import ExecutionTreeWidget, RunComparison

    result = evaluate([single_call("scripted"), roma("scripted")], TASKS[:2], out=tmp_path, progress=False)
    rows = result.rows.set_index(["condition", "task_id"])
    assert rows.loc[("single", "1"), "model_calls"] == 1 and rows.loc[("roma", "1"), "model_calls"] >= 1
    assert rows.loc[("roma", "1"), "cost"] == 0.0  # in-process scripted model
    assert all((tmp_path / t).is_file() for t in result.rows["trace"])
    assert isinstance(result.view("roma", "1"), ExecutionTreeWidget)
    single = result.view("single", "1")  # a single call is a one-node run: its prompt and completion shown
    assert isinstance(single, ExecutionTreeWidget) and len(single.tree["nodes"]) == 1
    trace = result.trace("single", "1")
    assert trace.output == rows.loc[("single", "1"), "prediction"] and len(trace.nodes) == 1
    (call,) = trace.root.calls
    assert call.exchanges and "2+2" in json.dumps(call.exchanges[0].messages)  # the request as sent
    assert not isinstance(result.side_by_side("1", "roma", "roma"), type(None))
    assert isinstance(result.side_by_side("1", "roma", "roma"), RunComparison)


USAGE = ["model_calls", "input_tokens", "output_tokens", "cost"]


def test_usage_is_in_each_row_as_its_trace_counts_it_and_a_resumed_evaluation_keeps_it(tmp_path):
    def run():
        return evaluate([single_call("scripted"), roma("scripted")], TASKS[:2], out=tmp_path, progress=False).rows

    first = run()
    assert first["model_calls"].notna().all()
    for row in first.itertuples():  # the row's usage is its trace's own total, by the trace room's one rule
        usage = load_trace(tmp_path / row.trace).usage()
        assert (row.model_calls, row.input_tokens, row.output_tokens, row.cost) == (
            usage.model_calls, usage.input_tokens, usage.output_tokens, usage.cost)
    log = (tmp_path / "attempts.csv").read_text()
    resumed = run()  # every row was written by the first call: nothing is asked, the rows are read back
    assert (tmp_path / "attempts.csv").read_text() == log
    pd.testing.assert_frame_equal(resumed[USAGE], first[USAGE])


def test_the_summary_and_paired_tables_name_each_systems_model(tmp_path):
    import dspy

    other = function(lambda q: RIGHT[q], label="other", model=dspy.LM("openai/other-model", api_key="unused"))
    systems = [single_call("scripted"), single_call("scripted", label="again"), other, _answers(RIGHT, "f")]
    result = evaluate(systems, TASKS, out=tmp_path, progress=False)
    scripted = result.models["single"]
    assert scripted.startswith("scripted") and result.models == {"single": scripted, "again": scripted,
                                                                  "other": "openai/other-model", "f": None}
    named = {"single": scripted, "again": scripted, "other": "openai/other-model", "f": ""}  # f: no model named
    assert result.summary().set_index("condition")["model"].to_dict() == named
    written = pd.read_csv(tmp_path / "summary.csv", keep_default_na=False)
    assert written.set_index("condition")["model"].to_dict() == named
    assert result.paired("again", "single")["model"].tolist() == [scripted]  # one model: named once
    assert result.paired("other", "single")["model"].tolist() == [f"openai/other-model, {scripted}"]
    assert result.paired_all()["model"].tolist() == [scripted, f"openai/other-model, {scripted}", scripted]


def test_an_agent_on_the_world_gets_the_world_tools_and_a_trajectory(tmp_path):
    from roma_lab.evaluate import agent
    from roma_lab.widgets import RunComparison, TrajectoryWidget

    tasks = world_task_set("dev", 2)
    result = evaluate([roma("scripted"), agent(None, "scripted")], tasks, out=tmp_path, progress=False)
    task_id = tasks.items[0].item_id
    assert isinstance(result.view("agent", task_id), TrajectoryWidget)
    trajectory = result.trace("agent", task_id)
    assert {t.name for t in tasks.agent_task(tasks.items[0]).environment(None).tools} >= {"search", "read_file"}
    assert trajectory.task_id == task_id
    assert isinstance(result.side_by_side(task_id, "roma", "agent"), RunComparison)


# --- the shell -----------------------------------------------------------------------------------


def test_the_shell_command_runs_systems_and_prints_the_tables(tmp_path, capsys):
    path = tmp_path / "t.csv"
    pd.DataFrame(TASKS).to_csv(path, index=False)
    code = main([str(path), "--system", "single", "--system", "roma", "--lm", "scripted", "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert code == 0 and "roma - single" in out and "sign_test_p_holm" in out
    # three tasks: mde_bound is NaN, and a line says why in words
    assert "roma - single: exact sign test, 80% power, alpha 0.05; n = 3 detects nothing" in " ".join(out.split())
    assert out.splitlines()[0].split()[:3] == ["condition", "model", "grader"] and "scripted (test double" in out
    assert len(pd.read_csv(tmp_path / "o" / "rows.csv")) == 6


def test_own_tasks_are_asked_for_short_answers_by_default_and_as_written_when_told(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame(TASKS).to_csv(path, index=False)
    asked = {}
    for form in ("default", "as-is"):  # the prompt a single call sent, from its trace
        out = tmp_path / form
        args = [str(path), "--system", "single", "--lm", "scripted", "--out", str(out)]
        assert main(args + (["--answer-form", form] if form != "default" else [])) == 0
        asked[form] = (out / pd.read_csv(out / "rows.csv")["trace"].iloc[0]).read_text()
    assert json.dumps(SHORT_ANSWER)[1:-1] in asked["default"] and json.dumps(SHORT_ANSWER)[1:-1] not in asked["as-is"]
    assert all(it.question.endswith(SHORT_ANSWER) for it in tasks_from(TASKS).asking_short_answers().items)


def test_answers_longer_than_the_golds_are_warned_of_under_a_whole_answer_grader(tmp_path, capsys):
    tasks = [{"question": "Capital of France?", "answer": "Paris"}, {"question": "Capital of Japan?", "answer": "Tokyo"}]
    wordy = function(lambda q: "The capital city that the question asks about is " + ("Paris." if "France" in q else "Tokyo."),
                     label="wordy")
    terse = function(lambda q: "Paris" if "France" in q else "Tokyo", label="terse")
    result = evaluate([terse, wordy], tasks_from(tasks), out=tmp_path / "o", progress=False)
    warnings = result.length_warnings()
    assert len(warnings) == 1 and warnings[0].startswith("wordy:") and "--grader contains" in warnings[0]
    contained = evaluate([terse, wordy], tasks_from(tasks), "contains", out=tmp_path / "c", progress=False)
    assert contained.length_warnings() == []  # a grader that finds the gold inside a sentence needs no warning
    assert contained.summary().set_index("condition").loc["wordy", "value"] == 1.0


def test_the_shell_command_names_a_bad_row_and_exits_2(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("question,answer\nq1,\n", encoding="utf-8")
    assert main([str(path), "--system", "single", "--lm", "scripted", "--out", str(tmp_path / "o")]) == 2
    assert "row 1 (line 2), column 'answer'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()



def test_systems_by_name_share_one_model_and_refuse_unknown_names():
    from roma_lab.evaluate import named_systems

    systems = named_systems(["agent", "single"], "scripted", max_depth=2)
    assert [s.label for s in systems] == ["agent", "single"] and systems[0].model is systems[1].model
    assert named_systems(["roma"], "scripted", max_depth=2)[0].settings == {"max_depth": 2}
    for bad in (["single", "single"], ["gpt"], []):
        with pytest.raises(ValueError, match="distinct names from"):
            named_systems(bad, "scripted")


def test_a_task_set_as_a_table_and_a_head_of_it():
    tasks = tasks_from(TASKS)
    assert tasks.to_df()["answer"].tolist() == ["4", "Paris", "-44.2%"] and len(tasks.head(2)) == 2
    with pytest.raises(ValueError, match="holds 3 tasks; asked for 4"):
        tasks.head(4)


def test_one_progress_bar_counts_every_system_run_and_task(tmp_path, capsys):
    systems = [_answers(RIGHT, "a"), _answers(RIGHT, "b")]
    evaluate(systems[:1], TASKS, out=tmp_path, runs=2)  # 6 rows on disk before the bar below
    capsys.readouterr()
    evaluate(systems, TASKS, out=tmp_path, runs=2)
    err = capsys.readouterr().err
    assert err.count("evaluate:") >= 1 and "12/12" in err and "/6" not in err



# --- every answer is graded (issue 41) -------------------------------------------------------------


NUMBERS = [{"id": f"n{i}", "question": f"{i} + {i}?", "answer": str(2 * i)} for i in range(4)]


def test_an_abstaining_system_is_scored_on_every_task_not_on_those_it_answered(tmp_path):
    """Half right, half None: the mean is 0.5 (was 1.0, the abstentions left out as grader errors)."""
    half = function(lambda q: str(2 * int(q.split()[0])) if int(q.split()[0]) < 2 else None, label="half")
    result = evaluate([half], NUMBERS, grader="exact", out=tmp_path, progress=False)
    assert list(result.rows["status"]) == ["correct", "correct", "no_answer", "no_answer"]
    assert result.rows["score"].tolist() == [1.0, 1.0, 0.0, 0.0]
    summary = result.summary().iloc[0]
    assert summary["value"] == 0.5 and summary["n"] == 4 and summary["n_no_answer"] == 2
    assert summary["n_system_error"] == 0 and summary["n_grader_error"] == 0


@pytest.mark.parametrize("answer, status, score", [
    (lambda q: 2 * int(q.split()[0]), "correct", 1.0),  # an int is graded as its text
    (lambda q: float(2 * int(q.split()[0])), "incorrect", 0.0),  # "0.0" is not "0" under exact match
    (lambda q: "", "no_answer", 0.0),
    (lambda q: {"answer": 1}, "incorrect", 0.0),  # JSON text, graded (and wrong)
    (lambda q: 7 ** 6000, "incorrect", 0.0),  # 5,071 digits: graded wrong, never a raw ValueError
])
def test_numbers_dicts_and_empty_answers_are_graded_and_counted(tmp_path, answer, status, score):
    result = evaluate([function(answer, label="s")], NUMBERS[:1], grader="exact", out=tmp_path, progress=False)
    row = result.rows.iloc[0]
    assert (row["status"], row["score"]) == (status, score) and result.summary().iloc[0]["n"] == 1


def test_an_answer_with_no_text_is_a_system_error_scored_zero(tmp_path):
    result = evaluate([function(lambda q: {"x": object()}, label="s")], NUMBERS[:2], grader="exact", out=tmp_path,
                      progress=False)
    assert set(result.rows["status"]) == {"system_error"} and result.summary().iloc[0]["value"] == 0.0
    assert result.summary().iloc[0]["n_system_error"] == 2


def test_a_300_character_task_id_runs_and_resumes_in_one_short_distinct_file(tmp_path):
    long_id = "q/" + "x" * 298
    tasks = [{"id": long_id, "question": "1 + 1?", "answer": "2"}, {"id": "q_" + "x" * 298, "question": "2 + 2?",
                                                                   "answer": "4"}]
    first = evaluate([single_call("scripted")], tasks, out=tmp_path, progress=False)
    traces = sorted((tmp_path / "traces").rglob("*.json"))
    assert len(traces) == 2 and all(len(p.name.encode()) <= 125 for p in traces)
    assert first.trace("single", long_id).output is not None
    again = evaluate([single_call("scripted")], tasks, out=tmp_path, progress=False)
    pd.testing.assert_frame_equal(first.rows.drop(columns="latency_s"), again.rows.drop(columns="latency_s"))


# --- a damaged out folder is a typed error naming the file (issue 41) -------------------------------


@pytest.mark.parametrize("damage, file, says", [
    (lambda p: p.write_text("[1, 2]"), "evaluation.json", "holds a JSON list where a dict belongs"),
    (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "evaluation.json", "nested deeper"),
    (lambda p: p.write_text("{not json"), "evaluation.json", "is not JSON"),
    (lambda p: (p.unlink(), p.mkdir()), "evaluation.json", "is a folder"),
    (lambda p: (p.unlink(), p.mkdir()), "provenance.json", "is a folder"),
])
def test_each_damaged_file_of_an_out_folder_is_a_typed_error_naming_it_on_every_rerun(tmp_path, damage, file, says):
    from roma_lab.results import DamagedFileError

    evaluate([function(lambda q: "4", label="s")], TASKS, out=tmp_path, progress=False)
    damage(tmp_path / file)
    for _ in range(2):  # the rerun says the same, never a raw Python error
        with pytest.raises(DamagedFileError, match=re.escape(str(tmp_path / file)) + ".*" + says + ".*move it aside"):
            evaluate([function(lambda q: "4", label="s")], TASKS, out=tmp_path, progress=False)


def test_a_trace_missing_its_fields_is_a_typed_error_naming_it(tmp_path):
    from roma_lab.results import DamagedFileError

    result = evaluate([single_call("scripted")], TASKS[:1], out=tmp_path, progress=False)
    path = result.trace_path("single", result.rows["task_id"].iloc[0])
    path.write_text(json.dumps({"kind": "single_call", "output": "4"}))
    with pytest.raises(DamagedFileError, match="input_tokens"):
        result.trace("single", result.rows["task_id"].iloc[0])
    path.write_text(json.dumps({"kind": "run", "nodes": "?"}))
    with pytest.raises(DamagedFileError, match="not a run trace"):
        result.trace("single", result.rows["task_id"].iloc[0])


def test_the_shell_names_columns_by_flag_saves_the_paired_table_and_says_how_to_resume(tmp_path, monkeypatch, capsys):
    path = tmp_path / "t.csv"
    path.write_text("q,gold\n2+2?,4\n")
    assert main([str(path), "--system", "single", "--system", "roma", "--lm", "scripted", "--question-column", "q",
                 "--answer-column", "gold", "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "paired.csv").is_file()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("roma_lab.evaluate.__main__.evaluate", interrupted)
    assert main([str(path), "--system", "single", "--lm", "scripted", "--question-column", "q", "--answer-column",
                 "gold", "--out", str(tmp_path / "out")]) == 130
    assert "run the same command again to resume" in capsys.readouterr().err


def test_a_task_file_s_own_corpus_is_found_beside_it_and_the_set_says_what_search_reads(tmp_path):
    (tmp_path / "mine_questions.csv").write_text("question,answer\nq?,a\n")
    alone = tasks_from(tmp_path / "mine_questions.csv", corpus="beside")
    assert alone.corpus is None and "closed-book" in alone.corpus_note()
    (tmp_path / "mine_corpus.jsonl").write_text('{"id": "d", "text": "a"}\n')
    beside = tasks_from(tmp_path / "mine_questions.csv", corpus="beside")
    assert beside.corpus == str(tmp_path / "mine_corpus.jsonl") and "search reads" in beside.corpus_note()
    assert str(tmp_path / "mine_corpus.jsonl") in beside.corpus_note()


def test_roma_states_its_final_answer_in_the_short_form_when_the_tasks_ask_for_it(tmp_path):
    """Issue 52: ROMA's aggregator writes sentences, which a whole-answer grader counts wrong against short
    golds; on tasks asking for short answers one more call states the answer alone, in the trace like any."""
    from roma_lab.evaluate._systems import FINAL_ANSWER_ROLE

    tasks = tasks_from(TASKS)
    asked = evaluate([roma("scripted")], tasks.asking_short_answers(), out=tmp_path / "short", progress=False)
    plain = evaluate([roma("scripted")], tasks, out=tmp_path / "plain", progress=False)
    for row in asked.rows.itertuples():
        run = asked.trace("roma", row.task_id)
        final = run.nodes[0].calls[-1]
        assert final.role == FINAL_ANSWER_ROLE and run.output == final.outputs["answer"] == row.prediction
        assert final.inputs["report"] and final.input_tokens > 0  # the report it read, and its tokens counted
        assert run.usage().input_tokens == row.input_tokens  # the row counts the final call too
    for row in plain.rows.itertuples():
        assert all(c.role != FINAL_ANSWER_ROLE for n in plain.trace("roma", row.task_id).nodes for c in n.calls)


def test_a_run_holds_full_collections_rarer_through_its_calls_and_tables_and_puts_the_setting_back(tmp_path,
                                                                                                    monkeypatch):
    # issue 53 item 7: full collections of a run's growing heap held the GIL from every call in flight
    import gc

    import roma_lab.evaluate._evaluate as module
    from roma_lab._concurrent import FULL_COLLECTION_EVERY

    before, seen = gc.get_threshold(), {}
    write = module._write

    def tables(*args, **kwargs):
        seen["tables"] = gc.get_threshold()
        return write(*args, **kwargs)

    def answer(question):
        seen["call"] = gc.get_threshold()
        return "4"

    monkeypatch.setattr(module, "_write", tables)
    evaluate([function(answer, label="f")], [{"question": "2+2?", "answer": "4"}], "exact", out=tmp_path / "e",
             progress=False)
    rarer = (*before[:2], max(before[2], FULL_COLLECTION_EVERY))
    assert seen == {"call": rarer, "tables": rarer}
    assert gc.get_threshold() == before
