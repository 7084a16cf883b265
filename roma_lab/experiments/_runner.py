"""Run experiments through papermill into ``results/<stem>/``, skipping what is complete."""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from roma_lab._environment import ENV
from roma_lab.results import (
    PROVENANCE_FILE,
    Provenance,
    ProvenanceError,
    changed_outputs,
    package_source_hash,
    parameters_hash,
    quarantine,
    quarantined_files,
    read_provenance,
    sha256_file,
    write_provenance,
    write_text_atomic,
)
from roma_lab.results._files import read_regular_bytes

from ._spec import ExperimentSpec, OverrideError, ParamValue, check_overrides

Outcome = Literal["completed", "skipped", "failed"]
KERNEL_FILE = ".kernel.json"  # the running kernel of this folder; hidden, so never hashed as an output
_KILL_WAIT_S = 30  # a SIGKILLed process is gone in milliseconds; this only guards against a hang


class RunnerStateError(RuntimeError):
    """Another runner holds the experiment, or a kernel left by a killed runner cannot be stopped."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What happened to one experiment in a run."""

    stem: str
    status: Outcome
    out_dir: Path
    error: str | None = None
    seconds: float = 0.0


def run_parameters(spec: ExperimentSpec, *, out_dir: Path, smoke: bool, lm: str | None,
                   overrides: Mapping[str, ParamValue] | None = None) -> dict[str, Any]:
    """Parameters papermill injects: the spec's overrides ([parameters], then [smoke] for the smoke
    tier), then the sizes asked for this run (``overrides``, from ``--set``, checked by
    :func:`check_overrides`), OUT_DIR, and ``lm`` as LM when given and the notebook declares LM.
    Everything else keeps the default written in the notebook's parameters cell."""
    params: dict[str, Any] = dict(spec.parameters)
    if smoke:
        params.update(spec.smoke)
    params.update(overrides or {})
    params["OUT_DIR"] = str(Path(out_dir).resolve())
    if lm is not None and "LM" in spec.declared:
        params["LM"] = lm
    return params


def _recorded(spec: ExperimentSpec, injected: dict[str, Any]) -> dict[str, Any]:
    """The parameters a run used: the notebook's defaults with the injected values on top.
    OUT_DIR is the folder the record lives in; keeping it out lets results move with the repo."""
    return {k: v for k, v in (dict(spec.defaults) | injected).items() if k != "OUT_DIR"}


def _inputs(spec: ExperimentSpec) -> list[str]:
    # The notebook is an input too: editing it makes its results stale.
    return [spec.notebook.relative_to(spec.root).as_posix(), *spec.inputs]


def _model(recorded: dict[str, Any]) -> str | None:
    """The run's model as tables label it: with its server's address when $ROMA_LAB_API_BASE sends it
    to one, so pointing LM at another server is another run."""
    from roma_lab.lm import model_label

    lm = recorded.get("LM")
    return model_label(lm) if isinstance(lm, str) else None


def _engine(recorded: dict[str, Any]) -> Mapping[str, Any] | None:
    """The engine and slot count the run's local model runs on ($ROMA_LAB_ENGINE and $ROMA_LAB_SLOTS
    reach the kernel too), None for any other model."""
    from roma_lab.lm import local_engine_settings

    lm = recorded.get("LM")
    settings = local_engine_settings(lm) if isinstance(lm, str) else None
    return MappingProxyType(settings) if settings is not None else None


@dataclass(frozen=True, slots=True)
class RunKey:
    """What makes a run of an experiment this run, taken once when the run starts and handed to
    the status check, the folder's preparation and the record: status and prepare compare it with
    the folder's record, the record writes it."""

    parameters: Mapping[str, Any]  # what papermill injects (run_parameters), OUT_DIR included
    recorded: Mapping[str, Any]  # the notebook's defaults with those on top, OUT_DIR left out
    parameters_hash: str  # of ``recorded``
    model: str | None  # the model as tables label it (_model)
    engine: Mapping[str, Any] | None  # a local model's engine and slot count (outputs depend on them)
    inputs: Mapping[str, str | None]  # the notebook and each declared input -> SHA-256 (None: missing)
    source: str  # package_source_hash(): the code that makes the numbers

    @property
    def missing_inputs(self) -> list[str]:
        return [p for p, digest in self.inputs.items() if digest is None]

    def matches(self, record: Provenance) -> bool:
        """The record was made with these parameters, model, notebook and inputs, by this roma_lab source."""
        return (record.parameters_hash == self.parameters_hash and record.model == self.model
                and record.extra.get("engine") == (dict(self.engine) if self.engine is not None else None)
                and record.roma_lab_source == self.source
                and not self.missing_inputs and record.inputs == dict(self.inputs))


