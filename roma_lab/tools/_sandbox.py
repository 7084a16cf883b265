"""Run model-written Python in an isolated, limited process (the ROMA `code` executor).

Two layers (design/sandbox.md says what each guarantees and what it does not):

1. The operating system. bubblewrap (``bwrap``, Debian package ``bubblewrap``): new PID,
   network, IPC, UTS and mount namespaces; a read-only view of only the interpreter, its
   virtualenv (both at fixed paths under ``/sandbox``, wherever the clone lives) and the system
   libraries; one private writable directory (the cwd, a size-bounded tmpfs that vanishes with the
   jail); an empty environment plus an allowlist; a seccomp filter (built with libseccomp) refusing
   the system calls a jail does not need (keyrings, new namespaces, mounts, ptrace, bpf, ...); and,
   before any user code, a switch to a fresh unprivileged uid without capabilities. A fresh cgroup
   per call (``_cgroup.py``) bounds memory (swap, tmpfs, shared memory, memfd and page cache
   included) and processes of the whole tree; the child joins it, and a fresh anonymous session
   keyring, before bwrap execs. When the call ends (timeout or not) the namespace's init is killed,
   which kills every process in it, and the cgroup is killed and removed.
2. Inside, a bootstrap that sets resource limits (address space, CPU seconds, file size, process
   count, no core dumps; hard limits lowered too) and installs a Python audit hook refusing
   sockets, subprocesses, exec and fork: clear error messages for the common cases, and a second
   wall should the first have a gap.

Isolation is chosen by name: ``"bwrap"`` (the default) or ``"audit-hook-only"`` (layer 2 alone, as
the current user, seeing the whole file system and network to any code that loads ``ctypes``).
When the jail cannot run (no bwrap, no root, no usable cgroup, no libseccomp), ``run_python`` raises
``SandboxUnavailableError`` rather than fall back: the weaker mode is used only when asked for, by
argument or ``$ROMA_LAB_SANDBOX``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import math
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from roma_lab._environment import ENV

from ._cgroup import Cgroup, CgroupUnavailableError, cgroup_problem

__all__ = ["ISOLATION_MODES", "SandboxResult", "SandboxUnavailableError", "check_sandbox", "run_python",
           "seccomp_program"]

ISOLATION_MODES = ("bwrap", "audit-hook-only")
_ISOLATION_ENV = ENV.sandbox

# Variables copied from the parent when present; everything else is dropped.
_ENV_ALLOWLIST = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")

# Paths inside the jail, the same wherever the clone, its venv and the interpreter live. The script
# is a read-only copy next to the writable cwd; the base interpreter and the venv have fixed homes.
_JAIL_DIR = "/sandbox"
_JAIL_SCRIPT = f"{_JAIL_DIR}/main.py"
_JAIL_WORKDIR = f"{_JAIL_DIR}/work"
_JAIL_PYTHON = f"{_JAIL_DIR}/python"  # the base interpreter's prefix (its bin/python3 and lib dirs)
_JAIL_VENV = f"{_JAIL_DIR}/venv"  # the virtualenv's lib dirs, and a pyvenv.cfg whose home is _JAIL_PYTHON
# System library directories the interpreter and compiled packages load from (symlinks on merged-/usr).
_SYSTEM_LIBS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64")
# Each call runs under its own uid from this range, so RLIMIT_NPROC counts only that call's
# processes; two calls drawing the same uid (1 in 2**24) would merely share one process budget.
_UID_BASE, _UID_SPAN = 1 << 30, 1 << 24

_FILE_SIZE_LIMIT = 16 * 1024 * 1024  # bounds stdout/stderr files and anything the code writes
_WORKDIR_BYTES = 64 * 1024 * 1024  # the jail's cwd: bounds all files together (RAM, not disk)
_SIGNAL_NUMBERS = frozenset(int(s) for s in signal.Signals)
_KILL_WAIT_S = 30.0  # a SIGKILLed namespace empties in milliseconds; beyond this something is wrong
# bwrap's monitor and the namespace's init are in the cgroup too, next to the code's processes.
_BWRAP_PROCESSES = 2
# Control characters other than newline and tab (C0, DEL, C1) are shown escaped, never passed on:
# output goes to terminals, notebooks and prompts.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_KEYCTL_JOIN_SESSION_KEYRING = 1

# System calls the jail refuses with EPERM (design/sandbox.md lists why): the interpreter needs a
# broad set, so the filter allows by default and refuses these.
_REFUSED_SYSCALLS = (
    # kernel keyrings
    "keyctl", "add_key", "request_key",
    # new namespaces (clone and clone3 are handled apart: clone by its flags, clone3 with ENOSYS)
    "unshare", "setns",
    # mounts and the root
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr",
    # other processes' memory, file descriptors and kernel objects
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # kernel attack surface no Python code needs
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "open_by_handle_at", "name_to_handle_at", "fanotify_init", "lookup_dcookie", "uselib", "personality",
    # the machine itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon",
    "swapoff", "acct", "quotactl", "quotactl_fd", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "syslog", "sethostname", "setdomainname", "vhangup", "iopl", "ioperm",
)
# CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET
_CLONE_NEW_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)

# Runs in the child before the user code.
# Arguments: address space, CPU seconds, file size, process count, uid (-1: keep), status fd (-1:
# none), user script. In the jail the bootstrap starts as the namespace's PID 1 (bwrap --as-pid-1),
# still root: it forks the code's process and writes that process's wait status, as the kernel gave
# it, to the status fd. The code's process closes the fd first and then runs under a uid of its own,
# which cannot reach a root process's descriptors: the code can end, never write its own status.
_BOOTSTRAP = r"""
import os, resource, runpy, socket, sys
as_bytes, cpu_s, fsize, nproc, uid, status_fd = (int(v) for v in sys.argv[1:7])
script = sys.argv[7]

