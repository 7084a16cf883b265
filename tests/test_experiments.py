"""roma_lab.experiments: spec validation, the papermill runner and its CLI, on a fixture project.

The fixture project (tests/fixtures/project) holds one notebook whose parameters make it
fail (FAIL), skip its output (WRITE) or sleep (SLEEP_S); tests copy it and add specs.
"""

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import nbformat
import pandas as pd
import psutil
import pytest
import zmq

import roma_lab.experiments._heartbeat as heartbeat
import roma_lab.experiments._kernel as kernel
import roma_lab.experiments._key as run_key_module
import roma_lab.experiments._runner as runner
from roma_lab.experiments import (
    SpecError,
    experiment_status,
    load_spec,
    load_specs,
    run_experiment,
    run_experiments,
    run_parameters,
)
from roma_lab.experiments._cli import main
from roma_lab.results import read_provenance

FIXTURE = Path(__file__).parent / "fixtures" / "project"
GOOD = """\
notebook = "notebooks/{stem}.ipynb"
paper = "roma"
table = "Fixture table"
description = "fixture"
timeout_s = 60
inputs = ["data/label.txt"]
outputs = ["rows.csv"]
"""


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    return root


def add_experiment(root, stem, spec_text=GOOD, **parameters):
    """A copy of the fixture notebook under ``stem`` with a spec setting ``parameters``."""
    shutil.copy(root / "notebooks" / "00_fixture.ipynb", root / "notebooks" / f"{stem}.ipynb")
    table = "".join(f"{k} = {json.dumps(v)}\n" for k, v in parameters.items())
    path = root / "experiments" / f"{stem}.toml"
    path.write_text(spec_text.format(stem=stem) + ("\n[parameters]\n" + table if parameters else ""))
    return path


# --- spec validation -------------------------------------------------------------------------


def test_fixture_spec_loads(project):
    (spec,) = load_specs(project)
    assert spec.stem == "00_fixture" and spec.notebook == project / "notebooks" / "00_fixture.ipynb"
    assert dict(spec.parameters) == {"SEED": 7, "N_ROWS": 4} and dict(spec.smoke) == {"N_ROWS": 2}
    assert spec.outputs == ("rows.csv",) and spec.inputs == ("data/label.txt",) and spec.timeout_s == 60
    assert "LM" in spec.declared


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t + 'notebok = "x"\n', "unknown keys \\['notebok'\\]"),
        (lambda t: t.replace('paper = "roma"\n', ""), "'paper' must be a non-empty string"),
        (lambda t: t.replace("timeout_s = 60", "timeout_s = 0"), "positive integer"),
        (lambda t: t.replace('outputs = ["rows.csv"]', "outputs = []"), "at least one file"),
        (lambda t: t.replace('outputs = ["rows.csv"]', 'outputs = ["../up.csv"]'), "relative file paths"),
        (lambda t: t.replace("data/label.txt", "data/absent.txt"), "input files not found"),
        (lambda t: t.replace("{stem}.ipynb", "01_other.ipynb"), "must equal the notebook stem"),
        (lambda t: t.replace("{stem}.ipynb", "absent.ipynb"), "must match"),
        (lambda t: t + "\n[parameters]\nSEED = {{ a = 1 }}\n", "not a plain literal"),
        (lambda t: t + "\n[parameters]\nOUT_DIR = 'x'\n", "injected by the runner"),
        (lambda t: t + "\n[smoke]\nN_RWOS = 1\n", "\\['N_RWOS'\\] are not declared"),
        (lambda t: t + "\n[parameters]\nN_ROWS = 3\nSEED = 1\n", "\\['N_ROWS'\\] repeat the notebook's defaults"),
        (lambda t: t + "\n[parameters\n", "Expected"),  # broken TOML
    ],
)
def test_bad_specs_raise_naming_the_file(project, edit, message):
    path = add_experiment(project, "01_bad", spec_text=edit(GOOD))
    with pytest.raises(SpecError, match=message) as info:
        load_spec(path)
    assert "01_bad.toml" in str(info.value)


def test_notebook_must_declare_runner_parameters(project):
    nb_path = project / "notebooks" / "00_fixture.ipynb"
    nb = json.loads(nb_path.read_text())
    nb["cells"][2]["source"] = ['OUT_DIR = "out"\n', "N_ROWS = 3\n"]
    nb_path.write_text(json.dumps(nb))
    with pytest.raises(SpecError, match="must declare \\['SEED'\\]"):
        load_spec(project / "experiments" / "00_fixture.toml")


def test_load_specs_reports_every_bad_file_and_sorts(project):
    add_experiment(project, "02_second")
    assert [s.stem for s in load_specs(project)] == ["00_fixture", "02_second"]
    add_experiment(project, "03_bad_a", spec_text=GOOD.replace("timeout_s = 60", "timeout_s = -1"))
    add_experiment(project, "04_bad_b", spec_text=GOOD + "colour = 'red'\n")
    with pytest.raises(SpecError) as info:
        load_specs(project)
    assert "03_bad_a.toml" in str(info.value) and "04_bad_b.toml" in str(info.value)
    with pytest.raises(SpecError, match="no experiments/ folder"):
        load_specs(project / "notebooks")


def test_run_parameters_injection(project):
    (spec,) = load_specs(project)
    out = project / "results" / spec.stem
    # only the spec's overrides and OUT_DIR: every other value is the notebook's own default
    assert run_parameters(spec, out_dir=out, smoke=False, lm=None) == {"SEED": 7, "N_ROWS": 4, "OUT_DIR": str(out)}
    assert run_parameters(spec, out_dir=out, smoke=True, lm="m")["N_ROWS"] == 2
    assert run_parameters(spec, out_dir=out, smoke=True, lm="m")["LM"] == "m"
    no_lm = replace(spec, declared={k: v for k, v in spec.declared.items() if k != "LM"})
    assert "LM" not in run_parameters(no_lm, out_dir=out, smoke=False, lm="m")  # only if declared