def run_key(spec: ExperimentSpec, *, out_dir: Path, smoke: bool, lm: str | None,
            overrides: Mapping[str, ParamValue] | None = None) -> RunKey:
    """The run's identity, hashing the package source and each input once. The sizes asked
    (``overrides``) are among its parameters, so a run at other sizes is another run."""
    params = run_parameters(spec, out_dir=out_dir, smoke=smoke, lm=lm, overrides=overrides)
    recorded = _recorded(spec, params)
    inputs = {p: sha256_file(spec.root / p) if (spec.root / p).is_file() else None for p in _inputs(spec)}
    return RunKey(MappingProxyType(params), MappingProxyType(recorded), parameters_hash(recorded), _model(recorded),
                  _engine(recorded), MappingProxyType(inputs), package_source_hash())


def experiment_status(spec: ExperimentSpec, *, results_root: Path, smoke: bool = False, lm: str | None = None,
                      overrides: Mapping[str, ParamValue] | None = None) -> str:
    """"completed" only if a completed record matches today's parameters (``overrides`` included), notebook, inputs and
    roma_lab source, every declared output exists and every recorded output still has its recorded
    SHA-256. Otherwise "not run", "stale", "incomplete" (a declared output is missing), "modified"
    (an output was edited or emptied since), "failed", "interrupted", "running" (a run killed
    hard) or "unreadable" (provenance.json is damaged)."""
    out_dir = Path(results_root) / spec.stem
    overrides = check_overrides(spec, overrides or {})
    return _status(spec, out_dir, lambda: run_key(spec, out_dir=out_dir, smoke=smoke, lm=lm, overrides=overrides))


def _status(spec: ExperimentSpec, out_dir: Path, key: Callable[[], RunKey]) -> str:
    """:func:`experiment_status` against the run key ``key()``, asked for only when a completed record
    has to be compared (listing experiments that never ran hashes nothing)."""
    try:
        record = read_provenance(out_dir)
    except FileNotFoundError:
        return "not run"
    except ProvenanceError:
        return "unreadable"
    if record.status != "completed":
        return record.status
    if not key().matches(record):
        return "stale"
    if any(not (out_dir / name).is_file() for name in spec.outputs):
        return "incomplete"
    if changed_outputs(out_dir, record):
        return "modified"
    return "completed"


# --- the notebook kernel: recorded at launch, stopped before anyone else writes the folder -------


def _kernel_client_class() -> type:
    """jupyter_client's async kernel client, with a shell channel that never sleeps through a reply.

    ``Session.send`` writes through a blocking shadow of the asyncio shell socket, so pyzmq's
    asyncio layer does not see the write, and the write can consume ZMQ's edge-triggered signal
    that a message is waiting. nbclient writes to that socket while it awaits the cell's
    execute_reply on it: its stand-in for an ipywidgets ``Output`` widget (notebook 14's
    ``ThresholdExplorer`` plot) sends the captured outputs back to the kernel. If the reply
    arrived during that send, the await sleeps until the cell timeout (600 s), then finds the reply
    and the cell passes (jupyter/nbclient#312, jupyter/jupyter_client#1059, both open). Reading
    ``EVENTS`` through the asyncio socket after each send makes pyzmq look again and wake the waiter.
    """
    import zmq
    from jupyter_client.asynchronous.client import AsyncKernelClient
    from jupyter_client.channels import AsyncZMQSocketChannel
    from traitlets import Type

    class ShellChannel(AsyncZMQSocketChannel):
        def send(self, msg: dict[str, Any]) -> None:
            super().send(msg)
            self.socket.get(zmq.EVENTS)

    class KernelClient(AsyncKernelClient):
        shell_channel_class = Type(ShellChannel)

    return KernelClient


# ipykernel (7.x, kernelapp.py init_sockets) logs this in the kernel process, to the stderr it
# inherits from the runner, whenever the kernel listens on TCP without CurveZMQ keys.
UNENCRYPTED_TCP = "Kernel is running over TCP without encryption."
_QUIET_LAUNCHER = ("import logging, runpy; logging.getLogger('IPKernelApp').addFilter("
                   f"lambda record: not str(record.msg).startswith({UNENCRYPTED_TCP!r})); "
                   "runpy.run_module('ipykernel_launcher', run_name='__main__', alter_sys=True)")


def _loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:  # a host name: not known to stay on this machine, so the warning stays
        return False


