"""Artifacts by reference (issue 14 §1): a content-addressed fsspec store; long node outputs reach
dependents and the parent as a reference plus a bounded summary; roles read the full text through
``read_artifact`` (traced); the run file keeps references and hashes; missing or corrupted
artifacts are typed errors naming them; old run files still load."""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from roma_lab.controller import Roma
from roma_lab.tools import (
    ArtifactCorruptedError,
    ArtifactError,
    ArtifactMissingError,
    ArtifactStore,
    read_artifact,
)
from roma_lab.trace import ArtifactRef, InvalidRunError, Node, Run

RUNS = Path(__file__).parent / "fixtures" / "runs"
NOTE = 600  # characters of every executor output: well over the artifact threshold below


def run_bounded(roma: Roma, goal: str = "root") -> Run:
    """A hung controller fails the test instead of hanging it."""
    return asyncio.run(asyncio.wait_for(roma.arun(goal), 30))


class NoteRoles:
    """root -> a, b (b depends on a); executors write a long note naming their goal; every context and
    every aggregator input is kept. With ``read_full`` the aggregator reads each child's artifact."""

    def __init__(self, read_full: bool = False, bogus_ref: str | None = None):
        self.read_full = read_full
        self.bogus_ref = bogus_ref
        self.contexts: dict[str, str] = {}
        self.aggregated: list[dict] = []

    @staticmethod
    def note(goal: str) -> str:
        return f"note on {goal}: " + "".join(f"{goal}{i % 10}" for i in range(NOTE))[:NOTE]

    async def atomizer(self, goal, context):
        return SimpleNamespace(is_atomic=goal != "root", task_type="think")

    async def planner(self, goal, context):
        return SimpleNamespace(subtasks=[{"goal": "a", "task_type": "think", "depends_on": []},
                                         {"goal": "b", "task_type": "think", "depends_on": [0]}])

    async def executor(self, goal, context):
        self.contexts[goal] = context
        return SimpleNamespace(output=self.note(goal))

    async def aggregator(self, goal, context, subtask_results):
        self.aggregated = subtask_results
        if self.bogus_ref is not None:
            read_artifact(self.bogus_ref)
        if self.read_full:
            return SimpleNamespace(output=" | ".join(read_artifact(r["artifact"]) for r in subtask_results))
        return SimpleNamespace(output=" | ".join(r["output"] for r in subtask_results))

    def roma(self, **kwargs) -> Roma:
        return Roma(atomizer=self.atomizer, planner=self.planner, executors={"think": self.executor},
                    aggregator=self.aggregator, max_depth=1, **kwargs)


# --- the store ----------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["local", "memory://roma-artifact-test"])
def test_store_is_content_addressed_and_checks_every_read(tmp_path, url):
    store = ArtifactStore(tmp_path / "store" if url == "local" else url)
    ref = store.put("a dataset\n" * 100)
    assert ref.sha256 == hashlib.sha256(("a dataset\n" * 100).encode()).hexdigest()
    assert ref.size == 1000 and ref.id == f"sha256:{ref.sha256}"
    assert store.put("a dataset\n" * 100) == ref  # the same content is the same artifact
    assert store.read_text(ref) == store.read_text(ref.id) == "a dataset\n" * 100
    assert store.read_bytes(ref.sha256) == ("a dataset\n" * 100).encode()


def test_a_local_store_survives_the_run_and_keeps_one_file_per_content(tmp_path):
    ref = ArtifactStore(tmp_path).put(b"\x00binary")
    again = ArtifactStore(str(tmp_path))  # a new process would open it like this
    assert again.read_bytes(ref) == b"\x00binary"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [ref.sha256]


def test_missing_and_corrupted_artifacts_are_typed_errors_naming_them(tmp_path):
    store = ArtifactStore(tmp_path)
    ref = store.put("the real content")
    path = tmp_path / ref.sha256[:2] / ref.sha256
    path.write_text("the real content, edited")
    with pytest.raises(ArtifactCorruptedError, match=f"sha256:{ref.sha256}.*corrupted"):
        store.read_text(ref)
    store.put("the real content")  # writing the content again repairs the stored copy
    assert store.read_text(ref) == "the real content"
    path.unlink()
    with pytest.raises(ArtifactMissingError, match=f"sha256:{ref.sha256} is missing from store {tmp_path}"):
        store.read_text(ref)
    with pytest.raises(ArtifactError, match="not an artifact id"):
        store.read_text("sha256:xyz")