# --- the runner ------------------------------------------------------------------------------


def test_completed_then_skipped_then_forced(project, tmp_path):
    (spec,) = load_specs(project)
    source_before = spec.notebook.read_bytes()
    results = tmp_path / "results"
    outcome = run_experiment(spec, results_root=results, lm="test-model")
    assert (outcome.status, outcome.error) == ("completed", None)
    out = results / "00_fixture"
    rows = pd.read_csv(out / "rows.csv")
    assert len(rows) == 4 and set(rows["seed"]) == {7} and set(rows["lm"]) == {"test-model"}
    assert set(rows["label"]) == {"fixture label"}  # read relative to cwd=notebooks/
    executed = json.loads((out / "00_fixture.ipynb").read_text())
    assert executed["metadata"]["papermill"]["parameters"]["OUT_DIR"] == str(out)
    assert spec.notebook.read_bytes() == source_before  # never executed in place
    record = read_provenance(out)
    assert record.status == "completed" and record.model == "test-model" and record.seeds == {"SEED": 7}
    # the record holds every parameter the run used: the notebook's defaults with the overrides on top
    assert record.parameters == {"SEED": 7, "N_ROWS": 4, "LM": "test-model", "FAIL": False, "WRITE": True,
                                 "SLEEP_S": 0}
    assert record.extra["smoke"] is False
    assert set(record.inputs) == {"notebooks/00_fixture.ipynb", "data/label.txt"}
    assert set(record.outputs) == {"rows.csv", "00_fixture.ipynb"}

    assert run_experiment(spec, results_root=results, lm="test-model").status == "skipped"
    forced = run_experiment(spec, results_root=results, lm="test-model", force=True)
    assert forced.status == "completed"
    assert read_provenance(out).started_at > record.started_at


def test_changes_make_results_stale_and_rerun(project, tmp_path):
    (spec,) = load_specs(project)
    results = tmp_path / "results"
    assert experiment_status(spec, results_root=results) == "not run"
    assert run_experiment(spec, results_root=results).status == "completed"
    assert experiment_status(spec, results_root=results) == "completed"
    assert read_provenance(results / "00_fixture").model == "local"  # the notebook's default
    # A different parameter, model, tier, input or notebook each invalidates the record.
    changed = replace(spec, parameters={**spec.parameters, "N_ROWS": 5})
    assert experiment_status(changed, results_root=results) == "stale"
    assert experiment_status(spec, results_root=results, lm="other") == "stale"
    assert experiment_status(spec, results_root=results, smoke=True) == "stale"
    (project / "data" / "label.txt").write_text("edited\n")
    assert experiment_status(spec, results_root=results) == "stale"
    (project / "data" / "label.txt").write_text("fixture label\n")
    assert experiment_status(spec, results_root=results) == "completed"
    with pytest.MonkeyPatch.context() as mp:  # the package's code changed since the run
        mp.setattr("roma_lab.experiments._key.package_source_hash", lambda: "0" * 64)
        assert experiment_status(spec, results_root=results) == "stale"
    (results / "00_fixture" / "rows.csv").unlink()
    assert experiment_status(spec, results_root=results) == "incomplete"

    assert run_experiment(changed, results_root=results).status == "completed"
    assert len(pd.read_csv(results / "00_fixture" / "rows.csv")) == 5


def test_a_local_model_s_engine_and_slots_are_recorded_and_another_makes_the_run_stale(project, tmp_path,
                                                                                       monkeypatch):
    # Greedy outputs differ across engines and slot counts: results of one are not another's.
    monkeypatch.delenv("ROMA_LAB_ENGINE", raising=False)
    monkeypatch.delenv("ROMA_LAB_SLOTS", raising=False)
    (spec,) = load_specs(project)
    results = tmp_path / "results"
    assert run_experiment(spec, results_root=results).status == "completed"
    assert read_provenance(results / "00_fixture").extra["engine"] == {"engine": "llama-cpp-python", "slots": 1}
    monkeypatch.setenv("ROMA_LAB_ENGINE", "llama.cpp-server")
    monkeypatch.setenv("ROMA_LAB_SLOTS", "2")
    assert experiment_status(spec, results_root=results) == "stale"
    assert run_experiment(spec, results_root=results).status == "completed"
    assert read_provenance(results / "00_fixture").extra["engine"] == {"engine": "llama.cpp-server", "slots": 2}
    monkeypatch.setenv("ROMA_LAB_SLOTS", "4")
    assert experiment_status(spec, results_root=results) == "stale"
    monkeypatch.setenv("ROMA_LAB_SLOTS", "2")
    assert experiment_status(spec, results_root=results) == "completed"
    assert run_key_module._engine({"LM": "openai/gpt-4o-mini"}) is None and run_key_module._engine({"LM": "scripted"}) is None


def test_a_run_hashes_the_package_source_once(project, tmp_path, monkeypatch):
    """One run key per run: its status check, the folder's preparation and both records use it."""
    import roma_lab.results._provenance as provenance

    real, calls = provenance.package_source_hash, []

    def counted():
        calls.append(1)
        return real()

    for module in (run_key_module, provenance):  # every name the runner or the record reaches it by
        monkeypatch.setattr(module, "package_source_hash", counted)
    (spec,) = load_specs(project)
    results = tmp_path / "results"

    def hashes(run_spec, **kw):
        calls.clear()
        outcome = run_experiment(run_spec, results_root=results, **kw)
        return outcome.status, len(calls)

    assert hashes(spec) == ("completed", 1)  # fresh: the "running" and the "completed" record
    assert hashes(spec) == ("skipped", 1)
    assert hashes(replace(spec, parameters={**spec.parameters, "N_ROWS": 5})) == ("completed", 1)  # stale: all four
    assert hashes(spec, force=True) == ("completed", 1)
    assert read_provenance(results / "00_fixture").roma_lab_source == real()


