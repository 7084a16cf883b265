"""Escape attempts against the `code` executor's sandbox (issue 9 §2), each run end to end.

Every probe is hostile model-written code with a way to tell, from the outside, whether it got
out (a secret in its output, a file changed, a connection accepted, a process alive afterwards).
Probes run from a parent process started with API keys in its environment, as a notebook kernel
would be (``/proc/<pid>/environ`` shows only the environment a process started with).
Each test first asserts that the probe did not escape, then that it was stopped with a clear
error. The probes are written to be harmless if they do escape (they open /etc/passwd for
appending but write nothing, signal a process of the test's own, clean up what they create), so
the same file measures an older sandbox:
    PYTHONPATH=<old checkout> python -m pytest tests/test_sandbox_escapes.py -q
counts as "ESCAPED" every failure whose message starts with that word.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from string import Template

import pytest

import roma_lab
from roma_lab.tools._sandbox import SandboxResult

SECRET = "sk-secret-probe"
SECRET_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY")
REPO = Path(__file__).resolve().parents[1]
CODE_UNDER_TEST = Path(roma_lab.__file__).resolve().parents[1]  # the roma_lab this run imports


@dataclass(frozen=True, slots=True)
class Target:
    """What the probes aim at, all owned by this test."""

    cwd: Path  # the parent's working directory, holding victim.txt
    outside: Path  # a directory outside the sandbox's temp dir, holding marker.txt
    home: Path  # the parent's $HOME, with a .netrc and a .cache
    tcp: socket.socket  # loopback listeners of the parent
    udp: socket.socket
    victim: subprocess.Popen  # a process of the parent's user
    marker: str  # process name the fork probes give their children
    planted: tuple[Path, ...]  # files a probe would create outside the sandbox


def _process_alive(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == marker:
                pids.append(int(entry.name))
        except OSError:
            pass  # exited while we looked
    return pids


def _outlived_the_call(t: Target) -> bool:
    """A probe process alive when run_python returned (seen by the parent), or still now."""
    return bool(json.loads((t.cwd / "alive_at_return.json").read_text())) or bool(_process_alive(t.marker))


def _pending_connection(listener: socket.socket) -> bool:
    listener.setblocking(False)
    try:
        listener.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def _datagram_received(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(100)
    except BlockingIOError:
        return False
    return True


@pytest.fixture
def target(tmp_path):
    cwd, outside, home = tmp_path / "cwd", tmp_path / "outside", tmp_path / "home"
    for path in (cwd, outside, home / ".cache"):
        path.mkdir(parents=True)
    (cwd / "victim.txt").write_text("keep me")
    (outside / "marker.txt").write_text("marker")
    (home / ".netrc").write_text(f"machine api.example.com password {SECRET}")
    (home / ".cache" / "marker.txt").write_text("marker")
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    planted = (REPO / f"pwned_{secrets.token_hex(4)}.txt", Path(sys.prefix) / f"pwned_{secrets.token_hex(4)}.txt")
    marker = f"romaprobe{secrets.token_hex(3)}"
    yield Target(cwd, outside, home, tcp, udp, victim, marker, planted)
    for pid in _process_alive(marker):  # only after an escape: our own probe's leftovers
        os.kill(pid, signal.SIGKILL)
    victim.kill()
    victim.wait()
    tcp.close()
    udp.close()
    for path in planted:
        path.unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class Probe:
    name: str
    code: str  # a string.Template over the Target's fields
    escaped: Callable[[SandboxResult, Target], bool]
    blocked_by: tuple[str, ...]  # one of these must be in the result's error
    timeout_s: float = 10.0
    memory_mb: int = 256
    max_processes: int = 8


_LIBC = "import ctypes, os, socket, struct\nlibc = ctypes.CDLL(None, use_errno=True)\n"
_FAIL = "def fail(what):\n    err = ctypes.get_errno()\n    raise OSError(err, f'{what}: {os.strerror(err)}')\n"
_SOCKADDR = "addr = struct.pack('<H', socket.AF_INET) + struct.pack('!H', $port) + socket.inet_aton('127.0.0.1') + bytes(8)\n"


def _printed(text: str) -> Callable[[SandboxResult, Target], bool]:
    return lambda result, _: text in result.stdout


# Memory probes (issue 21): memory no process owns. Each allocates 16 MB at a time up to 1 GB at
# most (safe on the 24 GB machine), printing its running total, and stops when refused.
_MB_ALLOWED = 64  # memory_mb of the memory probes
_MEMORY = dict(memory_mb=_MB_ALLOWED, max_processes=1, timeout_s=60.0,
               blocked_by=(f"memory limit of {_MB_ALLOWED} MB exceeded", "Operation not permitted"))
_FILL = ("total = 0\nwhile total < 1024:\n$step    total += 16\n    print('allocated', total, flush=True)\n")


def _past_memory_mb(result: SandboxResult, _) -> bool:
    """More allocated than the limit allows (the interpreter itself takes part of the 64 MB)."""
    totals = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("allocated ")]
    return max(totals, default=0) > _MB_ALLOWED


def _fill(step: str) -> str:
    return _FILL.replace("$step", "".join(f"    {line}\n" for line in step.splitlines()))


PROBES = [
    # --- secrets in the environment --------------------------------------------------------------
    Probe("env_secret", "import os\nprint(dict(os.environ))\nprint(os.environ['OPENAI_API_KEY'])",
          _printed(SECRET), ("KeyError",)),
    Probe("proc_parent_environ_dir_fd",
          "import os\nproc = os.open('/proc', os.O_RDONLY)\n"
          "fd = os.open(f'{os.getppid()}/environ', os.O_RDONLY, dir_fd=proc)\nprint(os.read(fd, 1 << 20))",
          _printed(SECRET), ("PermissionError",)),
    Probe("proc_1_environ", "print(open('/proc/1/environ', 'rb').read())", _printed(SECRET), ("PermissionError",)),
    Probe("proc_scan_all_environ",
          "import os\nproc = os.open('/proc', os.O_RDONLY)\nseen = []\n"
          "for pid in filter(str.isdigit, os.listdir(proc)):\n"
          "    try:\n        fd = os.open(f'{pid}/environ', os.O_RDONLY, dir_fd=proc)\n"
          "    except OSError:\n        continue\n"
          "    data = os.read(fd, 1 << 20)\n    seen.append(pid)\n    if b'sk-' in data:\n        print(data)\n"
          "raise PermissionError(f'no secret in the environments readable here: {seen}')",
          _printed(SECRET), ("PermissionError: no secret",)),
    # --- the parent's files, through /proc ---------------------------------------------------------
    Probe("unlink_in_parent_cwd", "import os\nos.unlink(f'/proc/{os.getppid()}/cwd/victim.txt')",
          lambda r, t: not (t.cwd / "victim.txt").exists(), ("PermissionError",)),
    Probe("list_parent_cwd", "import os\nprint(os.listdir(f'/proc/{os.getppid()}/cwd'))",
          _printed("victim.txt"), ("PermissionError",)),
    Probe("symlink_to_parent_root", "import os\nos.symlink(f'/proc/{os.getppid()}/root', 'r')\n"
          "print(os.listdir('r' + '$outside'))", _printed("marker.txt"), ("PermissionError",)),
    # --- the file system ---------------------------------------------------------------------------
    Probe("read_etc_passwd", "print(open('/etc/passwd').read())", _printed("root:"), ("FileNotFoundError",)),
    Probe("read_etc_shadow", "print(open('/etc/shadow').read())", _printed("root:"), ("FileNotFoundError",)),
    Probe("open_etc_passwd_for_writing", "open('/etc/passwd', 'a').close()\nprint('opened for writing')",
          _printed("opened for writing"), ("FileNotFoundError",)),
    Probe("symlink_to_etc", "import os\nos.symlink('/etc', 'etc')\nprint(open('etc/passwd').read())",
          _printed("root:"), ("FileNotFoundError",)),
    Probe("write_outside_tmp", "open('$outside/pwned.txt', 'w').write('x')",
          lambda r, t: (t.outside / "pwned.txt").exists(), ("FileNotFoundError",)),
    Probe("write_into_repo", "open('$repo_file', 'w').write('x')",
          lambda r, t: t.planted[0].exists(), ("FileNotFoundError", "PermissionError")),
    Probe("write_into_venv", "open('$venv_file', 'w').write('x')",
          lambda r, t: t.planted[1].exists(), ("Read-only file system", "FileNotFoundError")),
    Probe("nested_user_namespace_remounts_venv_writable",
          _LIBC + _FAIL + "if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS\n"
          "    fail('unshare')\nvenv = os.path.dirname('$venv_file').encode()\n"
          "if libc.mount(None, venv, None, 32 | 4096, None) != 0:  # MS_REMOUNT | MS_BIND, read-write\n"
          "    fail('remount')\nopen('$venv_file', 'w').write('x')",
          lambda r, t: t.planted[1].exists(), ("Operation not permitted",)),
    Probe("read_home_file", "print(open('$home/.netrc').read())", _printed(SECRET), ("FileNotFoundError",)),
    Probe("list_home_cache", "import os\nprint(os.listdir('$home/.cache'))", _printed("marker.txt"),
          ("FileNotFoundError",)),
    # --- processes ---------------------------------------------------------------------------------
    Probe("subprocess", "import subprocess\nprint(subprocess.run(['id'], capture_output=True, text=True).stdout)",
          _printed("uid="), ("PermissionError",)),
    Probe("subprocess_with_audit_silenced",
          "import subprocess, sys, types\n"
          "subprocess.sys = types.SimpleNamespace(**{**vars(sys), 'audit': lambda *args: None})\n"
          "print(subprocess.run(['id'], capture_output=True, text=True).stdout)",
          _printed("uid="), ("FileNotFoundError",)),
    Probe("ctypes_system", _LIBC + "rc = libc.system(b'id')\nif rc != 0:\n    raise OSError(f'system() returned {rc}')",
          _printed("uid="), ("system() returned",)),
    Probe("python_fork", "import os\nprint('forked', os.fork())", _printed("forked"), ("os.fork is disabled",)),
    Probe("ctypes_fork_setsid_grandchild_outlives_timeout",
          _LIBC + "import time\nif libc.fork() == 0:\n    libc.setsid()\n    if libc.fork() == 0:\n"
          "        libc.prctl(15, b'$marker', 0, 0, 0)\n        time.sleep(60)\n    libc._exit(0)\ntime.sleep(60)",
          lambda r, t: _outlived_the_call(t), ("timed out",), timeout_s=2.0),
    Probe("ctypes_fork_bomb",
          _LIBC + _FAIL + "import time\nfor n in range(200):\n    pid = libc.fork()\n    if pid == 0:\n"
          "        time.sleep(60)\n        libc._exit(0)\n    if pid < 0:\n        fail(f'fork after {n} children')\n"
          "print('forked', n + 1)", _printed("forked 200"), ("Resource temporarily unavailable",)),
    Probe("signal_parent", "import os\nos.kill(os.getppid(), 0)\nprint('may signal the parent')",
          _printed("may signal"), ("PermissionError",)),
    Probe("kill_other_process", "import os, signal\nos.kill($victim, signal.SIGKILL)",
          lambda r, t: t.victim.poll() is not None, ("ProcessLookupError",)),
    # --- network -----------------------------------------------------------------------------------
    Probe("python_tcp_connect", "import socket\nsocket.create_connection(('127.0.0.1', $port))",
          lambda r, t: _pending_connection(t.tcp), ("network access is disabled",)),
    Probe("ctypes_tcp_connect",
          _LIBC + _FAIL + _SOCKADDR + "fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)\n"
          "if fd < 0:\n    fail('socket')\nif libc.connect(fd, addr, len(addr)) != 0:\n    fail('connect')",
          lambda r, t: _pending_connection(t.tcp), ("Connection refused", "Network is unreachable")),
    Probe("ctypes_udp_sendto",
          (_LIBC + _FAIL + _SOCKADDR).replace("$port", "$udp_port") +
          "fd = libc.socket(socket.AF_INET, socket.SOCK_DGRAM, 0)\nif fd < 0:\n    fail('socket')\n"
          "if libc.connect(fd, addr, len(addr)) != 0:\n    fail('connect')\n"
          # a second send reports the ICMP "port unreachable" the first one met, if any
          "for _ in range(2):\n    if libc.send(fd, b'hello', 5, 0) != 5:\n        fail('send')\nprint('sent')",
          lambda r, t: _datagram_received(t.udp), ("Connection refused", "Network is unreachable")),
    Probe("ctypes_raw_socket",
          _LIBC + _FAIL + "fd = libc.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)\n"
          "if fd < 0:\n    fail('raw socket')\nprint('raw socket', fd)",
          _printed("raw socket"), ("Operation not permitted",)),
    Probe("python_dns", "import socket\nprint(socket.getaddrinfo('localhost', 80))", _printed("127.0.0.1"),
          ("network access is disabled",)),
    Probe("ctypes_dns",
          _LIBC + "res = ctypes.c_void_p()\nrc = libc.getaddrinfo(b'localhost', b'80', None, ctypes.byref(res))\n"
          "if rc != 0:\n    raise OSError(f'getaddrinfo failed: {libc.gai_strerror(rc)}')\nprint('resolved')",
          _printed("resolved"), ("getaddrinfo failed",)),
    # --- resources ---------------------------------------------------------------------------------
    Probe("memory_bomb", "x = bytearray(4 * 1024**3)\nprint('allocated')", _printed("allocated"),
          ("memory limit", "exited with code 1: MemoryError")),  # the address-space limit: the code's own exit
    Probe("memfd_files_past_memory_mb",
          "import os\nfds = []\n" + _fill("fd = os.memfd_create('probe')\nfor _ in range(16):\n"
                                          "    os.write(fd, bytes(1 << 20))\nfds.append(fd)"),
          _past_memory_mb, **_MEMORY),
    Probe("sysv_shm_loop_past_memory_mb",
          _LIBC + _FAIL + "libc.shmat.restype = ctypes.c_void_p\n"
          "libc.shmat.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int)\nlibc.shmdt.argtypes = (ctypes.c_void_p,)\n"
          + _fill("sid = libc.shmget(0, 16 << 20, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600, never removed\n"
                  "if sid < 0:\n    fail('shmget')\naddr = libc.shmat(sid, None, 0)\n"
                  "if addr is None or addr == ctypes.c_void_p(-1).value:\n    fail('shmat')\n"
                  "ctypes.memset(addr, 1, 16 << 20)\nlibc.shmdt(addr)"),
          _past_memory_mb, **_MEMORY),
    Probe("nested_userns_tmpfs_past_memory_mb",
          _LIBC + _FAIL + "libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE\n"
          "uid, gid = os.getuid(), os.getgid()\n"
          "if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS\n    fail('unshare')\n"
          "# map ourselves to root of the new namespace (dumpable: /proc/self is ours to write)\n"
          "for name, text in (('setgroups', 'deny'), ('uid_map', f'0 {uid} 1'), ('gid_map', f'0 {gid} 1')):\n"
          "    with open(f'/proc/self/{name}', 'w') as f:\n        f.write(text)\n"
          "os.mkdir('m')\nif libc.mount(b'none', b'm', b'tmpfs', 0, b'size=2g') != 0:\n    fail('mount')\n"
          + _fill("with open(f'm/f{total}', 'wb') as f:\n    for _ in range(16):\n        f.write(bytes(1 << 20))"),
          _past_memory_mb, **_MEMORY),
    Probe("cwd_tmpfs_files_plus_heap_past_memory_mb",
          "for i in range(4):\n    with open(f'f{i}', 'wb') as f:\n        f.write(bytes(12 << 20))\n"
          "    print('allocated', 12 * (i + 1), flush=True)\nblock = b'x' * (24 << 20)\nprint('allocated', 72)",
          _past_memory_mb, **_MEMORY),
    Probe("infinite_loop", "while True:\n    pass", lambda r, t: not r.timed_out, ("timed out",), timeout_s=1.0),
    Probe("fill_the_disk", "for i in range(64):\n    open(f'f{i}', 'wb').write(bytes(8_000_000))\nprint('wrote 512 MB')",
          _printed("wrote 512 MB"), ("No space left on device",)),
    Probe("huge_output", "import sys\nfor _ in range(200):\n    sys.stdout.write('x' * 1_000_000)",
          lambda r, t: len(r.stdout) > 30_000, ("file size limit",)),
]


def _code(probe: Probe, t: Target) -> str:
    return Template(probe.code).substitute(
        outside=t.outside, home=t.home, port=t.tcp.getsockname()[1], udp_port=t.udp.getsockname()[1],
        victim=t.victim.pid, marker=t.marker, repo_file=t.planted[0], venv_file=t.planted[1])


_DRIVER = """
import dataclasses, json, pathlib, sys
from roma_lab.tools._sandbox import run_python
result = run_python(sys.stdin.read(), timeout_s=float(sys.argv[1]), memory_mb=int(sys.argv[3]),
                    max_processes=int(sys.argv[4]))
