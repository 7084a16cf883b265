"""evaluate on a real LocalCluster of worker processes ($ROMA_LAB_CLUSTER): the serial runner's
guarantees on a cluster.

Same rows as a serial run; resumable task by task; rows written once, by the client, as tasks
finish; a worker killed mid-task loses nothing and repeats no row; a client killed mid-sweep
(kill -9 of a process running it) resumes without a duplicate row; where each task ran, and on
what, is recorded (``cluster.jsonl``); a per-model limit holds cluster-wide; local models generate
one at a time per machine; remote calls are retried on the workers; a scheduler that does not
answer is a typed error. A model limit is a ``roma_lab.cluster.Dispatch``, which evaluate never
builds: those tests hand one to evaluate's scheduler (``run_jobs``). One cluster (two workers)
serves the module: starting one costs seconds.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from dask_systems import (
    CountsAtOnce,
    Echo,
    KillsItsWorker,
    LocalGenerations,
    calls,
    generations,
    most_at_once,
    toy_items,
)
from evaluations import attempts

from roma_lab import cluster as roma_cluster
from roma_lab.bench import StringMatchGrader
from roma_lab.evaluate import ROW_COLUMNS, TaskSet, evaluate, function

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
HANG_GUARD_S = 180  # a stuck test fails after this instead of hanging CI; never a speed check


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """local:2, started with the environment its workers inherit (their own caches, no cluster named),
    and Dask's allowed-failures at 1: a task whose worker dies twice is given up (KilledWorker)."""
    import dask
    import distributed  # noqa: F401 - loads its config defaults, which config.set would otherwise drop on exit

    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ROMA_LAB_CACHE", str(cache / "roma"))
        env.setenv("DSPY_CACHEDIR", str(cache / "dspy"))
        for name in ("ROMA_LAB_CLUSTER", "ROMA_LAB_LM", "ROMA_LAB_API_BASE", "ROMA_LAB_API_KEY"):
            env.delenv(name, raising=False)
        with dask.config.set({"distributed.scheduler.allowed-failures": 1}):  # read when the scheduler starts
            session = roma_cluster.session("local:2")
        yield session
    roma_cluster.shutdown()


def sweep(out: Path, system, n: int, *, label: str = "echo", progress: bool = False):
    """The rows of ``evaluate`` with the function ``system`` on ``toy_items(n)``, string-match graded,
    where $ROMA_LAB_CLUSTER says."""
    items = toy_items(n)
    return evaluate([function(system, label=label)], TaskSet(items[0].benchmark, tuple(items)), StringMatchGrader(),
                    out=out, progress=progress).rows


def on(how, out: Path, system, n: int, *, label: str = "echo") -> None:
    """``system`` on ``toy_items(n)`` through evaluate's scheduler sent to ``how`` (a cluster name or a
    ``Dispatch``, which names a model and its limit: what evaluate itself never sends)."""
    from roma_lab.evaluate._schedule import Attempt, Job, run_jobs

    answer = function(system, label=label).bind(None)
    out.mkdir(parents=True, exist_ok=True)
    run_jobs(Attempt(label, answer, StringMatchGrader(), out), [Job(0, it) for it in toy_items(n)], cluster=how)


def rows(out: Path):
    """Every row of a folder's attempt log (not only the latest per task), as written."""
    return attempts(out)


# --- naming ---------------------------------------------------------------------------------------


def test_a_cluster_is_named_once_like_a_model(monkeypatch):
    monkeypatch.delenv("ROMA_LAB_CLUSTER", raising=False)
    assert roma_cluster.resolve_cluster().kind == "in-process"
    monkeypatch.setenv("ROMA_LAB_CLUSTER", "local:3")
    assert roma_cluster.resolve_cluster() == roma_cluster.ClusterSpec("local:3", "local", 3)
    assert roma_cluster.resolve_cluster("in-process").kind == "in-process"  # a name given wins over the environment
    assert roma_cluster.resolve_cluster("tcp://10.0.0.5:8786") == roma_cluster.ClusterSpec("tcp://10.0.0.5:8786", "scheduler")
    assert roma_cluster.resolve_cluster("local").n_workers == len(os.sched_getaffinity(0))
    for bad in ("local:0", "local:two", "10.0.0.5:8786", "tcp://host", "http://host:8787", "locale"):
        with pytest.raises(ValueError, match="cluster"):
            roma_cluster.resolve_cluster(bad)
    with pytest.raises(ValueError, match="unknown cluster name"):
        roma_cluster.Dispatch(cluster="dask")
    with pytest.raises(ValueError, match="max_concurrent"):
        roma_cluster.Dispatch(cluster="local:2", max_concurrent=2)  # a limit must name its model


