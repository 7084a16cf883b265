"""Fault-injection probe for the experiment runner, with real processes.

Kill scenarios: the runner (``python -m roma_lab.experiments run``) is killed with SIGKILL while
its notebook (tests/fixtures/items_project) waits at a chosen point: before item 0 finishes, after
2 of 4 items, after 2 of 4 with a kernel that outlives its runner, after every item, and while the
runner writes the final provenance.json (the kernel has finished on its own). Then the same
command is issued once more. Damage scenarios: provenance.json replaced by garbage, a declared
output edited, a declared output emptied, each after a completed run; then ``list`` and ``run``.

A scenario is ``recovered`` when the rerun completes, every item has exactly one row, no item
that had finished before is asked again (damage scenarios: unless its rows were the damaged
file), the kernel of the killed run was dead before the rerun recorded its start, and ``list``
never called a damaged folder completed. Otherwise it is ``stuck`` (the rerun does not complete),
``redone`` (it completes but finished items were asked again), ``orphan`` (the old kernel was
alive into the rerun) or ``silent`` (a damaged folder passed as completed). Foreign-record
scenarios: the killed run's kernel is gone and its ``.kernel.json`` names live processes the runner
did not start; ``foreign kill`` when the rerun killed one of them.

No timing is asserted: waits only guard against a hang (``TIMEOUT_S``) and fail the scenario.
``python tests/probe_runner_kills.py`` prints the table; tests/test_runner_kills.py runs each.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "items_project"
STEM = "00_items"
ITEMS = ("q0", "q1", "q2", "q3")
TIMEOUT_S = 300  # hang guard only


@dataclass(frozen=True)
class Result:
    scenario: str
    outcome: str
    detail: str


class Lab:
    """A copy of the fixture project, a results folder and the control folder the kernel reads."""

    def __init__(self, tmp: Path):
        self.root = tmp / "project"
        shutil.copytree(FIXTURE, self.root)
        self.results = tmp / "results"
        self.out = self.results / STEM
        self.control = tmp / "control"
        self.control.mkdir()
        self.env = {**os.environ, "ROMA_LAB_PROBE_DIR": str(self.control)}

    def start(self, *, pause: str = "", survive: bool = False, pause_provenance: bool = False) -> subprocess.Popen:
        (self.control / "pause").write_text(pause)
        if survive:
            (self.control / "survive").touch()
        args = [sys.executable, __file__, "runner", str(self.root), str(self.results)]
        return subprocess.Popen([*args, *(["--pause-provenance"] if pause_provenance else [])], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def wait_for(self, name: str, proc: subprocess.Popen) -> str:
        path = self.control / name
        deadline = time.monotonic() + TIMEOUT_S
        while not path.is_file() or not path.read_text():
            if proc.poll() is not None:
                raise RuntimeError(f"runner exited ({proc.returncode}) before {name}: {proc.stderr.read()[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {name} within {TIMEOUT_S} s")
            time.sleep(0.05)
        return path.read_text()

    def calls(self) -> list[tuple[int, str]]:
        log = self.control / "calls.log"
        lines = log.read_text().splitlines() if log.is_file() else []
        return [(int(pid), q) for pid, q in (line.split() for line in lines)]

    def rows(self) -> list[str]:
        """Item ids of the rows the notebook's evaluation logged (duplicates kept; [] when unreadable)."""
        try:
            with (self.out / "items" / "attempts.csv").open(newline="", encoding="utf-8") as f:
                return [row["task_id"] for row in csv.DictReader(f)]
        except (OSError, UnicodeDecodeError, csv.Error, KeyError):
            return []

    def status(self) -> str:
        from roma_lab.experiments import experiment_status, load_spec

        return experiment_status(load_spec(self.root / "experiments" / f"{STEM}.toml"), results_root=self.results)

    def started_at(self) -> str | None:
        try:
            return json.loads((self.out / "provenance.json").read_text())["started_at"]
        except (OSError, ValueError, KeyError):
            return None

    def rerun(self, orphan: int | None, before: str | None) -> tuple[int, bool]:
        """Issue the command again; return its exit code and whether ``orphan`` was alive when the
        rerun recorded its start. A surviving orphan is then released, to show what it would do."""
        (self.control / "pause").write_text("")
        proc = self.start()
        deadline = time.monotonic() + TIMEOUT_S
        while self.started_at() in (None, before) and proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                raise TimeoutError("rerun never recorded its start")
            time.sleep(0.02)
        alive = orphan is not None and _alive(orphan)
        (self.control / "release").touch()
        try:
            proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        if alive:
            _wait_gone(orphan)
        return proc.returncode, alive


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pid: int) -> None:
    """Let a released orphan finish its writes, then end it (it is a process this probe started)."""
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        os.killpg(pid, signal.SIGKILL)