if status_fd >= 0:
    child = os.fork()
    if child:
        while True:
            pid, status = os.waitpid(-1, 0)  # PID 1 reaps every orphan of the jail too
            if pid == child:
                os.write(status_fd, str(status).encode())
                os._exit(0)
    os.close(status_fd)

def _limit(kind, value):
    hard = resource.getrlimit(kind)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))

for kind, value in ((resource.RLIMIT_AS, as_bytes), (resource.RLIMIT_CPU, cpu_s),
                    (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_CORE, 0)):
    _limit(kind, value)
if uid >= 0:
    # In the jail: become an unprivileged uid of our own. RLIMIT_NPROC means nothing for root,
    # hence it is set only here; the kernel clears every capability on the switch.
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _limit(resource.RLIMIT_NPROC, nproc)
    with open("/proc/self/status") as status:
        caps = [line.split() for line in status if line.startswith(("CapPrm", "CapEff", "CapAmb"))]
    if any(int(value, 16) for _, value in caps) or os.getuid() != uid:
        sys.exit("roma_lab sandbox: privileges remain after dropping root; refusing to run the code")

_BLOCKED_PREFIXES = ("subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork",
                     "os.forkpty", "os.system", "pty.spawn")
_NETWORK_EVENTS = ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                   "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr")

_OWN_PROC = ("/proc/self", "/proc/thread-self", f"/proc/{os.getpid()}")

def _other_process(path):
    # /proc/<pid>/environ of the parent holds the secrets stripped from our environment
    real = os.path.realpath(os.fsdecode(path))
    parts = real.split("/")
    return len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit() and not real.startswith(_OWN_PROC)

def _audit(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)) and _other_process(args[0]):
        raise PermissionError("other processes' /proc entries are not readable in the roma_lab sandbox")
    # AF_UNIX socketpairs stay allowed: asyncio's event loop needs them and they reach nothing.
    if event == "socket.__new__" and args[1] != socket.AF_UNIX:
        raise PermissionError("network access is disabled in the roma_lab sandbox")
    if event in _NETWORK_EVENTS:
        raise PermissionError("network access is disabled in the roma_lab sandbox")
    if event.startswith(_BLOCKED_PREFIXES):
        raise PermissionError(f"{event} is disabled in the roma_lab sandbox")

sys.addaudithook(_audit)
sys.argv = [script]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit:
    raise
except BaseException as exc:
    # Show only the user's frames: the bootstrap's are noise to whoever reads the error.
    import traceback
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)
    sys.exit(1)
