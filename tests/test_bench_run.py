"""Resumable graded runs: interruption, errors, timeouts, torn and damaged files, files of an older format.

Summaries and paired comparisons of these rows are tested in test_papers_roma_tables.py."""

import csv
import io
import json
import threading
import warnings

import pandas as pd
import pytest
from probe_integrity import RUN_FILE_CASES

from roma_lab import bench
from roma_lab.bench import Item
from roma_lab.bench._grade import Grade
from roma_lab.bench._run import COLUMNS
from roma_lab.results import QuarantineWarning


def items(n=6, benchmark="simpleqa"):
    return [Item(benchmark=benchmark, item_id=str(i), question=f"q{i}", answer=f"a{i}") for i in range(n)]


class Echo:
    """Answers item i with its gold answer when i is even; counts calls per question."""

    def __init__(self, interrupt_on=None, fail_on=()):
        self.calls = []
        self.interrupt_on = interrupt_on
        self.fail_on = set(fail_on)

    def __call__(self, question):
        self.calls.append(question)
        i = int(question[1:])
        if question == self.interrupt_on:
            raise KeyboardInterrupt
        if question in self.fail_on:
            raise RuntimeError(f"cannot answer {question}")
        return f"a{i}" if i % 2 == 0 else "no idea"


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_interrupted_run_resumes_without_loss_or_repeat(tmp_path, suffix):
    out = tmp_path / f"run{suffix}"
    grader = bench.StringMatchGrader()
    first = Echo(interrupt_on="q3")
    with pytest.raises(KeyboardInterrupt):
        bench.run_benchmark(items(), first, grader, out_path=out, system_name="echo", progress=False)
    assert first.calls == ["q0", "q1", "q2", "q3"]
    assert list(bench.read_results_df(out)["item_id"]) == ["0", "1", "2"]

    second = Echo()
    df = bench.run_benchmark(items(), second, grader, out_path=out, system_name="echo", progress=False)
    assert second.calls == ["q3", "q4", "q5"]  # finished items skipped, interrupted one re-run
    on_disk = bench.read_results_df(out)
    assert sorted(on_disk["item_id"]) == [str(i) for i in range(6)]  # each exactly once
    assert list(df["item_id"]) == [str(i) for i in range(6)]
    assert list(df["label"]) == ["CORRECT", "INCORRECT"] * 3
    assert set(df["grader"]) == {bench.STRING_MATCH}

    third = Echo()
    bench.run_benchmark(items(), third, grader, out_path=out, system_name="echo", progress=False)
    assert third.calls == []


def test_on_row_sees_each_row_this_call_writes_once_it_is_on_disk(tmp_path):
    out = tmp_path / "run.csv"
    grader = bench.StringMatchGrader()
    bench.run_benchmark(items(3), Echo(), grader, out_path=out, system_name="echo", progress=False)
    seen = []

    def on_row(row):
        assert row["item_id"] in set(bench.read_results_df(out)["item_id"])  # written before the call
        seen.append(row["item_id"])

    bench.run_benchmark(items(5), Echo(), grader, out_path=out, system_name="echo", progress=False, on_row=on_row)
    assert seen == ["3", "4"]  # rows found on disk are not written again, nor reported


def test_system_errors_and_timeouts_are_rows_and_the_run_goes_on(tmp_path):
    out = tmp_path / "run.csv"
    release = threading.Event()

    def system(question):
        if question == "q1":
            raise RuntimeError("tool crashed")
        if question == "q2":
            release.wait(5)  # hangs past the timeout; released at the end of the test
        return question.replace("q", "a")

    try:
        df = bench.run_benchmark(items(4), system, bench.StringMatchGrader(), out_path=out,
                                 system_name="s", timeout_s=0.2, progress=False)
    finally:
        release.set()
    assert list(df["error_stage"].fillna("")) == ["", "system", "system", ""]
    assert df.loc[1, "error"] == "RuntimeError: tool crashed"
    assert df.loc[2, "error"].startswith("TimeoutError")
    assert df["score"].isna().tolist() == [False, True, True, False]
    assert list(df["label"].iloc[[0, 3]]) == ["CORRECT", "CORRECT"]