def _verdict(lab: Lab, scenario: str, code: int, orphan_alive: bool, finished_before: set[str],
             rerun_pids: set[int], allowed_again: set[str] = frozenset()) -> Result:
    rows = lab.rows()
    asked_again = {q for pid, q in lab.calls() if pid in rerun_pids} & {f"q{i}" for i in finished_before}
    asked_again -= {f"q{i}" for i in allowed_again}
    status = lab.status()
    detail = (f"exit {code}, status {status}, rows {sorted(rows)}, finished before {sorted(finished_before)}, "
              f"asked again {sorted(asked_again)}")
    if orphan_alive:
        return Result(scenario, "orphan", detail)
    if code != 0 or status != "completed" or sorted(rows) != ["0", "1", "2", "3"]:
        return Result(scenario, "stuck", detail)
    if asked_again:
        return Result(scenario, "redone", detail)
    return Result(scenario, "recovered", detail)


def kill_scenario(name: str, *, pause: str, survive: bool = False, pause_provenance: bool = False):
    def run(tmp: Path) -> Result:
        lab = Lab(tmp)
        proc = lab.start(pause=pause, survive=survive, pause_provenance=pause_provenance)
        kernel = int(lab.wait_for(f"paused-{pause}", proc))
        before = lab.started_at()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        first_pids = {pid for pid, _ in lab.calls()} | {kernel}
        finished = set(lab.rows())
        orphan = None if pause_provenance else kernel  # at the provenance write the kernel has exited
        try:
            code, orphan_alive = lab.rerun(orphan, before)
        finally:
            if orphan is not None and _alive(orphan):
                os.killpg(orphan, signal.SIGKILL)
        rerun_pids = {pid for pid, _ in lab.calls()} - first_pids
        return _verdict(lab, name, code, orphan_alive, finished, rerun_pids)

    return name, run


def damage_scenario(name: str, damage, redo: set[str] = frozenset()):
    def run(tmp: Path) -> Result:
        lab = Lab(tmp)
        proc = lab.start()
        proc.wait(TIMEOUT_S)
        if proc.returncode != 0 or lab.status() != "completed":
            raise RuntimeError(f"the first run did not complete: {proc.stderr.read()[-2000:]}")
        first_pids = {pid for pid, _ in lab.calls()}
        damage(lab.out)
        listed = lab.status()
        code, _ = lab.rerun(None, lab.started_at())
        rerun_pids = {pid for pid, _ in lab.calls()} - first_pids
        result = _verdict(lab, name, code, False, {"0", "1", "2", "3"}, rerun_pids, redo)
        if listed == "completed":
            return Result(name, "silent", f"list said completed after the damage; {result.detail}")
        return result

    return name, run