def _without_unencrypted_warning(kernel_cmd: list[str]) -> list[str]:
    """``python -m ipykernel_launcher ARGS`` as ``python -c <launcher> ARGS``, where the launcher
    adds a filter dropping :data:`UNENCRYPTED_TCP` to ipykernel's application logger, then runs
    ``ipykernel_launcher`` as ``-m`` would. The warning is logged inside the kernel process, so no
    ``warnings`` filter of the runner can reach it. Any other kernel command is left as it is."""
    if list(kernel_cmd[1:3]) != ["-m", "ipykernel_launcher"]:
        return kernel_cmd
    return [kernel_cmd[0], "-c", _QUIET_LAUNCHER, *kernel_cmd[3:]]


def _kernel_manager_class(out_dir: Path, kernel_env: Mapping[str, str]) -> type:
    """A jupyter kernel manager that starts its kernel with ``kernel_env`` on top of this process's
    environment, records the kernel's pid, process group and start time in
    ``out_dir/.kernel.json`` at launch, so a later run can stop a kernel whose runner was killed,
    and gives nbclient the client of :func:`_kernel_client_class`. A kernel listening on loopback
    TCP starts without its "running over TCP without encryption" warning, which there tells the
    user nothing (:func:`_without_unencrypted_warning`)."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class RecordingKernelManager(AsyncKernelManager):
        @default("client_factory")
        def _client_factory_default(self) -> type:
            return _kernel_client_class()

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            kw["env"] = {**kw.get("env", os.environ), **kernel_env}
            if self.transport == "tcp" and _loopback(self.ip):
                kernel_cmd = _without_unencrypted_warning(kernel_cmd)
            await super()._async_launch_kernel(kernel_cmd, **kw)
            write_text_atomic(out_dir / KERNEL_FILE, json.dumps(process_identity(self.provisioner.pid)))

        async def _async_interrupt_kernel(self):
            # jupyter_client interrupts before every shutdown request, also after the last cell; the
            # kernel may then log "KeyboardInterrupt caught in kernel", read as a failure. A kernel
            # still busy (a timed-out cell) gets the shutdown request, then SIGTERM and SIGKILL.
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

    return RecordingKernelManager


IDENTITY = ("pid", "pgid", "sid", "started", "boot")  # what a kernel record must hold to be acted on


def _boot() -> str:
    """This boot's id (Linux), else its time: a start time is only comparable within one boot."""
    import psutil

    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return f"boot time {psutil.boot_time()}"


def process_identity(pid: int) -> dict[str, Any] | None:
    """What tells a live process from a later one that reuses its pid: pid, process group, session,
    start time (``psutil.Process.create_time``, from /proc/<pid>/stat field 22) and boot; None when
    no process has that pid."""
    import psutil

    try:
        return {"pid": pid, "pgid": os.getpgid(pid), "sid": os.getsid(pid),
                "started": psutil.Process(pid).create_time(), "boot": _boot()}
    except (ProcessLookupError, psutil.NoSuchProcess):
        return None


