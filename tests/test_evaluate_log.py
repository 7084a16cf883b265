"""evaluate's attempt log (``attempts.csv``): resumable graded runs through interruption, errors,
timeouts, torn and damaged rows, files of another table or an older layout, and tasks run at once.

Summaries and paired comparisons of these rows are tested in test_evaluate.py and
test_papers_roma_tables.py."""

import csv
import io
import json
import re
import threading
import warnings

import pandas as pd
import pytest
from evaluations import attempts
from probe_integrity import RUN_FILE_CASES

from roma_lab import bench
from roma_lab.bench import Item
from roma_lab.bench._grade import Grade
from roma_lab.evaluate import (
    ROW_COLUMNS,
    LogFileError,
    OldLayoutError,
    SystemStalledError,
    TaskFileError,
    TaskSet,
    evaluate,
    function,
)
from roma_lab.evaluate._log import read_log_df
from roma_lab.lm import scripted_lm
from roma_lab.results import FolderBusyError, QuarantineWarning

LOG = "attempts.csv"


def items(n=6, benchmark="simpleqa"):
    return [Item(benchmark=benchmark, item_id=str(i), question=f"q{i}", answer=f"a{i}") for i in range(n)]


def tasks(n=6, benchmark="simpleqa"):
    return TaskSet(benchmark, tuple(items(n, benchmark)))


def run(out, system, work=None, grader=None, *, label="s", model=None, **kwargs):
    """The rows of ``evaluate`` with the function ``system`` (labelled ``label``) on ``work`` (default:
    six tasks), graded by string match unless ``grader`` is given."""
    work = tasks() if work is None else work
    work = work if isinstance(work, TaskSet) else TaskSet(work[0].benchmark, tuple(work))
    return evaluate([function(system, label=label, model=model)], work,
                    bench.StringMatchGrader() if grader is None else grader, out=out, progress=False, **kwargs).rows


def logged(out):
    """The log's latest row per (system, run, task), as ``evaluate`` reads it back."""
    return read_log_df(out / LOG)


class Echo:
    """Answers item i with its gold answer when i is even (every i with ``all_right``, ``reply`` to
    every question when given); counts calls per question. One class for a system and its rerun: a
    folder refuses another function under the same label (evaluation.json records its name)."""

    def __init__(self, interrupt_on=None, fail_on=(), all_right=False, reply=None):
        self.calls = []
        self.interrupt_on = interrupt_on
        self.fail_on = set(fail_on)
        self.all_right, self.reply = all_right, reply

    def __call__(self, question):
        self.calls.append(question)
        i = int(question[1:])
        if question == self.interrupt_on:
            raise KeyboardInterrupt
        if question in self.fail_on:
            raise RuntimeError(f"cannot answer {question}")
        if self.reply is not None:
            return self.reply
        return f"a{i}" if self.all_right or i % 2 == 0 else "no idea"


def test_interrupted_run_resumes_without_loss_or_repeat(tmp_path):
    first = Echo(interrupt_on="q3")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, first)
    assert first.calls == ["q0", "q1", "q2", "q3"]
    assert list(logged(tmp_path)["task_id"]) == ["0", "1", "2"]

    second = Echo()
    df = run(tmp_path, second)
    assert second.calls == ["q3", "q4", "q5"]  # finished tasks skipped, the interrupted one run again
    assert sorted(attempts(tmp_path)["task_id"]) == [str(i) for i in range(6)]  # each exactly once
    assert list(df["task_id"]) == [str(i) for i in range(6)]
    assert list(df["label"]) == ["CORRECT", "INCORRECT"] * 3
    assert list(df["status"]) == ["correct", "incorrect"] * 3
    assert set(df["grader"]) == {bench.STRING_MATCH}

    third = Echo()
    run(tmp_path, third)
    assert third.calls == []


def test_system_errors_and_timeouts_are_rows_and_the_run_goes_on(tmp_path):
    release = threading.Event()

    def system(question):
        if question == "q1":
            raise RuntimeError("tool crashed")
        if question == "q2":
            release.wait(5)  # hangs past the timeout; released at the end of the test
        return question.replace("q", "a")

    try:
        df = run(tmp_path, system, items(4), timeout_s=0.2)
    finally:
        release.set()
    assert list(df["error_stage"].fillna("")) == ["", "system", "system", ""]
    assert list(df["status"]) == ["correct", "system_error", "system_error", "correct"]
    assert df.loc[1, "error"] == "RuntimeError: tool crashed"
    assert df.loc[2, "error"].startswith("TimeoutError")
    assert df["score"].isna().tolist() == [False, True, True, False]
    assert list(df["label"].iloc[[0, 3]]) == ["CORRECT", "CORRECT"]


