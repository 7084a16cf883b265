"""The cgroup helper (roma_lab/tools/_cgroup.py): limits that hold for a whole process tree,
a kill that leaves nothing, an honest OOM report, nothing left behind. Real cgroups (root)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roma_lab.tools import _cgroup
from roma_lab.tools._cgroup import Cgroup, CgroupUnavailableError, cgroup_problem

pytestmark = pytest.mark.skipif(cgroup_problem() is not None, reason=f"no cgroup here: {cgroup_problem()}")

_SLEEPER = "import time\ntime.sleep(120)"


def _wait_for(condition, bound_s: float = 30.0) -> bool:
    """Poll until ``condition`` holds or ``bound_s`` passes (a liveness bound, not a speed test)."""
    for _ in range(int(bound_s / 0.02)):
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_limits_are_written_and_the_group_is_removed():
    with Cgroup.create("test", memory_bytes=64 << 20, max_pids=5) as group:
        assert all(os.path.isdir(p) for p in group.paths) and group.version in (1, 2)
        if group.version == 2:
            assert Path(group.paths[0], "memory.max").read_text().strip() == str(64 << 20)
            assert Path(group.paths[0], "pids.max").read_text().strip() == "5"
        else:
            memory, pids = group.paths
            assert Path(memory, "memory.limit_in_bytes").read_text().strip() == str(64 << 20)
            memsw = Path(memory, "memory.memsw.limit_in_bytes")
            assert not memsw.exists() or memsw.read_text().strip() == str(64 << 20)  # swap counted too
            assert Path(pids, "pids.max").read_text().strip() == "5"
        assert group.pids() == []
    assert not any(os.path.exists(p) for p in group.paths)
    group.remove()  # idempotent


def test_every_thread_and_process_of_the_tree_counts_against_max_pids():
    code = ("import os, threading, time\nstarted = 0\ntry:\n    for _ in range(20):\n"
            "        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n        started += 1\n"
            "except RuntimeError:\n    pass\nprint(started)")
    with Cgroup.create("test", max_pids=4) as group:
        out = subprocess.run([sys.executable, "-c", code], preexec_fn=group.join_current_process,
                             capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "3"  # the main thread plus 3 of 20


def test_memory_limit_holds_for_memory_no_process_owns_and_is_reported():
    # A memfd is charged to the group though no process maps it: the whole tree is bounded.
    code = ("import os\nfd = os.memfd_create('m')\nfor n in range(1, 257):\n    os.write(fd, bytes(1 << 20))\n"
            "    print(n, flush=True)")
    with Cgroup.create("test", memory_bytes=64 << 20, max_pids=4) as group:
        out = subprocess.run([sys.executable, "-c", code], preexec_fn=group.join_current_process,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == -9 and group.oom_killed()
    assert int(out.stdout.split()[-1]) < 64


def test_oom_killed_is_false_for_a_group_within_its_limit():
    with Cgroup.create("test", memory_bytes=128 << 20) as group:
        subprocess.run([sys.executable, "-c", "print(1)"], preexec_fn=group.join_current_process, check=True)
        assert not group.oom_killed()


def test_kill_all_ends_a_tree_of_session_leaders_and_keeps_the_group_usable():
    code = ("import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n"
            "        if os.fork() == 0:\n            time.sleep(120)\n        os._exit(0)\ntime.sleep(120)")
    with Cgroup.create("test", max_pids=20) as group:
        proc = subprocess.Popen([sys.executable, "-c", code], preexec_fn=group.join_current_process)
        assert _wait_for(lambda: len(group.pids()) == 4)  # the parent and three detached grandchildren
        members = group.pids()
        group.kill_all()
        proc.wait(timeout=30)
        assert group.pids() == [] and _wait_for(lambda: not any(map(_alive, members)))
        # the limit is restored after the kill: the group can run a new process
        assert subprocess.run([sys.executable, "-c", "import os\nos.fork() or print('forked')"],
                              preexec_fn=group.join_current_process, capture_output=True, text=True,
                              timeout=60).stdout == "forked\n"


def test_remove_kills_what_is_left():
    group = Cgroup.create("test")
    proc = subprocess.Popen([sys.executable, "-c", _SLEEPER], preexec_fn=group.join_current_process)
    assert _wait_for(lambda: group.pids() == [proc.pid])
    group.remove()
    assert proc.wait(timeout=30) == -9 and not any(os.path.exists(p) for p in group.paths)


def test_join_argv_joins_the_group_and_a_new_session_before_exec():
    with Cgroup.create("test", max_pids=10) as group:
        argv = group.join_argv([sys.executable, "-c", "import os\nprint(os.getpid() == os.getsid(0))\n"
                                "print(open('/proc/self/cgroup').read())"])
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    same_session, cgroups = out.stdout.split("\n", 1)
    name = os.path.basename(group.paths[0])
    assert same_session == "True" and f"/{name}" in cgroups


def test_join_argv_refuses_an_empty_command_and_names_the_usage():
    with Cgroup.create("test") as group:
        with pytest.raises(ValueError, match="empty argv"):
            group.join_argv([])
        out = subprocess.run([sys.executable, "-m", "roma_lab.tools._cgroup", "exec", *group.paths],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "usage:" in out.stderr


@pytest.mark.parametrize("label", ["", "a/b", "..", "x" * 65, "sp ace"])
def test_bad_label_is_a_value_error(label):
    if label == "..":
        label = "../escape"
    with pytest.raises(ValueError, match="cgroup label"):
        Cgroup.create(label)


@pytest.mark.parametrize("kwargs", [{"memory_bytes": 0}, {"max_pids": -1}, {"memory_bytes": 1.5}])
def test_bad_limits_are_value_errors(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        Cgroup.create("test", **kwargs)


def test_without_root_no_cgroup_and_the_error_says_why(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(CgroupUnavailableError, match="needs root"):
        Cgroup.create("test")


def test_groups_left_by_a_killed_process_are_swept():
    # A creator killed with -9 never removes its group: the next process to set up removes it.
    creator = subprocess.run([sys.executable, "-c", "import os\nfrom roma_lab.tools._cgroup import Cgroup\n"
                              "g = Cgroup.create('test')\nprint(*g.paths)\nos._exit(0)"],
                             capture_output=True, text=True, timeout=60, check=True)
    left = creator.stdout.split()
    assert left and all(os.path.isdir(p) for p in left)
    _cgroup._layout.cache_clear()
    with Cgroup.create("test"):
        assert not any(os.path.exists(p) for p in left)