def _alive(process) -> bool:
    import psutil

    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pgid(process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except ProcessLookupError:
        return None


def _stop_kernel(out_dir: Path) -> None:
    """Kill the kernel (and its process group) recorded in ``out_dir`` if it still runs.

    After ``kill -9`` of a runner its kernel lives on (ipykernel notices a dead parent only by
    polling, and not at all while a C call holds the GIL) and may still append rows. It is killed
    before the folder is touched again, so an orphan can never write into a rerun. Only a process
    that is still the one recorded is killed: same pid, start time and boot (else the kernel is gone
    and the pid reused), and same process group and session, led by the kernel. A record that
    differs otherwise, or lacks these fields, was not written by a runner as it stands: it is moved
    aside with a warning naming what differed, and nothing is killed.
    """
    import psutil

    path = out_dir / KERNEL_FILE
    try:
        kernel = json.loads(read_regular_bytes(path))
    except FileNotFoundError:
        return
    except (OSError, ValueError, RecursionError):  # written atomically, so only an outside edit gets here
        quarantine(path, "unreadable kernel record; no kernel can be stopped from it")
        return
    fields = kernel if isinstance(kernel, dict) else {}
    unusable = [k for k in IDENTITY if k not in fields or (k in ("pid", "pgid", "sid") and
                                                          not (type(fields[k]) is int and fields[k] > 1))]
    if unusable:
        quarantine(path, f"kernel record without a usable {', '.join(unusable)} (an older format, or edited); "
                         "nothing is killed from it: if a kernel of an earlier run still runs, stop it by hand")
        return
    live = process_identity(fields["pid"])
    if live is None or (live["started"], live["boot"]) != (fields["started"], fields["boot"]):
        path.unlink(missing_ok=True)  # the kernel is gone (its pid may now belong to a later process)
        return
    differs = [f"{k} recorded {fields[k]}, live {live[k]}" for k in ("pgid", "sid") if live[k] != fields[k]]
    if fields["pgid"] != fields["pid"]:  # jupyter starts each kernel in a session of its own
        differs.append(f"process group {fields['pgid']} is not led by pid {fields['pid']}")
    if live["pgid"] == os.getpgid(0):
        differs.append("it is this runner's own process group")
    if differs:
        quarantine(path, f"pid {fields['pid']} is not the recorded kernel ({'; '.join(differs)}); nothing is killed")
        return
    group = fields["pgid"]
    members = [p for p in psutil.process_iter() if _pgid(p) == group]
    if any(_alive(p) for p in members):
        os.killpg(group, signal.SIGKILL)
        deadline = time.monotonic() + _KILL_WAIT_S
        while any(_alive(p) for p in members):  # a signalled process runs on for a moment
            if time.monotonic() > deadline:
                raise RunnerStateError(f"kernel pid {group} of an earlier run of {out_dir.name} does not stop; "
                                       "kill it by hand and rerun")
            time.sleep(0.05)
    path.unlink(missing_ok=True)


# --- preparing the folder: start clean, or resume what the same run left -------------------------


def _executed_parameters(spec: ExperimentSpec, out_dir: Path) -> dict[str, Any] | None:
    """Parameters papermill stored in the executed copy of an earlier attempt (None if unreadable)."""
    try:
        nb = json.loads(read_regular_bytes(out_dir / spec.notebook.name))
        return _recorded(spec, dict(nb["metadata"]["papermill"]["parameters"]))
    except (OSError, ValueError, RecursionError, KeyError, TypeError):
        return None


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def _prepare(spec: ExperimentSpec, out_dir: Path, key: RunKey, force: bool) -> str | None:
    """Empty ``out_dir`` unless it holds work of this same run that can be continued; returns a note
    for the record when damaged files had to be moved aside.

    Kept: an unfinished run (running, failed, interrupted) with the same parameters, inputs and
    package source, so package functions that append per-item rows resume; a completed one whose
    outputs were edited or removed (not when forced), minus the changed files, which are moved
    aside; and, when provenance.json is missing or unreadable, a folder whose executed notebook
    copy shows these parameters (the package source of such a folder cannot be checked).
    A folder that cannot be attributed to this run is moved aside whole; one of another run is emptied.
    """
    _stop_kernel(out_dir)
    note = None
    try:
        record = read_provenance(out_dir)
    except FileNotFoundError:
        record = None
    except ProvenanceError:
        moved = quarantine(out_dir / PROVENANCE_FILE, "not a valid provenance record")
        record = None
        note = f"provenance.json was unreadable (kept as {moved.name})"
    if record is None:
        if _has_files(out_dir) and _executed_parameters(spec, out_dir) == key.recorded:
            note = ((note + "; ") if note else "provenance.json was missing; ") + (
                "kept the items of the earlier attempt, whose executed notebook shows these parameters")
        elif _has_files(out_dir):
            aside = quarantine(out_dir, "results folder without a readable record of its parameters; starting over")
            note = f"the earlier folder, without a readable record of its parameters, was moved to {aside.name}"
    elif not key.matches(record) or (record.status == "completed" and force):
        shutil.rmtree(out_dir)  # another run's results, or a forced fresh start
    elif record.status == "completed":
        changed = changed_outputs(out_dir, record)
        for name in changed:
            if (out_dir / name).is_file():
                quarantine(out_dir / name, "changed since the completed run recorded it; the run resumes")
        note = f"outputs changed after the completed run were moved aside: {', '.join(changed)}" if changed else None
    out_dir.mkdir(parents=True, exist_ok=True)
    for tmp in out_dir.rglob(".*.tmp*"):  # a write cut short by the kill; the finished file is intact
        if tmp.is_file():
            tmp.unlink()
    return note


def _describe(exc: Exception) -> str:
    from papermill.exceptions import PapermillExecutionError

    if isinstance(exc, PapermillExecutionError):  # the full traceback stays in the executed notebook
        return f"{exc.ename}: {exc.evalue} (cell In [{exc.exec_count}])"
    return f"{type(exc).__name__}: {exc}"


SMOKE_BANNER_ID = "smoke-banner"


def finish_notebook(path: Path, smoke: Mapping[str, Any] | None = None) -> bool:
    """Make the executed notebook at ``path`` final in one read and at most one write.

    A smoke-tier run's (``smoke``: its smoke parameters; None: not a smoke run) gets a banner at the
    top: its numbers come from small parameters and usually the scripted test double, and look like
    results if nothing says so. Then it is signed with nbformat's notary, as ``jupyter trust`` does,
    so JupyterLab opens it trusted and shows its live widgets rather than their static fallback. The
    signature goes to the notary's SQLite database in the Jupyter data dir, over the notebook as the
    file now holds it. When signing fails (a read-only data dir, say) the notebook stays as written
    and a UserWarning names it and the reason. Returns whether it was signed."""
    import nbformat
    from nbformat.sign import NotebookNotary

    nb = nbformat.read(path, as_version=4)  # as JupyterLab reads it
    if smoke is not None and not any(cell.get("id") == SMOKE_BANNER_ID for cell in nb.cells):
        nb.cells.insert(0, _smoke_banner(smoke, path.stem))
        text = nbformat.writes(nb)  # signed below as written, as Jupyter's server signs a notebook it saves
        write_text_atomic(path, text if text.endswith("\n") else text + "\n")
    try:
        notary = NotebookNotary()
        try:
            notary.sign(nb)
            # nbformat signs into memory, after logging why, when its database cannot be written
            in_memory = getattr(notary.store, "db_file", None) == ":memory:"
        finally:
            notary.store.close()  # (not `with NotebookNotary()`: that needs nbformat 5.11, which nothing pins)
    except Exception as exc:  # signing is a convenience: it must never cost a run its notebook
        reason = f"{type(exc).__name__}: {exc}"
    else:
        if not in_memory:
            return True
        reason = f"the signature database {notary.db_file} cannot be written"
    warnings.warn(f"{path} is not signed, so JupyterLab opens it untrusted and shows the widgets' static "
                  f"fallback ({reason}); `jupyter trust {path}` signs it once the Jupyter data dir is writable",
                  UserWarning, stacklevel=2)
    return False


def _smoke_banner(smoke: Mapping[str, Any], stem: str):
    import nbformat

    settings = ", ".join(f"`{k} = {v!r}`" for k, v in smoke.items()) or "the notebook's defaults"
    return nbformat.v4.new_markdown_cell(
        "> **Smoke tier: not results.** This copy ran with the smoke tier's small parameters "
        f"({settings}) to check that the notebook runs; its tables and figures measure nothing. "
        "The results are in the default run: `python -m roma_lab.experiments run " f"{stem}`.",
        id=SMOKE_BANNER_ID)


HEARTBEAT_S = 10.0  # a running cell says it is still running at least this often


def _rows_so_far(out_dir: Path) -> int:
    """Result rows written so far under ``out_dir`` (the runners' per-item run files: a row per item done)."""
    rows = 0
    for path in out_dir.rglob("run*.csv"):
        try:
            with path.open("rb") as f:
                rows += max(0, sum(1 for _ in f) - 1)
        except OSError:  # being replaced right now: counted at the next beat
            pass
    return rows


class _Announce:
    """nbclient's hook before each code cell: one line saying which notebook and cell is running and
    how it starts, then every ``HEARTBEAT_S`` while it runs a line with its time and the result rows
    written so far, so a notebook that runs for an hour is never a silent terminal."""

    def __init__(self, stem: str, n_cells: int, out_dir: Path):
        self.stem, self.n_cells, self.out_dir = stem, n_cells, out_dir
        self.cell, self.started = 0, time.monotonic()
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._run, name=f"heartbeat-{stem}", daemon=True)

    def __call__(self, cell, cell_index: int, **_: Any) -> None:
        from tqdm.auto import tqdm

        first = next((line.strip() for line in cell.source.splitlines()
                      if line.strip() and not line.lstrip().startswith("#")), "")
        self.cell, self.started = cell_index + 1, time.monotonic()
        tqdm.write(f"{self.stem}: cell {self.cell}/{self.n_cells}: {first[:90]}", file=sys.stderr)
        if not self._beat.is_alive():
            self._beat.start()

    def _run(self) -> None:
        from tqdm.auto import tqdm

        while not self._stop.wait(HEARTBEAT_S):
            tqdm.write(f"{self.stem}: cell {self.cell}/{self.n_cells} still running ({time.monotonic() - self.started:.0f} s); "
                       f"{_rows_so_far(self.out_dir)} result rows written so far", file=sys.stderr)

    def stop(self) -> None:
        self._stop.set()


