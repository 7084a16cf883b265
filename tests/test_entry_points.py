"""Every command-line entry point reports a bad value or a known error as one line on stderr with exit
status 2, never a traceback (issue 53 item 6). Each runs as a process, with a table of bad inputs; none of
them gets as far as running a model (the models named are the scripted double or nothing that answers).

Before: ``python -m roma_lab.evaluate`` printed tracebacks with exit 1 for ``--budget-usd`` -1/0/nan/inf,
$ROMA_LAB_CALL_DEADLINE_S ``abc`` or ``0``, $ROMA_LAB_BUDGET_USD=abc and a rerun after a gold answer
changed; the widgets export for a missing or unreadable notebook; the papers' shell ran the embedded model
for ``--limit -1``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "project"
TASKS = "id,question,answer\nq1,What is 2+2?,4\nq2,Capital of France?,Paris\n"


def refused(module: str, args: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> str:
    """``python -m module args`` (``{tmp}`` in an argument is ``tmp_path``): its one stderr line, after
    asserting exit status 2, one line and no traceback."""
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ROMA_LAB_")}
    environ |= {"PYTHONPATH": str(ROOT), "ROMA_LAB_CACHE": str(tmp_path / "cache"), **(env or {})}
    done = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=environ,
                          timeout=300, check=False, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


@pytest.fixture
def tasks(tmp_path):
    (tmp_path / "t.csv").write_text(TASKS)
    return tmp_path / "t.csv"


# --- python -m roma_lab.evaluate -------------------------------------------------------------------

def _gold_changed(tmp):
    from roma_lab.evaluate.__main__ import main

    assert main([str(tmp / "t.csv"), "--system", "single", "--lm", "scripted", "--out", str(tmp / "out")]) == 0
    (tmp / "t.csv").write_text(TASKS.replace(",4\n", ",5\n"))


def _fifo_log(tmp):
    (tmp / "out").mkdir()
    os.mkfifo(tmp / "out" / "attempts.csv")


def _old_layout(tmp):
    (tmp / "out").mkdir()
    (tmp / "out" / "run0.csv").write_text("benchmark,item_id\n")


RUN = ["t.csv", "--system", "single", "--lm", "scripted", "--out", "{tmp}/out"]
EVALUATE = [
    (RUN + ["--budget-usd", "-1"], {}, None, "--budget-usd must be a positive number of dollars, got -1.0"),
    (RUN + ["--budget-usd", "0"], {}, None, "--budget-usd must be a positive number"),
    (RUN + ["--budget-usd", "nan"], {}, None, "--budget-usd must be a positive number"),
    (RUN + ["--budget-usd", "inf"], {}, None, "--budget-usd must be a positive number"),
    (RUN + ["--budget-usd", "abc"], {}, None, "invalid float value: 'abc'"),
    (RUN, {"ROMA_LAB_BUDGET_USD": "abc"}, None, "$ROMA_LAB_BUDGET_USD must be a number of dollars, got 'abc'"),
    (RUN, {"ROMA_LAB_BUDGET_USD": "-2"}, None, "$ROMA_LAB_BUDGET_USD must be a positive number"),
    (["t.csv", "--system", "single", "--lm", "openai/m", "--out", "{tmp}/out"], {"ROMA_LAB_CALL_DEADLINE_S": "abc"},
     None, "$ROMA_LAB_CALL_DEADLINE_S must be a number of seconds, got 'abc'"),
    (["t.csv", "--system", "single", "--lm", "openai/m", "--out", "{tmp}/out"], {"ROMA_LAB_CALL_DEADLINE_S": "0"},
     None, "a model call's deadline must be a positive number of seconds, got 0.0"),
    (RUN, {}, _gold_changed, "holds rows for tasks ['q1'] with another question or gold answer"),
    (RUN, {}, _fifo_log, "attempts.csv: is a FIFO, not a regular file"),
    (RUN, {}, _old_layout, "migrate it once with"),
    (RUN + ["--runs", "0"], {}, None, "runs must be a positive integer, got 0"),
    (RUN + ["--timeout-s", "-1"], {}, None, "timeout_s must be a positive number of seconds"),
    (RUN + ["--n", "-1"], {}, None, "n must be a positive integer, got -1"),
    (["t.csv", "--system", "single", "--lm", "local:no-such", "--out", "{tmp}/out"], {}, None,
     "unknown local model 'local:no-such'"),
    (["none.csv", "--system", "single", "--lm", "scripted", "--out", "{tmp}/out"], {}, None, "no such task file"),
    (["t.csv", "--system", "bogus", "--out", "{tmp}/out"], {}, None, "invalid choice: 'bogus'"),
    (["t.csv", "--system", "single", "--system", "single", "--out", "{tmp}/out"], {}, None, "each --system once"),
    (["migrate", "{tmp}/nowhere"], {}, None, "is not a folder"),
]


@pytest.mark.parametrize(("args", "env", "setup", "says"), EVALUATE, ids=[
    " ".join([*a[-2:], *(f"{k}={v}" for k, v in e.items()), s.__name__ if s else ""]).strip() for a, e, s, _ in EVALUATE])
def test_evaluate(tmp_path, tasks, args, env, setup, says):
    if setup is not None:
        setup(tmp_path)
    assert says in refused("roma_lab.evaluate", args, tmp_path, env)


def test_evaluate_names_the_process_holding_its_folder(tmp_path, tasks):
    from roma_lab.results import folder_lock

    with folder_lock(tmp_path / "out", ".evaluate.lock", "evaluate"):
        line = refused("roma_lab.evaluate", RUN, tmp_path)
    assert f"is being written by another process (evaluate, process {os.getpid()}, since " in line


# --- python -m roma_lab.experiments ----------------------------------------------------------------

PLAN = ["--root", str(FIXTURE), "plan", "--all", "--results", "{tmp}/results"]
EXPERIMENTS = [
    (PLAN + ["--mde", "1e-300"], {}, "more than 1000000 tasks"),
    (PLAN + ["--mde", "0"], {}, "(0, 1]"),
    (PLAN + ["--mde", "-0.1"], {}, "(0, 1]"),
    (PLAN + ["--lm", "local:no-such-variant"], {}, "unknown local model 'local:no-such-variant'"),
    (PLAN + ["--budget-usd", "nan"], {}, "--budget-usd must be a positive number"),
    (PLAN + ["--budget-since", "1"], {}, "give --budget too"),
    (PLAN + ["--budget", "2h", "--budget-since", "nan"], {}, "--budget-since is a past moment"),
    (PLAN + ["--budget", "2h", "--budget-since", "9e12"], {}, "--budget-since is a past moment"),
    (PLAN + ["--budget", "2h", "--budget-since", "abc"], {}, "invalid float value: 'abc'"),
    (["--root", str(FIXTURE), "run", "--all", "--results", "{tmp}/results"], {"ROMA_LAB_BUDGET_USD": "abc"},
     "$ROMA_LAB_BUDGET_USD must be a number of dollars"),
    (["--root", str(FIXTURE), "run", "--all", "--results", "{tmp}/results"], {"ROMA_LAB_CALL_DEADLINE_S": "0"},
     "a model call's deadline must be a positive number"),
    (["--root", str(FIXTURE), "frobnicate"], {}, "invalid choice"),
    (["--root", str(FIXTURE), "probe", "--results", "{tmp}/results", "--lm", "local:nope"], {},
     "unknown local model 'local:nope'"),
    (["--root", str(FIXTURE), "probe", "--results", "{tmp}/results", "--lm", "openai/gpt-4o"], {},
     "a probe times the embedded model on this machine"),
]


@pytest.mark.parametrize(("args", "env", "says"), EXPERIMENTS,
                         ids=[" ".join([*a[3:5], *a[-2:], *env]) for a, env, _ in EXPERIMENTS])
def test_experiments(tmp_path, args, env, says):
    assert says in refused("roma_lab.experiments", args, tmp_path, env)
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())  # nothing ran


# --- python -m roma_lab.simulator ------------------------------------------------------------------

SIMULATOR = [
    (["t.csv", "--model", "m=0.5", "--port", "70000"], "--port: a port is 0 to 65535"),  # was an OverflowError
    (["t.csv", "--model", "m=0.5", "--model", "m=0.9"], "--model names 'm' twice"),  # was: 0.9 kept
    (["t.csv", "--model", "m=1.5"], "a skill is a probability in [0, 1]"),
    (["t.csv", "--model", "m=0.5", "--host", "0.0.0.0"], "binds 127.0.0.1 only"),
    (["none.csv", "--model", "m=0.5"], "no such task file"),
    (["t.csv"], "the following arguments are required: --model"),
]


@pytest.mark.parametrize(("args", "says"), SIMULATOR, ids=[" ".join(a[1:]) for a, _ in SIMULATOR])
def test_simulator(tmp_path, tasks, args, says):
    assert says in refused("roma_lab.simulator", args, tmp_path)


# --- python -m roma_lab.papers.routing -------------------------------------------------------------

ROUTING = [
    (["reproduce", "--out", "{tmp}/o", "--n-resamples", "-1"], "n_resamples and repeats must be >= 1"),
    (["reproduce", "--out", "{tmp}/o", "--repeats", "0"], "n_resamples and repeats must be >= 1"),
    (["reproduce", "--out", "{tmp}/o", "--tables", "nope"], "invalid choice: 'nope'"),
    (["reproduce", "--out", "{tmp}/t.csv"], "--out {tmp}/t.csv is not a folder"),
    (["reproduce", "--out", "{tmp}"], "is not empty; pass --force"),
    (["paraphrase", "--out", "{tmp}/p", "--limit", "-1"], "--limit: a whole number >= 1"),  # was: the model ran
    (["paraphrase", "--out", "{tmp}/p", "--limit", "0"], "--limit: a whole number >= 1"),
    (["paraphrase", "--out", "{tmp}/t.csv"], "is not a folder"),
    (["reproduce", "--out", "{tmp}/o", "--suite-seed", "abc"], "invalid int value: 'abc'"),
]


@pytest.mark.parametrize(("args", "says"), ROUTING, ids=[" ".join(a[:1] + a[3:]) for a, _ in ROUTING])
def test_papers_routing(tmp_path, tasks, args, says):
    assert says.replace("{tmp}", str(tmp_path)) in refused("roma_lab.papers.routing", args, tmp_path)
    assert not (tmp_path / "o").exists() and not (tmp_path / "p").exists()  # refused before anything ran


# --- python -m roma_lab.widgets --------------------------------------------------------------------

def _notebook(text):
    def write(tmp):
        (tmp / "nb.ipynb").write_text(text)
    return write


def _fifo_notebook(tmp):
    os.mkfifo(tmp / "nb.ipynb")


WIDGETS = [
    (["export", "missing.ipynb"], None, "No such file or directory: 'missing.ipynb'"),  # was a traceback
    (["export", "nb.ipynb"], _notebook("not json"), "nb.ipynb: not a notebook nbformat can read (NotJSONError"),
    (["export", "nb.ipynb"], _notebook("{}"), "nb.ipynb: not a notebook nbformat can read"),
    (["export", "nb.ipynb"], _notebook("[1]"), "nb.ipynb: not a notebook nbformat can read"),
    (["export", "nb.ipynb"], _fifo_notebook, "nb.ipynb: is a FIFO, not a regular file"),
    (["export", "{tmp}"], None, "is a folder, not a regular file"),
    ([], None, "the following arguments are required: command"),
]


@pytest.mark.parametrize(("args", "setup", "says"), WIDGETS,
                         ids=[" ".join(a) + (f" {s.__name__}" if s else "") for a, s, _ in WIDGETS])
def test_widgets(tmp_path, args, setup, says):
    if setup is not None:
        setup(tmp_path)
    assert says in refused("roma_lab.widgets", args, tmp_path)


# --- python -m roma_lab.web ------------------------------------------------------------------------

WEB = [
    (["serve", "--corpus", "c.jsonl", "--port", "70000"], "--port: a port is 0 to 65535"),
    (["serve", "--corpus", "missing.jsonl"], "missing.jsonl"),
    (["serve", "--corpus", "bad.jsonl"], "line 1 is not JSON"),
    (["serve", "--corpus", "c.jsonl", "--files", "c.jsonl"], "files are served from a folder"),
    (["serve"], "the following arguments are required: --corpus"),
]


@pytest.mark.parametrize(("args", "says"), WEB, ids=[" ".join(a[1:]) for a, _ in WEB])
def test_web(tmp_path, args, says):
    (tmp_path / "c.jsonl").write_text('{"id": "a", "text": "Paris is the capital of France"}\n')
    (tmp_path / "bad.jsonl").write_text("not json\n")
    assert says in refused("roma_lab.web", args, tmp_path)


def test_every_entry_point_is_in_a_table_here():
    """A new ``python -m roma_lab...`` command gets its table of bad inputs (internal helpers run by the
    package itself, never typed by a person, are named here)."""
    # an install step; a sandbox helper; the speed probe's child process (`experiments probe` runs it)
    internal = {"roma_lab/lm/_native_build.py", "roma_lab/tools/_cgroup.py", "roma_lab/experiments/_probe.py"}
    tested = {"roma_lab/evaluate/__main__.py", "roma_lab/experiments/__main__.py", "roma_lab/simulator/__main__.py",
              "roma_lab/papers/routing/__main__.py", "roma_lab/widgets/__main__.py", "roma_lab/web/__main__.py"}
    found = {p.relative_to(ROOT).as_posix() for p in (ROOT / "roma_lab").rglob("*.py")
             if p.name == "__main__.py" or 'if __name__ == "__main__"' in p.read_text(encoding="utf-8")}
    assert found == tested | internal