def test_failure_is_recorded_and_the_batch_goes_on(project, tmp_path):
    fail = load_spec(add_experiment(project, "01_fail", FAIL=True))
    (good, _) = load_specs(project)
    results = tmp_path / "results"
    outcomes = run_experiments([fail, good], results_root=results, progress=False)
    assert [o.status for o in outcomes] == ["failed", "completed"]
    assert "AssertionError: fixture asked to fail" in outcomes[0].error
    record = read_provenance(results / "01_fail")
    assert record.status == "failed" and "fixture asked to fail" in record.error
    assert (results / "01_fail" / "01_fail.ipynb").is_file()  # executed copy kept for the traceback
    assert experiment_status(fail, results_root=results) == "failed"


def test_missing_declared_output_fails_even_with_stale_files(project, tmp_path):
    (spec,) = load_specs(project)
    results = tmp_path / "results"
    assert run_experiment(spec, results_root=results).status == "completed"
    silent = replace(spec, parameters={**spec.parameters, "WRITE": False})
    outcome = run_experiment(silent, results_root=results)  # rows.csv from the last run must not count
    assert outcome.status == "failed"
    assert outcome.error == "notebook finished without writing declared outputs: rows.csv"
    assert read_provenance(results / "00_fixture").status == "failed"


def test_cell_timeout_fails_instead_of_hanging(project, tmp_path):
    spec = load_spec(add_experiment(project, "01_slow", GOOD.replace("timeout_s = 60", "timeout_s = 2"), SLEEP_S=60))
    outcome = run_experiment(spec, results_root=tmp_path / "results")
    assert outcome.status == "failed" and "timed out" in outcome.error.lower()


# --- a widget cell never waits out its timeout (nbclient's Output-widget stand-in, jupyter/nbclient#312) ---

WIDGET_CELL = """\
import pathlib
import time

import ipywidgets as w

out = w.Output()
display(out)
with out:
    print("captured by the Output widget")
# nbclient's stand-in for the widget sends that output to the kernel on the shell socket; the test
# holds that send until this cell's reply is waiting, and says so by creating GATE.
while not pathlib.Path(GATE).exists():
    time.sleep(0.01)
pathlib.Path(OUT_DIR, "done.txt").write_text("done")
"""
LOOP_TURNS = 100  # a woken await resumes within a handful of event-loop turns; no time passes in these


async def _turns(n: int = 10) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_a_send_on_the_runners_shell_channel_wakes_the_await_of_a_reply_already_waiting():
    """The mechanism with real ZMQ sockets and no kernel: the reply is queued and ZMQ's signal of it
    consumed (as a write through Session.send's blocking shadow socket does); the awaited get_msg
    sleeps, and the runner's channel must wake it on its next send."""
    kernel_side = zmq.Context.instance().socket(zmq.ROUTER)  # the kernel's end of the shell channel
    port = kernel_side.bind_to_random_port("tcp://127.0.0.1")
    client = kernel._kernel_client_class()()
    client.load_connection_info({"transport": "tcp", "ip": "127.0.0.1", "shell_port": port})

    async def scenario():
        shell, session = client.shell_channel, client.session
        shell.send(session.msg("execute_request", {"code": "", "silent": True}))
        assert kernel_side.poll(30_000), "the request never reached the kernel's socket"
        identity = kernel_side.recv_multipart()[0]
        waiter = asyncio.ensure_future(shell.get_msg())  # as nbclient awaits a cell's reply
        await _turns()
        kernel_side.send_multipart(session.serialize(session.msg("execute_reply", {"status": "ok"}), ident=identity))
        assert zmq.Socket.shadow(shell.socket.underlying).poll(30_000) == zmq.POLLIN, "no reply arrived"
        await _turns(LOOP_TURNS)
        asleep = not waiter.done()
        shell.send(session.msg("comm_msg", {"comm_id": "c", "data": {}}))  # what the widget stand-in sends
        await _turns(LOOP_TURNS)
        if not waiter.done():
            waiter.cancel()
            return asleep, None
        return asleep, waiter.result()["header"]["msg_type"]

    try:
        asleep, woke_with = asyncio.run(scenario())
    finally:
        client.stop_channels()
        kernel_side.close(linger=0)
    assert asleep, "pyzmq now wakes the await without a send: the runner's channel may be unnecessary"
    assert woke_with == "execute_reply", "the await of the reply slept on after a send: the cell would wait out its timeout"