def test_rerun_retries_error_rows_and_keeps_the_latest(tmp_path):
    out = tmp_path / "run.csv"
    grader = bench.StringMatchGrader()
    bench.run_benchmark(items(4), Echo(fail_on={"q1"}), grader, out_path=out, system_name="e", progress=False)
    kept = Echo(fail_on={"q1"})
    bench.run_benchmark(items(4), kept, grader, out_path=out, system_name="e", progress=False, retry_errors=False)
    assert kept.calls == []
    retry = Echo()
    df = bench.run_benchmark(items(4), retry, grader, out_path=out, system_name="e", progress=False)
    assert retry.calls == ["q1"]                             # only the failed item runs again
    assert df["error"].isna().all() and len(bench.read_results_df(out)) == 4


def test_a_stuck_system_stops_the_run_instead_of_starving_it(tmp_path):
    out = tmp_path / "run.csv"
    release = threading.Event()

    def stuck(question):
        release.wait(5)
        return "late"

    try:
        with pytest.raises(bench.SystemStalledError, match="2 timeouts in a row"):
            bench.run_benchmark(items(5), stuck, bench.StringMatchGrader(), out_path=out, system_name="s",
                                timeout_s=0.1, max_consecutive_timeouts=2, progress=False)
    finally:
        release.set()
    assert list(bench.read_results_df(out)["item_id"]) == ["0", "1"]   # finished rows kept


def test_grader_errors_are_recorded_with_stage(tmp_path):
    def judge(prompt, system=None):
        return "unparseable"

    df = bench.run_benchmark(items(2), lambda q: "x", bench.SimpleQAGrader(judge), out_path=tmp_path / "r.csv",
                             system_name="s", progress=False)
    assert set(df["error_stage"]) == {"grader"}
    assert df["error"].str.startswith("JudgeReplyError").all()
    assert set(df["grader_raw"]) == {"unparseable"}


def test_systems_share_a_file_and_output_objects_are_accepted(tmp_path):
    out = tmp_path / "r.jsonl"

    class Result:
        def __init__(self, output):
            self.output = output

    bench.run_benchmark(items(3), lambda q: Result(q.replace("q", "a")), bench.StringMatchGrader(),
                        out_path=out, system_name="roma", progress=False)
    bench.run_benchmark(items(3), lambda q: "wrong", bench.StringMatchGrader(),
                        out_path=out, system_name="base", progress=False)
    df = bench.read_results_df(out)
    assert len(df) == 6
    assert df.groupby("condition")["score"].mean().to_dict() == {"base": 0.0, "roma": 1.0}
    assert df.loc[df["condition"] == "roma", "prediction"].tolist() == ["a0", "a1", "a2"]


