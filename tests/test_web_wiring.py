"""The web wired into the systems: ROMA's search executor and the agent search the web and read pages
(every call a tool call of the trace, with its price and whether a recording served it), evaluate
records a run's web into its folder and replays it with the web stopped, a model-chosen URL never
reaches this machine's private network, and no key reaches a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import dspy
import pytest

from roma_lab.agents import AgentConfig
from roma_lab.controller import Roma, ScriptedRoles, default_executors
from roma_lab.evaluate import agent, evaluate, roma, tasks_from, world_task_set
from roma_lab.lm import ScriptedEngine, script_reply
from roma_lab.web import ProviderStub, Web, WebResult, WebSettings, serve_offline_web
from roma_lab.world import generate_world

REPO = Path(__file__).resolve().parents[1]
ACTOR = ("action", "arguments", "answer")


@pytest.fixture(scope="module")
def site():
    world = generate_world()
    with serve_offline_web(dict(world.documents), files=dict(world.files)) as served:
        yield served


def web_tools(run):
    return [t for n in run.nodes for c in n.calls for t in c.tools if t.name.startswith("web_")]


def searching_roma(web, lm="scripted"):
    """ROMA whose scripted roles send the goal straight to the default search executor (which answers
    with the scripted model from the passages the web gave)."""
    roles = ScriptedRoles({}, root_type="search")
    return Roma(atomizer=roles.atomizer, planner=roles.planner, aggregator=roles.aggregator,
                executors=default_executors(web=web), lm=lm, max_depth=1)


# --- ROMA ------------------------------------------------------------------------------------------

def test_roma_searches_the_web_reads_the_first_hits_and_records_each_call_in_its_trace(site):
    with Web(site.settings(deadline_s=30.0)) as web:
        run = searching_roma(web).run("In what year was the Drustgeith Foundation founded?")
    calls = web_tools(run)
    assert [t.name for t in calls][:3] == ["web_search", "web_read", "web_read"]  # search, then the first two read
    assert {t.server for t in calls} == {"searxng", "reader"} and all(t.status == "ok" for t in calls)
    assert all(t.cost == 0.0 and not t.replayed for t in calls)  # a self-hosted search bills nothing
    (executor,) = [c for n in run.nodes for c in n.calls if c.role.startswith("executor")]
    passages = executor.outputs["passages"]
    assert any("Flam Theirtheth established the Drustgeith Foundation in 1958" in p for p in passages)
    assert site.url_of("doc", "profile-5841") in " ".join(passages)  # each passage names its page


def test_a_priced_search_is_billed_in_the_run_s_usage_and_an_unknown_price_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("SERPER_API_KEY", "planted-key-4f2a")
    hits = [WebResult("Paris", "https://example.org/paris", "Paris is the capital of France.")]
    with ProviderStub("serper", hits, key="planted-key-4f2a") as stub, \
            Web(WebSettings(search=stub.spec, deadline_s=30.0)) as web:
        roles = ScriptedRoles({}, root_type="search")
        from roma_lab.web import WebPassages

        executors = default_executors(web=web)
        executors["search"].retriever = WebPassages(web, read=0)  # no page read: only the priced search
        run = Roma(atomizer=roles.atomizer, planner=roles.planner, aggregator=roles.aggregator, executors=executors,
                   lm="scripted", max_depth=1).run("Capital of France?")
    (search,) = web_tools(run)
    assert search.server == "serper" and search.cost == pytest.approx(0.001)  # $1.00 per 1,000 searches
    executor = run.usage_df().set_index("component").loc["executor"]
    assert executor["cost"] == pytest.approx(0.001)  # the scripted model costs 0; the search is billed
    call = next(c for n in run.nodes for c in n.calls if c.tools)
    alone = replace(run, nodes=(replace(run.nodes[0], calls=(call,)),))  # the scripted roles' calls record no cost
    assert alone.usage().cost == pytest.approx(0.001) and alone.usage().model_calls == 1
    unpriced = replace(alone, nodes=(replace(alone.nodes[0], calls=(
        replace(call, tools=tuple(replace(t, cost=None) for t in call.tools)),)),))
    assert unpriced.usage().cost is None  # a search of unknown price: the run's cost unknown, never 0


def test_a_failed_search_is_an_error_in_the_trace_and_the_executor_answers_without_evidence(site):
    with ProviderStub("searxng", []) as stub, Web(WebSettings(search=stub.spec, retries=0, deadline_s=10.0)) as web:
        stub.fail("500")
        run = searching_roma(web).run("Anything?")
    (search,) = web_tools(run)
    assert search.status == "error" and "HTTP 500" in search.error and run.status == "completed"


# --- the agent -------------------------------------------------------------------------------------

def web_actor(site, question_target):
    """A scripted actor that searches, reads the first hit's page, then answers what the page says."""
    state = {"step": 0}

    def respond(request):
        if request.outputs != ACTOR:
            return script_reply(request)
        state["step"] += 1
        if state["step"] == 1:
            return {"thought": "", "action": "search", "arguments": json.dumps({"query": question_target}), "answer": ""}
        if state["step"] == 2:
            return {"thought": "", "action": "read_page",
                    "arguments": json.dumps({"url": site.url_of("doc", "profile-5841")}), "answer": ""}
        return {"thought": "", "action": "final_answer", "arguments": "{}", "answer": "1958"}

    return dspy.LM("scripted/web-actor", engine=ScriptedEngine(respond), cache=False)