# which of the probe's processes are still alive the moment run_python returns
alive = [p.name for p in pathlib.Path('/proc').glob('[0-9]*') if p.joinpath('comm').exists()
         and p.joinpath('comm').read_text(errors='replace').strip() == sys.argv[2]]
pathlib.Path('alive_at_return.json').write_text(json.dumps(alive))
print(json.dumps(dataclasses.asdict(result)))
"""


def _parent_env(t: Target) -> dict[str, str]:
    return {**os.environ, **dict.fromkeys(SECRET_VARS, SECRET), "HOME": str(t.home), "PYTHONPATH": str(CODE_UNDER_TEST)}


def run_from_parent(code: str, t: Target, timeout_s: float = 10.0, memory_mb: int = 256,
                    max_processes: int = 8) -> SandboxResult:
    """``run_python(code)`` called by a parent process that started with secrets in its environment,
    in the Target's cwd and $HOME."""
    parent = subprocess.run([sys.executable, "-c", _DRIVER, str(timeout_s), t.marker, str(memory_mb),
                             str(max_processes)], input=code, cwd=t.cwd,
                            env=_parent_env(t), capture_output=True, text=True, timeout=timeout_s + 60)
    assert parent.returncode == 0, parent.stderr
    return SandboxResult(**json.loads(parent.stdout.splitlines()[-1]))


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_probe_is_blocked(probe, target):
    result = run_from_parent(_code(probe, target), target, probe.timeout_s, probe.memory_mb, probe.max_processes)
    assert not probe.escaped(result, target), f"ESCAPED: {probe.name}\n{result}"
    assert SECRET not in result.stdout + result.stderr, f"ESCAPED: {probe.name} leaked the secret"
    assert any(text in (result.error or "") for text in probe.blocked_by), (probe.name, result)