def test_a_widget_cell_whose_reply_arrives_during_the_widget_send_does_not_wait_out_its_timeout(
        project, tmp_path, monkeypatch):
    """Notebook 14's stall, through run_experiment: nbclient's Output-widget stand-in sends the
    captured output while the cell's execute_reply is already waiting. The stand-in's send is held
    until then, deterministically; afterwards nbclient must take the reply within a few event-loop
    turns, not at the cell timeout (where it still takes it and the run passes, 10 minutes late)."""
    from nbclient.output_widget import OutputWidget

    gate = tmp_path / "gate"
    nb = nbformat.read(project / "notebooks" / "00_fixture.ipynb", as_version=4)  # its kernel metadata
    nb.cells = [nbformat.v4.new_code_cell('OUT_DIR = "out"\nSEED = 0\nGATE = ""', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(WIDGET_CELL)]
    nbformat.write(nb, project / "notebooks" / "01_widget.ipynb")
    spec_text = (GOOD.format(stem="01_widget").replace('["data/label.txt"]', "[]").replace("rows.csv", "done.txt")
                 + f"\n[parameters]\nGATE = {json.dumps(str(gate))}\n")
    (project / "experiments" / "01_widget.toml").write_text(spec_text)
    seen, checks = [], []  # checks: holds the probe task, which asyncio keeps only weakly
    real_sync_state = OutputWidget.sync_state

    async def reply_taken(shell):
        pending = zmq.Socket.shadow(shell.socket.underlying)
        for _ in range(LOOP_TURNS):
            await asyncio.sleep(0)
            if not pending.poll(0):
                seen.append("reply taken")
                return
        seen.append("reply left waiting")
        shell.socket.get(zmq.EVENTS)  # wake nbclient here, so the failing test ends now

    def sync_state_once_the_reply_waits(self):
        shell = self.kernel_client.shell_channel
        first = not seen
        if first:
            gate.touch()  # the cell ends and its reply comes; nbclient's loop is held here meanwhile
            waiting = zmq.Socket.shadow(shell.socket.underlying).poll(30_000)
            seen.append("reply waiting" if waiting else "no reply")
        real_sync_state(self)
        if first:
            checks.append(asyncio.ensure_future(reply_taken(shell)))

    monkeypatch.setattr(OutputWidget, "sync_state", sync_state_once_the_reply_waits)
    outcome = run_experiment(load_spec(project / "experiments" / "01_widget.toml"), results_root=tmp_path / "results")
    assert outcome.status == "completed", outcome.error
    assert seen == ["reply waiting", "reply taken"]


def test_missing_input_at_run_time_fails_without_running(project, tmp_path, monkeypatch):
    (spec,) = load_specs(project)
    (project / "data" / "label.txt").unlink()
    monkeypatch.setattr(runner, "_execute", lambda *a: pytest.fail("must not execute"))
    outcome = run_experiment(spec, results_root=tmp_path / "results")
    assert (outcome.status, outcome.error) == ("failed", "input files missing: data/label.txt")


def test_interrupted_run_resumes_where_it_stopped(project, tmp_path, monkeypatch):
    add_experiment(project, "01_second")
    specs = load_specs(project)
    results = tmp_path / "results"
    real_execute = runner._execute

    def interrupt_second(spec, out_dir, params, kernel_env):
        if spec.stem == "01_second":
            raise KeyboardInterrupt
        real_execute(spec, out_dir, params, kernel_env)

    monkeypatch.setattr(runner, "_execute", interrupt_second)
    with pytest.raises(KeyboardInterrupt):
        run_experiments(specs, results_root=results, progress=False)
    assert read_provenance(results / "01_second").status == "interrupted"
    assert experiment_status(specs[1], results_root=results) == "interrupted"
    (results / "01_second" / "partial_items.csv").write_text("item\n1\n")  # rows a package function appended
    monkeypatch.setattr(runner, "_execute", real_execute)
    outcomes = run_experiments(specs, results_root=results, progress=False)
    assert [o.status for o in outcomes] == ["skipped", "completed"]
    assert (results / "01_second" / "partial_items.csv").exists()           # kept for item-level resume
    # an unfinished run whose inputs changed since is not continued
    monkeypatch.setattr(runner, "_execute", interrupt_second)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(specs[1], results_root=results, force=True)
    (results / "01_second" / "partial_items.csv").write_text("item\n1\n")
    (project / "data" / "label.txt").write_text("edited label\n")
    monkeypatch.setattr(runner, "_execute", real_execute)
    assert run_experiment(specs[1], results_root=results).status == "completed"
    assert not (results / "01_second" / "partial_items.csv").exists()
    (project / "data" / "label.txt").write_text("fixture label\n")
    # a completed run with other parameters starts from an empty folder
    changed = replace(specs[1], parameters={**specs[1].parameters, "N_ROWS": 2})
    assert run_experiment(changed, results_root=results).status == "completed"
    assert not (results / "01_second" / "partial_items.csv").exists()


# --- command line ----------------------------------------------------------------------------


def test_cli_bad_arguments_exit_2(project, capsys):
    assert main(["--root", str(project), "run", "99_nope"]) == 2
    assert "known: 00_fixture" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["--root", str(project), "run"])
    assert info.value.code == 2
    add_experiment(project, "01_bad", spec_text=GOOD + "colour = 1\n")
    assert main(["--root", str(project), "list"]) == 2
    assert "01_bad.toml" in capsys.readouterr().err


