"""A cgroup for a process tree: memory (swap included) and process limits, kill, OOM report.

Standard kernel interface only (the cgroup file system; no cgexec, no systemd-run), root required.
Used by the code jail (``_sandbox.py``: one group per jailed call) and the MCP tool servers
(``_tools.py``: one group per server). design/sandbox.md says what it bounds.

- cgroup v2 (unified): ``memory.max``, ``memory.swap.max = 0``, ``pids.max``, ``cgroup.kill``. The
  ``roma_lab`` parent sits at the hierarchy root: below a process's own group, usually a leaf with
  processes, controllers cannot be enabled ("no internal processes").
- cgroup v1 (a memory and a pids hierarchy): ``memory.limit_in_bytes`` and
  ``memory.memsw.limit_in_bytes`` (memory + swap), ``pids.max``. Kill: ``pids.max = 0`` (no new
  process can start), then SIGKILL until the group is empty.
v2 is used when its mount has both controllers; else v1; else ``CgroupUnavailableError``.

Command line (``join_argv``): ``python -I -S <this file> exec DIR... -- ARGV...`` joins the
groups, calls setsid (unless already a session leader) and execs ARGV.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import secrets
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Cgroup", "CgroupUnavailableError", "cgroup_problem"]

_PARENT = "roma_lab"
_LABEL = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}-(\d+)-[0-9a-f]{8}")  # label-creator pid-random
_CONTROLLERS = ("memory", "pids")
_POLL_S = 0.005  # between checks that a killed group is empty: emptying takes milliseconds


class CgroupUnavailableError(RuntimeError):
    """No cgroup with memory and pids limits can be made here (says why and what to do)."""


@dataclass(frozen=True, slots=True)
class _Layout:
    version: int
    parents: tuple[str, ...]  # the roma_lab parent directory in each hierarchy used (v1: memory, pids)


@dataclass(frozen=True, slots=True)
class Cgroup:
    """One fresh cgroup (v2) or pair of cgroups (v1: memory, pids) for one process tree."""

    version: int
    paths: tuple[str, ...]

    @classmethod
    def create(cls, label: str, *, memory_bytes: int | None = None, max_pids: int | None = None) -> Cgroup:
        """A fresh, uniquely named group under the ``roma_lab`` parent with the given limits
        (None: no limit of its own). Raises ``CgroupUnavailableError`` when none can be made."""
        if not isinstance(label, str) or not _LABEL.fullmatch(label):
            raise ValueError(f"cgroup label must match {_LABEL.pattern}, got {label!r}")
        for name, value in (("memory_bytes", memory_bytes), ("max_pids", max_pids)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive int or None, got {value!r}")
        layout = _layout(os.geteuid())
        name = f"{label}-{os.getpid()}-{secrets.token_hex(4)}"
        paths = tuple(os.path.join(parent, name) for parent in layout.parents)
        group = cls(layout.version, paths)
        try:
            for path in paths:
                os.mkdir(path, 0o755)
            group._set_limits(memory_bytes, max_pids)
        except OSError as err:
            group.remove()
            raise CgroupUnavailableError(f"cannot create cgroup {paths}: {err}") from err
        return group

    def _set_limits(self, memory_bytes: int | None, max_pids: int | None) -> None:
        if self.version == 2:
            (path,) = self.paths
            if memory_bytes is not None:
                _write(path, "memory.max", memory_bytes)
                if os.path.exists(os.path.join(path, "memory.swap.max")):  # absent without swap accounting
                    _write(path, "memory.swap.max", 0)
            if max_pids is not None:
                _write(path, "pids.max", max_pids)
            return
        memory, pids = self.paths
        if memory_bytes is not None:
            _write(memory, "memory.limit_in_bytes", memory_bytes)  # before memsw: memsw >= limit
            if os.path.exists(os.path.join(memory, "memory.memsw.limit_in_bytes")):
                _write(memory, "memory.memsw.limit_in_bytes", memory_bytes)
        if max_pids is not None:
            _write(pids, "pids.max", max_pids)

    def join_current_process(self) -> None:
        """Move the calling process into the group(s). Safe as ``Popen(preexec_fn=...)``: plain
        os calls only, so the child joins before it execs anything."""
        pid = str(os.getpid()).encode()
        for path in self.paths:
            fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def join_argv(self, argv: list[str]) -> list[str]:
        """An argv that joins this group, calls setsid, then execs ``argv``: for launchers that take
        no ``preexec_fn`` (the MCP SDK's stdio client)."""
        if not argv:
            raise ValueError("join_argv needs a command to run, got an empty argv")
        # This file by path, stdlib only (-I -S): importing the package would cost ~0.6 s per start.
        return [sys.executable, "-I", "-S", os.path.abspath(__file__), "exec", *self.paths, "--", *argv]

    def pids(self) -> list[int]:
        """Processes in the group (v1: in either hierarchy), excluding zombies (already dead)."""
        found: set[int] = set()
        for path in self.paths:
            try:
                text = Path(path, "cgroup.procs").read_text()
            except FileNotFoundError:
                continue
            found.update(int(line) for line in text.split())
        return sorted(pid for pid in found if not _zombie(pid))

    def kill_all(self, timeout_s: float = 10.0) -> None:
        """SIGKILL every process of the group and return once none is left; ``TimeoutError`` if
        some remain after ``timeout_s`` (a process stuck in the kernel)."""
        deadline = time.monotonic() + timeout_s
        kill_file = os.path.join(self.paths[0], "cgroup.kill")
        if self.version == 2 and os.path.exists(kill_file):
            _write(self.paths[0], "cgroup.kill", 1)  # the kernel kills all, forks racing it included
            self._kill_until_empty(deadline, timeout_s)
            return
        pids_dir = self.paths[-1]  # v2 without cgroup.kill (< 5.14): its single dir
        limit = Path(pids_dir, "pids.max").read_text().strip()
        _write(pids_dir, "pids.max", 0)  # no fork can succeed meanwhile, so the loop ends
        try:
            self._kill_until_empty(deadline, timeout_s)
        finally:
            _write(pids_dir, "pids.max", limit)  # the group stays usable

    def _kill_until_empty(self, deadline: float, timeout_s: float) -> None:
        while remaining := self.pids():
            for pid in remaining:
                self._kill(pid)
            if time.monotonic() > deadline:
                raise TimeoutError(f"processes {remaining} of cgroup {self.paths[0]} still alive "
                                   f"{timeout_s:g} s after SIGKILL")
            time.sleep(_POLL_S)

    def _kill(self, pid: int) -> None:
        """SIGKILL ``pid`` if it is still ours: through a pidfd, checked after opening, so a pid
        reused by an unrelated process since ``pids()`` read it is never signalled."""
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        try:
            if any(line.split(":", 2)[2].strip() and self._owns(line.split(":", 2)[2].strip())
                   for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError):
            pass  # exited meanwhile
        finally:
            os.close(pidfd)

    def _owns(self, relative: str) -> bool:
        return any(path.endswith(relative) for path in self.paths if relative != "/")

    def oom_killed(self) -> bool:
        """Whether the kernel OOM-killed a process of this group for hitting its memory limit."""
        if self.version == 2:
            counters = _counters(self.paths[0], "memory.events")
            return counters.get("oom_kill", 0) > 0
        counters = _counters(self.paths[0], "memory.oom_control")
        if "oom_kill" in counters:
            return counters["oom_kill"] > 0
        # kernels before 4.13 have no oom_kill counter: hitting the limit is the nearest sign
        return int(Path(self.paths[0], "memory.failcnt").read_text()) > 0

    def remove(self) -> None:
        """Kill what is left, then remove the group's directories (idempotent)."""
        if all(os.path.isdir(p) for p in self.paths):  # else create() failed before anyone joined
            self.kill_all()
        for path in self.paths:
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError as err:
                if err.errno != errno.EBUSY:
                    raise
                # a killed process may leave the group a moment after it leaves cgroup.procs
                _rmdir_when_free(path)

    def __enter__(self) -> Cgroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def cgroup_problem() -> str | None:
    """Why no cgroup with memory and pids limits can be made here, or None (cached per process)."""
    return _problem(os.geteuid())


@functools.cache
def _problem(euid: int) -> str | None:
    try:
        with Cgroup.create("probe", memory_bytes=64 << 20, max_pids=8):
            pass
    except CgroupUnavailableError as err:
        return str(err)
    return None


@functools.cache
def _layout(euid: int) -> _Layout:
    """Find the hierarchies to use (v2 with both controllers, else v1), make the parent(s) and
    remove the empty groups of processes that died before removing theirs (kill -9)."""
    layout = _find_layout(euid)
    for parent in layout.parents:
        _sweep(parent)
    return layout


def _sweep(parent: str) -> None:
    for name in os.listdir(parent):
        found = _NAME.fullmatch(name)
        if found and not os.path.exists(f"/proc/{found.group(1)}"):
            with contextlib.suppress(OSError):  # still populated (then left alone) or removed meanwhile
                os.rmdir(os.path.join(parent, name))


def _find_layout(euid: int) -> _Layout:
    if euid != 0:
        raise CgroupUnavailableError("creating cgroups needs root (run as root, as CI and `make test` do)")
    v2, v1 = None, {}
    with open("/proc/self/mountinfo") as mounts:
        for line in mounts:
            fields = line.split()
            sep = fields.index("-")
            fstype, mount_point, options = fields[sep + 1], fields[4], fields[sep + 3].split(",")
            if fstype == "cgroup2" and v2 is None:
                v2 = mount_point
            elif fstype == "cgroup":
                for controller in _CONTROLLERS:
                    if controller in options:
                        v1.setdefault(controller, mount_point)
    problems = []
    if v2 is not None:
        available = Path(v2, "cgroup.controllers").read_text().split()
        missing = [c for c in _CONTROLLERS if c not in available]
        if not missing:
            try:
                return _Layout(2, (_v2_parent(v2),))
            except OSError as err:
                problems.append(f"cgroup v2 at {v2}: cannot enable memory and pids below the root ({err})")
        else:
            problems.append(f"cgroup v2 at {v2} lacks the {'/'.join(missing)} controller(s)")
    else:
        problems.append("no cgroup v2 mounted")
    if all(c in v1 for c in _CONTROLLERS):
        try:
            parents = []
            for controller in _CONTROLLERS:
                # Below the caller's own group (v1 allows processes beside child groups), so limits
                # and accounting that apply to the caller (a container's, a session's) apply to ours.
                parent = os.path.join(v1[controller], _own_group(controller).lstrip("/"), _PARENT)
                os.makedirs(parent, 0o755, exist_ok=True)
                parents.append(parent)
            return _Layout(1, tuple(parents))
        except OSError as err:
            problems.append(f"cgroup v1: cannot create {_PARENT} groups ({err})")
    else:
        problems.append("no cgroup v1 memory and pids hierarchies mounted")
    raise CgroupUnavailableError(
        "no writable cgroup with memory and pids controllers: " + "; ".join(problems) +
        ". Mount cgroup v2 with both controllers (the default of systemd hosts) or cgroup v1 memory "
        "and pids hierarchies, writable by root (a container needs --cgroupns=private or a delegated cgroup)")


def _own_group(controller: str) -> str:
    """This process's group in the v1 hierarchy of ``controller`` ("/" when none is named)."""
    with open("/proc/self/cgroup") as groups:
        for line in groups:
            _, names, path = line.rstrip("\n").split(":", 2)
            if controller in names.split(","):
                return path
    return "/"


def _v2_parent(mount_point: str) -> str:
    want = " ".join(f"+{c}" for c in _CONTROLLERS)
    if not set(_CONTROLLERS) <= set(Path(mount_point, "cgroup.subtree_control").read_text().split()):
        _write(mount_point, "cgroup.subtree_control", want)
    parent = os.path.join(mount_point, _PARENT)
    os.makedirs(parent, 0o755, exist_ok=True)
    _write(parent, "cgroup.subtree_control", want)  # the parent holds no process, only groups
    return parent


def _write(directory: str, name: str, value: object) -> None:
    with open(os.path.join(directory, name), "w") as f:
        f.write(str(value))


def _counters(directory: str, name: str) -> dict[str, int]:
    pairs = (line.split() for line in Path(directory, name).read_text().splitlines())
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2}


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True  # gone entirely
    return stat[stat.rindex(")") + 2] in "ZX"


def _rmdir_when_free(path: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as err:
            if err.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
        time.sleep(_POLL_S)


def _main(argv: list[str]) -> None:
    """``exec DIR... -- ARGV...``: join the groups, start a new session, exec ARGV."""
    if len(argv) < 4 or argv[0] != "exec" or "--" not in argv[1:-1]:
        sys.exit("usage: python _cgroup.py exec CGROUP_DIR... -- COMMAND [ARG...]")
    split = argv.index("--")
    paths, command = tuple(argv[1:split]), argv[split + 1:]
    if not paths or not all(os.path.isdir(p) for p in paths):
        sys.exit(f"roma_lab cgroup exec: not cgroup directories: {paths}")
    Cgroup(2 if len(paths) == 1 else 1, paths).join_current_process()
    if os.getsid(0) != os.getpid():  # a launcher may have made it a session leader already (the MCP SDK does)
        os.setsid()
    try:
        os.execvp(command[0], command)
    except OSError as err:
        sys.exit(f"roma_lab cgroup exec: cannot run {command[0]!r}: {err}")


if __name__ == "__main__":
    _main(sys.argv[1:])
