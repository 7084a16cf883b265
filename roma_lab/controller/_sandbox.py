"""Run model-written Python in a separate, limited process (the ROMA `code` executor).

What the sandbox enforces, and how:
- a fresh ``python -I`` process (no user site-packages, no PYTHON* variables) in its own process
  group, killed as a group on timeout so grandchildren cannot outlive the call;
- a fresh temporary working directory, removed afterwards;
- an environment reduced to an allowlist, so API keys and other secrets never reach the child;
- resource limits (address space, CPU seconds, file size, no core dumps) set by the child's
  bootstrap before the user code runs. They are set there rather than in ``preexec_fn`` because
  ``preexec_fn`` may deadlock when the parent has threads (the controller runs roles in threads);
  the hard limits are lowered too, so the user code cannot raise them back;
- a Python audit hook, installed before the user code runs and impossible to remove from Python,
  that refuses network sockets, subprocesses and ``exec``/``fork``.

Limit (see design/local_model.md): this is not an OS-level jail. Code that loads native code
(``ctypes``) can still make system calls directly; a container or network namespace is the
answer when running untrusted code from an untrusted model.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SandboxResult", "run_python"]

# Variables copied from the parent when present; everything else is dropped.
_ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")

# Runs in the child before the user code. Arguments: limits, then the user script path.
_BOOTSTRAP = r"""
import os, resource, runpy, socket, sys
as_bytes, cpu_s, fsize = (int(v) for v in sys.argv[1:4])
script = sys.argv[4]
for limit, value in ((resource.RLIMIT_AS, as_bytes), (resource.RLIMIT_CPU, cpu_s),
                     (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(limit, (value, value))

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

_FILE_SIZE_LIMIT = 16 * 1024 * 1024  # bounds stdout/stderr files and anything the code writes


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """Outcome of one sandboxed run. ``error`` is None only for a clean exit with code 0."""

    stdout: str
    stderr: str
    returncode: int
    timed_out: bool
    error: str | None


def run_python(
    code: str, *, timeout_s: float = 10.0, memory_mb: int = 512, max_output_chars: int = 20_000
) -> SandboxResult:
    """Run ``code`` as a script in a fresh limited process and return what it printed.

    Never raises for failures of the code itself (syntax error, exception, timeout, memory or
    CPU exhaustion): those are reported in the result. Raises ``TypeError``/``ValueError`` for
    invalid arguments.
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str, got {type(code).__name__}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
    if not memory_mb >= 64:
        raise ValueError(f"memory_mb must be >= 64 (the interpreter alone needs ~30 MB), got {memory_mb!r}")
    if not max_output_chars > 0:
        raise ValueError(f"max_output_chars must be > 0, got {max_output_chars!r}")

    with tempfile.TemporaryDirectory(prefix="roma_sandbox_") as root:
        workdir = Path(root, "work")
        workdir.mkdir()
        script = Path(root, "main.py")
        script.write_text(code, encoding="utf-8")
        out_path, err_path = Path(root, "stdout.txt"), Path(root, "stderr.txt")
        env = {k: os.environ[k] for k in _ENV_ALLOWLIST if k in os.environ}
        # One BLAS/OpenMP thread: thread pools reserve address space and would trip RLIMIT_AS.
        env |= {"HOME": str(workdir), "TMPDIR": str(workdir), "OMP_NUM_THREADS": "1",
                "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        limits = (memory_mb * 1024 * 1024, int(timeout_s) + 1, _FILE_SIZE_LIMIT)
        argv = [sys.executable, "-I", "-X", "utf8", "-c", _BOOTSTRAP, *map(str, limits), str(script)]
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, start_new_session=True)
            timed_out = False
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc)
        stdout = _read_bounded(out_path, max_output_chars)
        stderr = _read_bounded(err_path, max_output_chars)
    returncode = proc.returncode
    return SandboxResult(stdout, stderr, returncode, timed_out,
                         _describe(returncode, timed_out, timeout_s, memory_mb, stderr))


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
    if returncode == -signal.SIGXFSZ:
        return f"file size limit of {_FILE_SIZE_LIMIT // (1024 * 1024)} MB exceeded (output too large?)"
    if returncode < 0:
        return f"killed by signal {signal.Signals(-returncode).name}"
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    return f"exited with code {returncode}" + (f": {last}" if last else "")