"""


class SandboxUnavailableError(RuntimeError):
    """The OS jail cannot run here, so model-written code is refused (not run more weakly)."""


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """Outcome of one sandboxed run. ``error`` is None only for a clean exit with code 0."""

    stdout: str
    stderr: str
    returncode: int
    timed_out: bool
    error: str | None


def check_sandbox(isolation: str | None = None) -> str:
    """Resolve the isolation mode (argument, else ``$ROMA_LAB_SANDBOX``, else ``"bwrap"``).

    For ``"bwrap"``, check once per process that the jail really starts here; raise
    ``SandboxUnavailableError`` saying why and how to fix it otherwise. Raise ``ValueError`` for an
    unknown mode name.
    """
    mode = isolation if isolation is not None else os.environ.get(_ISOLATION_ENV) or "bwrap"
    if mode not in ISOLATION_MODES:
        raise ValueError(f"unknown sandbox isolation {mode!r}; choose one of {ISOLATION_MODES}")
    if mode == "bwrap":
        problem = _jail_problem(shutil.which("bwrap"), os.geteuid())
        if problem is not None:
            raise SandboxUnavailableError(
                f"model-written code refused: OS isolation is unavailable ({problem}). Fix that, or "
                f"accept the weaker, audit-hook-only sandbox by name: isolation='audit-hook-only' "
                f"or {_ISOLATION_ENV}=audit-hook-only.")
    return mode


def run_python(
    code: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 512,
    max_output_chars: int = 20_000,
    max_processes: int = 8,
    isolation: str | None = None,
) -> SandboxResult:
    """Run ``code`` as a script in a fresh isolated, limited process and return what it printed.

    Never raises for failures of the code itself (syntax error, exception, timeout, memory or
    CPU exhaustion): those are reported in the result. Raises ``TypeError``/``ValueError`` for
    invalid arguments and ``SandboxUnavailableError`` when the requested isolation cannot run.
    ``max_processes`` bounds processes plus threads (the jail only: root ignores the limit).
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str, got {type(code).__name__}")
    if not 0 < timeout_s < math.inf:
        raise ValueError(f"timeout_s must be finite and > 0, got {timeout_s!r}")
    if not memory_mb >= 64:
        raise ValueError(f"memory_mb must be >= 64 (the interpreter alone needs ~30 MB), got {memory_mb!r}")
    if not max_output_chars > 0:
        raise ValueError(f"max_output_chars must be > 0, got {max_output_chars!r}")
    if not max_processes >= 1:
        raise ValueError(f"max_processes must be >= 1, got {max_processes!r}")
    if check_sandbox(isolation) == "bwrap":
        return _run(code, timeout_s, memory_mb, max_output_chars, max_processes, shutil.which("bwrap"))
    warnings.warn("model-written code runs WITHOUT OS isolation (isolation='audit-hook-only'): code that "
                  "loads ctypes can read and write files, reach the network and outlive the call",
                  RuntimeWarning, stacklevel=2)
    return _run(code, timeout_s, memory_mb, max_output_chars, max_processes, None)


_PACKAGE = __name__.split(".")[0]
_SELF_TEST = (f"try:\n    import {_PACKAGE}\nexcept ImportError:\n    pass\n"
              f"else:\n    raise SystemExit('{_PACKAGE} is importable in the jail')")
# An empty directory where the package was would import as a namespace package: the directory holds
# this instead, so the import fails as a missing module's does.
_PACKAGE_STUB = (f"raise ModuleNotFoundError({f'No module named {_PACKAGE!r} (the roma_lab sandbox hides it)'!r}, "
                 f"name={_PACKAGE!r})\n")


