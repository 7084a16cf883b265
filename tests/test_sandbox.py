"""Sandbox for the `code` executor: output capture, limits, isolation. Each run is a real process."""

import os
import time

import pytest

from roma_lab.controller._sandbox import SandboxResult, run_python


def test_stdout_captured_and_clean_exit():
    result = run_python("print('hello', 6 * 7)")
    assert result == SandboxResult(stdout="hello 42\n", stderr="", returncode=0, timed_out=False, error=None)


def test_exception_reported_with_user_frames_only():
    result = run_python("def f():\n    raise ValueError('boom')\nf()")
    assert result.returncode == 1 and not result.timed_out
    assert result.error == "exited with code 1: ValueError: boom"
    assert "main.py" in result.stderr and "runpy" not in result.stderr


def test_infinite_loop_times_out_promptly():
    start = time.monotonic()
    result = run_python("while True:\n    pass", timeout_s=1.0)
    elapsed = time.monotonic() - start
    assert result.timed_out and result.error == "timed out after 1 s"
    assert elapsed < 5.0  # generous bound: a hang would block forever


def test_blocking_call_times_out_too():
    # RLIMIT_CPU would not catch a sleep: the wall-clock timeout must.
    start = time.monotonic()
    result = run_python("import time\ntime.sleep(30)", timeout_s=0.5)
    assert result.timed_out and time.monotonic() - start < 5.0


def test_memory_bomb_is_an_error_not_a_crash():
    result = run_python("x = bytearray(2 * 1024**3)\nprint('allocated')", memory_mb=256)
    assert result.returncode != 0 and "allocated" not in result.stdout
    assert result.error == "memory limit of 256 MB exceeded"


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


def test_cwd_is_a_fresh_temp_dir_removed_afterwards():
    code = "import os\nopen('note.txt', 'w').write('x')\nprint(os.getcwd())\nprint(os.listdir('.'))"
    result = run_python(code)
    cwd, listing = result.stdout.splitlines()
    assert "roma_sandbox_" in cwd and listing == "['note.txt']"
    assert not os.path.exists(cwd)


def test_output_truncated_to_bound():
    result = run_python("print('x' * 100_000)", max_output_chars=1000)
    assert result.stdout.startswith("x" * 1000)
    assert "output truncated" in result.stdout and len(result.stdout) < 1100


def test_syntax_error_reported():
    result = run_python("def f(:")
    assert result.error == "exited with code 1: SyntaxError: invalid syntax"


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [({"code": b"print(1)"}, TypeError), ({"code": "1", "timeout_s": 0}, ValueError),
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