def _execute(spec: ExperimentSpec, out_dir: Path, params: dict[str, Any], kernel_env: Mapping[str, str]) -> None:
    import nbformat
    import papermill

    n_cells = len(nbformat.read(spec.notebook, as_version=4).cells) + 1  # papermill adds the injected parameters
    announce = _Announce(spec.stem, n_cells, out_dir)
    try:
        papermill.execute_notebook(
            str(spec.notebook),
            str(out_dir / spec.notebook.name),  # executed copy beside the results, never in place
            parameters=params,
            cwd=str(spec.notebook.parent),
            execution_timeout=spec.cell_timeout_s(params),  # follows the sizes asked (design/runner.md)
            kernel_name="python3",
            progress_bar=False,
            kernel_manager_class=_kernel_manager_class(out_dir, kernel_env),
            on_cell_execute=announce,
        )
    finally:
        announce.stop()
        _stop_kernel(out_dir)  # papermill shuts its kernel down; this only clears the record


def run_experiment(
    spec: ExperimentSpec,
    *,
    results_root: str | Path,
    smoke: bool = False,
    lm: str | None = None,
    force: bool = False,
    kernel_env: Mapping[str, str] | None = None,
    cluster: Mapping[str, Any] | None = None,
    overrides: Mapping[str, ParamValue] | None = None,
    budget_usd: float | None = None,
    plan: Mapping[str, Any] | None = None,
) -> RunOutcome:
    """Execute one experiment into ``<results_root>/<stem>/`` and write its provenance.json.

    Skipped when already completed with the same parameters, notebook and inputs and unchanged
    outputs (unless ``force``). One runner at a time per experiment (a lock beside the folder); a
    kernel left running by a killed runner is stopped before the folder is touched. Work of
    the same run is kept so item-level results resume (see ``_prepare``); otherwise the folder is
    emptied first. A failing notebook gives a "failed" outcome with its error, never an exception,
    so a batch keeps going. On KeyboardInterrupt the record says "interrupted" and the interrupt
    propagates; the next run redoes this experiment.

    ``kernel_env``: environment variables set for the notebook's kernel (the runner names the
    cluster its items go to, $ROMA_LAB_CLUSTER). ``cluster``: the JSON record of the cluster this
    run used, kept in provenance under ``extra.cluster``. ``overrides``: sizes asked for this run
    (``--set N_TASKS=100``), on top of the spec's; a name the notebook does not declare, one the
    runner owns or a value of another type raises :class:`OverrideError` before anything runs.
    They are parameters of the run (its identity and provenance's ``parameters``), listed again
    under ``extra.overrides``, and scale the cell timeout (``extra.cell_timeout_s``).
    ``budget_usd``: a dollar cap handed to the kernel as $ROMA_LAB_BUDGET_USD (``roma_lab.evaluate``
    keeps it when a notebook names none) and recorded under ``extra.budget_usd``. It is not part of the
    run's identity, so another cap resumes the same rows; but a completed run is skipped only when it
    ran under the cap asked now (one stopped at a lower cap runs again, resuming).
    ``plan``: the study plan's line for this notebook (``experiments plan``: its n, predicted time and
    MDE), printed before it runs and recorded under ``extra.plan``.
    """
    start = time.perf_counter()
    out_dir = (Path(results_root) / spec.stem).resolve()
    overrides = check_overrides(spec, overrides or {})
    key = run_key(spec, out_dir=out_dir, smoke=smoke, lm=lm, overrides=overrides)  # the one identity of this run
    if not force and _status(spec, out_dir, lambda: key) == "completed" and _budget_of(out_dir) == budget_usd:
        return RunOutcome(spec.stem, "skipped", out_dir)
    kernel_env = dict(kernel_env or {})
    if budget_usd is not None:
        kernel_env[ENV.budget_usd] = repr(budget_usd)  # roma_lab.evaluate reads it
    try:
        with _exclusive(out_dir):
            if plan is not None:
                print(f"plan: {plan['line']}", flush=True)
            error = _run(spec, out_dir, key, smoke=smoke, force=force, kernel_env=kernel_env, cluster=cluster,
                         overrides=overrides, budget_usd=budget_usd, plan=plan)
    except RunnerStateError as exc:
        error = str(exc)
    return RunOutcome(spec.stem, "failed" if error else "completed", out_dir, error, time.perf_counter() - start)