def test_read_artifact_outside_a_run_says_where_it_works():
    with pytest.raises(ArtifactError, match="inside a role call of a ROMA run"):
        read_artifact("sha256:" + "0" * 64)


# --- outputs by reference in a run --------------------------------------------------------------

def test_long_outputs_reach_dependents_and_parent_as_reference_and_summary(tmp_path):
    roles = NoteRoles()
    run = run_bounded(roles.roma(artifacts=tmp_path, artifact_chars=100, summary_chars=50))
    assert run.status == "completed" and run.artifact_store == str(tmp_path)
    a, b = run.node("0.0"), run.node("0.1")
    store = ArtifactStore(tmp_path)
    for node in (a, b):
        assert store.read_text(node.artifact) == roles.note(node.goal)  # the full text is in the store
        assert node.output == roles.note(node.goal)[:50] + "…"  # the node keeps the bounded summary
    # b's context names a's artifact and shows its summary, never its full text
    assert a.artifact.id in roles.contexts["b"] and roles.note("a")[:50] in roles.contexts["b"]
    assert roles.note("a") not in roles.contexts["b"]
    # the aggregator gets summaries and ids (typed field `artifact`), not the notes
    assert [r["artifact"] for r in roles.aggregated] == [a.artifact.id, b.artifact.id]
    assert all(len(r["output"]) == 51 for r in roles.aggregated)
    # the root's output is the run's answer: always whole, never a reference
    assert run.root.artifact is None and run.output == f"{a.output} | {b.output}"


def test_the_artifact_is_the_producing_calls_when_another_call_returned_the_same_text(tmp_path):
    """The verifier rejects a's first note and accepts the second, identical one: the node's output is
    the second call's, so that call records the reference and summary; the rejected one keeps its text."""
    roles, asked = NoteRoles(), []

    async def verifier(goal, context, candidate):
        asked.append(goal)
        return SimpleNamespace(verdict=goal != "a" or asked.count("a") > 1, feedback="once more")

    run = run_bounded(roles.roma(artifacts=tmp_path, artifact_chars=100, summary_chars=50, verifier=verifier))
    a = run.node("0.0")
    assert run.status == "completed" and a.status == "completed" and asked.count("a") == 2
    rejected, kept = [c for c in a.calls if c.role == "executor:think"]
    assert rejected.outputs == {"output": roles.note("a")}  # the same text, not the output the node kept
    assert kept.outputs == {"output": a.output, "artifact": a.artifact.id} and a.output == roles.note("a")[:50] + "…"


def test_without_a_threshold_or_under_it_outputs_stay_whole(tmp_path):
    for kwargs in ({}, {"artifacts": tmp_path, "artifact_chars": 10_000}):
        roles = NoteRoles()
        run = run_bounded(roles.roma(**kwargs))
        assert all(n.artifact is None for n in run.nodes) and run.artifact_store is None
        assert run.node("0.0").output == roles.note("a") and roles.note("a") in roles.contexts["b"]


def test_a_role_reads_the_full_content_through_the_accessor_and_the_trace_shows_it(tmp_path):
    roles = NoteRoles(read_full=True)
    run = run_bounded(roles.roma(artifacts=tmp_path, artifact_chars=100))
    assert run.output == f"{roles.note('a')} | {roles.note('b')}"
    (aggregate,) = run.root.calls[2:]
    assert [(t.name, t.server, t.status, t.result_chars) for t in aggregate.tools] == [
        ("read_artifact", None, "ok", len(roles.note("a"))), ("read_artifact", None, "ok", len(roles.note("b")))]
    assert aggregate.tools[0].arguments == {"ref": run.node("0.0").artifact.id}
    tools = run.tools_df()
    assert list(tools["tool"]) == ["read_artifact"] * 2 and set(tools["node_id"]) == {"0"}
    usage = run.usage_df().set_index("component")
    assert usage.loc["aggregator", "tool_calls"] == 2 and usage.loc["total", "tool_errors"] == 0


