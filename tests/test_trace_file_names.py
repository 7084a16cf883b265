"""A file name made from a task id keeps 64 bits of its hash, and a collision is caught, never assumed away
(issue 53 item 3). Before, ``safe_name`` kept 8 hex: the issue's two 205-character ids shared one trace (and
one usage record), so both rows reported the same tokens and cost."""

from __future__ import annotations

import functools
import json
import shutil

import pytest

from roma_lab import results
from roma_lab.bench import ExactGrader, Item
from roma_lab.evaluate import TaskSet, evaluate, single_call
from roma_lab.results import DamagedFileError, QuarantineWarning, safe_name
from roma_lab.trace import load_trace, trace_path

# the issue's pair: one 8-hex name for both
A, B = "task-" + "x" * 195 + "10705", "task-" + "x" * 195 + "52692"
TASKS = TaskSet("synthetic", (Item(benchmark="synthetic", item_id=A, question="What is 2+2?", answer="4"),
                              Item(benchmark="synthetic", item_id=B, question="Capital of France?", answer="Paris")))


def run(out):
    return evaluate([single_call("scripted")], TASKS, ExactGrader(), out=out, progress=False)


def as_before(monkeypatch):
    """File names as roma_lab made them before issue 53: 8 hex of the hash."""
    monkeypatch.setattr(results, "safe_name", functools.partial(safe_name, hash_hex=8))


def test_the_issues_two_ids_get_files_of_their_own_each_recording_its_task(tmp_path, monkeypatch):
    with monkeypatch.context() as before:
        as_before(before)
        assert trace_path("", "single", 0, A) == trace_path("", "single", 0, B)  # the collision the issue found
    assert safe_name(A) != safe_name(B) and len(safe_name(A).rpartition("-")[2]) == 16
    result = run(tmp_path)
    paths = result.rows.set_index("task_id")["trace"]
    assert paths[A] != paths[B]
    for task_id in (A, B):
        saved = json.loads((tmp_path / paths[task_id]).read_text())
        assert list(saved)[:2] == ["kind", "task_id"] and saved["task_id"] == task_id  # the kind stays first
        assert result.trace("single", task_id).goal == (TASKS.items[0] if task_id == A else TASKS.items[1]).question


def test_a_trace_of_another_task_in_a_tasks_place_is_an_error_when_read_and_run_again(tmp_path):
    result = run(tmp_path)
    path_a, path_b = (result.trace_path("single", t) for t in (A, B))
    shutil.copyfile(path_a, path_b)  # forged: A's trace under B's name
    with pytest.raises(DamagedFileError, match=f"is the trace of task '{A}', not of task '{B}'") as err:
        load_trace(path_b, B)
    assert err.value.path == path_b
    with pytest.raises(DamagedFileError, match="not of task"):
        result.trace("single", B)
    assert load_trace(path_b).goal == "What is 2+2?"  # read without an id: as it is
    with pytest.warns(QuarantineWarning, match="not a trace roma_lab wrote; its task runs again"):
        again = run(tmp_path)  # B runs again, into its own file
    assert again.trace("single", B).goal == "Capital of France?"


def test_ids_whose_file_names_collide_are_refused_before_anything_runs(tmp_path, monkeypatch):
    as_before(monkeypatch)  # a collision, as 64 bits give none to find
    with pytest.raises(ValueError, match=f"task ids '{A}' and '{B}' would share the trace file"):
        run(tmp_path)
    assert not (tmp_path / "attempts.csv").exists()


def test_a_folder_saved_with_the_old_names_is_read_by_its_rows_and_its_shared_trace_run_again(tmp_path, monkeypatch):
    # Decision: no migration. Rows record each trace's path, so a folder saved before keeps its 8-hex files;
    # a trace two rows name (the collision) is run again, each task into a 16-hex file of its own.
    single = TaskSet("synthetic", TASKS.items[:1])
    with monkeypatch.context() as before:
        as_before(before)
        old = evaluate([single_call("scripted")], single, ExactGrader(), out=tmp_path, progress=False)
    old_path = old.trace_path("single", A)
    assert old_path.name == safe_name(A, hash_hex=8) + ".json"
    kept = run(tmp_path)  # A's row is finished: its old file is read, B runs
    assert kept.trace_path("single", A) == old_path and kept.trace("single", A).goal == "What is 2+2?"
    assert kept.trace_path("single", B).name == safe_name(B) + ".json"

    # the issue's folder: both tasks saved under one 8-hex name, B's trace over A's
    log = tmp_path / "attempts.csv"
    log.write_text(log.read_text().replace(kept.rows.set_index("task_id")["trace"][B], old_path.relative_to(
        tmp_path).as_posix()))
    with pytest.warns(UserWarning, match="rows of several tasks name the trace"):
        mended = run(tmp_path)
    assert mended.trace("single", A).goal == "What is 2+2?" and mended.trace("single", B).goal == "Capital of France?"
    assert mended.trace_path("single", A) != old_path


def test_migrate_finds_the_traces_of_an_older_layout_under_the_names_they_were_saved_with(tmp_path):
    from roma_lab.evaluate._migrate import migrate

    saved = run(tmp_path / "made")
    old = tmp_path / "old"
    trace = old / "traces" / "s" / "r0" / f"{safe_name(A, hash_hex=8)}.json"
    trace.parent.mkdir(parents=True)
    shutil.copyfile(saved.trace_path("single", A), trace)
    (old / "evaluation.json").write_text("{}")
    (old / "run0.csv").write_text("benchmark,item_id,condition,prediction,label,score,grader,error,error_stage,"
                                  f"latency_s,details,grader_raw\nsynthetic,{A},s,4,CORRECT,1.0,exact,,,0.1,,\n")
    migrate(old)
    row = (old / "attempts.csv").read_text().splitlines()[1]
    assert trace.relative_to(old).as_posix() in row  # found, and its row names it where it stays