def test_there_are_at_least_the_issues_24_probes():
    assert len(PROBES) >= 24 and len({p.name for p in PROBES}) == len(PROBES)


def test_daemon_does_not_outlive_a_clean_exit(target):
    # Forking is allowed inside the jail (it is bounded there); what must hold is that nothing the
    # code started is alive once the call returns, even when the code itself exits cleanly.
    code = (_LIBC + "import time\nif libc.fork() == 0:\n    libc.setsid()\n    if libc.fork() == 0:\n"
            f"        libc.prctl(15, b'{target.marker}', 0, 0, 0)\n        time.sleep(60)\n    libc._exit(0)\n"
            "time.sleep(0.5)\nprint('parent done')")
    result = run_from_parent(code, target)
    assert result.stdout == "parent done\n" and result.error is None
    assert not _outlived_the_call(target), "ESCAPED: daemon outlived a clean exit"


_ROMA_DRIVER = """
import json, sys
import dspy
from dspy.utils import DummyLM
from roma_lab.controller import Roma
for code in json.load(sys.stdin):
    lm = DummyLM([{"is_atomic": True, "task_type": "code"}, {"code": code}], adapter=dspy.JSONAdapter())
    print(Roma(lm=lm, max_depth=1).run("compute it").to_json().replace(chr(10), " "))
"""