def test_in_process_by_default_and_dask_is_never_imported(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys
        from dask_systems import Echo, toy_items
        from roma_lab.bench import StringMatchGrader
        from roma_lab.evaluate import TaskSet, evaluate, function
        evaluate([function(Echo({str(tmp_path / 'log')!r}), label="echo")], TaskSet("toy", tuple(toy_items(3))),
                 StringMatchGrader(), out={str(tmp_path / 'out')!r}, progress=False)
        print(os.getpid(), sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))
    """)
    env = {k: v for k, v in os.environ.items() if k != "ROMA_LAB_CLUSTER"} | {"PYTHONPATH": f"{ROOT}:{TESTS}"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stderr
    pid, imported = out.stdout.split(maxsplit=1)
    assert imported.strip() == "[]"
    assert calls(tmp_path / "log") == [(int(pid), f"q{i}") for i in range(3)]  # in order, in that process


def test_a_scheduler_that_does_not_answer_is_a_typed_error_not_a_hang(monkeypatch, tmp_path, capsys):
    import shutil
    import socket

    from roma_lab.cluster import _cluster
    from roma_lab.experiments._cli import main

    monkeypatch.setattr(_cluster, "CONNECT_TIMEOUT_S", 2)
    with socket.socket() as probe:  # a port nobody listens on once closed
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(roma_cluster.ClusterConnectError, match="no Dask scheduler answers"):
        roma_cluster.session(address)
    monkeypatch.setenv("ROMA_LAB_CLUSTER", address)
    with pytest.raises(roma_cluster.ClusterConnectError, match=f"no Dask scheduler answers at {address}"):
        sweep(tmp_path / "out", Echo(str(tmp_path / "log")), 2)
    assert calls(tmp_path / "log") == [] and not (tmp_path / "out" / "attempts.csv").exists()
    monkeypatch.delenv("ROMA_LAB_CLUSTER")
    shutil.copytree(TESTS / "fixtures" / "project", tmp_path / "project")
    assert main(["--root", str(tmp_path / "project"), "run", "00_fixture", "--cluster", address]) == 2
    assert f"no Dask scheduler answers at {address}" in capsys.readouterr().err


# --- the guarantees ---------------------------------------------------------------------------------


def test_a_sweep_on_the_cluster_writes_the_rows_a_serial_run_writes(cluster, tmp_path, monkeypatch):
    items = toy_items(8)
    monkeypatch.setenv("ROMA_LAB_CLUSTER", "in-process")
    serial = sweep(tmp_path / "serial", Echo(str(tmp_path / "serial.log")), 8)
    monkeypatch.setenv("ROMA_LAB_CLUSTER", "local:2")
    spread = sweep(tmp_path / "cluster", Echo(str(tmp_path / "cluster.log")), 8)
    same = [c for c in ROW_COLUMNS if c != "latency_s"]
    assert spread[same].equals(serial[same])
    assert spread["score"].tolist() == [1.0, 0.0] * 4
    assert {pid for pid, _ in calls(tmp_path / "serial.log")} == {os.getpid()}
    # the work ran on both worker processes, never in the client
    pids = {pid for pid, _ in calls(tmp_path / "cluster.log")}
    assert len(pids) == 2 and os.getpid() not in pids
    assert sorted(q for _, q in calls(tmp_path / "cluster.log")) == sorted(it.question for it in items)
    # where each task ran and on what: every worker, its package versions, the tasks it computed
    [record] = [json.loads(line) for line in (tmp_path / "cluster" / "cluster.jsonl").read_text().splitlines()]
    assert record["cluster"] == "local:2" and record["status"] == "completed" and record["condition"] == "echo"
    assert record["scheduler"] == cluster.scheduler and record["dashboard"].startswith("http://127.0.0.1:")
    workers = record["workers"]
    assert set(workers) == set(cluster.workers())
    assert sorted(itertools.chain.from_iterable(w["items"] for w in workers.values())) == sorted(it.item_id for it in items)
    for w in workers.values():
        assert w["environment"]["packages"]["distributed"] and w["environment"]["packages"]["dspy"]
        assert w["environment"] == roma_cluster.environment().as_json()
    assert not (tmp_path / "serial" / "cluster.jsonl").exists()  # in-process runs have no cluster to record


def test_a_rerun_on_the_cluster_resumes_task_by_task(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("ROMA_LAB_CLUSTER", "local:2")
    log, out = str(tmp_path / "log"), tmp_path / "out"
    sweep(out, Echo(log), 3)
    result = sweep(out, Echo(log), 6)
    assert sorted(q for _, q in calls(log)) == [f"q{i}" for i in range(6)]  # each task computed once
    assert len(rows(out)) == 6 and result["error"].isna().all()
    sweep(out, Echo(log), 6)  # nothing left to do: nothing sent to the cluster
    assert len(calls(log)) == 6
    assert [json.loads(line)["status"] for line in (out / "cluster.jsonl").read_text().splitlines()] == ["completed"] * 2


def test_the_progress_bar_counts_the_whole_sweep_on_the_cluster(cluster, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ROMA_LAB_CLUSTER", "local:2")
    log, out = str(tmp_path / "log"), tmp_path / "out"
    sweep(out, Echo(log), 2)
    capsys.readouterr()
    sweep(out, Echo(log), 6, progress=True)
    bar = capsys.readouterr().err
    assert "evaluate" in bar and "echo" in bar and "6/6" in bar and "/2" not in bar  # one bar over the whole sweep
    assert len(calls(log)) == 6


def test_a_worker_killed_mid_task_loses_nothing_and_repeats_no_row(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("ROMA_LAB_CLUSTER", "local:2")
    log, marker = str(tmp_path / "log"), str(tmp_path / "killed")
    system = KillsItsWorker(Echo(log, delay_s=0.2), question="q3", marker=marker)
    result = sweep(tmp_path / "out", system, 8)
    [killed] = [int(x) for x in Path(marker).read_text().split()]  # the worker died once, mid-task
    written = rows(tmp_path / "out")
    assert sorted(written["task_id"]) == [str(i) for i in range(8)]  # every task, once
    assert result["error"].isna().all() and result["score"].tolist() == [1.0, 0.0] * 4
    [(answered_by, _)] = [c for c in calls(log) if c[1] == "q3"]
    assert answered_by != killed  # q3 was run again, on another (or the restarted) worker process


def test_a_task_that_kills_every_worker_becomes_an_error_row(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("ROMA_LAB_CLUSTER", "local:2")
    log, marker, out = str(tmp_path / "log"), str(tmp_path / "killed"), tmp_path / "out"
    system = KillsItsWorker(Echo(log), question="q1", marker=marker, always=True)
    result = sweep(out, system, 4).set_index("task_id")
    assert len(Path(marker).read_text().split()) == 2  # allowed-failures=1: two workers died, then it was given up
    assert result.loc["1", "error"].startswith("KilledWorker") and result.loc["1", "error_stage"] == "system"
    assert result.loc["1", "status"] == "system_error"
    # Dask charges every task a dying worker held, so another task may be given up too: as an error row
    others = result.drop(index="1")["error"]
    assert (others.isna() | others.str.startswith("KilledWorker")).all()
    assert sorted(rows(out)["task_id"]) == ["0", "1", "2", "3"]
    # error rows are retried by the rerun: nothing is lost (the same system, no longer killing its worker)
    asked_before = len(calls(log))
    rerun = sweep(out, KillsItsWorker(Echo(log), question="none", marker=marker), 4)
    assert rerun["error"].isna().all() and rerun["score"].tolist() == [1.0, 0.0, 1.0, 0.0]
    errors = result.index[result["error"].notna()]
    assert sorted(q for _, q in calls(log)[asked_before:]) == sorted(f"q{i}" for i in errors)  # only those asked again


SWEEP = """
import sys
from pathlib import Path
from dask_systems import Echo, toy_items
from roma_lab.bench import StringMatchGrader
from roma_lab.evaluate import TaskSet, evaluate, function

