"""Tools through MCP (issue 14 §2): executors call tools of MCP servers (official ``mcp`` SDK,
``dspy.Tool.from_mcp_tool``) beside the built-in ones; every tool call is in the trace and the usage
table; a server that dies, hangs, answers malformed results or never starts gives a typed status,
never a hang. The server is tests/mcp_server.py, started by each run over stdio (or HTTP).

Hang guards, not wall-clock assertions: every run has a generous ``run_timeout_s`` and must end
by itself (never ``timed_out``); a tool that hangs is cut by ``tool_timeout_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from roma_lab.controller import Roma
from roma_lab.lm import ScriptedRequest, script_reply, scripted_lm
from roma_lab.tools import (
    TOOL_LOG,
    McpServer,
    ToolLog,
    ToolTimeoutError,
    run_tools,
    traced_call,
)
from roma_lab.trace import Run

ROOT = Path(__file__).resolve().parents[1]
SERVER = str(ROOT / "tests" / "mcp_server.py")
GUARD_S = 240.0  # the run deadline as a hang guard: generous, a busy 2-core machine starts servers slowly


def server(*flags: str) -> McpServer:
    return McpServer.stdio("rivers", sys.executable, SERVER, *flags, env={"PYTHONPATH": str(ROOT)})


# The scripted model: a plan of two subtasks, one that must search and one that must compute; the
# ReAct executor picks the tool, then finishes; its answer is the tool's observation.
SEARCH_GOAL = "Which river flows through ten countries?"
COMPUTE_GOAL = "Compute twice the length of the Rhine in kilometres"
TOOL_FOR = {SEARCH_GOAL: ("search", {"query": "river flows through ten countries"}),
            COMPUTE_GOAL: ("calculate", {"expression": "1233 * 2"})}


def respond(request: ScriptedRequest):
    goal = request.inputs.get("goal", "").strip()
    if "subtasks" in request.outputs:
        return {"subtasks": [{"goal": SEARCH_GOAL, "task_type": "search", "depends_on": []},
                             {"goal": COMPUTE_GOAL, "task_type": "think", "depends_on": []}]}
    if "is_atomic" in request.outputs:
        return {"is_atomic": goal in TOOL_FOR, "task_type": "search" if goal == SEARCH_GOAL else "think"}
    if "next_tool_name" in request.outputs:
        if "observation_0" not in request.inputs:
            name, args = TOOL_FOR.get(goal, ("calculate", {"expression": "6 * 7"}))
            return {"next_thought": f"use {name}", "next_tool_name": name, "next_tool_args": args}
        return {"next_thought": "enough", "next_tool_name": "finish", "next_tool_args": {}}
    if "trajectory" in request.inputs and "output" in request.outputs:
        return {"reasoning": "from the tool", "output": request.inputs.get("observation_0", "").strip()}
    return script_reply(request)


def run_with(servers, goal: str, **kwargs) -> Run:
    roma = Roma(lm=scripted_lm(respond), mcp_servers=servers, run_timeout_s=GUARD_S, **kwargs)
    run = roma.run(goal)
    assert run.status != "timed_out", "the hang guard fired: a fault hung the run"
    return run


def test_a_roma_goal_uses_the_mcp_tools_and_the_trace_shows_each_call():
    run = run_with([server()], "How long is the Rhine twice, and which river crosses ten countries?", max_depth=1)
    assert run.status == "completed"
    by_goal = {n.goal: n for n in run.nodes}
    (search,) = [t for c in by_goal[SEARCH_GOAL].calls for t in c.tools]
    (compute,) = [t for c in by_goal[COMPUTE_GOAL].calls for t in c.tools]
    assert (search.name, search.server, search.status, search.error) == ("search", "rivers", "ok", None)
    assert search.arguments == {"query": "river flows through ten countries"} and search.result_chars > 0
    assert (compute.name, compute.arguments, compute.result_chars) == ("calculate", {"expression": "1233 * 2"}, 4)
    assert compute.latency_s >= 0 and compute.started_s > 0
    # the answers came from the tools
    assert "Danube" in by_goal[SEARCH_GOAL].output and by_goal[COMPUTE_GOAL].output == "2466"
    usage = run.usage_df().set_index("component")
    assert usage.loc["executor", "tool_calls"] == 2 and usage.loc["total", "tool_errors"] == 0
    tools = run.tools_df()
    assert sorted(tools["tool"]) == ["calculate", "search"] and set(tools["server"]) == {"rivers"}
    assert Run.from_json(run.to_json()) == run


# fault, how the server is broken, settings, the typed status in the trace
TOOL_FAULTS = [
    ("server dies during the call", "die", {}, "disconnected", "Connection closed"),
    ("tool never answers", "hang", {"tool_timeout_s": 2.0}, "timed_out", "no answer within 2 s"),
    ("result breaks the declared schema", "malformed", {}, "malformed", "Invalid structured content"),
    ("tool reports an error", "error", {}, "error", "the tool reported an error: division by zero"),
]


@pytest.mark.parametrize("fault, flag, settings, status, message", TOOL_FAULTS, ids=[f[1] for f in TOOL_FAULTS])
def test_a_failing_tool_call_is_typed_in_the_trace_and_never_hangs(fault, flag, settings, status, message):
    run = run_with([server("--fault", flag)], "What is 6 * 7?", max_depth=0, **settings)
    (call,) = run.root.calls
    (tool,) = call.tools
    assert (tool.name, tool.server, tool.status, tool.result_chars) == ("calculate", "rivers", status, None)
    assert message in tool.error and tool.error.startswith("tool 'calculate' of MCP server 'rivers'")
    # ReAct showed the failure to the model, which answered from it: the node ends, with the fault visible
    assert run.root.status == "completed" and message in run.output
    assert run.usage_df().set_index("component").loc["total", "tool_errors"] == 1


@pytest.mark.parametrize("flag, settings, message", [
    ("exit", {}, "MCP server 'rivers' could not be reached: MCPError: Connection closed"),
    ("no_start", {"mcp_start_timeout_s": 3.0}, "MCP server 'rivers' did not start and list its tools within 3 s"),
], ids=["exits-at-start", "never-answers-the-handshake"])
def test_a_server_that_cannot_start_fails_the_root_naming_it_before_any_call(flag, settings, message):
    run = run_with([server("--fault", flag)], "What is 6 * 7?", max_depth=0, **settings)
    assert run.status == "failed" and run.root.calls == ()
    assert run.root.error == f"McpServerError: {message}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_over_streamable_http_on_loopback():
    port = free_port()
    process = subprocess.Popen([sys.executable, SERVER, "--http", str(port)], cwd=ROOT,
                               env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    try:
        deadline = time.monotonic() + GUARD_S  # hang guard while the server starts
        while True:
            assert process.poll() is None and time.monotonic() < deadline, "the HTTP server did not come up"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        run = run_with([McpServer.http("rivers", f"http://127.0.0.1:{port}/mcp")], "What is 6 * 7?", max_depth=0)
    finally:
        process.terminate()
        process.wait(30)
    (tool,) = run.root.calls[0].tools
    assert (tool.name, tool.server, tool.status) == ("calculate", "rivers", "ok") and run.output == "42"


def test_a_server_over_http_that_wants_a_key_in_a_header_gets_it_and_without_it_refuses():
    port = free_port()
    process = subprocess.Popen([sys.executable, SERVER, "--http", str(port), "--require-header",
                                "Authorization=Bearer sk-mcp-test"], cwd=ROOT,
                               env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    try:
        deadline = time.monotonic() + GUARD_S
        while True:
            assert process.poll() is None and time.monotonic() < deadline, "the HTTP server did not come up"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        url = f"http://127.0.0.1:{port}/mcp"
        keyed = run_with([McpServer.http("rivers", url, headers={"Authorization": "Bearer sk-mcp-test"})],
                         "What is 6 * 7?", max_depth=0)
        bare = run_with([McpServer.http("rivers", url)], "What is 6 * 7?", max_depth=0, mcp_start_timeout_s=10.0)
    finally:
        process.terminate()
        process.wait(30)
    assert keyed.output == "42" and keyed.root.calls[0].tools[0].status == "ok"
    assert bare.status == "failed" and "MCP server 'rivers'" in bare.root.error
    assert "sk-mcp-test" not in keyed.to_json() + bare.to_json()  # the key is in no trace


def test_two_servers_listing_the_same_tool_name_fail_the_root_naming_it():
    twin = McpServer.stdio("rivers-twin", sys.executable, SERVER, env={"PYTHONPATH": str(ROOT)})
    run = run_with([server(), twin], "What is 6 * 7?", max_depth=0)
    assert run.status == "failed" and run.root.calls == ()
    assert run.root.error == ("McpServerError: MCP server 'rivers-twin' lists tools another server lists too: "
                              "['calculate', 'search']")


def test_an_mcp_tool_may_not_shadow_a_built_in_tool():
    from roma_lab.controller import default_executors

    executors = default_executors(["The Danube flows through ten countries."], tools=True)  # built-in search
    run = run_with([server()], "What is 6 * 7?", max_depth=0, executors=executors)
    assert run.root.status == "failed" and "two tools are named ['search']" in run.root.error


def test_built_in_tools_are_traced_the_same_way():
    from roma_lab.controller import default_executors

    def use_search(request: ScriptedRequest):
        if "next_tool_name" in request.outputs and "observation_0" not in request.inputs:
            return {"next_thought": "look it up", "next_tool_name": "search", "next_tool_args": {"query": "Danube"}}
        return respond(request)

    executors = default_executors(["The Danube flows through ten countries."], tools=True)
    run = Roma(lm=scripted_lm(use_search), executors=executors, max_depth=0,
               run_timeout_s=GUARD_S).run("Which river flows through ten countries?")
    (tool,) = run.root.calls[0].tools
    assert (tool.name, tool.server, tool.status, tool.arguments) == ("search", None, "ok", {"query": "Danube"})
    assert "Danube" in run.output


def test_a_tool_that_ignores_cancellation_is_still_cut_at_its_time_limit():
    async def stubborn():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # refuses to stop when the time limit cancels it
        await asyncio.sleep(10)  # stops at the next cancellation (asyncio.run's, at the end of the test)

    async def call():
        log = ToolLog(time.monotonic(), timeout_s=0.2)
        TOOL_LOG.set(log)
        with pytest.raises(ToolTimeoutError, match="tool 'slow': no answer within 0.2 s"):
            await traced_call("slow", None, {"x": 1}, stubborn)
        return log.calls

    (record,) = asyncio.run(asyncio.wait_for(call(), 30))  # the guard: it must return, not hang
    assert (record.name, record.status, record.arguments, record.result_chars) == ("slow", "timed_out", {"x": 1}, None)


def test_mcp_servers_are_checked_where_they_are_given():
    with pytest.raises(ValueError, match="exactly one of command"):
        McpServer("x")
    with pytest.raises(ValueError, match="needs a name"):
        McpServer.http(" ", "http://127.0.0.1:1/mcp")
    with pytest.raises(ValueError, match="names must be unique"):
        Roma(lm=scripted_lm(), mcp_servers=[server(), server()])
    with pytest.raises(TypeError, match="must be McpServer objects"):
        Roma(lm=scripted_lm(), mcp_servers=["python server.py"])


def test_run_tools_is_empty_outside_a_run():
    assert run_tools() == ()


# --- a server's processes end with the run (issue 21 §4) ---

def pids_in(folder: Path, *, clean: bool) -> list[int]:
    """The pids the test server wrote: with ``clean``, also its daemon with an empty environment."""
    names = ["pids", "pids.wrapper"] + (["pids.clean"] if clean else [])
    return [int(p) for name in names if (folder / name).exists() for p in (folder / name).read_text().split()]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")  # a zombie has ended
    except FileNotFoundError:
        return False


def assert_all_gone(pids: list[int], within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s  # bounded poll: the kill is asynchronous
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if alive(p)], f"still alive {within_s:g} s after the run: {pids}"


def blocks_after_the_tool(reached: threading.Event, release: threading.Event):
    """The scripted model: call the tool, then block the run's loop (a role that never yields)."""
    def blocking(request: ScriptedRequest):
        if "observation_0" in request.inputs:
            reached.set()
            release.wait(120)
        return respond(request)
    return blocking


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup", "no cgroup"])
@pytest.mark.parametrize("how", ["ends normally", "dies during the call", "wrapped by a launcher", "run times out"])
def test_every_process_of_a_stdio_server_ends_with_the_run(how, cgroup, tmp_path, monkeypatch):
    try:
        from roma_lab.tools import _cgroup
    except ImportError:  # code from before cgroups (measuring it): it runs as it did
        _cgroup = None
    if _cgroup is not None and cgroup and _cgroup.cgroup_problem() is not None:
        pytest.skip(f"no cgroup here: {_cgroup.cgroup_problem()}")
    if _cgroup is not None and not cgroup:  # the fallback: the process group and the inherited marker
        monkeypatch.setattr(_cgroup, "cgroup_problem", lambda: "turned off by the test")
    flags = ["--spawn", str(tmp_path / "pids")]
    flags += {"dies during the call": ["--fault", "die"], "wrapped by a launcher": ["--wrap"]}.get(how, [])
    if how == "run times out":
        reached, release = threading.Event(), threading.Event()
        roma = Roma(lm=scripted_lm(blocks_after_the_tool(reached, release)), mcp_servers=[server(*flags)],
                    max_depth=0, run_timeout_s=30)
        try:
            run = roma.run("What is 6 * 7?")
            assert reached.is_set() and run.status == "timed_out"
            check_gone(tmp_path, cgroup)
        finally:
            release.set()
        return
    run = run_with([server(*flags)], "What is 6 * 7?", max_depth=0)
    (tool,) = run.root.calls[0].tools
    assert tool.status == ("disconnected" if how == "dies during the call" else "ok")
    assert len(pids_in(tmp_path, clean=False)) == (4 if how == "wrapped by a launcher" else 3)  # server, child,
    check_gone(tmp_path, cgroup)  # setsid daemon (+ the launcher)


