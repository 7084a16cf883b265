"""Every file the package reads back or appends to in a run folder is checked to be a regular file before
it is read, through one helper (``roma_lab.results.open_regular``; issue 53 item 2): a FIFO, device,
socket or folder in its place is a ``DamagedFileError`` naming it, never a hang. Before, a FIFO in place
of the attempt log blocked the rerun at its append, and one in place of a usage record at its read."""

from __future__ import annotations

import ast
import os
import socket
from pathlib import Path

import pytest
from bounded import bounded

from roma_lab.evaluate import TaskSet, evaluate, function, single_call
from roma_lab.results import (
    DamagedFileError,
    QuarantineWarning,
    open_regular,
    read_regular_bytes,
)

ROOT = Path(__file__).resolve().parents[1]


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


# --- the helper -------------------------------------------------------------------------------------


def _socket(path: Path) -> socket.socket:
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return server


@pytest.mark.parametrize("mode", ["r", "rb", "a"])
@pytest.mark.parametrize("kind", ["a FIFO", "a socket", "a device", "a folder"])
def test_anything_but_a_regular_file_is_a_damaged_file_naming_it_in_every_mode(tmp_path, kind, mode):
    path = tmp_path / "attempts.csv"
    held = None
    if kind == "a FIFO":
        _fifo(path)
    elif kind == "a socket":
        held = _socket(tmp_path / "s")
        path = tmp_path / "s"
    elif kind == "a device":
        path.symlink_to("/dev/null")  # a link to a character device, followed
    else:
        path.mkdir()
    try:
        with pytest.raises(DamagedFileError) as info:
            bounded(lambda: open_regular(path, mode).close(), path)
    finally:
        if held is not None:
            held.close()
    error = info.value
    assert error.path == path and str(error).startswith(f"{path}: is {kind}, not a regular file"), error


def test_a_regular_file_reads_and_appends_and_a_link_is_refused_only_when_asked(tmp_path):
    path = tmp_path / "log.csv"
    with open_regular(path, "a") as f:  # created
        f.write("a,b\n")
    with open_regular(path, "a") as f:
        f.write("1,2\n")
    with open_regular(path) as f:
        assert f.read() == "a,b\n1,2\n"
    (tmp_path / "link").symlink_to(path)
    assert read_regular_bytes(tmp_path / "link") == b"a,b\n1,2\n"
    with pytest.raises(DamagedFileError, match="is a symbolic link, not a regular file"):
        read_regular_bytes(tmp_path / "link", follow_links=False)
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "none.csv")


# --- every run-folder file, through the package's own readers ------------------------------------------


def items(n=3):
    from roma_lab.bench import Item

    return TaskSet("simpleqa", tuple(Item(benchmark="simpleqa", item_id=str(i), question=f"q{i}", answer=f"a{i}")
                                     for i in range(n)))


def echo(question):
    return question.replace("q", "a")


def evaluated(out: Path, system=None):
    from roma_lab import bench

    return evaluate([system or function(echo, label="s")], items(), bench.StringMatchGrader(), out=out,
                    progress=False)


def test_a_fifo_in_place_of_the_attempt_log_is_named_and_never_blocks_the_rerun(tmp_path):
    evaluated(tmp_path)
    _fifo(tmp_path / "attempts.csv")
    with pytest.raises(DamagedFileError, match="is a FIFO, not a regular file") as info:
        bounded(lambda: evaluated(tmp_path), tmp_path / "attempts.csv")  # was: blocked at its append
    assert info.value.path == tmp_path / "attempts.csv"


def test_a_fifo_in_place_of_a_trace_is_moved_aside_and_its_task_run_again(tmp_path):
    first = evaluated(tmp_path, single_call("scripted"))
    trace = first.trace_path("single", "1")
    _fifo(trace)
    with pytest.warns(QuarantineWarning, match=f"{trace}: not a trace roma_lab wrote; its task runs again"):
        again = bounded(lambda: evaluated(tmp_path, single_call("scripted")), trace)
    assert again.rows["status"].tolist() == first.rows["status"].tolist()
    assert trace.is_file() and again.trace("single", "1").output == first.trace("single", "1").output
    assert len(list(trace.parent.glob("1.json.quarantined-*"))) == 1


def _speed_log(path):
    from roma_lab.lm import read_speeds

    return read_speeds(path)


def _trajectory(path):
    from roma_lab.trace import read_trajectory

    return read_trajectory(path)


