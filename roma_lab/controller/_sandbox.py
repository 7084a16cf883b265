"""Run model-written Python in an isolated, limited process (the ROMA `code` executor).

Two layers (design/sandbox.md says what each guarantees and what it does not):

1. The operating system, through bubblewrap (``bwrap``, Debian package ``bubblewrap``): new PID,
   network, IPC, UTS and mount namespaces; a read-only view of only the interpreter, its
   virtualenv and the system libraries; one private writable directory (the cwd, a size-bounded
   tmpfs that vanishes with the jail); an empty environment plus an allowlist; and, before any
   user code, a switch to a fresh unprivileged uid without capabilities, so file permissions and
   ``RLIMIT_NPROC`` apply. When the call ends (timeout or not) the namespace's init is killed,
   which kills every process in it; the call returns only once they are gone.
2. Inside, a bootstrap that sets resource limits (address space, CPU seconds, file size, process
   count, no core dumps; hard limits lowered too) and installs a Python audit hook refusing
   sockets, subprocesses, exec and fork: clear error messages for the common cases, and a second
   wall should the first have a gap.

Isolation is chosen by name: ``"bwrap"`` (the default) or ``"audit-hook-only"`` (layer 2 alone, as
the current user, seeing the whole file system and network to any code that loads ``ctypes``).
When the jail cannot run, ``run_python`` raises ``SandboxUnavailableError`` rather than fall back:
the weaker mode is used only when asked for, by argument or ``$ROMA_LAB_SANDBOX``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ISOLATION_MODES", "SandboxResult", "SandboxUnavailableError", "check_sandbox", "run_python"]

ISOLATION_MODES = ("bwrap", "audit-hook-only")
_ISOLATION_ENV = "ROMA_LAB_SANDBOX"

# Variables copied from the parent when present; everything else is dropped.
_ENV_ALLOWLIST = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")

# Paths inside the jail. The script is mounted read-only next to the writable cwd.
_JAIL_DIR = "/sandbox"
_JAIL_SCRIPT = f"{_JAIL_DIR}/main.py"
_JAIL_WORKDIR = f"{_JAIL_DIR}/work"
# System library directories the interpreter and compiled packages load from (symlinks on merged-/usr).
_SYSTEM_LIBS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64")
# Each call runs under its own uid from this range, so RLIMIT_NPROC counts only that call's
# processes; two calls drawing the same uid (1 in 2**24) would merely share one process budget.
_UID_BASE, _UID_SPAN = 1 << 30, 1 << 24

_FILE_SIZE_LIMIT = 16 * 1024 * 1024  # bounds stdout/stderr files and anything the code writes
_WORKDIR_BYTES = 64 * 1024 * 1024  # the jail's cwd: bounds all files together (RAM, not disk)
_SIGNAL_NUMBERS = frozenset(int(s) for s in signal.Signals)
_KILL_WAIT_S = 30.0  # a SIGKILLed namespace empties in milliseconds; beyond this something is wrong

# Runs in the child before the user code.
# Arguments: address space, CPU seconds, file size, process count, uid (-1: keep), user script.
_BOOTSTRAP = r"""
import os, resource, runpy, socket, sys
as_bytes, cpu_s, fsize, nproc, uid = (int(v) for v in sys.argv[1:6])
script = sys.argv[6]

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
                f"model-written code refused: OS isolation is unavailable ({problem}). Install "
                f"bubblewrap (`apt-get install bubblewrap`; `make test` does it when run as root), or "
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


@functools.cache
def _jail_problem(bwrap: str | None, euid: int) -> str | None:
    """Why the jail cannot run here, or None. Cached per bwrap path and user: it runs a process."""
    if bwrap is None:
        return "bwrap is not installed"
    if euid != 0:
        # Without root there is no uid of our own to switch to, hence no process limit that holds.
        return "the jail needs root, to run the code under a uid of its own"
    try:
        result = _run("pass", 30.0, 128, 2000, 1, bwrap)
    except SandboxUnavailableError as err:
        return str(err)
    return None if result.error is None else f"the jail's self-test failed: {result.error}"