def test_multiline_predictions_round_trip_in_csv(tmp_path):
    out = tmp_path / "r.csv"
    text = 'line one\n"quoted", line two\u2028end'
    df = bench.run_benchmark(items(1), lambda q: text, bench.StringMatchGrader(), out_path=out,
                             system_name="s", progress=False)
    assert df.loc[0, "prediction"] == text


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
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_fields_longer_than_the_csv_limit_round_trip(tmp_path, suffix, size):
    """csv reads at most 131,072 characters per field by default: such a row read back as damaged, was
    quarantined, its item ran again on every resume, and run_benchmark ended in a raw KeyError."""
    text = (('a "long", multi-line\nreply; ' + "x" * 972) * (size // 1000 + 1))[:size]
    out = tmp_path / f"r{suffix}"
    work = [*items(3), Item(benchmark="simpleqa", item_id="id " + text, question="q3", answer="a3")]

    def system(question):
        if question == "q1":
            raise RuntimeError(text)
        return text

    with warnings.catch_warnings():
        warnings.simplefilter("error", QuarantineWarning)
        df = bench.run_benchmark(work, system, LongGrader(text), out_path=out, system_name="s", progress=False)
        again = Echo()
        rerun = bench.run_benchmark(work, again, LongGrader(text), out_path=out, system_name="s", progress=False,
                                    retry_errors=False)
        pd.testing.assert_frame_equal(bench.read_results_df(out), df)
    assert again.calls == [] and not list(tmp_path.glob("*.quarantined-*"))
    pd.testing.assert_frame_equal(rerun, df)
    ok = df.iloc[[0, 3]]
    for column, value in [("prediction", text), ("label", text), ("grader", "g" + text), ("grader_raw", text),
                          ("details", json.dumps({text: 1.0}))]:
        assert ok[column].tolist() == [value, value], column
    assert df.loc[3, "item_id"] == "id " + text
    assert df.loc[1, "error"] == f"RuntimeError: {text}" and df.loc[2, "error"] == f"ValueError: {text}"


TEXTS = {"nul": "a\x00b", "carriage return": "one\rtwo", "crlf": "one\r\ntwo", "quotes": '"q", \'s\'',
         "controls": "\x1b[31m\x0c\x1d\x85\u2028", "lone surrogate": "bad \udcff byte"}


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_any_text_a_system_returns_is_written_and_reads_back(tmp_path, suffix):
    """csv quotes a field holding its line terminator but not a lone carriage return, so such a row
    read back as two damaged records (and the run ended in a raw KeyError); a lone surrogate, which
    UTF-8 cannot encode, made the write raise a raw UnicodeEncodeError. The surrogate is stored as
    its escape, everything else exactly."""
    out = tmp_path / f"r{suffix}"
    work = [Item(benchmark="simpleqa", item_id=name, question=name, answer="x") for name in TEXTS]
    asked = []

    def system(question):
        asked.append(question)
        return TEXTS[question]

    with warnings.catch_warnings():
        warnings.simplefilter("error", QuarantineWarning)
        for _ in range(2):  # the second run finds every row and asks nothing
            df = bench.run_benchmark(work, system, bench.StringMatchGrader(), out_path=out, system_name="s",
                                     progress=False)
    assert asked == list(TEXTS)
    assert df["prediction"].tolist() == [*list(TEXTS.values())[:-1], "bad \\udcff byte"]


def test_a_row_that_does_not_read_back_is_a_typed_error_naming_the_file(tmp_path, monkeypatch):
    """Whatever makes a row written in this run unreadable, the run ends in RunFileError naming the
    file (it ended in a raw KeyError from the final table)."""
    import roma_lab.bench._run as run

    out = tmp_path / "r.csv"
    real = run._row_problem
    monkeypatch.setattr(run, "_row_problem", lambda row: "refused" if row and row["item_id"] == "1" else real(row))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuarantineWarning)
        with pytest.raises(bench.RunFileError, match=r"r\.csv: the rows of 1 item\(s\) .* item '1'"):
            bench.run_benchmark(items(3), Echo(), bench.StringMatchGrader(), out_path=out, system_name="s",
                                progress=False)


# Deeper than json can parse recursively. In a CSV field 50,000 levels, which stay under csv's default
# field limit (a longer field was quarantined for its length, before it was parsed).
DEEP = {".csv": "[" * 50_000 + "]" * 50_000, ".jsonl": "[" * 100_000 + "]" * 100_000}


def _csv_line(fields):
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(fields)
    return buffer.getvalue().encode()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_record_nested_too_deep_is_quarantined_and_its_item_runs_again(tmp_path, suffix):
    """A 100,000-deep JSON row (jsonl) or 50,000-deep details field (csv) raised a raw RecursionError."""
    out = tmp_path / f"r{suffix}"
    grader = bench.StringMatchGrader()
    bench.run_benchmark(items(3), Echo(), grader, out_path=out, system_name="s", progress=False)
    lines = out.read_bytes().splitlines(keepends=True)
    if suffix == ".csv":
        fields = next(csv.reader([lines[2].decode()]))
        fields[COLUMNS.index("details")] = '{"a": ' + DEEP[suffix] + "}"
        lines[2] = _csv_line(fields)
    else:
        lines[1] = ('{"benchmark": ' + DEEP[suffix] + "}\n").encode()  # item 1's row: a jsonl file has no header
    out.write_bytes(b"".join(lines))
    again = Echo()
    with pytest.warns(QuarantineWarning, match="1 damaged record"):
        df = bench.run_benchmark(items(3), again, grader, out_path=out, system_name="s", progress=False)
    assert again.calls == ["q1"]
    assert list(df["item_id"]) == ["0", "1", "2"]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_torn_last_row_is_dropped_and_rerun(tmp_path, suffix):
    out = tmp_path / f"r{suffix}"
    bench.run_benchmark(items(3), lambda q: 'multi\n"line"\nanswer', bench.StringMatchGrader(), out_path=out,
                        system_name="s", progress=False)
    data = out.read_bytes()
    out.write_bytes(data[: len(data) - 15])  # cut inside the last row, as a crash mid-write would
    with pytest.warns(UserWarning, match="cut mid-write"):
        assert list(bench.read_results_df(out)["item_id"]) == ["0", "1"]
    echo = Echo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bench.run_benchmark(items(3), echo, bench.StringMatchGrader(), out_path=out, system_name="s", progress=False)
    assert echo.calls == ["q2"]
    assert list(bench.read_results_df(out)["item_id"]) == ["0", "1", "2"]


def test_bad_arguments_fail_clearly(tmp_path):
    grader = bench.StringMatchGrader()
    with pytest.raises(bench.RunFileError, match=".csv or .jsonl"):
        bench.run_benchmark(items(1), str, grader, out_path=tmp_path / "r.txt", system_name="s")
    with pytest.raises(ValueError, match="duplicate"):
        bench.run_benchmark(items(1) * 2, str, grader, out_path=tmp_path / "r.csv", system_name="s")
    with pytest.raises(ValueError, match="timeout_s"):
        bench.run_benchmark(items(1), str, grader, out_path=tmp_path / "r.csv", system_name="s", timeout_s=0)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(bench.RunFileError, match="columns"):
        bench.run_benchmark(items(1), str, grader, out_path=other, system_name="s")


def test_a_raising_custom_grader_is_recorded(tmp_path):
    def grader(item, prediction):
        raise KeyError("boom")

    df = bench.run_benchmark(items(2), str, grader, out_path=tmp_path / "r.csv", system_name="s", progress=False)
    assert list(df["error_stage"]) == ["grader", "grader"]
    assert df["error"].str.startswith("KeyError").all()


# --- damaged run files: recovered row by row, or refused naming the file ---------------------


@pytest.mark.parametrize("case", [c for c in RUN_FILE_CASES if c.name.startswith("results")], ids=lambda c: c.name)
def test_every_probed_row_damage_is_recovered(case, tmp_path):
    assert case.run(tmp_path) == "recovered"


def test_damaged_rows_go_to_a_quarantine_file_and_only_their_items_run_again(tmp_path):
    out = tmp_path / "r.csv"
    grader = bench.StringMatchGrader()
    bench.run_benchmark(items(4), lambda q: q.replace("q", "a"), grader, out_path=out, system_name="s", progress=False)
    lines = out.read_bytes().splitlines(keepends=True)
    bad_score = lines[2].replace(b",1.0,", b",one,")
    noise = b"\xff\xfe\x00 binary noise,\n"
    out.write_bytes(b"".join([lines[0], lines[1], bad_score, noise, *lines[3:]]))
    again = Echo()
    with pytest.warns(QuarantineWarning, match=r"r\.csv: 2 damaged record"):
        df = bench.run_benchmark(items(4), again, grader, out_path=out, system_name="s", progress=False)
    assert again.calls == ["q1"]  # only the item whose row was damaged
    (kept,) = tmp_path.glob("r.csv.quarantined-*")
    assert kept.read_bytes() == bad_score + noise  # nothing lost: the damaged bytes, exactly
    assert list(df["item_id"]) == ["0", "1", "2", "3"] and df["error"].isna().all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file was repaired once; reading it again is quiet
        assert len(bench.read_results_df(out)) == 4


@pytest.mark.parametrize("damage", [
    lambda lines: lines[1:],                                                     # header lost
    lambda lines: [b"benchm\x00rk;item\n", *lines[1:]],                          # header garbled
    lambda lines: [lines[0], lines[1].replace(b"s,", b"s,extra,", 1), *lines[2:]],  # a field too many
    lambda lines: [lines[0], b'"unclosed,quote\n', *lines[1:]],                  # a stray quote
    lambda lines: [lines[0], lines[1].replace(b",1.0,", b",nan,"), *lines[2:]],  # a score that is no number
], ids=["no header", "garbled header", "extra field", "stray quote", "nan score"])
def test_csv_damage_never_leaves_the_file_unusable(tmp_path, damage):
    out = tmp_path / "r.csv"
    grader = bench.StringMatchGrader()
    bench.run_benchmark(items(3), lambda q: q.replace("q", "a"), grader, out_path=out, system_name="s", progress=False)
    out.write_bytes(b"".join(damage(out.read_bytes().splitlines(keepends=True))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuarantineWarning)
        df = bench.run_benchmark(items(3), lambda q: q.replace("q", "a"), grader, out_path=out, system_name="s",
                                 progress=False)
    assert df["score"].tolist() == [1.0, 1.0, 1.0]
    assert out.read_bytes().startswith(b",".join(c.encode() for c in COLUMNS) + b"\n")


def test_a_file_of_another_table_is_refused_naming_it(tmp_path):
    other = tmp_path / "scores.csv"
    other.write_text("model,accuracy\ngpt,0.5\n")
    with pytest.raises(bench.RunFileError, match=r"scores\.csv is not a roma_lab\.bench run file"):
        bench.run_benchmark(items(1), str, bench.StringMatchGrader(), out_path=other, system_name="s")
    assert other.read_text() == "model,accuracy\ngpt,0.5\n"  # left as it was


def test_redo_runs_named_items_again(tmp_path):
    out = tmp_path / "r.jsonl"
    bench.run_benchmark(items(3), Echo(), bench.StringMatchGrader(), out_path=out, system_name="s", progress=False)
    again = Echo()
    bench.run_benchmark(items(3), again, bench.StringMatchGrader(), out_path=out, system_name="s", progress=False,
                        redo={"2"})
    assert again.calls == ["q2"]


# --- files written before the results vocabulary: the condition column was called "system" ----------


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_file_that_says_system_is_read_resumed_and_rewritten_as_condition(tmp_path, suffix):
    out = tmp_path / f"r{suffix}"
    bench.run_benchmark(items(3), Echo(), bench.StringMatchGrader(), out_path=out, system_name="s", progress=False)
    new = bench.read_results_df(out)
    old_name = b'"system":' if suffix == ".jsonl" else b"item_id,system,"
    out.write_bytes(out.read_bytes().replace(old_name.replace(b"system", b"condition"), old_name))  # as written before
    assert out.read_bytes().count(old_name) == (3 if suffix == ".jsonl" else 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an old file is not a damaged one: nothing quarantined
        pd.testing.assert_frame_equal(bench.read_results_df(out), new)
        echo = Echo()
        bench.run_benchmark(items(4), echo, bench.StringMatchGrader(), out_path=out, system_name="s", progress=False)
    assert echo.calls == ["q3"]  # the old rows count as finished
    assert b"system" not in out.read_bytes().replace(b'"error_stage": "system"', b"")  # rewritten in the vocabulary
    assert list(bench.read_results_df(out)["condition"]) == ["s"] * 4
    assert not list(tmp_path.glob("*.quarantined-*"))


def test_private_benchmark_items_are_refused_before_anything_is_written(tmp_path):
    # BrowseComp stays encrypted on disk: a run file holds the gold answer, a trace the question.
    out = tmp_path / "runs.csv"
    mixed = items(2) + items(1, benchmark="browsecomp")
    system = Echo()
    with pytest.raises(bench.PrivateItemsError, match="browsecomp.*evaluate_browsecomp"):
        bench.run_benchmark(mixed, system, bench.grader_for("simpleqa"), out_path=out, system_name="s",
                            progress=False)
    assert not out.exists() and system.calls == []
    assert "browsecomp" in bench.PRIVATE_BENCHMARKS


# --- items at once (workers > 1) ------------------------------------------------------------------


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


def raw_rows(path):
    """Every row on disk, duplicates included (read_results_df keeps the latest of each)."""
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_items_run_at_once_and_give_the_serial_rows_in_item_order(tmp_path):
    grader = bench.StringMatchGrader()
    serial = bench.run_benchmark(items(8), Echo(), grader, out_path=tmp_path / "serial.csv", system_name="s",
                                 progress=False)
    system = Overlapping(4)
    together = bench.run_benchmark(items(8), system, grader, out_path=tmp_path / "together.csv", system_name="s",
                                   progress=False, workers=4)
    assert system.most == 4  # four items in flight at once, never more
    pd.testing.assert_frame_equal(together.drop(columns="latency_s"), serial.drop(columns="latency_s"))
    assert sorted(r["item_id"] for r in raw_rows(tmp_path / "together.csv")) == sorted(map(str, range(8)))


def test_an_interrupted_concurrent_run_keeps_finished_rows_once_and_resumes_the_rest(tmp_path):
    out = tmp_path / "run.csv"
    grader = bench.StringMatchGrader()
    first = Overlapping(2, interrupt_on="q1")  # q0 and q1 in flight together, q1 stops the run
    with pytest.raises(KeyboardInterrupt):
        bench.run_benchmark(items(8), first, grader, out_path=out, system_name="e", progress=False, workers=2)
    finished = {r["item_id"] for r in raw_rows(out)}
    assert "0" in finished and "1" not in finished  # the call running beside the failure was kept
    assert len(finished) == len(raw_rows(out)) < 8  # each once; items not started were cancelled
    second = Echo()
    bench.run_benchmark(items(8), second, grader, out_path=out, system_name="e", progress=False, workers=3)
    assert sorted(second.calls) == sorted(f"q{i}" for i in range(8) if str(i) not in finished)
    assert sorted(r["item_id"] for r in raw_rows(out)) == sorted(map(str, range(8)))  # never a row twice


def test_callers_sharing_a_file_from_threads_lose_no_row_when_one_rewrites_it(tmp_path):
    # run_agent's (task, run) pairs each call run_benchmark on one runs.csv. A call that finds a torn
    # row rewrites the file; a row another call appends afterwards must land in the new file.
    out = tmp_path / "run.csv"
    grader = bench.StringMatchGrader()

    def system(question):
        with out.open("a") as f:
            f.write("simpleqa,9,x,torn")  # a crash's torn row, found by the next call's read
        with pytest.warns(UserWarning, match="cut mid-write"):
            bench.run_benchmark(items(2)[1:], Echo(), grader, out_path=out, system_name="b", progress=False)
        return "a0"

    df = bench.run_benchmark(items(1), system, grader, out_path=out, system_name="a", progress=False)
    assert df["label"].tolist() == ["CORRECT"]
    assert sorted((r["condition"], r["item_id"]) for r in raw_rows(out)) == [("a", "0"), ("b", "1")]

    threads = [threading.Thread(target=bench.run_benchmark, args=([it], Echo(), grader),
                                kwargs={"out_path": out, "system_name": "c", "progress": False}) for it in items(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r["item_id"] for r in raw_rows(out) if r["condition"] == "c") == sorted(map(str, range(8)))
    assert out.read_text().count("benchmark,item_id") == 1  # one header


def test_workers_below_one_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="workers must be >= 1"):
        bench.run_benchmark(items(1), Echo(), bench.StringMatchGrader(), out_path=tmp_path / "r.csv",
                            system_name="s", workers=0)
    assert not (tmp_path / "r.csv").exists()


def test_a_system_with_a_timeout_sees_the_callers_context(tmp_path):
    # DSPy's settings (dspy.context(lm=...)) live in contextvars; the thread a timeout runs the system on
    # must carry them, or the system silently calls another model.
    import contextvars

    setting = contextvars.ContextVar("setting", default="unset")
    token = setting.set("a0")
    try:
        df = bench.run_benchmark(items(1), lambda q: setting.get(), bench.StringMatchGrader(), out_path=tmp_path / "r.csv",
                                 system_name="s", timeout_s=5, progress=False, workers=2)
    finally:
        setting.reset(token)
    assert df["prediction"].tolist() == ["a0"]