def test_cli_run_list_and_exit_codes(project, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ROMA_LAB_LM", "env-model")
    results = tmp_path / "results"
    base = ["--root", str(project)]
    assert main([*base, "list", "--results", str(results)]) == 0
    assert "not run" in capsys.readouterr().out
    assert main([*base, "run", "--all", "--smoke", "--results", str(results)]) == 0
    assert "1 completed" in capsys.readouterr().out
    record = read_provenance(results / "00_fixture")
    assert record.model == "env-model" and record.extra["smoke"] is True and record.parameters["N_ROWS"] == 2
    assert main([*base, "list", "--smoke", "--results", str(results)]) == 0
    assert "completed" in capsys.readouterr().out

    add_experiment(project, "01_fail", FAIL=True)
    assert main([*base, "run", "--all", "--smoke", "--results", str(results)]) == 1
    captured = capsys.readouterr()
    assert "1 skipped, 1 failed" in captured.out and "FAILED 01_fail: AssertionError" in captured.err


# --- damaged folders and left-over kernels ---------------------------------------------------


def test_outputs_changed_after_completion_are_not_completed_and_are_moved_aside(project, tmp_path, capsys):
    (spec,) = load_specs(project)
    results = tmp_path / "results"
    out = results / "00_fixture"
    assert run_experiment(spec, results_root=results).status == "completed"
    original = (out / "rows.csv").read_bytes()
    (out / "rows.csv").write_bytes(original.replace(b"fixture label", b"edited label"))
    assert experiment_status(spec, results_root=results) == "modified"
    assert main(["--root", str(project), "list", "--results", str(results)]) == 0
    assert "modified" in capsys.readouterr().out
    (out / "rows.csv").write_bytes(b"")
    assert experiment_status(spec, results_root=results) == "modified"

    with pytest.warns(UserWarning, match="rows.csv: changed since the completed run"):
        outcome = run_experiment(spec, results_root=results)
    assert outcome.status == "completed"  # not "skipped"
    assert (out / "rows.csv").read_bytes() == original
    (quarantined,) = out.glob("rows.csv.quarantined-*")
    assert quarantined.read_bytes() == b""  # the damaged file is kept, not deleted
    record = read_provenance(out)
    assert "rows.csv" in record.extra["recovered"] and set(record.outputs) == {"rows.csv", "00_fixture.ipynb"}
    assert record.extra["quarantined"] == [quarantined.name]  # listed in the record, not hashed as a result
    quarantined.unlink()  # evidence, not a result: removing it changes nothing
    assert experiment_status(spec, results_root=results) == "completed"


def test_a_garbage_provenance_keeps_the_folder_of_the_same_parameters(project, tmp_path):
    (spec,) = load_specs(project)
    results = tmp_path / "results"
    out = results / "00_fixture"
    assert run_experiment(spec, results_root=results).status == "completed"
    (out / "partial_items.csv").write_text("item\n1\n")  # rows a package function appended
    (out / "provenance.json").write_bytes(b"\x00\xff{garbage")
    assert experiment_status(spec, results_root=results) == "unreadable"
    with pytest.warns(UserWarning, match="provenance.json: not a valid provenance record"):
        assert run_experiment(spec, results_root=results).status == "completed"
    assert (out / "partial_items.csv").is_file()  # completed items kept
    assert len(list(out.glob("provenance.json.quarantined-*"))) == 1
    assert "unreadable" in read_provenance(out).extra["recovered"]

    # garbage again, and now other parameters: the old folder cannot be attributed, so it moves aside whole
    (out / "provenance.json").write_bytes(b"")
    changed = replace(spec, parameters={**spec.parameters, "N_ROWS": 2})
    with pytest.warns(UserWarning) as caught:
        assert run_experiment(changed, results_root=results).status == "completed"
    messages = " ".join(str(w.message) for w in caught)
    assert "not a valid provenance record" in messages and "without a readable record" in messages
    (aside,) = results.glob("00_fixture.quarantined-*")
    assert (aside / "partial_items.csv").is_file() and not (out / "partial_items.csv").exists()
    assert len(pd.read_csv(out / "rows.csv")) == 2 and aside.name in read_provenance(out).extra["recovered"]


def _sleeping_group():
    """A process group like a kernel's: a leader in its own session and a child of it."""
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); time.sleep(300)"
    leader = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    deadline = time.monotonic() + 60  # hang guard only
    while not psutil.Process(leader.pid).children():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    return leader, psutil.Process(leader.pid).children()[0]


def test_a_recorded_kernel_is_killed_with_its_group_only_if_it_is_the_same_process(tmp_path):
    out = tmp_path / "exp"
    out.mkdir()
    leader, child = _sleeping_group()
    try:
        record = kernel.process_identity(leader.pid)  # what the kernel manager records at launch
        (out / kernel.KERNEL_FILE).write_text(json.dumps({**record, "started": record["started"] - 5}))
        kernel.stop_kernel(out)  # same pid, other start time: a reused pid, never killed
        assert leader.poll() is None and child.is_running()
        (out / kernel.KERNEL_FILE).write_text(json.dumps(record))
        kernel.stop_kernel(out)
        assert leader.wait(30) == -signal.SIGKILL
        assert not kernel._alive(child)  # the whole group, not only the kernel
        assert not (out / kernel.KERNEL_FILE).exists()
        kernel.stop_kernel(out)  # nothing recorded: nothing to do
    finally:
        if leader.poll() is None:
            leader.kill()
        if kernel._alive(child):
            child.kill()


