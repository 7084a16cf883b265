"""What ``python -m roma_lab.experiments`` prints a person (issue 52, items 4 and 5): the plan and the list
in 100 columns, one line per notebook and a legend once; the plan and the README saying the same of
``make reproduce``; a run that names the folder it wrote, the command that opens its notebook with
JupyterLab's file browser at the repository root, and progress lines that name where it writes."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from roma_lab.experiments import load_spec, load_specs
from roma_lab.experiments._cli import main, open_command
from roma_lab.experiments._plan import RESERVE, plan_study, sizable_s
from roma_lab.experiments._plan_text import BUDGET_RULE, LEGEND, plan_lines

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "project"
LEVELS = load_spec(REPO / "experiments" / "27_measure_levels_table1.toml")
WIDTH = 100
STEMS = sorted(p.stem for p in (REPO / "experiments").glob("*.toml"))


@pytest.mark.parametrize("argv", [["plan", "--all", "--budget", "2h"], ["plan", "--all", "--budget", "8h"],
                                  ["plan", "--all", "--budget", "24h"],
                                  ["plan", "--all", "--budget", "2h", "--mde", "0.10"], ["plan", "--all"], ["list"]],
                         ids=" ".join)
def test_plan_and_list_fit_100_columns_with_one_line_per_notebook(argv, tmp_path, capsys, monkeypatch):
    # the real experiments/, an empty results folder seen from the folder holding it: a fresh clone
    monkeypatch.chdir(tmp_path)
    assert main(["--root", str(REPO), *argv, "--results", "results"]) == 0
    lines = capsys.readouterr().out.splitlines()
    wide = [f"{len(line)}: {line}" for line in lines if len(line) > WIDTH]
    assert not wide, "\n".join(wide)
    table = lines[:next((i for i, line in enumerate(lines) if line.startswith("total: ")), len(lines))]
    for stem in STEMS:  # the table's row; a study the budget shrinks has a line of its own after the total
        assert sum(stem in line.split() for line in table) == 1, stem
    if argv[0] == "plan":
        assert sum(line == LEGEND[0] for line in lines) == 1  # the legend once, not a note on every line
        assert not any("discordance" in line or "N_ITEMS" in line or "N_TASKS" in line for line in lines)


def test_a_notebook_that_detects_nothing_says_what_n_it_needs_and_one_that_can_says_its_mde(tmp_path):
    small, large = (plan_study([LEVELS], results_root=tmp_path, budget_s=budget).notebooks[0] for budget in (200, 36000))
    assert small.n == 4 and small.detects.startswith("nothing; needs n = ") and small.detects.endswith(" here")
    assert large.n == 60 and re.fullmatch(r"0\.\d\d at n = 30 a level", large.detects), large.detects  # the MDE
    row = next(line for line in plan_lines(plan_study([LEVELS], results_root=tmp_path, budget_s=36000))
               if line.startswith(LEVELS.stem))
    assert row.split()[1:5] == ["60", f"{LEVELS.measured_s / 60:.1f}", "min", "spec"] and row.endswith(large.detects)


def test_the_total_says_whether_the_plan_fits_and_what_run_does_when_it_does_not(tmp_path):
    over = "\n".join(plan_lines(plan_study([LEVELS], results_root=tmp_path, budget_s=60)))
    assert "over the 60 s budget even at 2 tasks a comparison" in over and BUDGET_RULE in over
    assert "1 of 1 times are the specs' figures, not runs on this machine" in over
    within = "\n".join(plan_lines(plan_study([LEVELS], results_root=tmp_path, budget_s=36000)))
    assert "within the 10.0 h budget" in within and "over the" not in within and BUDGET_RULE not in within


def test_the_readme_says_what_the_plan_says_of_make_reproduce(tmp_path):
    """The README's reproduce section and a fresh clone's plan agree: under the 2-hour budget notebook
    27's primary comparison is paid first, at an n that detects its pilot's lower end (in L1 alone, its
    two systems), every other task-sized notebook at 2 tasks a comparison at least, the total within
    the budget and as the README gives it; and a budget sizes notebooks but stops none."""
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert BUDGET_RULE.lower() in readme.lower() and "runs within it" not in readme  # a sentence the plan contradicted
    plan = plan_study(load_specs(REPO), results_root=tmp_path, budget_s=sizable_s(2 * 3600, 0))
    levels = next(p for p in plan.notebooks if p.stem == "27_measure_levels_table1")
    assert "pays notebook 27's primary comparison first (agent − single call, L1 alone;" in readme
    assert dict(levels.sets) == {"LEVELS": ["L1"], "SYSTEMS": ["single"]}
    assert [e.name for e in levels.expected] == ["agent - single, L1"]
    assert levels.comparison_n >= levels.pilots[0].needs  # its pilot's expectation
    assert all(p.comparison_n >= 2 for p in plan.notebooks if p.unit is not None)
    assert plan.seconds <= sizable_s(2 * 3600, 0) and f"{plan.seconds / 3600:.1f} h predicted on the EPYC" in readme
    assert f"{RESERVE:.0%} of the budget kept for" in readme


def test_the_open_command_roots_jupyterlab_at_the_repository_with_the_notebook_open(tmp_path, monkeypatch):
    from jupyter_server.serverapp import ServerApp

    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    notebook = root / "results" / "own" / "0123abcdef" / "01_x" / "01_x.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    monkeypatch.chdir(root)
    words = [w for w in shlex.split(open_command(notebook, root)) if w != "--allow-root"]
    assert words[1:4] == ["lab", "--ServerApp.root_dir=.", "results/own/0123abcdef/01_x/01_x.ipynb"]
    app = ServerApp()  # JupyterLab hands its command line to the server: read as it reads it
    app.parse_command_line(words[2:])
    assert Path(app.root_dir) == root and app._resolve_file_to_run_and_root_dir() == words[3]
    bare = ServerApp()  # the command the README gave: the file browser stops at the notebook's folder
    bare.parse_command_line(words[3:4])
    assert Path(bare.root_dir) == notebook.parent
    elsewhere = tmp_path / "elsewhere" / "01_x" / "01_x.ipynb"  # --results outside the repository
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text("{}")
    assert f"--ServerApp.root_dir={tmp_path / 'elsewhere'}" in shlex.split(open_command(elsewhere, root))


def test_the_open_command_shuts_down_the_kernels_of_closed_notebooks_and_only_those(tmp_path, monkeypatch):
    """Issue 52: every notebook opened left a kernel running. jupyter_server culls a kernel idle this
    long with no browser connected; one whose notebook is open, or that runs a cell, is kept."""
    from jupyter_server.serverapp import ServerApp
    from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager

    notebook = tmp_path / "results" / "01_x" / "01_x.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    monkeypatch.chdir(tmp_path)
    app = ServerApp()
    app.parse_command_line([w for w in shlex.split(open_command(notebook, tmp_path))[2:] if w != "--allow-root"])
    kernels = AsyncMappingKernelManager(config=app.config)  # the class ServerApp runs kernels with
    assert kernels.cull_idle_timeout == 600 and kernels.cull_interval == 60
    assert not kernels.cull_connected and not kernels.cull_busy
    assert AsyncMappingKernelManager().cull_idle_timeout == 0  # without the flags: never


def test_the_readme_opens_the_quickstart_as_the_runner_says(monkeypatch):
    monkeypatch.chdir(REPO)
    command = open_command(REPO / "results" / "01_run_quickstart" / "01_run_quickstart.ipynb", REPO)
    printed = command.removesuffix(" --allow-root").split(" lab ", 1)[1]
    readme = (REPO / "README.md").read_text(encoding="utf-8").replace(" \\\n  ", " ")  # a command's continued line
    assert f".venv/bin/jupyter lab {printed}" in readme


def test_an_own_goal_run_names_its_folder_and_how_to_open_it_and_its_progress_says_where_it_writes(
        tmp_path, monkeypatch, capsys):
    """A --set that changes what the notebook does runs into results/own/<hash>/: the end line names that
    folder (it said results/), the next line opens its notebook, and the parameters cells' progress lines
    say where the run writes (the notebook's own cell shows its default OUT_DIR, which it does not)."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    monkeypatch.chdir(root)
    assert main(["--root", ".", "run", "00_fixture", "--set", "WRITE=True"]) == 0
    captured = capsys.readouterr()
    own = next((root / "results" / "own").iterdir()) / "00_fixture"
    shown = own.relative_to(root).as_posix()
    assert f"1 experiment: 1 completed, 0 skipped, 0 failed; results in {shown}/" in captured.out
    opening = next(line for line in captured.out.splitlines() if line.startswith("open it: "))
    words = shlex.split(opening.removeprefix("open it: "))
    assert words[1:4] == ["lab", "--ServerApp.root_dir=.", f"{shown}/00_fixture.ipynb"] and (root / words[3]).is_file()
    assert f"00_fixture: cell 4/5: this run's parameters; it writes to {own}" in captured.err
    assert "cell 3/5: the notebook's default parameters (the next cell sets this run's)" in captured.err
    assert 'OUT_DIR = "out"' not in captured.err
