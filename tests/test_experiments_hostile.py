"""roma_lab.experiments on hostile input: specs and run files that are nested too deep, not UTF-8 or
not regular files, and kernel records that name a process the runner did not start.

Each is a typed error naming the file, or the file moved aside with a warning; never a raw
RecursionError or UnicodeDecodeError, never a hang, never a kill of another process group.
"""

import json
import os
import subprocess
from pathlib import Path

import psutil
import pytest
from bounded import bounded
from probe_integrity import RUNNER_CASES, run_case
from test_experiments import GOOD, _sleeping_group, add_experiment, project  # noqa: F401 - project is a fixture

import roma_lab.experiments._kernel as kernel
from roma_lab.experiments import SpecError, experiment_status, load_spec, load_specs, run_experiment
from roma_lab.experiments._cli import main
from roma_lab.results import QuarantineWarning, read_provenance

DEEP_TOML = "x = " + "[" * 50_000 + "]" * 50_000 + "\n"
DEEP_JSON = b"[" * 100_000 + b"]" * 100_000


def _deep(path):
    path.write_text(GOOD.format(stem=path.stem) + DEEP_TOML)


def _not_utf8(path):
    path.write_bytes(GOOD.format(stem=path.stem).replace("fixture", "fixt\xffure").encode("latin-1"))


def _fifo(path):
    path.unlink()
    os.mkfifo(path)


HOSTILE_SPECS = {"nested 50,000 deep": _deep, "invalid UTF-8": _not_utf8, "a FIFO": _fifo}


@pytest.mark.parametrize("damage", HOSTILE_SPECS.values(), ids=HOSTILE_SPECS)
def test_a_hostile_spec_is_a_spec_error_naming_it(project, damage):
    path = add_experiment(project, "01_bad")
    damage(path)
    with pytest.raises(SpecError, match=r"01_bad\.toml: ") as info:
        bounded(lambda: load_spec(path), path)
    with pytest.raises(SpecError, match=r"01_bad\.toml"):
        bounded(lambda: load_specs(project), path)


@pytest.mark.parametrize("damage", HOSTILE_SPECS.values(), ids=HOSTILE_SPECS)
def test_list_shows_the_good_specs_and_names_the_bad_one(project, tmp_path, capsys, damage):
    """``list`` exits 2 (the set of experiments is incomplete) after listing every valid spec; each bad
    file is one error line on stderr, not a traceback. ``run`` refuses to start with a bad spec."""
    path = add_experiment(project, "01_bad")
    damage(path)
    results = ["--results", str(tmp_path / "results")]
    assert bounded(lambda: main(["--root", str(project), "list", *results]), path) == 2
    out, err = capsys.readouterr()
    assert "00_fixture" in out and "1 experiments" in out and "01_bad" not in out
    assert "error: " in err and "01_bad.toml" in err and "Traceback" not in err
    assert bounded(lambda: main(["--root", str(project), "run", "00_fixture", *results]), path) == 2
    assert "01_bad.toml" in capsys.readouterr().err and not (tmp_path / "results").exists()


# --- JSON the runner reads: nested too deep, or not a regular file -----------------------------


def test_a_provenance_nested_too_deep_is_unreadable_and_the_run_recovers(project, tmp_path):
    (spec,) = load_specs(project)
    results = tmp_path / "results"
    assert run_experiment(spec, results_root=results).status == "completed"
    (results / "00_fixture" / "provenance.json").write_bytes(DEEP_JSON)
    assert experiment_status(spec, results_root=results) == "unreadable"
    with pytest.warns(QuarantineWarning, match="provenance.json: not a valid provenance record"):
        assert run_experiment(spec, results_root=results).status == "completed"
    assert read_provenance(results / "00_fixture").status == "completed"


def test_an_executed_copy_nested_too_deep_does_not_attribute_the_folder(project, tmp_path):
    """Without provenance.json the runner reads the executed notebook's parameters; a 100,000-deep copy
    raised a raw RecursionError. Now it cannot attribute the folder, which is moved aside whole."""
    (spec,) = load_specs(project)
    results = tmp_path / "results"
    assert run_experiment(spec, results_root=results).status == "completed"
    (results / "00_fixture" / "provenance.json").unlink()
    (results / "00_fixture" / "00_fixture.ipynb").write_bytes(DEEP_JSON)
    with pytest.warns(QuarantineWarning, match="without a readable record of its parameters"):
        assert run_experiment(spec, results_root=results).status == "completed"
    assert len(list(results.glob("00_fixture.quarantined-*"))) == 1


@pytest.mark.parametrize("content", ["deep", "fifo"])
def test_a_kernel_record_nested_too_deep_or_a_fifo_is_moved_aside(tmp_path, content):
    out = tmp_path / "exp"
    out.mkdir()
    record = out / kernel.KERNEL_FILE
    if content == "deep":
        record.write_bytes(DEEP_JSON)
    else:
        os.mkfifo(record)
    with pytest.warns(QuarantineWarning, match=r"\.kernel\.json: unreadable kernel record"):
        bounded(lambda: kernel.stop_kernel(out), record)
    assert not record.exists() and len(list(out.glob(".kernel.json.quarantined-*"))) == 1


# --- kill only the kernel the runner started --------------------------------------------------