def _budget_of(out_dir: Path) -> float | None:
    """The dollar cap the folder's recorded run was given (None: none, or no readable record)."""
    try:
        return read_provenance(out_dir).extra.get("budget_usd")
    except (FileNotFoundError, ProvenanceError):
        return None


@contextlib.contextmanager
def _exclusive(out_dir: Path):
    """Hold a lock on the experiment for this runner's lifetime (the OS drops it when the runner
    dies, even by kill -9). Holding it proves that a kernel recorded in the folder is an orphan."""
    lock = out_dir.parent / f".{out_dir.name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunnerStateError(f"another runner is running {out_dir.name} now (it holds {lock}); "
                                   "wait for it to finish, or stop it and rerun") from None
        yield


def _run(spec: ExperimentSpec, out_dir: Path, key: RunKey, *, smoke: bool, force: bool,
         kernel_env: Mapping[str, str], cluster: Mapping[str, Any] | None,
         overrides: Mapping[str, ParamValue], budget_usd: float | None,
         plan: Mapping[str, Any] | None = None) -> str | None:
    """Prepare the folder, execute, write the record; returns the error (None when completed)."""
    note = _prepare(spec, out_dir, key, force)
    recorded = dict(key.recorded)
    missing_inputs = key.missing_inputs
    started_at = datetime.now(UTC)
    extra = {"experiment": spec.stem, "paper": spec.paper, "table": spec.table, "smoke": smoke,
             "cell_timeout_s": spec.cell_timeout_s(recorded)}
    if key.engine is not None:
        extra["engine"] = dict(key.engine)
    if overrides:  # which of the parameters were asked on the command line
        extra["overrides"] = dict(overrides)
    if note:
        extra["recovered"] = note
    if cluster:
        extra["cluster"] = dict(cluster)
    if budget_usd is not None:
        extra["budget_usd"] = budget_usd
    if plan is not None:
        extra["plan"] = dict(plan)

    def record(status: str, error: str | None = None) -> None:
        kept = quarantined_files(out_dir)  # damaged files moved aside by the runner or the notebook
        write_provenance(
            out_dir,
            parameters=recorded,
            seeds={k: v for k, v in recorded.items() if (k == "SEED" or k.endswith("_SEED")) and type(v) is int},
            model=key.model,
            inputs=[p for p in key.inputs if p not in missing_inputs],
            extra={**extra, "quarantined": kept} if kept else extra,
            status=status,
            started_at=started_at,
            error=error,
            root=spec.root,
            roma_lab_source=key.source,
        )

    record("running")  # a run killed hard leaves "running", which is never taken as complete
    error = None
    if missing_inputs:
        error = f"input files missing: {', '.join(missing_inputs)}"
    else:
        try:
            _execute(spec, out_dir, dict(key.parameters), kernel_env)
        except KeyboardInterrupt:
            record("interrupted")
            raise
        except Exception as exc:  # any failure of this notebook is recorded; the batch goes on
            error = _describe(exc)
        else:
            # the folder holds only this run's files (fresh, or kept from this same run): existence suffices
            missing = [name for name in spec.outputs if not (out_dir / name).is_file()]
            if missing:
                error = f"notebook finished without writing declared outputs: {', '.join(missing)}"
        if (out_dir / spec.notebook.name).is_file():  # a failed run's copy too: its traceback and outputs so far
            finish_notebook(out_dir / spec.notebook.name,
                            {k: key.parameters[k] for k in spec.smoke if k in key.parameters} if smoke else None)
    record("failed" if error else "completed", error)
    return error


