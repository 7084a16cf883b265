"""One runner per experiment, and no orphan kernel (design/runner.md).

A runner holds a lock beside the experiment's folder while it works on it (:func:`hold_experiment`).
The notebook's kernel is started by a kernel manager (:func:`kernel_manager_class`) that records
the kernel's identity in the folder at launch, so the next runner, which holds the lock and so knows
that kernel's runner is gone, stops it before touching the folder (:func:`stop_kernel`). The same
manager carries two workarounds: a shell channel that never sleeps through a reply, and no "TCP
without encryption" warning from a kernel on loopback.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roma_lab.results import (
    FolderBusyError,
    folder_lock,
    quarantine,
    read_regular_bytes,
    write_text_atomic,
)

KERNEL_FILE = ".kernel.json"  # the running kernel of this folder; hidden, so never hashed as an output
_KILL_WAIT_S = 30  # a SIGKILLed process is gone in milliseconds; this only guards against a hang


class RunnerStateError(RuntimeError):
    """Another runner holds the experiment, or a kernel left by a killed runner cannot be stopped."""


@contextlib.contextmanager
def hold_experiment(out_dir: Path):
    """Hold a lock on the experiment for this runner's lifetime (``roma_lab.results.folder_lock``, the lock
    ``evaluate`` takes on its folder: the OS drops it when the runner dies, even by kill -9). Holding it
    proves that a kernel recorded in the folder is an orphan."""
    lock = f".{out_dir.name}.lock"
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(folder_lock(out_dir.parent, lock, f"the notebook runner of {out_dir.name}"))
        except FolderBusyError as busy:
            raise RunnerStateError(f"another runner is running {out_dir.name} now ({busy.holder}; it holds "
                                   f"{out_dir.parent / lock}); wait for it to finish, or stop it and rerun") from None
        yield


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


def kernel_manager_class(out_dir: Path, kernel_env: Mapping[str, str]) -> type:
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


def stop_kernel(out_dir: Path) -> None:
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