def check_gone(folder: Path, cgroup: bool) -> None:
    """Every process of the server is gone; without a cgroup, the daemon that left both the process
    group and the environment escapes (design/mcp.md): it is ended here, by its pid."""
    try:
        assert_all_gone(pids_in(folder, clean=cgroup))
    finally:
        if not cgroup:
            for pid in pids_in(folder, clean=True):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


# --- tool results are bounded (issue 21 §4) ---

@pytest.mark.parametrize("store", [True, False], ids=["with a store", "without a store"])
def test_a_huge_tool_result_is_cut_in_prompt_and_trace_and_kept_as_an_artifact(store, tmp_path):
    from mcp_server import BIG_CHARS

    from roma_lab.tools import ArtifactStore

    artifacts = ArtifactStore(tmp_path / "store") if store else None
    run = run_with([server("--fault", "big")], "What is 6 * 7?", max_depth=0, artifacts=artifacts)
    (call,) = run.root.calls
    (tool,) = call.tools
    limit = run.settings.max_tool_result_chars
    assert (tool.status, tool.result_chars) == ("ok", BIG_CHARS)  # the whole size is recorded ...
    assert limit < tool.shown_chars < limit + 300  # ... and the model saw the cut, with a note
    prompts = sum(len(json.dumps(e.messages)) for e in call.exchanges)
    assert prompts < 20 * limit, "the prompt holds the whole result"
    assert len(run.to_json()) < 200_000
    assert "more characters cut" in run.output
    if store:
        assert tool.artifact.startswith("sha256:") and tool.artifact in run.output
        assert run.artifact_store == artifacts.url
        assert len(artifacts.read_text(tool.artifact)) == BIG_CHARS
    else:
        assert tool.artifact is None and run.artifact_store is None
    assert Run.from_json(run.to_json()) == run


def test_max_tool_result_chars_none_passes_results_whole():
    run = run_with([server()], "What is 6 * 7?", max_depth=0, max_tool_result_chars=None)
    (tool,) = run.root.calls[0].tools
    assert (tool.result_chars, tool.shown_chars, tool.artifact) == (2, None, None) and run.output == "42"