def test_a_second_runner_of_the_same_experiment_is_refused_and_touches_nothing(project, tmp_path, monkeypatch):
    import fcntl

    (spec,) = load_specs(project)
    results = tmp_path / "results"
    out = results / "00_fixture"
    out.mkdir(parents=True)
    leader, child = _sleeping_group()  # stands for the kernel of the runner that holds the lock
    try:
        (out / kernel.KERNEL_FILE).write_text(json.dumps(kernel.process_identity(leader.pid)))
        monkeypatch.setattr(runner, "_execute", lambda *a: pytest.fail("must not execute"))
        with (results / ".00_fixture.lock").open("a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            outcome = run_experiment(spec, results_root=results)
        assert outcome.status == "failed" and "another runner is running 00_fixture" in outcome.error
        assert leader.poll() is None and (out / kernel.KERNEL_FILE).is_file()  # its kernel is left alone
    finally:
        leader.kill()
        child.kill()


def test_the_kernel_is_interrupted_for_a_running_cell_but_not_for_its_shutdown(tmp_path, monkeypatch):
    """jupyter_client sends SIGINT before every shutdown request; after the last cell it can only make
    the kernel log "KeyboardInterrupt caught in kernel" in the run's log, which reads as a failure."""
    from jupyter_client.manager import AsyncKernelManager

    from roma_lab.experiments._kernel import kernel_manager_class

    sent = []

    async def interrupt(self):
        sent.append(self.shutting_down)

    monkeypatch.setattr(AsyncKernelManager, "_async_interrupt_kernel", interrupt)
    manager = kernel_manager_class(tmp_path, {})()
    for shutting_down in (False, True):
        manager.shutting_down = shutting_down
        asyncio.run(manager._async_interrupt_kernel())
    assert sent == [False]


# --- sizes from the command line: --set NAME=VALUE -------------------------------------------


def test_set_sizes_the_run_is_its_own_run_recorded_and_resumed(project, tmp_path, capsys, monkeypatch):
    (spec,) = load_specs(project)
    results = tmp_path / "results"
    base = ["--root", str(project), "run", "00_fixture", "--results", str(results)]
    assert main([*base, "--set", "N_ROWS=9", "--set", "SEED=3"]) == 0
    assert "1 completed" in capsys.readouterr().out
    out = results / "00_fixture"
    rows = pd.read_csv(out / "rows.csv")
    assert len(rows) == 9 and set(rows["seed"]) == {3}
    record = read_provenance(out)
    assert record.parameters["N_ROWS"] == 9 and record.seeds == {"SEED": 3}
    assert record.extra["overrides"] == {"N_ROWS": 9, "SEED": 3}
    assert record.extra["cell_timeout_s"] == 60 + 5 * (9 - 4)  # the fixture spec: 5 s per row beyond its 4

    asked = {"N_ROWS": 9, "SEED": 3}
    key = run_key_module.run_key(spec, out_dir=out, smoke=False, lm=None, overrides=asked)
    assert key.parameters_hash != run_key_module.run_key(spec, out_dir=out, smoke=False, lm=None).parameters_hash
    assert experiment_status(spec, results_root=results, overrides=asked) == "completed"
    assert experiment_status(spec, results_root=results) == "stale"  # the default size is not this run
    assert main([*base, "--set", "SEED=3", "--set", "N_ROWS=9"]) == 0  # the same sizes: skipped
    assert "1 skipped" in capsys.readouterr().out

    # an unfinished run with these sizes keeps its items for the rerun with the same --set
    real_execute = runner._execute

    def interrupt(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "_execute", interrupt)
    assert main([*base, "--force", "--set", "N_ROWS=9", "--set", "SEED=3"]) == 130
    (out / "partial_items.csv").write_text("item\n1\n")
    monkeypatch.setattr(runner, "_execute", real_execute)
    assert main([*base, "--set", "N_ROWS=9", "--set", "SEED=3"]) == 0
    assert (out / "partial_items.csv").is_file() and read_provenance(out).status == "completed"
    assert main(base) == 0  # and the default size is a run of its own, from an empty folder
    assert "1 completed" in capsys.readouterr().out
    assert len(pd.read_csv(out / "rows.csv")) == 4 and not (out / "partial_items.csv").exists()
    assert "overrides" not in read_provenance(out).extra


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("N_RWOS=1", "N_RWOS is not a parameter of 00_fixture.ipynb"),
        ("N_ROWS=many", "N_ROWS = 'many': expected int (its default is 3)"),
        ("N_ROWS=1.5", "N_ROWS = 1.5: expected int"),
        ("FAIL=1", "FAIL = 1: expected bool (its default is False)"),
        ("N_ROWS=-1", "N_ROWS = -1 counts units of work for the cell timeout"),
        ("OUT_DIR=/tmp/elsewhere", "OUT_DIR cannot be set: the runner sets it"),
        ("LM=other", "LM cannot be set: name the model with --lm"),
        # issue 41: sizes no notebook can use, named before anything runs (not an OverflowError in a kernel)
        ("N_ROWS=1e400", "N_ROWS = 1e400: not a finite number"),
        ("N_ROWS=1" + "0" * 400, "N_ROWS = 1" + "0" * 76 + "...: outside the 64-bit integer range"),
        ("SEED=-9223372036854775809", "SEED = -9223372036854775809: outside the 64-bit integer range"),
        ("N_ROWS=4611686018427387904", "N_ROWS asks for a cell timeout of 2.31e+19 s, more than the 31,536,000 s"),
    ],
)
def test_a_bad_set_exits_2_before_anything_runs_naming_the_parameters(project, tmp_path, capsys, monkeypatch,
                                                                     assignment, message):
    monkeypatch.setattr(runner, "_execute", lambda *a: pytest.fail("must not execute"))
    results = tmp_path / "results"
    add_experiment(project, "01_second", (project / "experiments" / "00_fixture.toml").read_text()
                   .replace("00_fixture", "{stem}"))  # the fixture's spec, its timeout units included
    argv = ["--root", str(project), "run", "00_fixture", "01_second", "--results", str(results), "--set", assignment]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "00_fixture.ipynb declares: SEED (int, default 0), N_ROWS (int, default 3)" in err
    assert "01_second" in err  # each notebook that refuses it is named
    assert not results.exists()


def test_a_huge_int_for_a_float_parameter_is_named_not_an_overflow(project):
    from dataclasses import replace

    from roma_lab.experiments import OverrideError
    from roma_lab.experiments._spec import check_overrides

    (spec,) = load_specs(project)
    spec = replace(spec, defaults={**spec.defaults, "RATE": 0.5}, declared={**spec.declared, "RATE": "0.5"})
    assert check_overrides(spec, {"RATE": 2}) == {"RATE": 2.0}
    with pytest.raises(OverrideError, match=r"RATE = 1000+\.\.\.: outside the 64-bit integer range"):
        check_overrides(spec, {"RATE": 10**400})  # float(10**400) raised OverflowError
    with pytest.raises(OverrideError, match=r"RATE = \[0.5, inf\]: not a finite number"):
        check_overrides(spec, {"RATE": [0.5, float("inf")]})


def test_set_syntax_errors_exit_2(project):
    for argv in (["--set", "N_ROWS"], ["--set", "N_ROWS=1", "--set", "N_ROWS=2"], ["--set", "=1"]):
        with pytest.raises(SystemExit) as info:
            main(["--root", str(project), "run", "00_fixture", *argv])
        assert info.value.code == 2


