"""The planner trusts nothing it reads (reliability issue): a damaged results file is left out with a
warning naming it, never a negative or crashing plan; and every ``python -m roma_lab.experiments``
subcommand reports a bad value or a known error as one ``error:`` line with exit code 2."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from test_experiments import project  # noqa: F401 - a fixture

from roma_lab.experiments import load_spec, run_times, times_markdown
from roma_lab.experiments._cli import main
from roma_lab.experiments._plan import check_target_mde, plan_study
from roma_lab.results import write_provenance

REPO = Path(__file__).resolve().parents[1]
# sized by N_TASKS; one comparison and no pilot, so the discordance comes from its earlier rows
LEVELS = dataclasses.replace(load_spec(REPO / "experiments" / "27_measure_levels_table1.toml"), per=None, pilots=())
OWN_N = {**LEVELS.defaults, **LEVELS.parameters}["N_TASKS"]
SPEC_COST = ("estimate (the spec's measured run)", LEVELS.measured_s / OWN_N)


def _measured_run(results: Path, *, minutes: float = 30, overrides=None, edit=None) -> Path:
    """A completed full-size record of LEVELS that took ``minutes`` (negative: finished before it
    started), with ``overrides`` as its --set sizes; ``edit`` changes its JSON afterwards."""
    out = results / LEVELS.stem
    out.mkdir(parents=True, exist_ok=True)
    extra = {"smoke": False, **({"overrides": overrides} if overrides is not None else {})}
    write_provenance(out, parameters={"N_TASKS": OWN_N}, model="local", extra=extra,
                     started_at=datetime.now(UTC) - timedelta(minutes=minutes))
    if edit is not None:
        path = out / "provenance.json"
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    return out / "provenance.json"


def _plan_warns(results: Path, path: Path, **kw):
    with pytest.warns(UserWarning, match=str(path)):
        plan = plan_study([LEVELS], results_root=results, **kw)
    assert plan.seconds > 0 and all(p.seconds > 0 and p.seconds_per_unit > 0 for p in plan.notebooks)
    return plan.notebooks[0]


def test_a_good_measured_run_still_sets_the_cost(tmp_path):
    _measured_run(tmp_path, minutes=30)
    (notebook,) = plan_study([LEVELS], results_root=tmp_path).notebooks
    assert notebook.cost_source.startswith("measured") and notebook.seconds_per_unit == pytest.approx(1800 / OWN_N, rel=0.01)


def test_a_record_that_finished_before_it_started_is_left_out_not_a_negative_plan(tmp_path):
    # before: the plan predicted -3,600 s for it and split the budget with that cost
    path = _measured_run(tmp_path, minutes=-60)
    notebook = _plan_warns(tmp_path, path, budget_s=3600)
    assert (notebook.cost_source, notebook.seconds_per_unit) == SPEC_COST
    assert notebook.n == min(OWN_N, int(3600 // SPEC_COST[1]))  # the budget split at the spec's cost


@pytest.mark.parametrize("n_tasks", [-3, 0, "abc", [], 2.5])
def test_a_record_whose_sizes_count_no_work_is_left_out(tmp_path, n_tasks):
    # before: N_TASKS = -3 gave -7,200 s; 0 a ZeroDivisionError; 'abc' a TypeError
    path = _measured_run(tmp_path, overrides={"N_TASKS": n_tasks})
    notebook = _plan_warns(tmp_path, path)
    assert (notebook.cost_source, notebook.seconds_per_unit) == SPEC_COST


@pytest.mark.parametrize("field", ["started_at", "finished_at"])
def test_a_record_without_a_time_zone_is_left_out_by_plan_and_times(tmp_path, field):
    # before: a TypeError (an aware time minus a naive one) in plan and in times
    naive = datetime.now(UTC).replace(tzinfo=None).isoformat()
    path = _measured_run(tmp_path, edit=lambda record: {**record, field: naive})
    notebook = _plan_warns(tmp_path, path)
    assert (notebook.cost_source, notebook.seconds_per_unit) == SPEC_COST
    with pytest.warns(UserWarning, match="without a time zone"):
        rows = times_markdown(run_times(tmp_path, [LEVELS.stem]))
    assert f"| `{LEVELS.stem}` | unreadable |" in rows


def test_a_speed_log_line_without_a_time_zone_is_a_damaged_line(tmp_path):
    # before: comparing a run's UTC start with the line's naive load time was a TypeError in times and plan
    _measured_run(tmp_path)
    line = {"model": "qwen.gguf", "pid": 1, "threads": 2, "cpus": 2, "load_avg_1min": 0.5,
            "loaded_at": "2026-11-30T10:00:05", "closed_at": "2026-11-30T10:04:00", "calls": 3, "call_seconds": 30.0,
            "prompt_tokens": 300, "prompt_seconds": 10.0, "generated_tokens": 100, "generation_seconds": 20.0}
    (tmp_path / "lm_speed.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.warns(UserWarning, match="1 damaged line"):
        (notebook,) = plan_study([LEVELS], results_root=tmp_path).notebooks
    assert notebook.cost_source.startswith("measured")
    with pytest.warns(UserWarning, match="1 damaged line"):
        run_times(tmp_path, [LEVELS.stem])


@pytest.mark.parametrize(("rows", "problem"), [
    ("a - b,abc,3,1,6", "n column holds 'abc'"),  # before: a TypeError comparing 'abc' with 0
    ("a - b,10,many,1,6", "wins column holds 'many'"),
    ("a - b,10,-3,1,6", "negative"),
    ("a - b,inf,3,1,6", "infinite"),
    ("a - b,10,8,7,0", "more wins and losses than tasks"),  # before: a discordance of 1.5, a ValueError
])
def test_a_paired_table_whose_counts_are_not_counts_is_left_out(tmp_path, rows, problem):
    table = tmp_path / LEVELS.stem / "levels_comparisons.csv"
    table.parent.mkdir()
    table.write_text(f"condition,n,wins,losses,ties\n{rows}\n")
    with pytest.warns(UserWarning, match=f"{table}: cannot be used .*{problem}"):
        (notebook,) = plan_study([LEVELS], results_root=tmp_path).notebooks
    assert notebook.discordance is None and notebook.discordance_source.startswith("no pilot")


def test_a_paired_table_that_is_no_regular_file_is_left_out(tmp_path):
    (tmp_path / LEVELS.stem / "levels_paired.csv").mkdir(parents=True)
    with pytest.warns(UserWarning, match="levels_paired.csv: cannot be used"):
        (notebook,) = plan_study([LEVELS], results_root=tmp_path).notebooks
    assert notebook.discordance is None


@pytest.mark.parametrize("mde", [0, -0.1, 1.5, float("nan"), float("inf"), 1e-300, 1e-4])
def test_a_target_mde_is_checked_before_planning(mde, tmp_path):
    # before: 0 was dropped silently, 1e-300 an OverflowError
    with pytest.raises(ValueError, match="target MDE"):
        check_target_mde(mde)
    with pytest.raises(ValueError, match="target MDE"):
        plan_study([LEVELS], results_root=tmp_path, target_mde=mde)


def test_a_target_mde_in_range_plans(tmp_path):
    (notebook,) = plan_study([LEVELS], results_root=tmp_path, target_mde=0.3).notebooks
    assert notebook.target_mde == 0.3 and notebook.target_n >= 2


# --- the command line: one error line, exit 2 -------------------------------------------------------


def _cli(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    return code, capsys.readouterr().err


BAD = [
    (["plan", "--all", "--mde", "1e-300"], "more than 1000000 tasks"),
    (["plan", "--all", "--mde", "0"], "(0, 1]"),
    (["plan", "--all", "--mde", "-0.1"], "(0, 1]"),
    (["plan", "--all", "--mde", "nan"], "(0, 1]"),
    (["plan", "--all", "--mde", "1.5"], "(0, 1]"),
    (["plan", "--all", "--mde", "abc"], "invalid float value"),
    (["plan", "--all", "--lm", "local:no-such-variant"], "unknown local model 'local:no-such-variant'"),
    (["plan", "--all", "--lm", "/nowhere/weights.gguf"], "does not exist"),
    (["run", "--all", "--lm", "local:no-such-variant"], "unknown local model"),
    (["list", "--lm", "local:no-such-variant"], "unknown local model"),
    (["plan", "--all", "--budget", "two hours"], "a budget is a time"),
    (["plan", "--all", "--budget-usd", "-1"], "--budget-usd must be a positive number"),
    (["plan", "--all", "--concurrency", "0"], "--concurrency"),
    (["plan"], "name experiments or pass --all"),
    (["plan", "99_nope"], "unknown experiment(s) 99_nope"),
    (["run", "00_fixture", "--set", "N_RWOS=1"], "N_RWOS is not a parameter of 00_fixture.ipynb"),
    (["run", "00_fixture", "--set", "N_ROWS"], "--set takes NAME=VALUE"),
    (["run", "--all", "--per", "cluster"], "invalid choice"),
    (["times", "--bogus"], "unrecognized arguments"),
    (["frobnicate"], "invalid choice"),
    (["plan", "--all", "--results", "{file}"], "is not a folder"),
    (["list", "--results", "{file}"], "is not a folder"),
    (["--root", "{nowhere}", "list"], "no experiments/ folder"),
]


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_value_is_one_error_line_and_exit_2(project, tmp_path, capsys, argv, message):  # noqa: F811
    (tmp_path / "a_file").write_text("")
    argv = [a.format(file=tmp_path / "a_file", nowhere=tmp_path / "nowhere") for a in argv]
    root = [] if "--root" in argv else ["--root", str(project)]
    code, err = _cli([*root, *argv, *([] if "--results" in argv else ["--results", str(tmp_path / "results")])],
                     capsys)
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert "Traceback" not in err and "usage:" not in err


def test_the_process_prints_no_traceback_for_an_mde_that_overflowed(project, tmp_path):  # noqa: F811
    done = subprocess.run([sys.executable, "-m", "roma_lab.experiments", "--root", str(project), "plan", "--all",
                           "--mde", "1e-300", "--results", str(tmp_path)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "plan.json").exists()  # refused before anything was planned


def test_good_values_still_plan(project, tmp_path, capsys):  # noqa: F811
    argv = ["--root", str(project), "plan", "--all", "--mde", "0.3", "--lm", "local:smollm2-135m", "--budget", "1h",
            "--results", str(tmp_path)]
    assert main(argv) == 0
    assert "total: " in capsys.readouterr().out and (tmp_path / "plan.json").is_file()


def test_a_provenance_record_that_is_no_regular_file_is_left_out_by_plan_and_times(tmp_path):
    # before (issue 53): a FIFO or folder in its place was a DamagedFileError out of plan and times
    import os
    import threading

    path = tmp_path / LEVELS.stem / "provenance.json"
    path.parent.mkdir()
    os.mkfifo(path)
    box = {}

    def both():
        with pytest.warns(UserWarning, match=f"{path}: is a FIFO, not a regular file"):
            box["plan"] = plan_study([LEVELS], results_root=tmp_path).notebooks[0]
        with pytest.warns(UserWarning, match="is a FIFO"):
            box["times"] = times_markdown(run_times(tmp_path, [LEVELS.stem]))

    worker = threading.Thread(target=both, daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("plan or times blocked on a FIFO")
    assert (box["plan"].cost_source, box["plan"].seconds_per_unit) == SPEC_COST
    assert f"| `{LEVELS.stem}` | unreadable |" in box["times"]
