"""A resumed ``run --all --budget`` (``make reproduce`` run again) never redoes finished work: a notebook
an earlier plan of the same budget started keeps that run's n, whatever a new plan would give it (the
plan reads results/ and the time left); only the notebooks not yet started are sized anew.

The notebooks are task-sized copies of the runner's fixture notebook; their execution is faked (it
writes their rows), so these tests run the real runner's skip and resume without a kernel."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import roma_lab.experiments._plan as plan_rules
import roma_lab.experiments._runner as runner
from roma_lab.experiments import _cli, load_specs
from roma_lab.experiments._plan import plan_study
from roma_lab.results import read_provenance

FIXTURE = Path(__file__).parent / "fixtures" / "project"
SPEC = """\
notebook = "notebooks/{stem}.ipynb"
paper = "roma"
table = "Fixture table"
description = "a task-sized fixture"
timeout_s = 1500
timeout_per_unit_s = 30
timeout_units = ["N_TASKS"]
measured_s = 400  # 10 s a task at its own 40
inputs = ["data/label.txt"]
outputs = ["rows.csv"]

[parameters]
N_TASKS = 40
"""
STEMS = ("21_first", "22_second", "23_third")


@pytest.fixture(autouse=True)
def no_reserve(monkeypatch):
    """These tests count a budget's minutes whole; the reserve's own test sets it."""
    monkeypatch.setattr(plan_rules, "RESERVE", 0.0)


@pytest.fixture
def project(tmp_path):
    """Three task-sized notebooks (40 tasks each, 10 s a task by their specs)."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "experiments" / "00_fixture.toml").unlink()
    notebook = (root / "notebooks" / "00_fixture.ipynb").read_text().replace("N_ROWS", "N_TASKS")
    for stem in STEMS:
        (root / "notebooks" / f"{stem}.ipynb").write_text(notebook)
        (root / "experiments" / f"{stem}.toml").write_text(SPEC.format(stem=stem))
    return root


@pytest.fixture
def ran(monkeypatch):
    """The notebooks run, as (stem, N_TASKS, rows already on disk); each takes ``took[stem]`` seconds
    of the run's clock, and the one in ``interrupt`` is interrupted after writing a row."""
    clock, log = [0.0], {"runs": [], "took": {}, "interrupt": None}

    def execute(spec, out_dir, params, kernel_env):
        rows = out_dir / "rows_so_far.csv"
        log["runs"].append((spec.stem, params["N_TASKS"], rows.is_file()))
        clock[0] += log["took"].get(spec.stem, 0.0)
        if spec.stem == log["interrupt"]:
            rows.write_text("task\n0\n")  # what evaluate appends, task by task
            raise KeyboardInterrupt
        pd.DataFrame({"task": range(params["N_TASKS"])}).to_csv(out_dir / "rows.csv", index=False)

    monkeypatch.setattr(runner, "_execute", execute)
    monkeypatch.setattr(_cli, "_clock", lambda: clock[0])
    return log


def run(project, results, budget="10min"):
    return _cli.main(["--root", str(project), "run", "--all", "--budget", budget, "--results", str(results)])


def test_a_second_budgeted_run_skips_the_notebooks_the_first_finished_at_their_n(project, tmp_path, ran, capsys):
    results = tmp_path / "results"
    ran["took"] = {"21_first": 600.0}  # it took the whole budget: the re-plan gives the others the floor
    assert run(project, results) == 0
    first = {stem: n for stem, n, _ in ran["runs"]}
    assert first["22_second"] == first["23_third"] == 2 < first["21_first"]
    # a new plan would size them otherwise: their runs here cost next to nothing
    fresh = plan_study(load_specs(project), results_root=results, budget_s=600).notebooks
    assert all(p.n != first[p.stem] for p in fresh)
    ran["runs"].clear()
    capsys.readouterr()
    assert run(project, results) == 0
    out = capsys.readouterr().out
    assert ran["runs"] == [] and "3 experiments: 0 completed, 3 skipped" in out
    assert "kept at the n their runs under this budget started with: 21_first, 22_second, 23_third" in out
    assert all(read_provenance(results / stem).parameters["N_TASKS"] == n for stem, n in first.items())
    # another budget is another plan: its notebooks are sized anew
    assert run(project, results, budget="20min") == 0
    assert [stem for stem, _, _ in ran["runs"]] == list(STEMS)