def test_overrides_in_python_are_checked_like_set(project, tmp_path):
    from roma_lab.experiments import OverrideError

    (spec,) = load_specs(project)
    with pytest.raises(OverrideError, match="N_RWOS is not a parameter"):
        run_experiment(spec, results_root=tmp_path / "results", overrides={"N_RWOS": 1})
    with pytest.raises(OverrideError, match="N_ROWS = '9': expected int"):
        run_experiments([spec], results_root=tmp_path / "results", overrides={"N_ROWS": "9"}, progress=False)
    # every spec is checked before the first runs: one without N_ROWS stops the batch at its start
    other = replace(spec, stem="01_other", defaults={k: v for k, v in spec.defaults.items() if k != "N_ROWS"})
    with pytest.raises(OverrideError, match="01_other: N_ROWS is not a parameter"):
        run_experiments([spec, other], results_root=tmp_path / "results", overrides={"N_ROWS": 9}, progress=False)
    assert not (tmp_path / "results").exists()


def test_set_values_take_the_type_of_the_parameters_cell(project):
    from roma_lab.experiments import OverrideError
    from roma_lab.experiments._spec import parse_overrides

    (fixture,) = load_specs(project)
    extra = {"SPLIT": '"test"', "RATE": "0.5", "SIZES": "[1, 2]", "RATES": "[0.5]", "GOAL": "None"}
    spec = replace(fixture, declared={**fixture.declared, **extra},
                   defaults={**fixture.defaults, "SPLIT": "test", "RATE": 0.5, "SIZES": [1, 2], "RATES": [0.5],
                             "GOAL": None})
    assert parse_overrides(spec, {"N_ROWS": "100", "FAIL": "True", "SPLIT": "dev", "RATE": "1", "SIZES": "[4]",
                                  "RATES": "[1, 0.25]", "GOAL": "write a poem"}) == {
        "N_ROWS": 100, "FAIL": True, "SPLIT": "dev", "RATE": 1.0, "SIZES": [4], "RATES": [1.0, 0.25],
        "GOAL": "write a poem"}
    assert type(parse_overrides(spec, {"RATE": "1"})["RATE"]) is float
    assert parse_overrides(spec, {"SPLIT": "'quoted'"}) == {"SPLIT": "quoted"}
    assert parse_overrides(spec, {"SPLIT": "12"}) == {"SPLIT": "12"}  # a string parameter takes the text
    for texts, message in (({"SIZES": "[0.5]"}, "SIZES = \\[0.5\\]: expected a list of int"),
                           ({"RATE": "inf"}, "RATE = 'inf': expected float"),
                           ({"N_ROWS": "True"}, "N_ROWS = True: expected int"),
                           ({"N_ROWS": "[" * 100_000}, "N_ROWS = '\\[\\[\\[.*\\.\\.\\.: expected int")):
        with pytest.raises(OverrideError, match=message):
            parse_overrides(spec, texts)


# --- the cell timeout follows the sizes asked ------------------------------------------------


def test_a_larger_set_gets_a_larger_cell_timeout(project):
    (spec,) = load_specs(project)  # timeout_s 60 at its N_ROWS = 4, plus 5 s per row
    assert (spec.timeout_per_unit_s, spec.timeout_units) == (5, ("N_ROWS",))
    assert spec.cell_timeout_s(dict(spec.parameters)) == 60
    assert spec.cell_timeout_s({}) == 55  # the notebook's own N_ROWS = 3
    assert spec.cell_timeout_s({**spec.parameters, **spec.smoke}) == 50
    assert spec.cell_timeout_s({**spec.parameters, "N_ROWS": 100}) == 540
    fixed = load_spec(add_experiment(project, "01_fixed"))  # no timeout_units: the timeout is fixed
    assert fixed.cell_timeout_s({"N_ROWS": 100}) == 60


