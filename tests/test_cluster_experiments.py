"""The experiment runner on a real LocalCluster: items of each notebook on the workers, or whole
notebooks on the workers, with the runner's guarantees (resume, provenance) kept.

The items fixture project (tests/fixtures/items_project) is the runner kill probe's: its system
logs each answer with its process id and can pause at a question (tests/probe_runner_kills.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from roma_lab import cluster as roma_cluster
from roma_lab.experiments import load_spec, run_experiments
from roma_lab.results import read_provenance

FIXTURES = Path(__file__).parent / "fixtures"
HANG_GUARD_S = 180  # a stuck test fails after this instead of hanging CI; never a speed check


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Copies of the two fixture projects and a local:2 cluster whose workers can import the items
    notebook's system (its folder on their path) and find the probe's control folder."""
    root = tmp_path_factory.mktemp("sweep")
    for name in ("items_project", "project"):
        shutil.copytree(FIXTURES / name, root / name)
    control = root / "control"
    control.mkdir()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ROMA_LAB_PROBE_DIR", str(control))
        env.setenv("ROMA_LAB_CACHE", str(root / "cache"))
        env.delenv("ROMA_LAB_CLUSTER", raising=False)
        env.syspath_prepend(str(root / "items_project" / "notebooks"))
        session = roma_cluster.session("local:2")
        pids = set(session.client.run(os.getpid).values())
        yield root, control, session, pids
    roma_cluster.shutdown()


def specs(root: Path):
    return (load_spec(root / "items_project" / "experiments" / "00_items.toml"),
            load_spec(root / "project" / "experiments" / "00_fixture.toml"))


def calls(control: Path) -> list[tuple[int, str]]:
    path = control / "calls.log"
    return [(int(p), q) for p, q in (line.split() for line in path.read_text().splitlines())] if path.exists() else []


def test_per_item_the_notebooks_items_run_on_the_workers(sweep, tmp_path):
    root, control, session, worker_pids = sweep
    (control / "calls.log").unlink(missing_ok=True)
    items, _ = specs(root)
    [outcome] = run_experiments([items], results_root=tmp_path, cluster="local:2", per="item", progress=False)
    assert outcome.status == "completed", outcome.error
    answered = calls(control)
    assert sorted(q for _, q in answered) == ["q0", "q1", "q2", "q3"]
    assert {pid for pid, _ in answered} <= worker_pids  # not the kernel: the workers
    [line] = (tmp_path / "00_items" / "items" / "cluster.jsonl").read_text().splitlines()
    assert json.loads(line)["scheduler"] == session.scheduler  # the kernel used the runner's cluster
    cluster = read_provenance(tmp_path / "00_items").extra["cluster"]
    assert cluster["name"] == "local:2" and cluster["per"] == "item" and cluster["scheduler"] == session.scheduler
    assert set(cluster["workers"]) == set(session.workers())
    assert all(w["environment"]["packages"]["distributed"] for w in cluster["workers"].values())
    # the kernel connected to the runner's cluster: its dashboard link is in the executed notebook
    executed = json.loads((tmp_path / "00_items" / "00_items.ipynb").read_text())
    shown = "".join("".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", []))
    assert f"dashboard {session.dashboard}" in shown


def test_per_notebook_whole_notebooks_run_on_the_workers(sweep, tmp_path):
    root, control, session, worker_pids = sweep
    (control / "calls.log").unlink(missing_ok=True)
    outcomes = run_experiments(list(specs(root)), results_root=tmp_path, cluster="local:2", per="notebook",
                               progress=False)
    assert [(o.stem, o.status) for o in outcomes] == [("00_items", "completed"), ("00_fixture", "completed")]
    for stem in ("00_items", "00_fixture"):
        cluster = read_provenance(tmp_path / stem).extra["cluster"]
        assert cluster["per"] == "notebook" and cluster["worker"] in session.workers()
    kernels = {pid for pid, _ in calls(control)}
    assert len(kernels) == 1 and not kernels & worker_pids  # the items ran in the notebook's kernel
    assert not (tmp_path / "00_items" / "items" / "cluster.jsonl").exists()  # nothing dispatched from a worker


def test_per_notebook_a_worker_runs_the_sizes_asked(sweep, tmp_path):
    """--set reaches a notebook run on a worker: its rows, its record, its cell timeout."""
    root, _, session, _ = sweep
    _, fixture = specs(root)
    [outcome] = run_experiments([fixture], results_root=tmp_path, cluster="local:2", per="notebook",
                                overrides={"N_ROWS": 6}, progress=False)
    assert outcome.status == "completed", outcome.error
    assert len(pd.read_csv(tmp_path / "00_fixture" / "rows.csv")) == 6
    record = read_provenance(tmp_path / "00_fixture")
    assert record.parameters["N_ROWS"] == 6 and record.extra["overrides"] == {"N_ROWS": 6}
    assert record.extra["cell_timeout_s"] == 70 and record.extra["cluster"]["worker"] in session.workers()


def test_a_worker_killed_mid_notebook_resumes_it_on_another(sweep, tmp_path):
    root, control, session, worker_pids = sweep
    for name in ("calls.log", "paused-q2"):
        (control / name).unlink(missing_ok=True)
    (control / "pause").write_text("q2")
    items, _ = specs(root)
    killed = {}

    def kill_the_worker_running_it() -> None:
        deadline = time.monotonic() + HANG_GUARD_S
        while not (control / "paused-q2").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        kernel = psutil.Process(int((control / "paused-q2").read_text()))
        (control / "pause").unlink()  # the rerun must not pause again
        killed["worker"] = kernel.ppid()
        os.kill(killed["worker"], signal.SIGKILL)

    watcher = threading.Thread(target=kill_the_worker_running_it, daemon=True)
    watcher.start()
    [outcome] = run_experiments([items], results_root=tmp_path, cluster="local:2", per="notebook", progress=False)
    watcher.join(HANG_GUARD_S)
    assert killed["worker"] in worker_pids
    assert outcome.status == "completed", outcome.error
    assert sorted(q for _, q in calls(control)) == ["q0", "q1", "q2", "q3"]  # items 0, 1 kept, not asked again
    assert read_provenance(tmp_path / "00_items").status == "completed"