def _run(code: str, timeout_s: float, memory_mb: int, max_output_chars: int, max_processes: int,
         bwrap: str | None) -> SandboxResult:
    """Run in the bwrap jail when ``bwrap`` is a path, else in a plain audit-hook child."""
    with tempfile.TemporaryDirectory(prefix="roma_sandbox_") as root:
        script = Path(root, "main.py")
        script.write_text(code, encoding="utf-8")
        out_path, err_path = Path(root, "stdout.txt"), Path(root, "stderr.txt")
        uid = _UID_BASE + secrets.randbelow(_UID_SPAN) if bwrap else -1
        limits = (memory_mb * 1024 * 1024, int(timeout_s) + 1, _FILE_SIZE_LIMIT, max_processes, uid)
        workdir = Path(root, "work")  # the audit-hook-only mode's cwd; the jail's is its own tmpfs
        home = _JAIL_WORKDIR if bwrap else str(workdir)
        env = {k: os.environ[k] for k in _ENV_ALLOWLIST if k in os.environ}
        # One BLAS/OpenMP thread: thread pools reserve address space and would trip RLIMIT_AS.
        env |= {"HOME": home, "TMPDIR": home, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1"}
        python = [sys.executable, "-I", "-X", "utf8", "-c", _BOOTSTRAP, *map(str, limits)]
        with out_path.open("wb") as out, err_path.open("wb") as err:
            if bwrap:
                returncode, timed_out = _run_jailed([bwrap, *_jail_args(script, env)], [*python, _JAIL_SCRIPT],
                                                    out, err, timeout_s)
            else:
                workdir.mkdir()
                returncode, timed_out = _run_plain([*python, str(script)], env, workdir, out, err, timeout_s)
        stdout = _read_bounded(out_path, max_output_chars)
        stderr = _read_bounded(err_path, max_output_chars)
    if returncode is None:
        raise SandboxUnavailableError(f"bwrap did not start the jail: {stderr.strip() or 'no message'}")
    return SandboxResult(stdout, stderr, returncode, timed_out,
                         _describe(returncode, timed_out, timeout_s, memory_mb, stderr))


def _jail_args(script: Path, env: dict[str, str]) -> list[str]:
    """bwrap options: namespaces, the read-only file system view, the private cwd, the environment."""
    args = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv",
            # Root keeps every capability in bwrap unless told otherwise; the bootstrap needs these
            # two to switch to its own uid, after which the kernel drops them too.
            "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    bound: list[str] = []
    # System libraries (symlinks on merged-/usr), then the interpreter, then the virtualenv.
    for path in (*_SYSTEM_LIBS, sys.base_prefix, sys.prefix):
        if any(path == b or path.startswith(b + "/") for b in bound):
            continue
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += [*_parent_dirs(path), "--ro-bind", path, path]
            bound.append(path)
    args += ["--proc", "/proc", "--dev", "/dev", *_parent_dirs(_JAIL_SCRIPT),
             "--ro-bind", str(script), _JAIL_SCRIPT,
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


def _run_jailed(bwrap: list[str], command: list[str], out, err, timeout_s: float) -> tuple[int | None, bool]:
    """Run ``command`` in bwrap; on return every process of the jail is gone.
    Returncode None: bwrap failed before starting the jail."""
    deadline = time.monotonic() + timeout_s
    info_r, info_w = os.pipe()
    try:
        proc = subprocess.Popen([*bwrap, "--info-fd", str(info_w), "--", *command], env={},
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=(info_w,),
                                start_new_session=True)
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
    if info is not None and not info.strip():
        return None, False
    code = proc.returncode
    # bwrap reports a command killed by signal N as 128 + N: use Popen's convention (-N). An exit
    # code the code chose itself in that range (sys.exit(137)) reads as the signal too.
    return (-(code - 128) if code - 128 in _SIGNAL_NUMBERS else code), timed_out


def _read_until_eof(fd: int, deadline: float) -> bytes | None:
    """Everything written to ``fd`` until EOF, or None if the deadline passes first."""
    data = b""
    while select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))[0]:
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
        if not select.select([pidfd], [], [], _KILL_WAIT_S)[0]:
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
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(max_chars * 4)  # utf-8 is at most 4 bytes a character
    text = head.decode("utf-8", errors="replace")
    if len(text) > max_chars or size > len(head):
        return text[:max_chars] + f"\n[... output truncated: {size} bytes in total]"
    return text


def _describe(returncode: int, timed_out: bool, timeout_s: float, memory_mb: int, stderr: str) -> str | None:
    if timed_out:
        return f"timed out after {timeout_s:g} s"
    if returncode == 0:
        return None
    if "MemoryError" in stderr:
        return f"memory limit of {memory_mb} MB exceeded"
    if returncode == -signal.SIGXCPU:
        return "CPU time limit exceeded"
    # Python ignores SIGXFSZ, so the limit shows as EFBIG; native code may still get the signal
    if returncode == -signal.SIGXFSZ or "[Errno 27] File too large" in stderr:
        return f"file size limit of {_FILE_SIZE_LIMIT // (1024 * 1024)} MB exceeded (output too large?)"
    if returncode < 0:
        return f"killed by signal {signal.Signals(-returncode).name}"
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    return f"exited with code {returncode}" + (f": {last}" if last else "")