Per = Literal["item", "notebook"]


def run_experiments(
    specs: Sequence[ExperimentSpec],
    *,
    results_root: str | Path,
    smoke: bool = False,
    lm: str | None = None,
    force: bool = False,
    progress: bool = True,
    cluster: str | None = None,
    per: Per = "item",
    overrides: Mapping[str, ParamValue] | None = None,
    budget_usd: float | None = None,
    plans: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[RunOutcome]:
    """Run specs with a tqdm bar; one failure does not stop the rest.

    ``cluster`` (a ``roma_lab.cluster`` cluster name; None = $ROMA_LAB_CLUSTER, else in-process):
    with ``per="item"`` the notebooks run here one after the other and send their benchmark items
    to the cluster (their kernels get the scheduler's address as $ROMA_LAB_CLUSTER, so a local
    cluster starts once for the whole sweep); with ``per="notebook"`` whole notebooks run on the
    workers, as many at once as there are workers, and their items run in their kernels. Either
    way the workers' environments are checked first (packages, Python, roma_lab source, and the
    weights of the local models the notebooks name), and each provenance.json records the
    cluster, its workers with their package versions, and (per notebook) the worker that ran it.

    ``overrides`` (``--set``) apply to every spec and must suit each: they are checked against all
    of them (one :class:`OverrideError` naming each that refuses them) before any notebook runs.
    ``budget_usd``: each notebook's dollar cap (:func:`run_experiment`); its items then run in its own
    kernel, so not with ``per="item"`` on a cluster (a ValueError). ``plans``: per notebook stem, its
    line of the study plan (:func:`run_experiment`'s ``plan``).
    """
    from tqdm.auto import tqdm

    from roma_lab import cluster as batch

    if per not in ("item", "notebook"):
        raise ValueError(f"per must be 'item' or 'notebook', got {per!r}")
    how = batch.resolve_cluster(cluster)
    if budget_usd is not None and how.kind != "in-process" and per == "item":
        raise ValueError("a dollar cap is kept in each notebook's kernel, which then runs its items itself: "
                         "use --per notebook (or no cluster) with --budget-usd")
    overrides, plans = dict(overrides or {}), dict(plans or {})
    refused = []
    for spec in specs:
        try:
            check_overrides(spec, overrides)
        except OverrideError as exc:
            refused.append(str(exc))
    if refused:
        raise OverrideError("\n".join(refused))
    kwargs = {"results_root": results_root, "smoke": smoke, "lm": lm, "force": force, "overrides": overrides,
              "budget_usd": budget_usd}
    outcomes = []
    with tqdm(total=len(specs), desc="experiments", unit="exp", disable=not progress) as bar:

        def report(outcome: RunOutcome) -> None:
            bar.update(1)
            bar.write(f"{outcome.status:>9}  {outcome.stem}" + (f"  ({outcome.error})" if outcome.error else ""))
            outcomes.append(outcome)

        if how.kind == "in-process":
            for spec in specs:
                bar.set_postfix_str(spec.stem)
                report(run_experiment(spec, plan=plans.get(spec.stem), **kwargs))
            return outcomes
        record = _cluster_record(how, specs, smoke=smoke, lm=lm, per=per, overrides=overrides)
        if per == "item":
            kernel_env = {batch.ENV_VAR: record["scheduler"]}
            for spec in specs:
                bar.set_postfix_str(spec.stem)
                report(run_experiment(spec, kernel_env=kernel_env, cluster=record, plan=plans.get(spec.stem),
                                      **kwargs))
            return outcomes
        # per notebook: the kernels on the workers run their items in-process (nested dispatch could
        # hold every worker waiting for work that has no worker left to run it)
        work = _Experiment(kwargs, record, plans)
        for done in batch.dispatch(work, list(specs), how=batch.Dispatch(cluster=how.name), label="notebook"):
            spec = specs[done.index]
            report(done.value if done.error is None else RunOutcome(
                spec.stem, "failed", (Path(results_root) / spec.stem).resolve(),
                f"{type(done.error).__name__}: {done.error}"))
    order = {spec.stem: i for i, spec in enumerate(specs)}
    return sorted(outcomes, key=lambda o: order[o.stem])


def _cluster_record(how, specs: Sequence[ExperimentSpec], *, smoke: bool, lm: str | None, per: Per,
                    overrides: Mapping[str, ParamValue]) -> dict[str, Any]:
    """Check every worker against this process for the models the notebooks will load; the record
    provenance keeps: cluster, scheduler, dashboard, and each worker with its environment."""
    from roma_lab import cluster as batch

    models = set()
    for spec in specs:
        recorded = _recorded(spec, run_parameters(spec, out_dir=Path("."), smoke=smoke, lm=lm,
                                                  overrides=check_overrides(spec, overrides)))
        models |= {v for k, v in recorded.items() if k in ("LM", "JUDGE_LM") and isinstance(v, str) and v}
    s = batch.session(how)
    expected = batch.expected_environment(sorted(models))
    workers = batch.check_workers(s.client, expected)
    info = s.workers()
    return {"name": how.name, "per": per, "scheduler": s.scheduler, "dashboard": s.dashboard,
            "workers": {address: {**info.get(address, {}), "environment": env.as_json()}
                        for address, env in sorted(workers.items())}}


@dataclass(frozen=True, slots=True)
class _Experiment:
    """One notebook on a worker: ``run_experiment`` there (its lock, orphan-kernel stop and resume
    work as here: the workers share this checkout's paths), its kernel told to run items in-process."""

    kwargs: Mapping[str, Any]
    record: Mapping[str, Any]
    plans: Mapping[str, Mapping[str, Any]]

    def __call__(self, spec: ExperimentSpec) -> RunOutcome:
        from distributed import get_worker

        from roma_lab import cluster as batch

        cluster = {**self.record, "worker": get_worker().address}
        return run_experiment(spec, kernel_env={batch.ENV_VAR: batch.IN_PROCESS}, cluster=cluster,
                              plan=self.plans.get(spec.stem), **self.kwargs)