def _append_speed(path, monkeypatch):
    from roma_lab.lm import ModelSpeed
    from roma_lab.lm._speed import LOG_ENV, append_speed

    monkeypatch.setenv(LOG_ENV, str(path))
    return append_speed(ModelSpeed.model_construct())


READERS = {
    "evaluation.json": lambda out, path, mp: evaluated(out),
    "rows.csv": lambda out, path, mp: __import__("roma_lab.results", fromlist=["x"]).read_table(out, "rows"),
    "provenance.json": lambda out, path, mp: __import__("roma_lab.results", fromlist=["x"]).read_provenance(out),
    "traces/single/r0/0.json": lambda out, path, mp: __import__("roma_lab.trace", fromlist=["x"]).load_trace(path),
    "trajectory.json": lambda out, path, mp: _trajectory(path),
    "an output hashed": lambda out, path, mp: __import__("roma_lab.results", fromlist=["x"]).sha256_file(path),
    "lm_speed.jsonl (read)": lambda out, path, mp: _speed_log(path),
    "lm_speed.jsonl (appended)": lambda out, path, mp: _append_speed(path, mp),
    "attempts.csv (appended)": lambda out, path, mp: __import__("roma_lab.evaluate._log", fromlist=["x"]).append_row(
        path, {}),
}


@pytest.mark.parametrize("name", READERS)
def test_each_run_folder_file_in_a_fifo_is_a_damaged_file_naming_it(tmp_path, name, monkeypatch):
    evaluated(tmp_path, single_call("scripted"))
    path = tmp_path / name.split(" ")[0]
    _fifo(path)
    with pytest.raises(DamagedFileError) as info:
        bounded(lambda: READERS[name](tmp_path, path, monkeypatch), path)
    assert info.value.path == path


def test_the_heartbeat_counts_no_rows_of_a_fifo_and_goes_on(tmp_path):
    from roma_lab.experiments._heartbeat import _rows_so_far

    evaluated(tmp_path / "a")
    evaluated(tmp_path / "b")
    _fifo(tmp_path / "b" / "attempts.csv")
    assert bounded(lambda: _rows_so_far(tmp_path), tmp_path / "b" / "attempts.csv") == 3


# --- one helper: no room that reads run folders opens a file another way ---------------------------------

ROOMS = ("evaluate", "results", "trace", "experiments")
# Reads that are not of a run folder, each for its reason.
NOT_RUN_FOLDERS = {
    ("results/_provenance.py", "package_source_hash"),  # the package's own source files
    ("experiments/_kernel.py", "_boot"),  # /proc
    ("evaluate/_tasks.py", "export_world_tasks"),  # writes a new file whole ("w"), never appends
}
OPENERS = {"open", "read_text", "read_bytes", "read_csv", "read_parquet", "ParquetFile"}


def _openers(path: Path) -> list[tuple[str, int, str]]:
    """(function, line, call) of every call in ``path`` that opens a file by its path, not through the helper."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Call):
                name = child.func.attr if isinstance(child.func, ast.Attribute) else getattr(child.func, "id", "")
                # a read_csv of an open handle (``f``) goes through the helper
                handle = child.args and isinstance(child.args[0], ast.Name) and child.args[0].id in ("f", "handle")
                if name in OPENERS and not handle and not (name == "open" and isinstance(child.func, ast.Attribute)
                                                           and getattr(child.func.value, "id", "") == "os"):
                    found.append((inner, child.lineno, name))
            visit(child, inner)

    visit(tree, "")
    return found


def test_every_file_these_rooms_read_or_append_is_opened_by_the_one_helper():
    found = []
    for room in ROOMS:
        for path in sorted((ROOT / "roma_lab" / room).rglob("*.py")):
            relative = path.relative_to(ROOT / "roma_lab").as_posix()
            if relative == "results/_files.py":  # the helper itself
                continue
            found += [f"{relative}:{line} {call}() in {function}" for function, line, call in _openers(path)
                      if (relative, function) not in NOT_RUN_FOLDERS]
    assert not found, "\n".join(found)


def test_the_rule_sees_a_plain_open(tmp_path):
    planted = tmp_path / "x.py"
    planted.write_text("def f(p):\n    with open(p) as g:\n        return g.read() + p.read_text()\n")
    assert [(function, call) for function, _, call in _openers(planted)] == [("f", "open"), ("f", "read_text")]