def test_secret_never_reaches_the_saved_run(target):
    # The issue's case: model code read the parent's environment and the key was saved with the Run.
    codes = [_code(p, target) for p in PROBES if p.name in ("env_secret", "proc_parent_environ_dir_fd",
                                                           "proc_scan_all_environ", "proc_1_environ")]
    parent = subprocess.run([sys.executable, "-c", _ROMA_DRIVER], input=json.dumps(codes), cwd=target.cwd,
                            env=_parent_env(target), capture_output=True, text=True, timeout=300)
    assert parent.returncode == 0, parent.stderr
    runs = parent.stdout.splitlines()[-len(codes):]
    assert len(runs) == 4
    for saved in runs:
        assert SECRET not in saved, f"ESCAPED: the secret is in the saved Run: {saved[:300]}"
        assert json.loads(saved)["status"] == "failed" and "CodeExecutionError" in saved


def _wait_for(condition: Callable[[], bool], bound_s: float = 30.0) -> bool:
    """Poll ``condition`` until it holds or ``bound_s`` passes (a liveness bound, not a speed test)."""
    for _ in range(int(bound_s / 0.05)):
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_jail_dies_with_a_killed_parent(target):
    # A notebook kernel killed mid-call (kill -9) must not leave model code running.
    code = _LIBC + f"libc.prctl(15, b'{target.marker}', 0, 0, 0)\nimport time\ntime.sleep(120)"
    parent = subprocess.Popen([sys.executable, "-c", _DRIVER, "120", target.marker, "256", "8"], stdin=subprocess.PIPE,
                              cwd=target.cwd, env=_parent_env(target), text=True)
    parent.stdin.write(code)
    parent.stdin.close()
    assert _wait_for(lambda: bool(_process_alive(target.marker))), "the probe never started"
    parent.kill()
    parent.wait()
    assert _wait_for(lambda: not _process_alive(target.marker)), "ESCAPED: the jail outlived its parent"