def test_an_interrupted_notebook_resumes_at_the_n_it_started_with_and_only_the_rest_are_resized(
        project, tmp_path, ran, capsys):
    results = tmp_path / "results"
    ran["took"], ran["interrupt"] = {"21_first": 300.0}, "22_second"
    assert run(project, results) == 130
    started = {stem: n for stem, n, _ in ran["runs"]}
    assert started == {"21_first": 20, "22_second": 15}  # 20 each planned; 21 took 300 s: 22 and 23 share 300
    record = read_provenance(results / "22_second")
    assert record.status == "interrupted"
    ran["runs"].clear()
    ran["took"], ran["interrupt"] = {"22_second": 495.0}, None
    assert run(project, results) == 0
    assert [stem for stem, _, _ in ran["runs"]] == ["22_second", "23_third"]  # 21 finished: skipped
    (second, n2, resumed), (third, n3, _) = ran["runs"]
    assert (second, n2, resumed) == ("22_second", started["22_second"], True)  # its rows kept, evaluate resumes
    assert (results / "22_second" / "rows_so_far.csv").is_file()
    assert record.extra["plan"]["run_budget_s"] == 600  # by which it was found: the budget of its whole run
    assert read_provenance(results / "21_first").status == "completed"  # skipped, not run again
    # the third, never started, is sized by what is left: 600 s less this run's 495 s (and the kept runs'
    # recorded milliseconds) buys its 2 tasks and 8 more at 10 s a task
    assert n3 == 10
    plan = json.loads((results / "plan.json").read_text())
    assert {p["stem"]: p["kept"] for p in plan["notebooks"]} == {"21_first": True, "22_second": True,
                                                                "23_third": False}
    assert third == "23_third" and read_provenance(results / third).extra["plan"]["kept"] is False
    assert f"22_second: n = {n2} (kept: its run under this budget)" in capsys.readouterr().out


def test_a_forced_run_sizes_every_notebook_anew(project, tmp_path, ran):
    results = tmp_path / "results"
    ran["took"] = {"21_first": 600.0}
    assert run(project, results) == 0
    ran["runs"].clear()
    ran["took"] = {}
    assert _cli.main(["--root", str(project), "run", "--all", "--budget", "10min", "--force",
                      "--results", str(results)]) == 0
    assert [n for _, n, _ in ran["runs"]] == [p.n for p in plan_study(
        load_specs(project), results_root=results, budget_s=600).notebooks]


LEVELS_SPEC = SPEC.replace("measured_s = 400  # 10 s a task at its own 40", "measured_s = 600  # 10 s a task at its own 60"
                           ).replace("N_TASKS = 40", "N_TASKS = 60").replace("timeout_s = 1500", "timeout_s = 2000") + """
[plan]
per = "LEVELS"
source = "a fixture's pilot"

[plan.pilot]
"a - b, L1" = [20, 0, 30]
"""


def test_a_notebook_run_in_its_primary_comparison_s_level_alone_stays_in_results_and_is_kept(tmp_path, ran, capsys):
    root = tmp_path / "levels"
    shutil.copytree(FIXTURE, root)
    (root / "experiments" / "00_fixture.toml").unlink()
    notebook = json.loads((root / "notebooks" / "00_fixture.ipynb").read_text().replace("N_ROWS", "N_TASKS"))
    notebook["cells"][2]["source"].append('\nLEVELS = ["L1", "L2"]')
    (root / "notebooks" / "27_levels.ipynb").write_text(json.dumps(notebook))
    (root / "experiments" / "27_levels.toml").write_text(LEVELS_SPEC.format(stem="27_levels"))
    # 5 min: 22 tasks a level in both levels cost 440 s; in L1 alone 220 s, and 8 more reach its 30 there
    assert _cli.main(["--root", str(root), "run", "--all", "--budget", "5min"]) == 0
    record = read_provenance(root / "results" / "27_levels")  # in results/, not a folder of its own
    assert record.parameters["LEVELS"] == ["L1"] and record.parameters["N_TASKS"] == 30
    assert "27_levels runs in L1 alone: its own size is not paid in every level" in capsys.readouterr().out
    assert not (root / "results" / "own").exists()
    ran["runs"].clear()
    assert _cli.main(["--root", str(root), "run", "--all", "--budget", "5min"]) == 0
    assert ran["runs"] == [] and "1 skipped" in capsys.readouterr().out


