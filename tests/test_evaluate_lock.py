"""One process writes an evaluation folder at a time (issue 53 item 4): a second ``evaluate`` on the same
``out`` is told which process holds it (one line, exit 2 from the shell) and spends nothing, so two runs
started at once can no longer double a dollar cap. Before, two capped runs into one folder spent 2.03x
the cap and left 61 duplicated rows. The notebook runner holds its experiment with the same lock."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from roma_lab.evaluate import BUDGET_ENV, NOT_RUN, tasks_from
from roma_lab.lm import LIMIT_ENV
from roma_lab.simulator import SimModel, simulated_provider

ROOT = Path(__file__).resolve().parents[1]
PRICED = SimModel(0.6, usd_per_1k_input=0.5, usd_per_1k_output=2.0)
CAP_USD = 0.002


class Held:
    """The provider's latency: each reply waits until ``gate`` is set (a process holding the folder is
    then still running when the second one starts, whatever the machine's speed)."""

    def __init__(self):
        self.gate = threading.Event()

    def seconds(self, _quantile: float) -> float:
        self.gate.wait(120)
        return 0.0


def test_a_second_process_on_the_same_folder_is_told_who_holds_it_and_the_cap_is_kept_once(tmp_path):
    rows = [{"id": f"t{i}", "question": f"Question {i}: what is the value asked for in case {i}?", "answer": str(i)}
            for i in range(8)]
    task_file = tmp_path / "tasks.csv"
    with task_file.open("w", newline="") as f:
        writer = csv.DictWriter(f, ["id", "question", "answer"])
        writer.writeheader()
        writer.writerows(rows)
    out = tmp_path / "out"
    latency = Held()
    with simulated_provider(tasks_from(str(task_file)), {"m": PRICED}, latency=latency) as sim:
        env = {**{k: v for k, v in os.environ.items() if k != BUDGET_ENV}, "ROMA_LAB_API_BASE": sim.base_url,
               LIMIT_ENV: "1", "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "roma_lab.evaluate", str(task_file), "--system", "single", "--lm", "openai/m",
                   "--out", str(out), "--budget-usd", str(CAP_USD)]
        first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            waited = time.monotonic()
            while sim.in_flight == 0:  # the first process holds the folder and waits for its first reply
                assert first.poll() is None, first.communicate()
                assert time.monotonic() - waited < 120, "the first process made no call in 120 s"
                time.sleep(0.1)
            second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
        finally:
            latency.gate.set()
            _, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err[-3000:]
    assert second.returncode == 2 and "Traceback" not in second.stderr, second.stderr
    (line,) = second.stderr.splitlines()  # before: no error at all, two writers of one log
    assert line.startswith(f"error: {out} is being written by another process (evaluate, process {first.pid}, since ")
    log = pd.read_csv(out / "attempts.csv", dtype={"task_id": str})
    assert not log.duplicated(["condition", "run", "task_id"]).any()  # every task once
    done = pd.read_csv(out / "rows.csv", dtype={"task_id": str})
    assert (done["status"] == NOT_RUN).any() and len(sim.calls) == len(log)  # the cap stopped the one run
    assert log["cost"].sum() <= CAP_USD + log["cost"].max()  # one task past the cap at most, at concurrency 1


def test_the_notebook_runner_holds_its_experiment_with_the_same_lock_naming_the_holder(tmp_path):
    from roma_lab.experiments._kernel import RunnerStateError, hold_experiment
    from roma_lab.results import FolderBusyError, folder_lock

    out = tmp_path / "results" / "00_fixture"
    holder = rf"another runner is running 00_fixture now \(the notebook runner of 00_fixture, process {os.getpid()}, "
    with hold_experiment(out):
        with pytest.raises(RunnerStateError, match=holder), hold_experiment(out):
            pass
        with pytest.raises(FolderBusyError, match="the notebook runner of 00_fixture"), \
                folder_lock(out.parent, ".00_fixture.lock", "evaluate"):
            pass
    with hold_experiment(out):  # released
        pass