@functools.cache
def _jail_problem(bwrap: str | None, euid: int) -> str | None:
    """Why the jail cannot run here, or None. Cached per bwrap path and user: it runs a process."""
    if bwrap is None:
        return ("bwrap is not installed: install bubblewrap (`apt-get install bubblewrap`; "
                "`make test` does it when run as root)")
    if euid != 0:
        # Without root there is no uid of our own to switch to, hence no process limit that holds.
        return "the jail needs root, to run the code under a uid of its own and in a cgroup of its own"
    problem = cgroup_problem()
    if problem is not None:
        # Without a cgroup, memory outside any process (tmpfs, shared memory, memfd) is unbounded.
        return f"the jail needs a cgroup to bound its memory and processes: {problem}"
    try:
        seccomp_program()
    except (ImportError, OSError, AttributeError) as err:
        return (f"the jail's seccomp filter cannot be built ({type(err).__name__}: {err}): install "
                f"libseccomp (`apt-get install libseccomp2`) and pyseccomp (`pip install pyseccomp`)")
    try:
        # the self-test checks the jail's promise that matters most to a benchmark: no roma_lab inside
        result = _run(_SELF_TEST, 30.0, 128, 2000, 1, bwrap)
    except SandboxUnavailableError as err:
        return str(err)
    return None if result.error is None else f"the jail's self-test failed: {result.error}"