# --- the kernel keyring (issue 21) ------------------------------------------------------------------
# The parent joins a session keyring of its own holding a secret key, as a PAM login or a systemd
# service has one. That happens in a subprocess: the pytest process's own keyring is never touched.
_KEYRING_DRIVER = """
import ctypes, json, os, sys
import pyseccomp
from roma_lab.tools._sandbox import run_python
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
KEYCTL, ADD_KEY = (pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, n) for n in ("keyctl", "add_key"))
L = ctypes.c_long
secret = sys.argv[1].encode()
if libc.syscall(L(KEYCTL), L(1), b"roma-probe-session") < 0:  # KEYCTL_JOIN_SESSION_KEYRING, named
    sys.exit(f"cannot join a session keyring: {os.strerror(ctypes.get_errno())}")
key = libc.syscall(L(ADD_KEY), b"user", b"roma_probe_secret", secret, L(len(secret)), L(-3))  # @s
if key < 0:
    sys.exit(f"cannot add a key: {os.strerror(ctypes.get_errno())}")
probe = sys.stdin.read().replace("KEY_ID", str(key)).replace("KEYCTL", str(KEYCTL)).replace("ADD_KEY", str(ADD_KEY))
calls = [run_python(probe, memory_mb=128) for _ in range(2)]  # the second: does it see what the first left?

def read(key_id):
    buf = ctypes.create_string_buffer(4096)
    n = libc.syscall(L(KEYCTL), L(11), L(key_id), buf, L(4096))  # KEYCTL_READ
    return buf.raw[:n] if n >= 0 else None

planted = libc.syscall(L(KEYCTL), L(10), L(-3), b"user", b"roma_probe_planted", L(0))  # KEYCTL_SEARCH
print(json.dumps({"calls": [[c.stdout, c.stderr, c.error] for c in calls],
                  "secret_kept": read(key) == secret, "planted_seen_by_host": planted >= 0,
                  "parent_keyring_size": len(read(-3) or b"") // 4}))
"""