def test_a_budget_since_an_earlier_moment_sizes_the_notebooks_by_what_is_left_and_keeps_their_runs(
        project, tmp_path, ran, capsys, monkeypatch):
    """make reproduce passes its own start (--budget-since): the 5 minutes its set-up and probe took
    come out of the 10-minute budget before the plan sizes anything, and out of every re-plan; the runs
    it starts belong to the 10-minute budget, so a rerun with another start keeps them."""
    results = tmp_path / "results"
    monkeypatch.setattr(_cli, "_now", lambda: 1_000_300.0)
    assert _cli.main(["--root", str(project), "run", "--all", "--budget", "10min", "--budget-since", "1000000",
                      "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "the 10.0 min budget: 5.0 min of it went before this command" in out
    ns = {stem: n for stem, n, _ in ran["runs"]}
    at = {b: {p.stem: p.n for p in plan_study(load_specs(project), results_root=tmp_path / "nothing",
                                              budget_s=b).notebooks} for b in (300, 600)}
    assert ns["21_first"] == at[300]["21_first"] == 10 < at[600]["21_first"]  # 10 s a task by the specs
    assert all(read_provenance(results / stem).extra["plan"]["run_budget_s"] == 600 for stem in STEMS)
    ran["runs"].clear()
    monkeypatch.setattr(_cli, "_now", lambda: 2_000_060.0)
    assert _cli.main(["--root", str(project), "run", "--all", "--budget", "10min", "--budget-since", "2000000",
                      "--results", str(results)]) == 0
    assert ran["runs"] == [] and "3 skipped" in capsys.readouterr().out


def test_budget_since_is_spent_by_every_re_plan(project, tmp_path, ran, capsys, monkeypatch):
    """The time before the command counts in each re-plan too: with 5 of 10 minutes gone before it and
    21 taking 4 more, 22 is sized with one minute left (3 tasks, half of it), not six."""
    results = tmp_path / "results"
    ran["took"] = {"21_first": 240.0}
    monkeypatch.setattr(_cli, "_now", lambda: 1_000_300.0)
    assert _cli.main(["--root", str(project), "run", "--all", "--budget", "10min", "--budget-since", "1000000",
                      "--results", str(results)]) == 0
    ns = {stem: n for stem, n, _ in ran["runs"]}
    assert ns["22_second"] == 3
    without = tmp_path / "without"
    ran["runs"].clear()
    assert run(project, without) == 0  # no --budget-since: the same 21 leaves it six minutes
    assert {stem: n for stem, n, _ in ran["runs"]}["22_second"] == 18


def test_the_reserve_is_kept_out_of_the_first_plan_and_every_re_plan(project, tmp_path, ran, capsys, monkeypatch):
    """A reserve of half a 10-minute budget sizes the notebooks as 5 minutes gone before the command
    do (21 at 10 tasks), and is kept in each re-plan: 21 taking 4 minutes leaves 22 one minute (3
    tasks), not six; the plan says what it keeps; the runs belong to the 10-minute budget."""
    monkeypatch.setattr(plan_rules, "RESERVE", 0.5)
    results = tmp_path / "results"
    ran["took"] = {"21_first": 240.0}
    assert _cli.main(["--root", str(project), "run", "--all", "--budget", "10min", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "the 10.0 min budget: 50% of it is kept for the machine's drift in speed; the plan sizes 5.0 min" in out
    ns = {stem: n for stem, n, _ in ran["runs"]}
    assert ns["21_first"] == 10 and ns["22_second"] == 3
    assert all(read_provenance(results / stem).extra["plan"]["run_budget_s"] == 600 for stem in STEMS)
    assert plan_rules.sizable_s(600, 900) == 0.0  # an overrun sizes nothing, never a negative budget