def test_rerun_retries_error_rows_and_keeps_the_latest(tmp_path):
    run(tmp_path, Echo(fail_on={"q1"}), items(4))
    retry = Echo()
    df = run(tmp_path, retry, items(4))
    assert retry.calls == ["q1"]  # only the failed task runs again
    assert df["error"].isna().all() and len(logged(tmp_path)) == 4
    written = attempts(tmp_path)
    assert written["task_id"].tolist() == ["0", "1", "2", "3", "1"]  # the error row stays in the log
    assert written["error"].str.startswith("RuntimeError").tolist() == [False, True, False, False, False]


def test_a_stuck_system_stops_the_run_instead_of_starving_it(tmp_path):
    release = threading.Event()

    def stuck(question):
        release.wait(5)
        return "late"

    try:
        with pytest.raises(SystemStalledError, match="2 timeouts in a row"):
            run(tmp_path, stuck, items(5), timeout_s=0.1, max_consecutive_timeouts=2)
    finally:
        release.set()
    assert list(logged(tmp_path)["task_id"]) == ["0", "1"]  # finished rows kept


def test_grader_errors_are_recorded_with_stage(tmp_path):
    def judge(prompt, system=None):
        return "unparseable"

    df = run(tmp_path, lambda q: "x", items(2), bench.SimpleQAGrader(judge))
    assert set(df["error_stage"]) == {"grader"} and set(df["status"]) == {"grader_error"}
    assert df["error"].str.startswith("JudgeReplyError").all()
    assert set(df["grader_raw"]) == {"unparseable"}


def test_systems_share_a_log_and_output_objects_are_accepted(tmp_path):
    class Result:
        def __init__(self, output):
            self.output = output

    run(tmp_path, lambda q: Result(q.replace("q", "a")), items(3), label="roma")
    run(tmp_path, lambda q: "wrong", items(3), label="base")
    df = logged(tmp_path)
    assert len(df) == 6
    assert df.groupby("condition")["score"].mean().to_dict() == {"base": 0.0, "roma": 1.0}
    assert df.loc[df["condition"] == "roma", "prediction"].tolist() == ["a0", "a1", "a2"]


def test_multiline_predictions_round_trip_in_csv(tmp_path):
    text = 'line one\n"quoted", line two\u2028end'
    df = run(tmp_path, lambda q: text, items(1))
    assert df.loc[0, "prediction"] == text
    assert logged(tmp_path).loc[0, "prediction"] == text


class LongGrader:
    """Grades every answer correct with a label, grader name, reply and details as long as ``text``;
    raises a message that long on item 2 (a grader error row)."""

    name = "long"

    def __init__(self, text):
        self.text = text

    def __call__(self, item, prediction):
        if item.item_id == "2":
            raise ValueError(self.text)
        return Grade(label=self.text, score=1.0, grader="g" + self.text, raw=self.text, details={self.text: 1.0})