def _identity(pid):
    """A kernel record as the runner writes it, built here independently of the runner's code."""
    boot = Path("/proc/sys/kernel/random/boot_id")
    return {"pid": pid, "pgid": os.getpgid(pid), "sid": os.getsid(pid), "started": psutil.Process(pid).create_time(),
            "boot": boot.read_text().strip() if boot.is_file() else f"boot time {psutil.boot_time()}"}


def _running(*processes):
    """Whether all are alive: the leaders of _sleeping_group are Popen objects, their children psutil's."""
    return all(p.poll() is None if isinstance(p, subprocess.Popen) else kernel._alive(p) for p in processes)


def _kill(*processes):
    for p in processes:
        if _running(p):
            p.kill()


def test_a_record_naming_an_unrelated_group_kills_nothing_on_the_recovery_path(project, tmp_path):
    """The record names a live process (with its true start time) and the process group of another
    session; the runner killed that group without checking it was the process's own."""
    (spec,) = load_specs(project)
    results = tmp_path / "results"
    out = results / "00_fixture"
    out.mkdir(parents=True)
    victim, victim_child = _sleeping_group()  # an unrelated process group
    decoy, decoy_child = _sleeping_group()
    try:
        named = _identity(decoy.pid)
        (out / kernel.KERNEL_FILE).write_text(json.dumps({**named, "pgid": victim.pid}))
        with pytest.warns(QuarantineWarning, match=rf"pid {decoy.pid} is not the recorded kernel \(pgid recorded "
                                                   rf"{victim.pid}, live {decoy.pid}"):
            assert run_experiment(spec, results_root=results).status == "completed"
        assert _running(victim, victim_child, decoy, decoy_child)
    finally:
        _kill(victim_child, victim, decoy_child, decoy)


@pytest.mark.parametrize("edit", [
    lambda ident: {k: ident[k] for k in ("pid", "pgid", "started")},  # the format before identities
    lambda ident: {**ident, "sid": ident["sid"] + 1},
    lambda ident: {**ident, "pgid": 1},  # killpg(1) would signal every process the runner may
    lambda ident: {**ident, "pid": "0"},
    [],
], ids=["old format", "other session", "group 1", "pid not a number", "not an object"])
def test_a_record_that_is_not_a_kernel_identity_kills_nothing_and_warns(tmp_path, monkeypatch, edit):
    """Before, a record whose pid and start time matched a live process was acted on whatever its
    group said: os.killpg(1) is kill(-1), every process the runner may signal. os.killpg is replaced
    here so that a regression fails the test instead of doing that."""
    def killpg(group, sig):
        raise AssertionError(f"os.killpg({group}, {sig}) called")

    monkeypatch.setattr(kernel.os, "killpg", killpg)
    out = tmp_path / "exp"
    out.mkdir()
    leader, child = _sleeping_group()
    try:
        ident = _identity(leader.pid)
        (out / kernel.KERNEL_FILE).write_text(json.dumps(edit(ident) if callable(edit) else edit))
        with pytest.warns(QuarantineWarning, match=r"\.kernel\.json: .*nothing is killed"):
            kernel.stop_kernel(out)
        assert _running(leader, child)
        assert not (out / kernel.KERNEL_FILE).exists() and len(list(out.glob(".kernel.json.quarantined-*"))) == 1
    finally:
        _kill(child, leader)


@pytest.mark.parametrize("field", ["started", "boot"])
def test_a_record_of_another_start_or_boot_means_the_kernel_is_gone(tmp_path, field):
    """Same pid, another start time or boot: the pid was reused, so the recorded kernel no longer
    runs. Nothing is killed and the stale record is removed."""
    out = tmp_path / "exp"
    out.mkdir()
    leader, child = _sleeping_group()
    try:
        ident = _identity(leader.pid)
        other = ident["started"] - 5 if field == "started" else "another boot"
        (out / kernel.KERNEL_FILE).write_text(json.dumps({**ident, field: other}))
        kernel.stop_kernel(out)
        assert _running(leader, child) and not (out / kernel.KERNEL_FILE).exists()
    finally:
        _kill(child, leader)


def test_the_identity_is_that_of_a_kernel_leading_its_own_session():
    """What the kernel manager records, checked on a process started like a jupyter kernel."""
    leader, child = _sleeping_group()
    try:
        ident = kernel.process_identity(leader.pid)
        assert ident == _identity(leader.pid) and set(ident) == set(kernel.IDENTITY)
        assert ident["pid"] == ident["pgid"] == ident["sid"] == leader.pid
        assert ident["started"] == psutil.Process(leader.pid).create_time() and ident["boot"]
        assert kernel.process_identity(child.pid)["pgid"] == leader.pid
    finally:
        _kill(child, leader)


@pytest.mark.parametrize("case", RUNNER_CASES, ids=lambda c: c.name)
def test_every_probed_spec_and_runner_file_is_typed_or_recovered(case):
    assert run_case(case) in ("typed", "recovered")


def test_the_notebook_contract_reports_a_notebook_nested_too_deep(tmp_path):
    """notebook_problems raised a raw RecursionError instead of listing the problem."""
    from roma_lab.experiments import notebook_problems

    path = tmp_path / "01_deep.ipynb"
    path.write_bytes(DEEP_JSON)
    (problem,) = notebook_problems(path)
    assert problem.startswith("01_deep.ipynb: not a readable notebook")
