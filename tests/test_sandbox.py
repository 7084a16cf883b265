"""Sandbox for the `code` executor: output capture, limits, isolation modes. Each run is a real
process; escape attempts are in test_sandbox_escapes.py."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM

import roma_lab
from roma_lab.controller import CodeExecutor, Roma
from roma_lab.tools import _sandbox
from roma_lab.tools._sandbox import SandboxResult, SandboxUnavailableError, check_sandbox, run_python


def test_stdout_captured_and_clean_exit():
    result = run_python("print('hello', 6 * 7)")
    assert result == SandboxResult(stdout="hello 42\n", stderr="", returncode=0, timed_out=False, error=None)


def test_the_jail_works_in_a_process_holding_more_than_1024_descriptors():
    # a kernel or a test session that has opened many files must not break the jail (select() refuses
    # descriptors numbered 1024 and up; a full `make test` once reached 1,429)
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard descriptor limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200) if hard == resource.RLIM_INFINITY else hard, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        result = run_python("print('hello', 6 * 7)")
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert result == SandboxResult(stdout="hello 42\n", stderr="", returncode=0, timed_out=False, error=None)


def test_exception_reported_with_user_frames_only():
    result = run_python("def f():\n    raise ValueError('boom')\nf()")
    assert result.returncode == 1 and not result.timed_out
    assert result.error == "exited with code 1: ValueError: boom"
    assert "main.py" in result.stderr and "runpy" not in result.stderr


def test_infinite_loop_times_out():
    result = run_python("while True:\n    pass", timeout_s=1.0)
    assert result.timed_out and result.error == "timed out after 1 s"


def test_blocking_call_times_out_too():
    # RLIMIT_CPU would not catch a sleep: the wall-clock timeout must (a sleep of 1 hour would
    # otherwise hang this test).
    result = run_python("import time\ntime.sleep(3600)", timeout_s=0.5)
    assert result.timed_out and result.error == "timed out after 0.5 s"


def test_memory_bomb_is_an_error_not_a_crash():
    result = run_python("x = bytearray(2 * 1024**3)\nprint('allocated')", memory_mb=256)
    assert result.returncode != 0 and "allocated" not in result.stdout
    # the address-space limit refused it; only the code's process knows, so it reads as the code's exit
    assert result.error == "exited with code 1: MemoryError"


def test_secrets_do_not_reach_the_child(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("ROMA_LAB_LM", "local")
    result = run_python("import os\nprint(sorted(os.environ))\nprint(os.environ.get('OPENAI_API_KEY'))")
    assert "OPENAI_API_KEY" not in result.stdout and "sk-test-secret" not in result.stdout
    assert "ROMA_LAB_LM" not in result.stdout
    assert result.stdout.splitlines()[-1] == "None"


@pytest.mark.parametrize(
    "code",
    [
        "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)",
        "import socket\nsocket.create_connection(('127.0.0.1', 9))",
        "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9')",
    ],
)
def test_network_blocked(code):
    result = run_python(code)
    assert result.returncode == 1
    assert "network access is disabled" in result.stderr


def test_subprocess_blocked():
    result = run_python("import subprocess\nsubprocess.run(['true'])")
    assert "subprocess.Popen is disabled" in (result.error or "")


def test_asyncio_still_works():
    # asyncio needs an AF_UNIX socketpair, which the network block must leave alone.
    result = run_python("import asyncio\nasync def f():\n    return 3\nprint(asyncio.run(f()))")
    assert result.stdout == "3\n" and result.error is None


def test_cwd_is_a_private_dir_whose_host_copy_is_removed_afterwards(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = "import os\nopen('note.txt', 'w').write('x')\nprint(os.getcwd())\nprint(os.listdir('.'))"
    result = run_python(code)
    cwd, listing = result.stdout.splitlines()
    assert cwd == "/sandbox/work" and listing == "['note.txt']"
    assert list(tmp_path.iterdir()) == []


def test_output_truncated_to_bound():
    result = run_python("print('x' * 100_000)", max_output_chars=1000)
    assert result.stdout.startswith("x" * 1000)
    assert "output truncated" in result.stdout and len(result.stdout) < 1100


def test_syntax_error_reported():
    result = run_python("def f(:")
    assert result.error == "exited with code 1: SyntaxError: invalid syntax"


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [({"code": b"print(1)"}, TypeError), ({"code": "1", "timeout_s": 0}, ValueError), ({"code": "1", "timeout_s": float("inf")}, ValueError),
     ({"code": "1", "max_processes": 0}, ValueError),
     ({"code": "1", "memory_mb": 8}, ValueError), ({"code": "1", "max_output_chars": 0}, ValueError)],
)
def test_bad_arguments_raise_typed_errors(kwargs, exc):
    code = kwargs.pop("code")
    with pytest.raises(exc):
        run_python(code, **kwargs)


def test_parent_environment_cannot_be_read_through_proc(monkeypatch):
    monkeypatch.setenv("FAKE_SECRET_KEY", "sk-test-parent")
    code = ("import os\n"
            "for path in (f'/proc/{os.getppid()}/environ', '/proc/1/environ'):\n"
            "    try:\n"
            "        print(open(path, 'rb').read())\n"
            "    except PermissionError as err:\n"
            "        print('refused', err)\n"
            "print(len(open('/proc/self/status').read()) > 0)\n")
    result = run_python(code)
    assert "sk-test-parent" not in result.stdout
    assert result.stdout.count("refused") == 2 and result.stdout.strip().endswith("True")



def test_code_runs_under_its_own_unprivileged_uid_without_capabilities():
    code = ("import os\nprint(os.getuid(), os.getgid(), os.getgroups())\n"
            "print(sorted(line.split()[1] for line in open('/proc/self/status') if line.startswith(('CapPrm', 'CapEff', 'CapAmb'))))\n"
            "print([line.split()[1] for line in open('/proc/self/status') if line.startswith('NoNewPrivs')])")
    ids, caps, no_new_privs = run_python(code).stdout.splitlines()
    uid, gid, groups = ids.split(" ", 2)
    assert int(uid) >= 1 << 30 and gid == uid and groups == "[]"
    assert set(eval(caps)) == {"0000000000000000"} and no_new_privs == "['1']"


# The jail's root: the same fixed entries wherever the clone, its venv and the interpreter live.
JAIL_ROOT = sorted({"sandbox", "proc", "dev"} | {p.split("/")[1] for p in ("/usr/lib", "/usr/lib64", "/lib", "/lib64")
                                                 if os.path.lexists(p)})
_LIST_ROOT = "import os\nprint(sorted(os.listdir('/')))\nprint(sorted(os.listdir('/sandbox')))"


def test_jail_sees_no_host_files_and_no_other_process():
    result = run_python("import os\nprint(sorted(os.listdir('/')))\nprint(sorted(filter(str.isdigit, os.listdir('/proc'))))")
    top, pids = (eval(line) for line in result.stdout.splitlines())
    assert top == JAIL_ROOT  # no etc, home, tmp, root, work, opt ...: nothing named after the host
    assert pids == ["1", "2"]  # the bootstrap as init (root) and the code itself


def _venv(where: Path, name: str = "venv") -> Path:
    """A venv of this project's interpreter at ``where``, seeing this project's packages and code
    through a .pth, as a clone's own .venv would."""
    venv = where / name
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=120)
    site = Path(subprocess.run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    ours = sysconfig.get_paths()["purelib"]
    (site / "roma_lab_test.pth").write_text(f"{ours}\n{Path(roma_lab.__file__).resolve().parents[1]}\n")
    return venv


@pytest.fixture
def scratch():
    made: list[Path] = []

    def make(parent: str) -> Path:
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
            pytest.skip(f"{parent} is not a writable directory here")
        made.append(Path(tempfile.mkdtemp(prefix="roma_venv_test_", dir=parent)))
        return made[-1]

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("layout", ["tmp", "home", "symlinked_dot_venv", "no_venv"])
def test_jail_view_is_the_same_for_a_clone_anywhere(layout, scratch):
    # Issue 21: a clone under /tmp saw `tmp` at the jail's root; a symlinked .venv broke every call.
    env, expected_sandbox = dict(os.environ), ["main.py", "python", "venv", "work"]
    if layout == "no_venv":  # the base interpreter itself, this project's packages on its path
        python = Path(getattr(sys, "_base_executable", sys.executable))
        env["PYTHONPATH"] = os.pathsep.join([sysconfig.get_paths()["purelib"], str(Path(roma_lab.__file__).resolve().parents[1])])
        expected_sandbox = ["main.py", "python", "work"]
    elif layout == "symlinked_dot_venv":
        real = _venv(scratch("/home"), "real_venv")
        clone = scratch("/tmp")
        (clone / ".venv").symlink_to(real)
        python = clone / ".venv" / "bin" / "python"
    else:
        python = _venv(scratch(f"/{layout}")) / "bin" / "python"
    driver = ("import json, sys\nfrom roma_lab.tools._sandbox import run_python\n"
              f"r = run_python({_LIST_ROOT!r})\nprint(json.dumps([r.stdout, r.error]))")
    out = subprocess.run([python, "-c", driver], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    stdout, error = json.loads(out.stdout.splitlines()[-1])
    assert error is None, error
    top, sandbox = (eval(line) for line in stdout.splitlines())
    assert top == JAIL_ROOT and sandbox == expected_sandbox


@pytest.mark.parametrize("stagger_s", [0.0, 0.5], ids=["together", "one_after_another"])
def test_total_memory_of_the_tree_is_bounded_not_each_process(stagger_s):
    # Three forked children of 30 MB each fit each process's own limit, not the jail's 64 MB. One
    # after another, each child killed at the limit makes room for the next: counting their "I hold
    # it" messages is not enough (CI saw three), so the parent checks that all three are still alive.
    code = ("import ctypes, os, time\nlibc = ctypes.CDLL(None)\nr, w = os.pipe()\nchildren = []\n"
            "for n in range(3):\n    pid = libc.fork()\n    if pid == 0:\n"
            f"        time.sleep({stagger_s} * n)\n        block = b'x' * (30 << 20)  # written: every page really used\n"
            "        os.write(w, b'1')\n        time.sleep(30)\n        os._exit(0)\n    children.append(pid)\n"
            "held = b''\nwhile len(held) < 3:\n    held += os.read(r, 3)\n"
            "alive = [os.waitpid(pid, os.WNOHANG) == (0, 0) for pid in children]\n"
            "print('all three hold 30 MB' if all(alive) else f'alive: {alive}')")
    result = run_python(code, memory_mb=64, max_processes=4, timeout_s=5)
    assert "all three" not in result.stdout, f"ESCAPED: {result}"
    oom = "memory limit of 64 MB exceeded (the jail's cgroup killed a process at its limit)"
    # Together: the parent waits for a killed child until the timeout. One after another: the
    # parent sees a dead child and exits 0, and the error still says what the cgroup did.
    assert result.error in (f"{oom}, then timed out after 5 s", f"{oom}; the main process exited 0 without it"), result
    if stagger_s:
        assert result.stdout.startswith("alive: ") and "False" in result.stdout, result


@pytest.mark.parametrize("isolation", ["bwrap", "audit-hook-only"])
def test_limit_messages_come_from_the_limits_not_from_printed_text(isolation):
    # Issue 21: a child printing "MemoryError" and exiting 3 was reported as "memory limit exceeded".
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for text, code in (("MemoryError", 3), ("OSError: [Errno 27] File too large", 1)):
            result = run_python(f"import sys\nprint({text!r}, file=sys.stderr)\nsys.exit({code})", isolation=isolation)
            assert result.error == f"exited with code {code}: {text}", result


# Issue 41: code wrote "memory" to the status descriptor the bootstrap used and was believed.
_FORGE_STATUS = ("import ctypes, os, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                 "for fd in range(3, 1024):\n    try:\n        os.write(fd, b'memory')\n    except OSError:\n        pass\n"
                 "for n in range(64):  # the init's descriptors, past the audit hook (ctypes)\n"
                 "    fd = libc.open(f'/proc/1/fd/{n}'.encode(), 1)\n"
                 "    if fd >= 0:\n        print('opened the init fd', n)\n        os.write(fd, b'memory')\n"
                 "sys.exit(1)")


@pytest.mark.parametrize("isolation", ["bwrap", "audit-hook-only"])
def test_the_code_cannot_write_its_own_status(isolation):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = run_python(_FORGE_STATUS, isolation=isolation)
    assert "opened the init fd" not in result.stdout, result
    assert result.returncode == 1 and result.error == "exited with code 1", result


@pytest.mark.parametrize("isolation", ["bwrap", "audit-hook-only"])
@pytest.mark.parametrize("code", [137, 143, 159, 255])
def test_an_exit_code_in_the_signal_range_is_an_exit_code(isolation, code):
    # Issue 41: bwrap reports a death by signal N as 128 + N, so exit(137) read as SIGKILL.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for how in (f"import sys\nsys.exit({code})", f"import os\nos._exit({code})"):
            result = run_python(how, isolation=isolation)
            assert (result.returncode, result.error) == (code, f"exited with code {code}"), (how, result)


@pytest.mark.parametrize("isolation", ["bwrap", "audit-hook-only"])
def test_a_real_signal_death_is_a_signal(isolation):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        segv = run_python("import ctypes\nctypes.string_at(0)", isolation=isolation)
        term = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)", isolation=isolation)
    assert (segv.returncode, segv.error) == (-11, "killed by signal SIGSEGV"), segv
    assert (term.returncode, term.error) == (-15, "killed by signal SIGTERM"), term


def test_output_at_its_size_limit_is_measured_by_the_parent():
    result = run_python("import sys\ntry:\n    for _ in range(20):\n        sys.stdout.write('x' * 1_000_000)\n"
                        "except OSError:\n    sys.exit(0)")
    assert result.error is None and "output truncated: 16777216 bytes" in result.stdout  # caught: a clean exit
    result = run_python("import sys\nfor _ in range(20):\n    sys.stdout.write('x' * 1_000_000)")
    assert result.error == "file size limit of 16 MB exceeded (output too large?)", result.error


def test_the_package_is_covered_wherever_a_bind_shows_it(tmp_path):
    lib = tmp_path / "venv" / "lib"
    (lib / "site" / "roma_lab").mkdir(parents=True)
    (tmp_path / "checkout").mkdir()
    binds = [(str(lib), "/sandbox/venv/lib"), (str(lib / "site"), "/usr/lib/site")]
    found = _sandbox._jail_paths({str(lib / "site" / "roma_lab"), str(tmp_path / "checkout")}, binds)
    assert found == ("/sandbox/venv/lib/site/roma_lab", "/usr/lib/site/roma_lab")  # the checkout is in no bind
    interpreter = _sandbox._interpreter()
    assert all(not p.endswith("__pycache__") for p in interpreter.hidden)  # site-packages' shared one stays
    assert set(interpreter.stubbed) <= set(interpreter.hidden)


def test_roma_lab_installed_in_site_packages_is_not_in_the_jail(scratch):
    # Issue 41: with a non-editable install (the package in the venv's site-packages, which the jail
    # binds), code in the jail imported roma_lab and could recompute the generated world's golds.
    venv = scratch("/tmp") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(subprocess.run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    shutil.copytree(Path(roma_lab.__file__).resolve().parent, site / "roma_lab",
                    ignore=shutil.ignore_patterns("__pycache__"))  # what `pip install .` puts there
    info = site / "roma_lab-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: roma_lab\nVersion: 0.1.0\n")
    (info / "RECORD").write_text("roma_lab/__init__.py,,\nroma_lab-0.1.0.dist-info/METADATA,,\n"
                                 "roma_lab-0.1.0.dist-info/RECORD,,\n")
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # its dependencies, not its code
    seen = "/sandbox/venv/" + str(site.relative_to(venv) / "roma_lab")  # where the jail binds it
    listing = f"import os\nprint(sorted(os.listdir({seen!r})))"
    driver = ("import json, roma_lab\nfrom roma_lab.tools._sandbox import check_sandbox, run_python\ncheck_sandbox()\n"
              f"r = run_python('import roma_lab')\nls = run_python({listing!r})\n"
              "print(json.dumps([roma_lab.__file__, r.error, ls.stdout]))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([venv / "bin" / "python", "-c", driver], capture_output=True, text=True, timeout=300, env=env,
                         cwd=venv)  # not the checkout: python -c puts the cwd first on its path
    assert out.returncode == 0, out.stderr[-2000:]
    imported_from, error, listing = json.loads(out.stdout.splitlines()[-1])
    assert imported_from == str(site / "roma_lab" / "__init__.py")  # the probe's layout: a copy in site-packages
    assert error == ("exited with code 1: ModuleNotFoundError: No module named 'roma_lab' (the roma_lab sandbox "
                     "hides it)"), f"ESCAPED: {error}"
    assert listing == "['__init__.py']\n"  # a read-only directory holding only the refusal


def test_control_bytes_in_the_output_are_escaped():
    result = run_python("import sys\nprint('a\\x00b\\x1b[31mc\\td\\r\\x7f\\x9b')\n"
                        "print('\\x1b]0;title\\x07', file=sys.stderr)\nsys.exit(1)")
    assert result.stdout == "a\\x00b\\x1b[31mc\td\\x0d\\x7f\\x9b\n"
    assert result.stderr == "\\x1b]0;title\\x07\n" and result.error == "exited with code 1: \\x1b]0;title\\x07"


def test_threads_and_processes_count_against_max_processes():
    code = ("import threading, time\nthreads = [threading.Thread(target=time.sleep, args=(0.5,)) for _ in range({n})]\n"
            "for t in threads:\n    t.start()\nprint('started', len(threads))")
    assert run_python(code.format(n=3), max_processes=4).stdout == "started 3\n"
    refused = run_python(code.format(n=4), max_processes=4)
    assert refused.error == "exited with code 1: RuntimeError: can't start new thread"


# --- isolation modes: the jail, or the weaker mode by name, never a silent fallback ----------------


@pytest.fixture
def no_bwrap(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no bwrap to find
    monkeypatch.delenv("ROMA_LAB_SANDBOX", raising=False)


def test_missing_bwrap_refuses_the_code_and_says_how_to_fix_it(no_bwrap):
    with pytest.raises(SandboxUnavailableError) as err:
        run_python("print(1)")
    message = str(err.value)
    assert "bwrap is not installed" in message and "apt-get install bubblewrap" in message
    assert "isolation='audit-hook-only'" in message and "ROMA_LAB_SANDBOX=audit-hook-only" in message


def test_bwrap_that_cannot_create_namespaces_refuses_the_code(tmp_path, monkeypatch):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailableError, match="Creating new namespace failed: Operation not permitted"):
        run_python("print(1)")


@pytest.fixture
def fresh_jail_check():
    _sandbox._jail_problem.cache_clear()
    yield
    _sandbox._jail_problem.cache_clear()


def test_without_a_cgroup_the_jail_is_refused_and_says_why(monkeypatch, fresh_jail_check):
    monkeypatch.setattr(_sandbox, "cgroup_problem", lambda: "no cgroup v2 mounted; no cgroup v1 memory and pids hierarchies")
    with pytest.raises(SandboxUnavailableError) as err:
        run_python("print(1)")
    message = str(err.value)
    assert "needs a cgroup" in message and "no cgroup v2 mounted" in message
    assert "isolation='audit-hook-only'" in message


def test_without_root_the_jail_is_refused(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SandboxUnavailableError, match="needs root"):
        check_sandbox()


def test_weaker_mode_runs_when_named_by_argument_and_warns(no_bwrap):
    with pytest.warns(RuntimeWarning, match="WITHOUT OS isolation"):
        result = run_python("import os\nprint(os.path.exists('/etc/passwd'))", isolation="audit-hook-only")
    assert result.stdout == "True\n"  # it really is weaker: the host's files are visible


def test_weaker_mode_runs_when_named_by_environment(no_bwrap, monkeypatch):
    monkeypatch.setenv("ROMA_LAB_SANDBOX", "audit-hook-only")
    with pytest.warns(RuntimeWarning):
        assert run_python("print(6 * 7)").stdout == "42\n"
    assert check_sandbox() == "audit-hook-only"


def test_the_jail_is_the_default(monkeypatch):
    monkeypatch.delenv("ROMA_LAB_SANDBOX", raising=False)
    assert check_sandbox() == "bwrap"
    assert run_python("import os\nprint(os.path.exists('/etc/passwd'))").stdout == "False\n"


@pytest.mark.parametrize("name", ["none", "", "BWRAP", "audit-hook"])
def test_unknown_isolation_name_is_an_error(name, monkeypatch):
    with pytest.raises(ValueError, match="unknown sandbox isolation"):
        run_python("print(1)", isolation=name)
    if name:  # an empty variable means unset
        monkeypatch.setenv("ROMA_LAB_SANDBOX", name)
        with pytest.raises(ValueError, match="unknown sandbox isolation"):
            run_python("print(1)")


def test_code_executor_without_the_jail_fails_the_node_before_asking_for_code(no_bwrap):
    # One answer only: asking the model for code would fail differently (no answer left).
    lm = DummyLM([{"is_atomic": True, "task_type": "code"}], adapter=dspy.JSONAdapter())
    run = Roma(lm=lm, max_depth=1).run("compute six times seven")
    assert run.status == "failed"
    assert "SandboxUnavailableError" in run.root.error and "bwrap is not installed" in run.root.error


def test_code_executor_weaker_mode_by_name(no_bwrap):
    executors = {"code": CodeExecutor(isolation="audit-hook-only")}
    with pytest.warns(RuntimeWarning):
        lm = DummyLM([{"is_atomic": True, "task_type": "code"}, {"code": "print(6 * 7)"}], adapter=dspy.JSONAdapter())
        run = Roma(lm=lm, max_depth=1, executors=executors).run("compute six times seven")
    assert run.status == "completed" and run.output == "42"


def test_code_killed_by_a_signal_reports_the_signal():
    # bwrap reports a signal as 128 + N: it must read as Popen's -N, as in the weaker mode.
    result = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert result.returncode == -9 and result.error == "killed by signal SIGKILL"
    exited = run_python("import sys\nsys.exit(3)")
    assert exited.returncode == 3 and exited.error == "exited with code 3"