if __name__ == "__main__":  # worker processes are spawned: they import this file as a module
    evaluate([function(Echo(sys.argv[1], delay_s=float(sys.argv[4])), label="echo")],
             TaskSet("toy", tuple(toy_items(int(sys.argv[3])))), StringMatchGrader(), out=Path(sys.argv[2]),
             progress=False)
"""


def test_a_client_killed_mid_sweep_resumes_without_a_duplicate_row(tmp_path):
    import psutil

    script, log, out = tmp_path / "sweep.py", tmp_path / "log", tmp_path / "out"
    script.write_text(SWEEP)
    env = os.environ | {"ROMA_LAB_CLUSTER": "local:2", "PYTHONPATH": f"{ROOT}:{TESTS}"}
    command = [sys.executable, str(script), str(log), str(out), "10"]
    client = subprocess.Popen([*command, "0.5"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + HANG_GUARD_S
    log_file = out / "attempts.csv"
    while not (log_file.exists() and len(log_file.read_text().splitlines()) >= 4):  # header + 3 rows
        assert client.poll() is None and time.monotonic() < deadline, "the sweep ended before it could be killed"
        time.sleep(0.05)
    client.kill()  # kill -9 of the client, mid-sweep
    client.wait()
    before = rows(out)
    assert 3 <= len(before) < 10
    workers = {pid for pid, _ in calls(log)}
    # its worker processes follow it (they watch their parent): no orphan keeps computing
    for pid in workers:
        try:
            psutil.Process(pid).wait(timeout=HANG_GUARD_S)
        except psutil.NoSuchProcess:
            pass
    finished = subprocess.run([*command, "0"], env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert finished.returncode == 0, finished.stderr
    after = rows(out)
    assert sorted(after["task_id"], key=int) == [str(i) for i in range(10)]  # every task once: nothing lost or repeated
    assert after.iloc[: len(before)].equals(before)  # the rows written before the kill are kept as they were
    rerun = [q for pid, q in calls(log) if pid not in workers]
    assert sorted(rerun) == sorted(f"q{i}" for i in range(10) if str(i) not in set(before["task_id"]))
    assert (out / "rows.csv").is_file()  # the finished call wrote its tables


# --- limits -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit, expected", [(1, 1), (None, 2)])
def test_a_model_limit_bounds_tasks_running_at_once_across_the_cluster(cluster, tmp_path, limit, expected):
    counter = str(tmp_path / "at-once")
    how = roma_cluster.Dispatch(cluster="local:2", model="openai/some-provider-model", max_concurrent=limit) if limit else (
        roma_cluster.Dispatch(cluster="local:2"))
    on(how, tmp_path, CountsAtOnce(counter, hold_s=0.3), 6, label="held")
    assert most_at_once(counter) == expected  # without the limit both workers hold tasks at once
    assert sorted(rows(tmp_path)["task_id"]) == [str(i) for i in range(6)]
    [record] = [json.loads(line) for line in (tmp_path / "cluster.jsonl").read_text().splitlines()]
    assert (record["model"], record["max_concurrent"]) == (how.model, limit)


def test_local_models_generate_one_at_a_time_per_machine_across_workers(cluster, tmp_path):
    pytest.importorskip("llama_cpp")
    from roma_lab.lm import MODELS, ModelNotInstalledError, model_file

    try:
        model_file(MODELS["smollm2-135m"])
    except ModelNotInstalledError as exc:
        pytest.skip(str(exc))
    log = str(tmp_path / "generations")
    how = roma_cluster.Dispatch(cluster="local:2", model="local:smollm2-135m")
    on(how, tmp_path, LocalGenerations("local:smollm2-135m", log), 4, label="local")
    result = rows(tmp_path)
    assert (result["error"] == "").all(), result["error"].tolist()
    spans = sorted(generations(log), key=lambda g: g[1])
    assert len(spans) == 8 and len({pid for pid, _, _ in spans}) == 2  # both workers generated
    for (_, _, end), (_, start, _) in itertools.pairwise(spans):
        assert end <= start  # no generation began before the previous one ended


def test_remote_calls_on_workers_are_retried_by_dspy(cluster, tmp_path):
    """A rate-limited provider (HTTP 429, here from a proxy before llama.cpp's real server): DSPy's
    retries with back-off run on the worker and every row completes."""
    pytest.importorskip("llama_cpp")
    from online_server import FaultProxy, LlamaServer

    from roma_lab.lm import resolve_lm

    server = LlamaServer(tmp_path).start()
    try:
        with FaultProxy(server.port, max_tokens_cap=4) as proxy:
            lm = resolve_lm("openai/smollm2-135m", api_base=proxy.api_base, cache=False, num_retries=3)
            proxy.inject("429", times=2)
            how = roma_cluster.Dispatch(cluster="local:2", model="openai/smollm2-135m", max_concurrent=2)
            on(how, tmp_path / "out", RemoteAnswer(lm), 3, label="remote")
            result = rows(tmp_path / "out")
            assert len(result) == 3 and (result["error"] == "").all(), result["error"].tolist()
            statuses = [e.status for e in proxy.exchanges if e.path.endswith("/chat/completions")]
            assert statuses.count(429) == 2 and statuses.count(200) == 3  # the two refused requests were sent again
    finally:
        server.stop()


class RemoteAnswer:
    """Asks the remote model once per task."""

    def __init__(self, lm):
        self.lm = lm

    def __call__(self, question: str) -> str:
        return self.lm(f"Reply with one word: {question}")[0]
