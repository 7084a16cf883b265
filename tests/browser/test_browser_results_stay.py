"""Issue 44: opening an executed results notebook in JupyterLab never changes its status. JupyterLab
rewrites what it opens (the kernelspec, cell ids, the JSON layout) and autosaves it; the runner's
status depends on what the run recorded (each cell's source, count and outputs), not on that."""

from __future__ import annotations

import time

import pytest
from conftest import AUTOSAVE_S, LAB_START_S, REPO

from roma_lab.experiments import experiment_status, load_spec, run_experiment

STEMS = ("01_run_quickstart", "10_build_suite", "20_audit_paper_numbers")


@pytest.fixture(scope="module")
def executed(lab):
    """Three notebooks executed by the runner (smoke sizes) into the server's folder."""
    results = lab.root / "results"
    specs = [load_spec(REPO / "experiments" / f"{stem}.toml") for stem in STEMS]
    for spec in specs:
        outcome = run_experiment(spec, results_root=results, smoke=True)
        assert outcome.status == "completed", outcome.error
    return results, specs


def test_opening_three_executed_notebooks_past_autosave_leaves_them_completed(lab, browser, executed):
    results, specs = executed
    page = browser.new_page()
    for spec in specs:
        path = results / spec.stem / spec.notebook.name
        before, recorded = path.stat().st_mtime_ns, path.read_bytes()
        page.goto(f"{lab.url}/lab/tree/{path.relative_to(lab.root)}?token={lab.token}")
        page.wait_for_function("name => window.jupyterapp?.shell?.currentWidget?.context?.path === name",
                               arg=path.relative_to(lab.root).as_posix(), timeout=LAB_START_S * 1000)
        time.sleep(AUTOSAVE_S * 3)
        # a reader folds the outputs away (cell metadata) and saves, as Ctrl-S would: JupyterLab writes
        # the notebook its own way, and what the run recorded is untouched
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:hide-all-cell-outputs')")
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        deadline = time.monotonic() + 30
        while path.stat().st_mtime_ns == before and time.monotonic() < deadline:
            time.sleep(0.5)
        assert path.stat().st_mtime_ns != before, "JupyterLab never wrote the notebook: the test proves nothing"
        assert path.read_bytes() != recorded  # its bytes changed, so a byte hash would call it modified
        assert experiment_status(spec, results_root=results, smoke=True) == "completed", spec.stem
    lab.shutdown_kernels()