def test_the_agent_searches_the_web_and_reads_a_page_each_a_metered_step(site, tmp_path):
    tasks = world_task_set("dev", 1, levels=["L1"], web=site.settings(deadline_s=30.0))
    result = evaluate([agent(AgentConfig(reanswer=False), web_actor(site, "Drustgeith Foundation founded"))], tasks,
                      out=tmp_path, progress=False)
    trajectory = result.trace("agent", result.rows["task_id"].iloc[0])
    steps = trajectory.rollouts[0].steps
    assert [s.action for s in steps] == ["search", "read_page", "final_answer"]
    search, read = steps[0].tool_call, steps[1].tool_call
    assert search.status == read.status == "ok" and search.cost == read.cost == 0.0
    assert "Flam Theirtheth established the Drustgeith Foundation in 1958" in steps[1].observation


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/", "http://169.254.169.254/latest/meta-data/",
                                 "http://[::1]:9/", "http://localhost:9/"])
def test_a_page_the_model_chooses_on_this_machine_s_network_is_refused_as_a_tool_error(site, tmp_path, url):
    def respond(request):
        if request.outputs != ACTOR:
            return script_reply(request)
        if "already" in request.inputs.get("feedback", "") or "refused" in request.inputs.get("memory", ""):
            return {"thought": "", "action": "final_answer", "arguments": "{}", "answer": "x"}
        return {"thought": "", "action": "read_page", "arguments": json.dumps({"url": url}), "answer": ""}

    lm = dspy.LM("scripted/ssrf", engine=ScriptedEngine(respond), cache=False)
    tasks = world_task_set("dev", 1, levels=["L1"], web=site.settings(deadline_s=10.0))  # its own host only
    result = evaluate([agent(AgentConfig(reanswer=False, max_steps=2), lm)], tasks, out=tmp_path, progress=False)
    step = result.trace("agent", result.rows["task_id"].iloc[0]).rollouts[0].steps[0]
    assert step.tool_call.status == "error" and "refused" in step.tool_call.error.lower()


# --- evaluate: a recorded web, replayed with the web gone -----------------------------------------

def test_a_recorded_run_replays_with_the_web_stopped_identically_and_makes_no_request(tmp_path):
    world = generate_world()
    with serve_offline_web(dict(world.documents), files=dict(world.files), port=0) as live:
        spec, allow = live.search_spec, live.allow_hosts
        recording = live.settings(recording="record", recording_dir=str(tmp_path / "rec"), deadline_s=30.0)
        first = evaluate([searching_roma_system()], world_task_set("dev", 2, levels=["L1"], web=recording),
                         out=tmp_path / "web", progress=False)
        made = live.requests
    assert made > 0 and (tmp_path / "web" / "web_snapshot" / "manifest.json").is_file()
    provenance = json.loads((tmp_path / "web" / "provenance.json").read_text())["extra"]["web"]
    assert provenance["recording"] == "record" and len(provenance["snapshot_sha256"]) == 64
    replay = WebSettings(search=spec, allow_hosts=allow, recording="replay",
                         recording_dir=str(tmp_path / "web" / "web_snapshot"))
    again = evaluate([searching_roma_system()], world_task_set("dev", 2, levels=["L1"], web=replay),
                     out=tmp_path / "replay", progress=False)
    keep = ["task_id", "prediction", "status", "score", "error"]
    assert again.rows[keep].equals(first.rows[keep]) and first.rows["error"].isna().all()
    for task in first.rows["task_id"]:
        recorded, replayed = web_tools(first.trace("roma", task)), web_tools(again.trace("roma", task))
        assert recorded and [t.arguments for t in replayed] == [t.arguments for t in recorded]
        assert all(t.replayed for t in replayed) and not any(t.replayed for t in recorded)
    # a snapshot edited after the run is refused, by name, before anything runs
    entry = next((tmp_path / "web" / "web_snapshot").rglob("*/*/*.json"))
    entry.write_text(entry.read_text().replace("}", " }", 1))  # one byte more: its hash no longer matches
    from roma_lab.web import DamagedRecordingError

    with pytest.raises(DamagedRecordingError, match=entry.name):
        world_task_set("dev", 2, levels=["L1"], web=replay)