_KEYRING_PROBE = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
out = {}
buf = ctypes.create_string_buffer(4096)
n = libc.syscall(L(KEYCTL), L(11), L(KEY_ID), buf, L(4096))  # KEYCTL_READ of the parent's secret
out["read"] = buf.raw[:n].decode(errors="replace") if n >= 0 else os.strerror(ctypes.get_errno())
n = libc.syscall(L(KEYCTL), L(11), L(-3), buf, L(4096))  # KEYCTL_READ of the session keyring: key ids
out["session_keys"] = n // 4 if n >= 0 else os.strerror(ctypes.get_errno())
try:
    out["proc_keys"] = open("/proc/keys").read()
except OSError as err:
    out["proc_keys"] = str(err)
n = libc.syscall(L(KEYCTL), L(10), L(-3), b"user", b"roma_probe_planted", L(0))  # left by an earlier call?
out["planted_found"] = n >= 0
n = libc.syscall(L(ADD_KEY), b"user", b"roma_probe_planted", b"planted", L(7), L(-3))
out["add"] = "added" if n >= 0 else os.strerror(ctypes.get_errno())
n = libc.syscall(L(KEYCTL), L(7), L(-3))  # KEYCTL_CLEAR of the session keyring
out["clear"] = "cleared" if n >= 0 else os.strerror(ctypes.get_errno())
print(json.dumps(out))
"""


def test_parent_session_keyring_is_out_of_reach():
    parent = subprocess.run([sys.executable, "-c", _KEYRING_DRIVER, SECRET], input=_KEYRING_PROBE,
                            env={**os.environ, "PYTHONPATH": str(CODE_UNDER_TEST)}, capture_output=True, text=True,
                            timeout=300)
    assert parent.returncode == 0, parent.stderr
    report = json.loads(parent.stdout.splitlines()[-1])
    first, second = (json.loads(stdout) if stdout else {"error": error, "stderr": stderr}
                     for stdout, stderr, error in report["calls"])
    assert SECRET not in parent.stdout, f"ESCAPED: the jail read the parent's secret key: {first}"
    assert report["secret_kept"] and report["parent_keyring_size"] == 1, f"ESCAPED: the parent's keyring changed: {report}"
    assert not report["planted_seen_by_host"], "ESCAPED: a key the jail added is in the host's keyring"
    assert not second["planted_found"], "ESCAPED: the next call saw the key the first one added"
    for call in (first, second):
        # refused by the seccomp filter, before any keyring is looked at
        assert {call[k] for k in ("read", "session_keys", "add", "clear")} == {"Operation not permitted"}, call
        assert "roma_probe" not in call["proc_keys"], call


# --- the seccomp filter (issue 21) ------------------------------------------------------------------


def _native(name: str) -> int:
    import pyseccomp

    return pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)


# The list design/sandbox.md names (the jail's own list may only be longer).
REFUSED_SYSCALLS = (
    "keyctl", "add_key", "request_key", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "ptrace",
    "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "open_by_handle_at", "name_to_handle_at",
    "fanotify_init", "lookup_dcookie", "uselib", "personality", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog", "sethostname", "setdomainname",
    "vhangup", "iopl", "ioperm")


def test_refused_system_calls_fail_with_eperm():
    from roma_lab.tools._sandbox import run_python

    numbers = {name: _native(name) for name in REFUSED_SYSCALLS if _native(name) >= 0}
    assert {"keyctl", "add_key", "request_key", "unshare", "setns", "mount", "ptrace", "bpf"} <= set(numbers)
    # All-zero arguments: harmless wherever a call is allowed (unshare(0) changes nothing, null
    # pointers fail with EFAULT); a refused call fails with EPERM before the kernel looks at them.
    code = (_LIBC + "libc.syscall.restype = ctypes.c_long\nerrors = {}\n"
            f"for name, number in {numbers!r}.items():\n"
            "    rc = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(0)] * 6)\n"
            "    errors[name] = 'allowed' if rc >= 0 else os.strerror(ctypes.get_errno())\n"
            "print(json.dumps(errors))").replace("import ctypes,", "import ctypes, json,")
    result = run_python(code)
    errors = json.loads(result.stdout)
    not_refused = {name: e for name, e in errors.items() if e != "Operation not permitted"}
    assert not not_refused, f"ESCAPED: reached the kernel: {not_refused}"


def test_clone_into_new_namespaces_is_refused_clone3_falls_back_and_fork_works():
    from roma_lab.tools._sandbox import run_python

    code = (_LIBC + "import json\nlibc.syscall.restype = ctypes.c_long\nout = {}\n"
            f"for name, flag in (('user', 0x10000000), ('pid', 0x20000000), ('net', 0x40000000), ('mount', 0x20000)):\n"
            f"    pid = libc.syscall(ctypes.c_long({_native('clone')}), ctypes.c_long(flag | 17), *[ctypes.c_long(0)] * 4)\n"
            "    if pid == 0:\n        libc._exit(0)  # the child of an allowed clone leaves at once\n"
            "    out[name] = 'cloned' if pid > 0 else os.strerror(ctypes.get_errno())\n"
            "    if pid > 0:\n        os.waitpid(pid, 0)\n"
            f"libc.syscall(ctypes.c_long({_native('clone3')}), None, ctypes.c_long(0))\n"
            "out['clone3'] = os.strerror(ctypes.get_errno())\n"
            "pid = libc.fork()\nif pid == 0:\n    libc._exit(7)\n"
            "out['fork'] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\nprint(json.dumps(out))")
    out = json.loads(run_python(code).stdout)
    assert out == {"user": "Operation not permitted", "pid": "Operation not permitted",
                   "net": "Operation not permitted", "mount": "Operation not permitted",
                   "clone3": "Function not implemented", "fork": 7}, f"ESCAPED: {out}"


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the other ABIs probed are x86's (i386, x32)")
@pytest.mark.parametrize("abi", ["i386_int80", "x32"])
def test_system_calls_of_another_abi_kill_the_process(abi):
    from roma_lab.tools._sandbox import run_python

    if abi == "x32":  # the x32 bit on the native getpid
        call = "rc = libc.syscall(ctypes.c_long(0x40000000 | 39))\n"
    else:  # i386 getpid through int 0x80, from an executable page: mov eax, 20; int 0x80; ret
        call = ("libc.mmap.restype = ctypes.c_void_p\n"
                "libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)\n"
                "page = libc.mmap(None, 4096, 7, 0x22, -1, 0)  # PROT_RWX, MAP_PRIVATE | MAP_ANONYMOUS\n"
                "ctypes.memmove(page, bytes.fromhex('b814000000cd80c3'), 8)\n"
                "rc = ctypes.CFUNCTYPE(ctypes.c_int)(page)()\n")
    result = run_python(_LIBC + call + "print('returned', rc)")
    assert "returned" not in result.stdout, f"ESCAPED: a {abi} system call ran: {result}"
    assert result.error == "killed by signal SIGSYS", result


# --- what /proc/self/mountinfo shows (issue 21) -------------------------------------------------------


def test_mountinfo_names_only_the_fixed_mounts_and_the_interpreter_sources(target):
    system_libs = {p for p in ("/usr/lib", "/usr/lib64", "/lib", "/lib64") if os.path.isdir(p) and not os.path.islink(p)}
    result = run_from_parent("print(open('/proc/self/mountinfo').read())", target)
    assert result.error is None, result
    mounts = [line.split(" - ")[0].split()[3:5] for line in result.stdout.splitlines() if line.strip()]
    # Mount points: the fixed view only, whatever the paths of the clone, the venv and the interpreter.
    stray = {point for _, point in mounts
             if point not in {"/", "/proc", "/dev", *system_libs} and not point.startswith(("/sandbox/", "/proc/", "/dev/"))}
    assert not stray, f"ESCAPED: host paths as mount points: {stray}"
    # The "root" field of a bind names its source on the host. Only the system libraries and the
    # interpreter's and venv's own directories may show (design/sandbox.md says so); never the
    # script's host copy, the host temp dir, the parent's cwd or $HOME.
    own = tuple(os.path.realpath(p) + "/" for p in (sys.base_prefix, sys.prefix))
    others = {root for root, point in mounts if not point.startswith(("/proc", "/dev"))
              and root not in {"/", "/newroot", *system_libs}  # bwrap's own tmpfs, the system libraries
              and not root.startswith(("/bindfile", *own))}  # copies bwrap makes; the interpreter's files
    assert not others, f"ESCAPED: host paths in mountinfo: {others}"
    for private in (str(target.cwd), str(target.home), "roma_sandbox_"):
        assert private not in result.stdout, f"ESCAPED: {private} in mountinfo"