def test_a_role_reading_a_missing_artifact_fails_its_node_naming_the_artifact(tmp_path):
    bogus = "sha256:" + "ab" * 32
    run = run_bounded(NoteRoles(bogus_ref=bogus).roma(artifacts=tmp_path, artifact_chars=100))
    assert run.status == "failed"
    assert "ArtifactMissingError" in run.root.error and bogus in run.root.error
    (tool,) = run.root.calls[-1].tools
    assert tool.status == "error" and bogus in tool.error


def test_a_store_that_cannot_be_written_fails_the_node_with_a_typed_error(tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the store should be")
    run = run_bounded(NoteRoles().roma(artifacts=blocked, artifact_chars=100))
    assert run.node("0.0").status == "failed" and run.node("0.1").status == "skipped"
    assert run.node("0.0").error.startswith("node 0.0: could not write artifact sha256:")


def test_a_threshold_without_a_store_is_refused_where_it_is_set():
    with pytest.raises(ValueError, match="artifact_chars is set but there is no artifact store"):
        NoteRoles().roma(artifact_chars=100)


# --- the run file -------------------------------------------------------------------------------

def test_the_run_file_keeps_references_and_hashes_not_contents(tmp_path):
    roles = NoteRoles()
    run = run_bounded(roles.roma(artifacts=tmp_path, artifact_chars=100))
    text = run.to_json()
    assert Run.from_json(text) == run
    record = json.loads(text)
    (a,) = [n for n in record["nodes"] if n["id"] == "0.0"]
    assert a["artifact"] == {"sha256": run.node("0.0").artifact.sha256, "size": NOTE + len("note on a: "),
                             "media_type": "text/plain"}
    assert roles.note("a") not in text and record["artifact_store"] == str(tmp_path)
    # the executor call that wrote the note records the reference and summary too
    (execute,) = run.node("0.0").calls
    assert execute.outputs == {"output": run.node("0.0").output, "artifact": run.node("0.0").artifact.id}


def completed_with(child_changes: dict, **run_changes) -> Run:
    """A completed two-node run, its child changed."""
    root = Node(id="0", parent_id=None, depth=0, goal="g", task_type="think", status="completed", output="o")
    child = Node(id="0.0", parent_id="0", depth=1, goal="c", task_type="think", status="completed", output="s")
    return Run(goal="g", status="completed", output="o", nodes=(root, replace(child, **child_changes)), wall_s=1.0,
               **run_changes)


REF = ArtifactRef("c" * 64, 10)


@pytest.mark.parametrize("node_changes, run_changes, message", [
    ({"artifact": REF}, {}, "has an artifact but the run names no artifact store"),
    ({"artifact": ArtifactRef("C" * 64, 10)}, {"artifact_store": "/s"}, "needs a SHA-256"),
    ({"artifact": ArtifactRef("c" * 64, -1)}, {"artifact_store": "/s"}, "size >= 0"),
])
def test_broken_artifact_records_are_invalid_runs(node_changes, run_changes, message):
    with pytest.raises(InvalidRunError, match=message):
        completed_with(node_changes, **run_changes)


def test_a_failed_node_or_the_root_never_carries_an_artifact():
    root = Node(id="0", parent_id=None, depth=0, goal="g", task_type="think", status="completed", output="o",
                artifact=REF)
    with pytest.raises(InvalidRunError, match="root's output is the run's answer"):
        Run(goal="g", status="completed", output="o", nodes=(root,), wall_s=1.0, artifact_store="/s")
    failed = Node(id="0", parent_id=None, depth=0, goal="g", task_type="think", status="failed", error="x",
                  artifact=REF)
    with pytest.raises(InvalidRunError, match="is failed but has an artifact"):
        Run(goal="g", status="failed", output=None, nodes=(failed,), wall_s=1.0, artifact_store="/s")


def test_a_run_file_written_before_artifacts_loads_and_saves_with_the_new_fields_unrecorded():
    text = (RUNS / "run_main_f08eb8c.json").read_text()
    run = Run.from_json(text)
    assert run.status == "partial" and run.artifact_store is None and run.repair is None
    assert all(n.artifact is None and not n.reused and all(c.tools == () for c in n.calls) for n in run.nodes)
    assert run.settings.artifact_chars is None and run.settings.tool_timeout_s == 30.0
    saved, old = json.loads(run.to_json()), json.loads(text)
    for node in old["nodes"]:
        node.update(artifact=None, reused=False)
        for call in node["calls"]:
            call["tools"] = []
            for exchange in call.get("exchanges", []):
                exchange["recorded_latency_s"] = None  # no cache latency recorded then (issue 26)
                exchange["recorded_at"] = None  # nor when an entry was recorded (issue 54)
    old.update(artifact_store=None, repair=None, kind="run")  # saved traces name their kind (issue 40)
    old["settings"].update(artifacts={"min_chars": None, "summary_chars": 200},
                           tools={"call_timeout_s": 30.0, "mcp_start_timeout_s": 60.0})
    assert saved == old  # every old field keeps its value


# --- the measurement behind notebook 02's with/without references section ------------------------

def test_references_shrink_the_contexts_above_long_outputs_and_nothing_else(tmp_path):
    from roma_lab.papers.roma import measure_references

    tables = measure_references(tmp_path, depths=(1, 3), artifact_chars=200, summary_chars=80, tokenizer="whitespace")
    calls, summary = tables["references"], tables["references_summary"]
    by = summary.set_index(["depth", "node_depth", "role", "mode"])
    # depth 1: every output is short, nothing is stored, both modes see the same contexts
    shallow = calls[calls["depth"] == 1].groupby("mode")[["context_chars", "context_tokens"]].sum()
    assert shallow.loc["whole"].tolist() == shallow.loc["by_reference"].tolist()
    # depth 3: the root's aggregator is shown its children's long outputs as summaries and references
    whole, ref = by.loc[(3, 0, "aggregator", "whole")], by.loc[(3, 0, "aggregator", "by_reference")]
    assert ref["context_chars"] < whole["context_chars"] and ref["context_tokens"] < whole["context_tokens"]
    assert any((tmp_path / "artifacts").rglob("*"))  # the store is in the results folder and survives
    assert (tmp_path / "references.csv").exists() and (tmp_path / "references_summary.csv").exists()
    with pytest.raises(ValueError, match="tokenizer must be 'local' or 'whitespace'"):
        measure_references(tmp_path, depths=(1,), tokenizer="bpe")


def test_the_read_artifact_tool_returns_a_long_artifact_in_bounded_parts(tmp_path):
    """A cut tool result kept as an artifact must not come back whole through the read_artifact tool:
    each part is at most max_tool_result_chars and says where the next one starts."""
    import re

    from roma_lab.controller._roles import ToolExecutor
    from roma_lab.tools import RUN_STORE, TOOL_LOG, ToolLog

    store = ArtifactStore(tmp_path / "store")
    whole = "".join(f"{i:05d}" for i in range(50))  # 250 characters
    ref = store.put(whole)
    tool = ToolExecutor(None)

    async def read_all() -> tuple[list[str], list[str]]:
        RUN_STORE.set(store)
        log = ToolLog(t0=0.0, timeout_s=30.0, max_result_chars=100)
        TOOL_LOG.set(log)
        parts, offset = [], 0
        while True:
            shown = await tool.read_artifact(ref.id, offset)
            parts.append(shown)
            found = re.search(r"offset=(\d+)\)\]$", shown)
            if found is None:
                return parts, [c.name for c in log.calls]
            offset = int(found.group(1))

    parts, calls = asyncio.run(read_all())
    assert len(parts) == 3 and calls == ["read_artifact"] * 3
    bodies = [p.rsplit("\n[characters ", 1)[0] for p in parts]
    assert all(len(b) <= 100 for b in bodies) and "".join(bodies) == whole
    assert parts[-1].endswith("of 250]")


def test_the_read_artifact_tool_returns_a_short_artifact_whole(tmp_path):
    from roma_lab.controller._roles import ToolExecutor
    from roma_lab.tools import RUN_STORE

    store = ArtifactStore(tmp_path / "store")
    ref = store.put("short text")

    async def read() -> str:
        RUN_STORE.set(store)
        return await ToolExecutor(None).read_artifact(ref.id)

    assert asyncio.run(read()) == "short text"