@pytest.mark.parametrize("size", [200_000, 5_000_000], ids=["200k", "5M"])
def test_fields_longer_than_the_csv_limit_round_trip(tmp_path, size):
    """csv reads at most 131,072 characters per field by default: such a row read back as damaged, was
    quarantined, its task ran again on every resume, and the run ended in a raw KeyError."""
    text = (('a "long", multi-line\nreply; ' + "x" * 972) * (size // 1000 + 1))[:size]
    work = [*items(3), Item(benchmark="simpleqa", item_id="id " + text, question="q3", answer="a3")]
    asked = []

    def system(question):
        asked.append(question)
        if question == "q1":
            raise RuntimeError(text)
        return text

    with warnings.catch_warnings():
        warnings.simplefilter("error", QuarantineWarning)
        df = run(tmp_path, system, work, LongGrader(text))
        # as the log reads back (gold aside: the rows take it from the tasks, in their own dtype)
        pd.testing.assert_frame_equal(logged(tmp_path).astype({"gold": object}), df.astype({"gold": object}))
        asked.clear()
        rerun = run(tmp_path, system, work, LongGrader(text))
    assert asked == ["q1", "q2"]  # only the two error rows run again: every finished row read back
    assert not list(tmp_path.rglob("*.quarantined-*"))
    pd.testing.assert_frame_equal(rerun.drop(columns="latency_s"), df.drop(columns="latency_s"))
    ok = df.iloc[[0, 3]]
    for column, value in [("prediction", text), ("label", text), ("grader", "g" + text), ("grader_raw", text),
                          ("details", json.dumps({text: 1.0}))]:
        assert ok[column].tolist() == [value, value], column
    assert df.loc[3, "task_id"] == "id " + text
    assert df.loc[1, "error"] == f"RuntimeError: {text}" and df.loc[2, "error"] == f"ValueError: {text}"


TEXTS = {"nul": "a\x00b", "carriage return": "one\rtwo", "crlf": "one\r\ntwo", "quotes": '"q", \'s\'',
         "controls": "\x1b[31m\x0c\x1d\x85\u2028", "lone surrogate": "bad \udcff byte"}


def test_any_text_a_system_returns_is_written_and_reads_back(tmp_path):
    """csv quotes a field holding its line terminator but not a lone carriage return, so such a row
    read back as two damaged records (and the run ended in a raw KeyError); a lone surrogate, which
    UTF-8 cannot encode, made the write raise a raw UnicodeEncodeError. The surrogate is stored as
    its escape, everything else exactly."""
    work = [Item(benchmark="simpleqa", item_id=name, question=name, answer="x") for name in TEXTS]
    asked = []

    def system(question):
        asked.append(question)
        return TEXTS[question]

    with warnings.catch_warnings():
        warnings.simplefilter("error", QuarantineWarning)
        for _ in range(2):  # the second run finds every row and asks nothing
            df = run(tmp_path, system, work)
    assert asked == list(TEXTS)
    assert df["prediction"].tolist() == [*list(TEXTS.values())[:-1], "bad \\udcff byte"]


def test_a_row_that_does_not_read_back_is_a_typed_error_naming_the_log(tmp_path, monkeypatch):
    """Whatever makes a row written in this run unreadable, the run ends in LogFileError naming the
    log (never a table that silently lacks the row, nor one that calls it a task the budget kept back)."""
    import roma_lab.evaluate._log as log

    real = log._row_problem
    monkeypatch.setattr(log, "_row_problem", lambda row: "refused" if row and row["task_id"] == "1" else real(row))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuarantineWarning)
        with pytest.raises(LogFileError, match=r"attempts\.csv"):
            run(tmp_path, Echo(), items(3))


def _csv_line(fields):
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(fields)
    return buffer.getvalue().encode()


def test_a_record_nested_too_deep_is_quarantined_and_its_task_runs_again(tmp_path):
    """A details field nested 50,000 deep (under csv's default field limit, which quarantined longer
    ones before they were parsed) raised a raw RecursionError."""
    run(tmp_path, Echo(), items(3))
    out = tmp_path / LOG
    lines = out.read_bytes().splitlines(keepends=True)
    fields = next(csv.reader([lines[2].decode()]))  # task 1's row
    assert fields[ROW_COLUMNS.index("task_id")] == "1"
    fields[ROW_COLUMNS.index("details")] = '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}"
    lines[2] = _csv_line(fields)
    out.write_bytes(b"".join(lines))
    again = Echo()
    with pytest.warns(QuarantineWarning, match="1 damaged record"):
        df = run(tmp_path, again, items(3))
    assert again.calls == ["q1"]
    assert list(df["task_id"]) == ["0", "1", "2"]


def test_torn_last_row_is_dropped_and_rerun(tmp_path):
    run(tmp_path, Echo(reply='multi\n"line"\nanswer'), items(3))
    out = tmp_path / LOG
    data = out.read_bytes()
    out.write_bytes(data[: len(data) - 15])  # cut inside the last row, as a crash mid-write would
    with pytest.warns(UserWarning, match="cut mid-write"):
        assert list(logged(tmp_path)["task_id"]) == ["0", "1"]
    echo = Echo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(tmp_path, echo, items(3))
    assert echo.calls == ["q2"]
    assert list(logged(tmp_path)["task_id"]) == ["0", "1", "2"]


def test_bad_arguments_fail_clearly_before_anything_is_written(tmp_path):
    with pytest.raises(TaskFileError, match="duplicate"):
        run(tmp_path / "dup", str, items(1) * 2)
    with pytest.raises(ValueError, match="max_consecutive_timeouts must be >= 1"):
        run(tmp_path / "stall", str, items(1), max_consecutive_timeouts=0)
    assert not list(tmp_path.rglob(LOG))
    other = tmp_path / "other"
    other.mkdir()
    (other / LOG).write_text("a,b\n1,2\n")
    with pytest.raises(LogFileError, match="columns"):
        run(other, str, items(1))


def test_a_task_set_named_other_than_its_tasks_benchmark_is_refused(tmp_path):
    # Rows are keyed by the benchmark their task names: a set named otherwise would leave its rows unfound
    # (each task then counted as kept back by a budget there never was, and asked again on every rerun).
    system = Echo(all_right=True)
    with pytest.raises(TaskFileError, match="holds tasks of benchmark 'simpleqa'"):
        run(tmp_path, system, TaskSet("mine", tuple(items(2))))  # the tasks say simpleqa
    assert system.calls == [] and not (tmp_path / LOG).exists()


@pytest.mark.parametrize("timeout_s", [0, -1.0])
def test_a_time_limit_that_is_not_positive_is_refused_before_anything_runs(tmp_path, timeout_s):
    system = Echo()
    with pytest.raises(ValueError, match="timeout_s"):
        run(tmp_path, system, items(1), timeout_s=timeout_s)
    assert system.calls == [] and not (tmp_path / LOG).exists()


def test_workers_below_one_are_refused_before_anything_is_written(tmp_path):
    from roma_lab.evaluate._schedule import Attempt, Job, run_jobs

    how = Attempt("s", lambda item, run, previous: item.answer, bench.StringMatchGrader(), tmp_path)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        run_jobs(how, [Job(0, it) for it in items(2)], workers=0)
    assert not (tmp_path / LOG).exists()


def test_a_raising_custom_grader_is_recorded(tmp_path):
    def grader(prediction, gold):
        raise KeyError("boom")

    df = run(tmp_path, str, items(2), grader)
    assert list(df["error_stage"]) == ["grader", "grader"] and set(df["status"]) == {"grader_error"}
    assert df["error"].str.startswith("KeyError").all()


# --- damaged logs: recovered row by row, or refused naming the file ---------------------------------


@pytest.mark.parametrize("case", [c for c in RUN_FILE_CASES if c.name.startswith("results")], ids=lambda c: c.name)
def test_every_probed_row_damage_is_recovered(case, tmp_path):
    assert case.run(tmp_path) == "recovered"


def test_damaged_rows_go_to_a_quarantine_file_and_only_their_tasks_run_again(tmp_path):
    run(tmp_path, Echo(all_right=True), items(4))
    out = tmp_path / LOG
    lines = out.read_bytes().splitlines(keepends=True)
    bad_score = lines[2].replace(b",1.0,", b",one,")
    assert bad_score != lines[2]
    noise = b"\xff\xfe\x00 binary noise,\n"
    out.write_bytes(b"".join([lines[0], lines[1], bad_score, noise, *lines[3:]]))
    again = Echo(all_right=True)
    with pytest.warns(QuarantineWarning, match=r"attempts\.csv: 2 damaged record"):
        df = run(tmp_path, again, items(4))
    assert again.calls == ["q1"]  # only the task whose row was damaged
    (kept,) = tmp_path.glob("attempts.csv.quarantined-*")
    assert kept.read_bytes() == bad_score + noise  # nothing lost: the damaged bytes, exactly
    assert list(df["task_id"]) == ["0", "1", "2", "3"] and df["error"].isna().all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file was repaired once; reading it again is quiet
        assert len(logged(tmp_path)) == 4


@pytest.mark.parametrize("damage", [
    lambda lines: lines[1:],                                                     # header lost
    lambda lines: [b"benchm\x00rk;item\n", *lines[1:]],                          # header garbled
    lambda lines: [lines[0], lines[1].replace(b"s,", b"s,extra,", 1), *lines[2:]],  # a field too many
    lambda lines: [lines[0], b'"unclosed,quote\n', *lines[1:]],                  # a stray quote
    lambda lines: [lines[0], lines[1].replace(b",1.0,", b",nan,"), *lines[2:]],  # a score that is no number
], ids=["no header", "garbled header", "extra field", "stray quote", "nan score"])
def test_csv_damage_never_leaves_the_log_unusable(tmp_path, damage):
    run(tmp_path, lambda q: q.replace("q", "a"), items(3))
    out = tmp_path / LOG
    out.write_bytes(b"".join(damage(out.read_bytes().splitlines(keepends=True))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuarantineWarning)
        df = run(tmp_path, lambda q: q.replace("q", "a"), items(3))
    assert df["score"].tolist() == [1.0, 1.0, 1.0]
    assert out.read_bytes().startswith(",".join(ROW_COLUMNS).encode() + b"\n")


def test_a_file_of_another_table_is_refused_naming_it(tmp_path):
    other = tmp_path / LOG
    other.write_text("model,accuracy\ngpt,0.5\n")
    with pytest.raises(LogFileError, match=r"attempts\.csv is not a roma_lab attempt log"):
        run(tmp_path, str, items(1))
    assert other.read_text() == "model,accuracy\ngpt,0.5\n"  # left as it was


# --- folders written by an earlier roma_lab (run<r>.csv beside usage/) ---------------------------------


# What an earlier roma_lab's evaluate wrote for Echo() labelled "s" on items(3): evaluation.json beside
# run0.csv, whose condition column was called "system" before the results vocabulary.
OLD_RECORD = {"grader": bench.STRING_MATCH, "source": "", "systems": {"s": {"function": "Echo", "kind": "function",
                                                                          "model": None}},
              "task_hashes": {"0": "19a741b18364a161", "1": "2dbd47390e56f9c7", "2": "425c4f0fa665d39c"},
              "tasks": "simpleqa"}
OLD_RUN = ("benchmark,item_id,{condition},prediction,label,score,grader,error,error_stage,latency_s,details,grader_raw\n"
           'simpleqa,0,s,a0,CORRECT,1.0,"string-match, not the official judge",,,0.027017,,\n'
           'simpleqa,1,s,no idea,INCORRECT,0.0,"string-match, not the official judge",,,1.9e-05,,\n'
           'simpleqa,2,s,a2,CORRECT,1.0,"string-match, not the official judge",,,1.1e-05,,\n')


@pytest.mark.parametrize("condition", ["condition", "system"])
def test_a_folder_of_the_older_layout_is_refused_then_migrated_and_resumed(tmp_path, condition, capsys):
    from roma_lab.evaluate.__main__ import main

    out = tmp_path / "results" / "evaluation"
    out.mkdir(parents=True)
    (out / "evaluation.json").write_text(json.dumps(OLD_RECORD, indent=2, sort_keys=True) + "\n")
    (out / "run0.csv").write_text(OLD_RUN.format(condition=condition))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    system = Echo()
    with pytest.raises(OldLayoutError, match="migrate it once with `python -m roma_lab.evaluate migrate ") as refused:
        run(out, system, items(4))
    assert system.calls == [] and {p.name: p.read_bytes() for p in out.iterdir() if p.name != ".evaluate.lock"} == before
    (command,) = re.findall(r"`python -m roma_lab\.evaluate (migrate [^`]+)`", str(refused.value))
    assert main(command.split()) == 0  # the command the message names
    assert f"{out}: an evaluation folder; 3 row(s) now in attempts.csv" in capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an old folder is not a damaged one: nothing quarantined
        df = run(out, system, items(4))
    assert system.calls == ["q3"]  # the old rows count as finished
    assert df["condition"].tolist() == ["s"] * 4 and df["task_id"].tolist() == ["0", "1", "2", "3"]
    assert df["prediction"].tolist() == ["a0", "no idea", "a2", "no idea"]
    assert df["score"].tolist() == [1.0, 0.0, 1.0, 0.0] and df["status"].tolist() == ["correct", "incorrect"] * 2
    assert df["gold"].tolist() == ["a0", "a1", "a2", "a3"] and df["error"].isna().all()
    assert not list(tmp_path.rglob("*.quarantined-*"))


# --- private benchmarks: never on disk in the clear -------------------------------------------------


def test_private_benchmark_tasks_never_reach_the_disk_in_the_clear(tmp_path):
    # BrowseComp stays encrypted on disk: a row would hold the gold answer, a trace the question.
    assert "browsecomp" in bench.PRIVATE_BENCHMARKS
    work = [Item(benchmark="browsecomp", item_id=str(i), question=f"Which secret city number {i}?",
                 answer=f"Zanzibarville{i}") for i in range(2)]
    df = run(tmp_path, lambda q: "Zanzibarville" + q.split()[-1].rstrip("?"), work, bench.ExactGrader())
    assert df["score"].tolist() == [1.0, 1.0]  # graded on the clear text, before redaction
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"Zanzibarville" not in data and b"secret city" not in data, path


# --- tasks at once (a model's concurrency bound) ----------------------------------------------------


class Overlapping(Echo):
    """Echo whose first ``together`` calls wait for each other (a barrier: they must be in flight at
    once, or the barrier breaks), counting the most calls in flight."""

    def __init__(self, together, **kw):
        super().__init__(**kw)
        self.barrier = threading.Barrier(together, timeout=10)
        self.lock, self.in_flight, self.most = threading.Lock(), 0, 0

    def __call__(self, question):
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            first = len(self.calls) < self.barrier.parties
            self.calls.append(question)
        try:
            if first:
                self.barrier.wait()
            return self.answer(question)
        finally:
            with self.lock:
                self.in_flight -= 1

    def answer(self, question):
        if question == self.interrupt_on:
            raise KeyboardInterrupt
        return f"a{question[1:]}" if int(question[1:]) % 2 == 0 else "no idea"


def test_tasks_run_at_once_up_to_the_models_bound_and_give_the_serial_rows_in_task_order(tmp_path):
    serial = run(tmp_path / "serial", Echo(), items(8))
    system = Overlapping(4)
    together = run(tmp_path / "together", system, items(8), model=scripted_lm(slots=4))
    assert system.most == 4  # four tasks in flight at once, never more
    pd.testing.assert_frame_equal(together.drop(columns="latency_s"), serial.drop(columns="latency_s"))
    assert sorted(attempts(tmp_path / "together")["task_id"]) == sorted(map(str, range(8)))


def test_a_name_bound_set_for_a_model_holds(tmp_path):
    from roma_lab.lm import set_max_concurrency

    set_max_concurrency("scripted/bound-3", 3)
    try:
        system = Overlapping(3)
        run(tmp_path, system, items(9), model=scripted_lm(name="scripted/bound-3", slots=8))
    finally:
        set_max_concurrency("scripted/bound-3", None)
    assert system.most == 3


def test_an_interrupted_concurrent_run_keeps_finished_rows_once_and_resumes_the_rest(tmp_path):
    first = Overlapping(2, interrupt_on="q1")  # q0 and q1 in flight together, q1 stops the run
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, first, items(8), label="e", model=scripted_lm(slots=2))
    finished = set(attempts(tmp_path)["task_id"])
    assert "0" in finished and "1" not in finished  # the call running beside the failure was kept
    assert len(finished) == len(attempts(tmp_path)) < 8  # each once; tasks not started were cancelled
    second = Overlapping(1)  # the same system (its record names its class), no longer interrupted
    run(tmp_path, second, items(8), label="e", model=scripted_lm(slots=3))
    assert sorted(second.calls) == sorted(f"q{i}" for i in range(8) if str(i) not in finished)
    assert sorted(attempts(tmp_path)["task_id"]) == sorted(map(str, range(8)))  # never a row twice


def test_one_writer_per_folder_and_no_row_lost_or_doubled(tmp_path):
    # A system that evaluates into its own folder, and threads evaluating into one folder at once: one
    # writer at a time (the others are refused, FolderBusyError), the log keeps one header and every row
    # of each call that ran, once.
    def nested(question):
        run(tmp_path, Echo(), items(2)[1:], label="b")
        return "a0"

    df = run(tmp_path, nested, items(1), label="a")
    assert df["status"].tolist() == ["system_error"] and df["error"].iloc[0].startswith("FolderBusyError")

    gate = threading.Barrier(4, timeout=10)
    outcomes = []

    def one(i):
        gate.wait()
        try:
            run(tmp_path, Echo(), items(8), label=f"c{i}")
            outcomes.append(("ran", i))
        except FolderBusyError:
            outcomes.append(("busy", i))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ran = {f"c{i}" for kind, i in outcomes if kind == "ran"}
    assert len(outcomes) == 4 and ran
    written = attempts(tmp_path)
    assert sorted(written[["condition", "task_id"]].itertuples(index=False, name=None)) == sorted(
        [("a", "0")] + [(c, str(i)) for c in ran for i in range(8)])
    assert (tmp_path / LOG).read_text().count("condition,run,benchmark") == 1  # one header


def test_a_system_with_a_timeout_sees_the_callers_context(tmp_path):
    # DSPy's settings (dspy.context(lm=...)) live in contextvars; the thread a timeout runs the system on
    # must carry them, or the system silently calls another model.
    import contextvars

    setting = contextvars.ContextVar("setting", default="unset")
    token = setting.set("a0")
    try:
        df = run(tmp_path, lambda q: setting.get(), items(2), timeout_s=5, model=scripted_lm(slots=2))
    finally:
        setting.reset(token)
    assert df["prediction"].tolist() == ["a0", "a0"]