def _sleeping_session() -> subprocess.Popen:
    """A process group the runner did not start: a sleeper leading a session of its own."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)


def _boot() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        import psutil

        return f"boot time {psutil.boot_time()}"


def foreign_record_scenario(name: str, record):
    """The killed run's kernel is gone, and its .kernel.json now names processes the runner did not
    start (``record(decoy, victim)``, both live sleepers in sessions of their own). The rerun must
    recover and leave both alive; ``foreign kill`` when it killed either."""

    def run(tmp: Path) -> Result:
        import psutil

        lab = Lab(tmp)
        proc = lab.start(pause="q2")
        kernel = int(lab.wait_for("paused-q2", proc))
        before = lab.started_at()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        os.killpg(kernel, signal.SIGKILL)  # a kernel this probe's runner started
        _wait_gone(kernel)
        first_pids = {pid for pid, _ in lab.calls()} | {kernel}
        finished = set(lab.rows())
        decoy, victim = _sleeping_session(), _sleeping_session()
        try:
            (lab.out / ".kernel.json").write_text(json.dumps(record(psutil.Process(decoy.pid), victim.pid)))
            code, _ = lab.rerun(None, before)
            killed = [p.pid for p in (decoy, victim) if p.poll() is not None]
        finally:
            for p in (decoy, victim):
                p.kill()
                p.wait()
        rerun_pids = {pid for pid, _ in lab.calls()} - first_pids
        result = _verdict(lab, name, code, False, finished, rerun_pids)
        return Result(name, "foreign kill", f"killed pids {killed}; {result.detail}") if killed else result

    return name, run


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xff{not json at all")


def _edit(path: Path) -> None:
    path.write_text(path.read_text().replace("1.0", "0.0"))


SCENARIOS = dict([
    kill_scenario("kill -9 before item 0 finished", pause="q0"),
    kill_scenario("kill -9 after 2 of 4 items", pause="q2"),
    kill_scenario("kill -9 after 2 of 4 items, kernel outlives the runner", pause="q2", survive=True),
    kill_scenario("kill -9 after every item", pause="after_items"),
    kill_scenario("kill -9 during the final provenance write", pause="provenance", pause_provenance=True),
    damage_scenario("provenance.json replaced by garbage", lambda out: _garbage(out / "provenance.json")),
    damage_scenario("declared output summary.csv edited", lambda out: _edit(out / "summary.csv")),
    damage_scenario("declared output items/attempts.csv emptied",
                    lambda out: (out / "items" / "attempts.csv").write_bytes(b""),
                    redo={"0", "1", "2", "3"}),
    # the identity of a live process, with another session's process group
    foreign_record_scenario("kernel record naming another process group", lambda decoy, group: {
        "pid": decoy.pid, "pgid": group, "sid": os.getsid(decoy.pid), "started": decoy.create_time(), "boot": _boot()}),
    # the format before identities, naming an unrelated process exactly
    foreign_record_scenario("kernel record of the old format naming an unrelated process", lambda decoy, group: {
        "pid": decoy.pid, "pgid": decoy.pid, "started": decoy.create_time()}),
])


def run_scenario(name: str) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        return SCENARIOS[name](Path(tmp))


def _runner_child(root: str, results: str, pause_provenance: bool) -> int:
    """The runner under test; optionally stopped inside its final provenance write."""
    if pause_provenance:
        import roma_lab.results._provenance as provenance

        real = provenance.write_text_atomic
        control = Path(os.environ["ROMA_LAB_PROBE_DIR"])

        def stop_midway(path, text):
            if '"status": "completed"' not in text:
                return real(path, text)
            Path(path).with_name(f".{Path(path).name}.tmp-probe").write_text(text[: len(text) // 2])
            (control / "paused-provenance").write_text(str(os.getpid()))
            while True:
                time.sleep(1)

        provenance.write_text_atomic = stop_midway
    from roma_lab.experiments._cli import main

    return main(["--root", root, "run", STEM, "--results", results])


def main() -> int:
    results = [run_scenario(name) for name in SCENARIOS]
    for r in results:
        print(f"{r.scenario:58} {r.outcome:9} {r.detail}", flush=True)
    kills = [r for r in results if r.scenario.startswith("kill")]
    records = [r for r in results if r.scenario.startswith("kernel record")]
    damage = [r for r in results if r not in kills and r not in records]
    print(f"\nkills {len(kills)} / recovered {sum(r.outcome == 'recovered' for r in kills)}; "
          f"damaged folders {len(damage)} / recovered {sum(r.outcome == 'recovered' for r in damage)}; "
          f"foreign kernel records {len(records)} / recovered {sum(r.outcome == 'recovered' for r in records)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "runner":
        sys.exit(_runner_child(sys.argv[2], sys.argv[3], "--pause-provenance" in sys.argv[4:]))
    sys.exit(main())