@functools.cache
def seccomp_program() -> bytes:
    """The jail's seccomp filter as a BPF program, for ``bwrap --seccomp`` (built once per process).

    Default allow; the calls of ``_REFUSED_SYSCALLS`` fail with EPERM, ``clone`` too when it asks for
    any new namespace, and ``clone3`` with ENOSYS (its flags sit in memory a filter cannot read), so
    glibc falls back to ``clone``. Only the native architecture is allowed: a call through another
    ABI (i386 ``int 0x80``, x32) kills the process (libseccomp's bad-architecture action).
    """
    import pyseccomp  # loads libseccomp: only the jail needs it

    syscall_filter = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    syscall_filter.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.KILL_PROCESS)
    refuse = pyseccomp.ERRNO(errno.EPERM)
    for name in _REFUSED_SYSCALLS:
        if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) >= 0:  # absent on this architecture
            syscall_filter.add_rule(refuse, name)
    for flag in _CLONE_NEW_FLAGS:
        syscall_filter.add_rule(refuse, "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
    syscall_filter.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as program:
        syscall_filter.export_bpf(program)
        program.seek(0)
        return program.read()


@dataclass(frozen=True, slots=True)
class _Interpreter:
    """Where this interpreter's files are on the host, for the jail's fixed view of them."""

    executable: str  # the real base interpreter binary (links resolved)
    binds: tuple[tuple[str, str], ...]  # (host dir, jail dir): the stdlib, libpython and venv lib dirs
    library_path: str | None  # LD_LIBRARY_PATH in the jail, for a libpython found by an absolute RUNPATH
    venv_cfg: str | None  # the jail's pyvenv.cfg (home = the fixed base), None outside a venv
    jail_executable: str
    hidden: tuple[str, ...]  # jail paths covered by an empty directory: this package, its installed metadata
    stubbed: tuple[str, ...]  # of those, the package's own: an __init__.py there refuses the import


@functools.cache
def _interpreter() -> _Interpreter:
    """The host paths of the interpreter and its venv, links resolved (a symlinked .venv, pyenv,
    merged /usr alike), mapped onto fixed paths in the jail."""
    base = os.path.realpath(sys.base_prefix)
    executable = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    binds: list[tuple[str, str]] = []

    def bind(host: str, root: str, jail_root: str) -> str:
        # the top directory of ``host`` below ``root`` (lib, lib64), bound at the same place below jail_root
        top = os.path.relpath(os.path.realpath(host), root).split(os.sep)[0]
        if top in (os.curdir, os.pardir):
            raise SandboxUnavailableError(f"{host} is not inside {root}: the jail cannot map it to {jail_root}")
        pair = (os.path.join(root, top), f"{jail_root}/{top}")
        if pair not in binds:
            binds.append(pair)
        return pair[1]

    for key in ("stdlib", "platstdlib"):
        bind(sysconfig.get_paths(vars=dict.fromkeys(("base", "platbase", "installed_base", "installed_platbase"), base))[key],
             base, _JAIL_PYTHON)
    library_path = None
    libdir = sysconfig.get_config_var("LIBDIR")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and libdir and os.path.realpath(libdir).startswith(base + os.sep):
        bind(libdir, base, _JAIL_PYTHON)
        library_path = f"{_JAIL_PYTHON}/{os.path.relpath(os.path.realpath(libdir), base)}"
    venv_cfg, jail_executable = None, f"{_JAIL_PYTHON}/bin/python3"
    if sys.prefix != sys.base_prefix:
        prefix = os.path.realpath(sys.prefix)
        for key in ("purelib", "platlib"):
            bind(sysconfig.get_paths()[key], prefix, _JAIL_VENV)
        cfg = Path(prefix, "pyvenv.cfg").read_text(encoding="utf-8")
        system_site = re.search(r"^\s*include-system-site-packages\s*=\s*(\w+)", cfg, re.MULTILINE | re.IGNORECASE)
        venv_cfg = (f"home = {_JAIL_PYTHON}/bin\n"
                    f"include-system-site-packages = {system_site.group(1) if system_site else 'false'}\n"
                    f"version = {'.'.join(map(str, sys.version_info[:3]))}\n")
        jail_executable = f"{_JAIL_VENV}/bin/python3"
    system = [(path, path) for path in _SYSTEM_LIBS if os.path.isdir(path) and not os.path.islink(path)]
    hidden = _jail_paths(_package_paths(), [*system, *binds])
    stubbed = tuple(path for path in hidden if os.path.basename(path) == _PACKAGE)
    return _Interpreter(executable, tuple(binds), library_path, venv_cfg, jail_executable, hidden, stubbed)


def _package_paths() -> set[str]:
    """Host directories of this package's code, data and installed metadata, links resolved: the
    package it was imported from, the checkout it sits in (if it does) and ``$ROMA_LAB_DATA``, and for
    every installed distribution of it the package's copy (a non-editable install's, in site-packages)
    and its dist-info. Code in the jail must not import the package or read its data: it could
    recompute what the package knows (the generated world's golds). Directories the distribution
    shares with others (site-packages' __pycache__) are not its own and stay."""
    import importlib.metadata

    package = Path(__file__).resolve().parents[1]
    paths = {os.path.realpath(package)}
    if (package.parent / "pyproject.toml").is_file():  # a checkout (editable or PYTHONPATH), not site-packages
        paths.add(os.path.realpath(package.parent))
    if os.environ.get(ENV.data):
        paths.add(os.path.realpath(os.environ[ENV.data]))
    for dist in importlib.metadata.distributions(name=_PACKAGE):
        for top in {file.parts[0] for file in dist.files or ()}:
            if top == _PACKAGE or (top.startswith(f"{_PACKAGE}-") and top.endswith((".dist-info", ".egg-info"))):
                paths.add(os.path.realpath(dist.locate_file(top)))
    return {path for path in paths if os.path.isdir(path)}


def _jail_paths(host_paths: set[str], binds: list[tuple[str, str]]) -> tuple[str, ...]:
    """Where each of ``host_paths`` shows in the jail through ``binds`` (host dir, jail dir), every
    place it shows; a path under no bind is not in the jail and needs nothing."""
    found = []
    for host_dir, jail_dir in binds:
        real = os.path.realpath(host_dir)
        for path in sorted(host_paths):
            if path == real or path.startswith(real + os.sep):
                found.append(jail_dir + path[len(real):])
    return tuple(dict.fromkeys(found))


def _run(code: str, timeout_s: float, memory_mb: int, max_output_chars: int, max_processes: int,
         bwrap: str | None) -> SandboxResult:
    """Run in the bwrap jail when ``bwrap`` is a path, else in a plain audit-hook child."""
    with tempfile.TemporaryDirectory(prefix="roma_sandbox_") as root, contextlib.ExitStack() as stack:
        script = Path(root, "main.py")
        script.write_text(code, encoding="utf-8")
        out_path, err_path = Path(root, "stdout.txt"), Path(root, "stderr.txt")
        uid = _UID_BASE + secrets.randbelow(_UID_SPAN) if bwrap else -1
        status_r, status_w = os.pipe() if bwrap else (-1, -1)  # the jail's init reports through it
        if bwrap:
            stack.callback(os.close, status_r)
            stack.callback(os.close, status_w)
        limits = (memory_mb * 1024 * 1024, int(timeout_s) + 1, _FILE_SIZE_LIMIT, max_processes, uid, status_w)
        workdir = Path(root, "work")  # the audit-hook-only mode's cwd; the jail's is its own tmpfs
        home = _JAIL_WORKDIR if bwrap else str(workdir)
        env = {k: os.environ[k] for k in _ENV_ALLOWLIST if k in os.environ}
        # One BLAS/OpenMP thread: thread pools reserve address space and would trip RLIMIT_AS.
        env |= {"HOME": home, "TMPDIR": home, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1"}
        bootstrap = ["-I", "-X", "utf8", "-c", _BOOTSTRAP, *map(str, limits)]
        oom_killed = False
        with out_path.open("wb") as out, err_path.open("wb") as err:
            if bwrap:
                interpreter = _interpreter()
                if interpreter.library_path:
                    env["LD_LIBRARY_PATH"] = interpreter.library_path
                data = {name: stack.enter_context(open(path, "rb")) for name, path in _jail_files(root, interpreter)}
                group = stack.enter_context(_jail_cgroup(memory_mb, max_processes))
                argv = [bwrap, *_jail_args(interpreter, {k: f.fileno() for k, f in data.items()}, env)]
                returncode, timed_out = _run_jailed(argv, [interpreter.jail_executable, *bootstrap, _JAIL_SCRIPT],
                                                    out, err, timeout_s, group,
                                                    (status_w, *(f.fileno() for f in data.values())))
                if returncode is not None:
                    returncode = _jailed_exit(returncode, status_r)
                oom_killed = group.oom_killed()
            else:
                workdir.mkdir()
                returncode, timed_out = _run_plain([sys.executable, *bootstrap, str(script)], env, workdir, out,
                                                   err, timeout_s)
        stdout = _read_bounded(out_path, max_output_chars)
        stderr = _read_bounded(err_path, max_output_chars)
        # measured here, not told: RLIMIT_FSIZE stops the output files at exactly this size
        output_full = max(out_path.stat().st_size, err_path.stat().st_size) >= _FILE_SIZE_LIMIT
    if returncode is None:
        raise SandboxUnavailableError(f"bwrap did not start the jail: {stderr.strip() or 'no message'}")
    return SandboxResult(stdout, stderr, returncode, timed_out,
                         _describe(returncode, timed_out, timeout_s, memory_mb, stderr, output_full, oom_killed))


def _jailed_exit(bwrap_code: int, status_r: int) -> int:
    """The code's exit as Popen reports one (exit code N, or -N for signal N), from the wait status the
    jail's init wrote. Without one (the init was killed: a timeout, the cgroup's OOM killer) bwrap's
    own code stands; it reports a process killed by signal N as 128 + N, so it is read back as -N."""
    os.set_blocking(status_r, False)
    try:
        status = os.read(status_r, 64)
    except BlockingIOError:
        status = b""
    if status:
        if not status.isdigit():  # only the init writes here; anything else is a breach, said loudly
            raise RuntimeError(f"the jail's status pipe holds {status[:64]!r}, not a wait status")
        return os.waitstatus_to_exitcode(int(status))
    return -(bwrap_code - 128) if bwrap_code - 128 in _SIGNAL_NUMBERS else bwrap_code


@contextlib.contextmanager
def _jail_cgroup(memory_mb: int, max_processes: int):
    """A fresh cgroup for one call: memory (swap included) for the whole tree, processes plus threads."""
    try:
        group = Cgroup.create("jail", memory_bytes=memory_mb * 1024 * 1024,
                              max_pids=max_processes + _BWRAP_PROCESSES)
    except CgroupUnavailableError as err:
        raise SandboxUnavailableError(f"the jail's cgroup cannot be created: {err}") from err
    with group:
        yield group


def _jail_files(root: str, interpreter: _Interpreter) -> list[tuple[str, Path]]:
    """Files copied into the jail by bwrap (``--ro-bind-data``), so that no host path of theirs shows
    in the jail's /proc/self/mountinfo: the script, the seccomp program, the venv's pyvenv.cfg."""
    files = [("script", Path(root, "main.py"))]
    program = Path(root, "seccomp.bpf")
    program.write_bytes(seccomp_program())
    files.append(("seccomp", program))
    if interpreter.venv_cfg is not None:
        cfg = Path(root, "pyvenv.cfg")
        cfg.write_text(interpreter.venv_cfg, encoding="utf-8")
        files.append(("venv_cfg", cfg))
    if interpreter.stubbed:
        stub = Path(root, "package_stub.py")
        stub.write_text(_PACKAGE_STUB, encoding="utf-8")
        files += [(f"stub{i}", stub) for i in range(len(interpreter.stubbed))]  # bwrap reads each fd once
    return files


def _jail_args(interpreter: _Interpreter, fds: dict[str, int], env: dict[str, str]) -> list[str]:
    """bwrap options: namespaces, seccomp, the read-only file system view, the private cwd, the environment."""
    # --as-pid-1: the bootstrap is the namespace's init, the one that reports how the code ended
    args = ["--unshare-pid", "--as-pid-1", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv", "--seccomp", str(fds["seccomp"]),
            # Root keeps every capability in bwrap unless told otherwise; the bootstrap needs these
            # two to switch to its own uid, after which the kernel drops them too.
            "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    # System libraries (symlinks on merged-/usr), at their own paths: compiled packages load from them.
    for path in _SYSTEM_LIBS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += [*_parent_dirs(path), "--ro-bind", path, path]
    # The interpreter and the venv at fixed paths: the binary, the stdlib and libpython dirs, the
    # venv's site-packages dirs and its pyvenv.cfg (whose home is the fixed base).
    args += [*_parent_dirs(interpreter.jail_executable), "--ro-bind", interpreter.executable, interpreter.jail_executable]
    for host, jail in interpreter.binds:
        args += [*_parent_dirs(jail), "--ro-bind", host, jail]
    if "venv_cfg" in fds:
        args += ["--perms", "0444", "--ro-bind-data", str(fds["venv_cfg"]), f"{_JAIL_VENV}/pyvenv.cfg"]
    # this package (a non-editable install puts it in site-packages) and its metadata: empty, read-only
    for path in interpreter.hidden:
        args += ["--perms", "0555", "--size", "65536", "--tmpfs", path]
        if path in interpreter.stubbed:
            fd = fds[f"stub{interpreter.stubbed.index(path)}"]
            args += ["--perms", "0444", "--ro-bind-data", str(fd), f"{path}/__init__.py"]
        args += ["--remount-ro", path]
    args += ["--proc", "/proc", "--dev", "/dev", *_parent_dirs(_JAIL_SCRIPT),
             "--perms", "0444", "--ro-bind-data", str(fds["script"]), _JAIL_SCRIPT,
             "--perms", "01777", "--size", str(_WORKDIR_BYTES), "--tmpfs", _JAIL_WORKDIR, "--chdir", _JAIL_WORKDIR]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args


def _parent_dirs(path: str) -> list[str]:
    """Create ``path``'s parents traversable: bwrap would otherwise make them 0700 (root only)."""
    args = []
    for parent in reversed(Path(path).parents[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


@functools.cache
def _keyctl() -> tuple[ctypes.CDLL, int]:
    import pyseccomp  # its syscall table gives keyctl's number on this architecture

    return ctypes.CDLL(None, use_errno=True), pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "keyctl")


def _enter_jail_child(group: Cgroup, libc: ctypes.CDLL, keyctl: int) -> None:
    """In the forked child, before bwrap execs: join the call's cgroup and a fresh anonymous
    session keyring, so the jail never holds the parent's keys (seccomp comes later, with bwrap)."""
    group.join_current_process()
    if libc.syscall(keyctl, _KEYCTL_JOIN_SESSION_KEYRING, None) < 0 and ctypes.get_errno() != errno.ENOSYS:
        raise OSError(ctypes.get_errno(), "keyctl(KEYCTL_JOIN_SESSION_KEYRING) failed")


def _run_jailed(bwrap: list[str], command: list[str], out, err, timeout_s: float, group: Cgroup,
                pass_fds: tuple[int, ...]) -> tuple[int | None, bool]:
    """Run ``command`` in bwrap, in ``group``; on return every process of the jail is gone.
    Returncode: bwrap's own exit code; None: bwrap failed before starting the jail."""
    deadline = time.monotonic() + timeout_s
    libc, keyctl = _keyctl()
    info_r, info_w = os.pipe()
    try:
        proc = subprocess.Popen([*bwrap, "--info-fd", str(info_w), "--", *command], env={},
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=(info_w, *pass_fds),
                                start_new_session=True,
                                preexec_fn=functools.partial(_enter_jail_child, group, libc, keyctl))
    except subprocess.SubprocessError as exc:  # the preexec step failed: no jail without its cgroup
        os.close(info_r)
        raise SandboxUnavailableError(f"the jail's child could not join its cgroup and keyring: {exc}") from exc
    finally:
        os.close(info_w)
    init = None
    try:
        # bwrap writes the pid of the namespace's init, then closes the pipe (or exits on failure).
        info = _read_until_eof(info_r, deadline)
        if info is not None and info.strip():
            try:
                init = os.pidfd_open(json.loads(info)["child-pid"])
            except ProcessLookupError:
                pass  # already gone, and everything in its namespace with it
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
    finally:
        os.close(info_r)
        if init is not None:
            _kill_namespace(init)
        _kill_group(proc)
        group.kill_all(_KILL_WAIT_S)
    if info is not None and not info.strip():
        return None, False
    return proc.returncode, timed_out


def _ready(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` is readable (or closed) within ``timeout_s``. poll, not select: select refuses a
    descriptor numbered 1024 or more, which a long-lived process (a notebook kernel, a test session)
    can reach."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(max(timeout_s, 0.0) * 1000))


def _read_until_eof(fd: int, deadline: float) -> bytes | None:
    """Everything written to ``fd`` until EOF, or None if the deadline passes first."""
    data = b""
    while _ready(fd, deadline - time.monotonic()):
        chunk = os.read(fd, 4096)
        if not chunk:
            return data
        data += chunk
    return None


def _kill_namespace(pidfd: int) -> None:
    """SIGKILL the namespace's init and wait until it is gone. The kernel kills every other
    process of a PID namespace when its init dies, and reports init gone only after them."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        if not _ready(pidfd, _KILL_WAIT_S):
            raise RuntimeError(f"sandbox processes still alive {_KILL_WAIT_S:g} s after SIGKILL")
    except ProcessLookupError:
        pass
    finally:
        os.close(pidfd)


def _run_plain(argv: list[str], env: dict[str, str], workdir: Path, out, err, timeout_s: float) -> tuple[int, bool]:
    proc = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                            start_new_session=True)
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_group(proc)
    return proc.returncode, timed_out


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child's whole process group (it may have left background children) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _read_bounded(path: Path, max_chars: int) -> str:
    """The file's text, truncated to ``max_chars``, control characters but newline and tab escaped."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(max_chars * 4)  # utf-8 is at most 4 bytes a character
    text = head.decode("utf-8", errors="replace")
    truncated = len(text) > max_chars or size > len(head)
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text[:max_chars])
    return text + f"\n[... output truncated: {size} bytes in total]" if truncated else text


def _describe(returncode: int, timed_out: bool, timeout_s: float, memory_mb: int, stderr: str,
              output_full: bool, oom_killed: bool) -> str | None:
    """The error of a run, from what the kernel reported (the exit status, the cgroup's OOM kills) and
    what the parent measured (the clock, the output files at their size limit), never from anything
    the code can print or write. A MemoryError at the address-space limit is the code's own exit
    ("exited with code 1: MemoryError"): only the code's process knows it happened."""
    oom = f"memory limit of {memory_mb} MB exceeded (the jail's cgroup killed a process at its limit)"
    if timed_out:  # a process killed at the limit often leaves the others waiting for it
        return f"{oom}, then timed out after {timeout_s:g} s" if oom_killed else f"timed out after {timeout_s:g} s"
    if oom_killed:  # even when the main process exits 0: a helper it forked died at the limit
        return oom if returncode != 0 else f"{oom}; the main process exited 0 without it"
    if returncode == 0:
        return None
    if returncode == -signal.SIGXCPU:
        return "CPU time limit exceeded"
    # Python ignores SIGXFSZ, so the limit shows as EFBIG; native code may still get the signal
    if returncode == -signal.SIGXFSZ or output_full:
        return f"file size limit of {_FILE_SIZE_LIMIT // (1024 * 1024)} MB exceeded (output too large?)"
    if returncode < 0:
        return f"killed by signal {signal.Signals(-returncode).name}"
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    return f"exited with code {returncode}" + (f": {last}" if last else "")