def test_the_kernel_gets_the_timeout_of_the_sizes_asked(project, tmp_path):
    """SLEEP_S as the unit: asking for a 6 s sleep raises the 5 s timeout to 35 s, so the cell passes."""
    text = GOOD.replace("timeout_s = 60", 'timeout_s = 5\ntimeout_per_unit_s = 5\ntimeout_units = ["SLEEP_S"]')
    spec = load_spec(add_experiment(project, "01_slow", text))
    outcome = run_experiment(spec, results_root=tmp_path / "results", overrides={"SLEEP_S": 6})
    assert (outcome.status, outcome.error) == ("completed", None)
    assert read_provenance(tmp_path / "results" / "01_slow").extra["cell_timeout_s"] == 35


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ('timeout_per_unit_s = 5', "go together"),
        ('timeout_units = ["N_ROWS"]', "go together"),
        ('timeout_per_unit_s = -1\ntimeout_units = ["N_ROWS"]', "'timeout_per_unit_s' must be a number >= 0"),
        ('timeout_per_unit_s = 5\ntimeout_units = "N_ROWS"', "'timeout_units' must be a list"),
        ('timeout_per_unit_s = 5\ntimeout_units = ["N_RWOS"]', "\\['N_RWOS'\\] are not declared"),
        ('timeout_per_unit_s = 5\ntimeout_units = ["FAIL"]', "FAIL = False counts units of work"),
        ('timeout_per_unit_s = 20\ntimeout_units = ["N_ROWS"]', "must exceed timeout_per_unit_s x 3 = 60"),
        ('measured_s = 0', "'measured_s' must be a positive number"),
        ('measured_s = "56 s"', "'measured_s' must be a positive number"),
        ('measured_s = true', "'measured_s' must be a positive number"),
        ('measured_sizes = {{ N_ROWS = 2 }}', "it needs 'measured_s'"),
        ('measured_s = 9\ntimeout_per_unit_s = 5\ntimeout_units = ["N_ROWS"]\nmeasured_sizes = {{ SLEEP_S = 2 }}',
         "\\['SLEEP_S'\\] are not 'timeout_units'"),
        ('measured_s = 9\ntimeout_per_unit_s = 5\ntimeout_units = ["N_ROWS"]\nmeasured_sizes = {{ N_ROWS = 0 }}',
         "gives no units of work"),
        ('measured_s = 9\ntimeout_per_unit_s = 5\ntimeout_units = ["N_ROWS"]\nmeasured_sizes = {{ N_ROWS = 1.5 }}',
         "N_ROWS = 1.5 counts units of work"),

        ('measured_runs = [{{ s = 9 }}]', "'measured_runs' are runs besides the one 'measured_s' times"),
        ('measured_s = 9\nmeasured_runs = [{{ s = 0 }}]', "entry 1: 's' must be a positive number"),
        ('measured_s = 9\nmeasured_runs = [{{ s = 8 }}, {{ s = 7, seconds = 7 }}]', "entry 2: unknown keys \\['seconds'\\]"),
        ('measured_s = 9\nmeasured_runs = [{{ s = 8, tps = [90.0] }}]', "entry 1: 'tps' must be \\[prompt, generation\\]"),
        ('measured_s = 9\ntimeout_per_unit_s = 5\ntimeout_units = ["N_ROWS"]\nmeasured_runs = [{{ s = 8, sizes = {{ SLEEP_S = 2 }} }}]',
         "entry 1: sizes \\['SLEEP_S'\\] are not 'timeout_units'"),
        ('measured_s = 9\ntimeout_per_unit_s = 5\ntimeout_units = ["N_ROWS"]\nmeasured_runs = [{{ s = 8, sizes = {{ N_ROWS = 0 }} }}]',
         "a 'measured_runs' entry's sizes give no units of work"),
        ('measured_s = 9\ntimeout_per_unit_s = 5\ntimeout_units = ["N_ROWS"]\nmeasured_runs = [{{ s = 8, sizes = {{ N_ROWS = "two" }} }}]',
         "N_ROWS = 'two' counts units of work"),
    ],
)
def test_bad_timeout_keys_raise_naming_the_file(project, keys, message):
    path = add_experiment(project, "01_bad", spec_text=GOOD.replace("timeout_s = 60", f"timeout_s = 60\n{keys}"))
    with pytest.raises(SpecError, match=message) as info:
        load_spec(path)
    assert "01_bad.toml" in str(info.value)


def test_the_cluster_is_checked_for_the_models_a_set_names(project, monkeypatch):
    """Workers must load the weights of every model the run names, a judge given with --set included."""
    from roma_lab import cluster as batch

    seen = {}

    class Session:
        client, scheduler, dashboard = None, "tcp://127.0.0.1:1", ""

        def workers(self):
            return {}

    monkeypatch.setattr(batch, "session", lambda how: Session())
    monkeypatch.setattr(batch, "expected_environment", lambda models: seen.setdefault("models", models))
    monkeypatch.setattr(batch, "check_workers", lambda client, expected: {})
    (fixture,) = load_specs(project)
    spec = replace(fixture, declared={**fixture.declared, "JUDGE_LM": '""'}, defaults={**fixture.defaults, "JUDGE_LM": ""})
    runner._cluster_record(batch.resolve_cluster("local:2"), [spec], smoke=False, lm=None, per="item",
                           overrides={"JUDGE_LM": "local:judge"})
    assert seen["models"] == ["local", "local:judge"]


def test_a_running_cell_says_it_is_still_running_with_the_rows_written_so_far(tmp_path, monkeypatch, capsys):
    """Issue 44: the runner's terminal is never silent while a cell runs."""
    import time as _time
    from types import SimpleNamespace

    from roma_lab.evaluate import evaluate, single_call, tasks_from

    monkeypatch.setattr(heartbeat, "HEARTBEAT_S", 0.05)
    # the rows a notebook's evaluation writes, in a folder below the notebook's own
    evaluate([single_call("scripted")], tasks_from([{"question": "q1", "answer": "a"}, {"question": "q2", "answer": "b"}]),
             out=tmp_path / "sub" / "runs", progress=False)
    announce = heartbeat.Announce("demo", 3, tmp_path)
    announce(SimpleNamespace(source="# setup\nslow_call()"), 1)
    _time.sleep(0.3)
    announce.stop()
    err = capsys.readouterr().err
    assert "demo: cell 2/3: slow_call()" in err
    assert "demo: cell 2/3 still running" in err and "2 result rows written so far" in err


def test_a_run_s_record_names_the_commit_it_started_from_not_one_made_while_it_ran(project, tmp_path, monkeypatch):
    """A commit made while a notebook runs (another session's work in the same checkout) is not the code
    the run imported: its provenance names the commit and work-tree state it started from."""
    def git(*args):
        return subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
    start = git("rev-parse", "HEAD").strip()
    execute = runner._execute

    def commit_meanwhile(*args, **kwargs):
        (project / "later.txt").write_text("a later change\n")
        git("-c", "user.name=t", "-c", "user.email=t@t", "add", "later.txt")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "meanwhile")
        return execute(*args, **kwargs)

    monkeypatch.setattr(runner, "_execute", commit_meanwhile)
    (spec,) = load_specs(project)
    outcome = run_experiment(spec, results_root=tmp_path / "results")
    assert outcome.status == "completed", outcome.error
    record = read_provenance(outcome.out_dir)
    assert git("rev-parse", "HEAD").strip() != start
    assert (record.git_commit, record.git_dirty) == (start, False)