def searching_roma_system():
    """``searching_roma`` as a system of ``evaluate`` (bound to each task set's web)."""
    from roma_lab.evaluate import RomaSystem

    roles = ScriptedRoles({}, root_type="search")
    return RomaSystem("scripted", "roma", roles={"atomizer": roles.atomizer, "planner": roles.planner,
                                                 "aggregator": roles.aggregator},
                      settings={"max_depth": 1})


def test_a_resumed_recorded_run_keeps_every_call_of_its_finished_rows_in_its_snapshot(tmp_path):
    world = generate_world()
    with serve_offline_web(dict(world.documents), files=dict(world.files)) as live:
        recording = live.settings(recording="record", recording_dir=str(tmp_path / "rec"), deadline_s=30.0)
        evaluate([searching_roma_system()], world_task_set("dev", 1, levels=["L1"], web=recording),
                 out=tmp_path / "web", progress=False)
        one = json.loads((tmp_path / "web" / "web_snapshot" / "manifest.json").read_text())["entries"]
        evaluate([searching_roma_system()], world_task_set("dev", 2, levels=["L1"], web=recording),
                 out=tmp_path / "web", progress=False)
    both = json.loads((tmp_path / "web" / "web_snapshot" / "manifest.json").read_text())["entries"]
    assert set(one) < set(both)  # the first task's calls (not made again) are still in the snapshot


def test_a_planted_key_reaches_no_file_of_a_run_nor_its_recording(tmp_path, monkeypatch):
    key = "sk-planted-7d1e9c"
    monkeypatch.setenv("SERPER_API_KEY", key)
    hits = [WebResult("Paris", "https://example.org/paris", "Paris is the capital of France.")]
    with ProviderStub("serper", hits, key=key) as stub:
        settings = WebSettings(search=stub.spec, recording="record", recording_dir=str(tmp_path / "rec"),
                               deadline_s=30.0)
        tasks = tasks_from([{"question": "Capital of France?", "answer": "Paris"}], web=settings)
        evaluate([roma("scripted", max_depth=0), agent(None, "scripted")], tasks, out=tmp_path / "out",
                 progress=False)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any("web_snapshot" in p.parts for p in files)
    assert not [p for p in files if key.encode() in p.read_bytes()]


def test_the_web_a_run_searched_is_part_of_its_record_and_a_change_is_refused(tmp_path, site):
    from roma_lab.evaluate import EvaluationMismatchError, single_call

    tasks = [{"question": "q?", "answer": "a"}]
    evaluate([single_call("scripted")], tasks_from(tasks, web=site.settings()), out=tmp_path, progress=False)
    with pytest.raises(EvaluationMismatchError, match="web search"):
        evaluate([single_call("scripted")], tasks_from(tasks), out=tmp_path, progress=False)


def test_corpus_and_web_together_are_refused_and_the_set_says_what_search_reads(site, tmp_path):
    from roma_lab.evaluate import TaskFileError

    tasks = tasks_from([{"question": "q?", "answer": "a"}], web=site.settings())
    assert "search reads the web (searxng=" in tasks.corpus_note()
    with pytest.raises(TaskFileError, match="corpus or the web"):
        replace(tasks, corpus=("a document",))


# --- from the shell --------------------------------------------------------------------------------

def test_the_shell_names_the_key_a_provider_needs_and_refuses_an_unknown_one(tmp_path):
    (tmp_path / "q.csv").write_text("question,answer\nq?,a\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"PYTHONPATH": str(REPO)}
    for web, says in (("serper", "needs $SERPER_API_KEY"), ("nope", "unknown web search provider 'nope'")):
        done = subprocess.run([sys.executable, "-m", "roma_lab.evaluate", str(tmp_path / "q.csv"), "--system",
                               "single", "--lm", "scripted", "--web", web, "--out", str(tmp_path / "out")],
                              capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


# --- MCP over HTTP with headers -------------------------------------------------------------------

def test_an_http_mcp_server_s_headers_are_never_recorded(tmp_path):
    from roma_lab.tools import McpServer

    server = McpServer.http("search", "http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer sk-mcp-planted"})
    assert "sk-mcp-planted" not in repr(server)
    assert server.describe() == {"name": "search", "url": "http://127.0.0.1:9/mcp", "env": [],
                                 "headers": ["Authorization"]}
    system = roma("scripted", mcp_servers=[server])
    text = json.dumps(system.describe())  # a record evaluate writes (it used to be a TypeError)
    assert "sk-mcp-planted" not in text and "Authorization" in text
    with pytest.raises(ValueError, match="headers go with an HTTP server"):
        McpServer("cmd", command="echo", headers={"X": "y"})
