"""The run trace as a file (issue 9 §1): every finished run can be saved and read back exactly, the
goal is stored once, and a file or a Run that breaks the trace's invariants is a typed error."""

from __future__ import annotations

import asyncio
import json
from dataclasses import MISSING, fields, is_dataclass
from types import SimpleNamespace
from typing import Any, get_args, get_type_hints

import pytest
from pydantic import BaseModel

from roma_lab.trace import ArtifactRef, InvalidRunError, LMExchange, Node, RepairRecord, RoleCall, Run, ToolCall
from roma_lab.controller import Roma, ScriptedRoles, Subtask
from roma_lab.trace._types import _RunModel
from roma_lab.results import write_text_atomic

PLAN = {"root": (Subtask("a", "think"), Subtask("b", "think"), Subtask("c", "think", (1,)))}


def scripted_run(goal: str = "root", plans=PLAN, **roles) -> Run:
    kwargs = ScriptedRoles(dict(plans)).role_kwargs() | roles
    return asyncio.run(Roma(**kwargs, max_depth=1).arun(goal))


@pytest.mark.parametrize("text", ["nul \x00 inside", "lone \ud800 high", "lone \udfff low", "emoji 🙂 and é"])
def test_any_goal_or_output_is_saved_and_read_back_exactly(text, tmp_path):
    async def echo(goal, context):
        return SimpleNamespace(output=f"{text} / {goal}")

    run = scripted_run(text, {}, executors={"think": echo})
    assert run.status == "completed"
    saved = run.to_json()
    saved.encode("utf-8")  # strict UTF-8: a lone surrogate is written as its JSON escape
    write_text_atomic(tmp_path / "run.json", saved)
    again = Run.from_json((tmp_path / "run.json").read_bytes())
    assert again == run and again.output == f"{text} / {text.strip()}"


def test_a_1_mb_goal_is_stored_once():
    goal = "measure " + "x" * 1_000_000

    async def short(goal, context):
        return SimpleNamespace(output="short")

    async def join(goal, context, subtask_results):
        return SimpleNamespace(output="joined")

    run = scripted_run(goal, {goal: PLAN["root"]}, executors={"think": short}, aggregator=join)
    assert run.status == "completed" and len(run.nodes) == 4
    saved = run.to_json()
    assert saved.count(goal) == 1 and len(saved) < len(goal) + 50_000
    assert all("goal" not in c.inputs for n in run.nodes for c in n.calls)  # the node has it
    assert Run.from_json(saved) == run


def test_files_that_stored_the_goal_at_the_top_level_still_load():
    run = scripted_run()
    legacy = json.loads(run.to_json()) | {"goal": "root"}
    assert Run.from_json(json.dumps(legacy)) == run
    with pytest.raises(InvalidRunError, match="goal differs"):
        Run.from_json(json.dumps(legacy | {"goal": "another goal"}))


def saved() -> dict:
    run = scripted_run(executors={"think": _fail_b})
    assert run.status == "partial"  # a: completed, b: failed, c: skipped
    return json.loads(run.to_json())


async def _fail_b(goal, context):
    if goal == "b":
        raise ValueError("boom")
    return SimpleNamespace(output=f"done({goal})")


def _set(path: str, value):
    def apply(data: dict) -> None:
        *keys, last = path.split(".")
        target = data
        for k in keys:
            target = target[int(k)] if k.isdigit() else target[k]
        target[int(last) if last.isdigit() else last] = value
    return apply


CORRUPTIONS = {
    "no nodes": (_set("nodes", []), "at least its root"),
    "completed run with failed nodes": (_set("status", "completed"), "does not match its nodes"),
    "failed run whose root has an output": (_set("status", "failed"), "does not match its nodes"),
    "duplicate node ids": (_set("nodes.2.id", "0.0"), "repeated node ids"),
    "wall_s NaN": (_set("wall_s", float("nan")), "wall_s must be a finite"),
    "wall_s negative": (_set("wall_s", -1.0), "wall_s must be a finite"),
    "a node still running": (_set("nodes.1.status", "running"), "no pending or running"),
    "unknown status": (_set("status", "great"), "not a ROMA run trace"),
    "output not the root's": (_set("output", "something else"), "goal and output must be the root's"),
    "a parent that is not in the run": (_set("nodes.1.parent_id", "9"), "not in the run one level up"),
    "a dependency that is not a sibling": (_set("nodes.3.depends_on", ["0"]), "not its siblings"),
    "a failed node that says nothing": (_set("nodes.2.error", None), "without saying why"),
    "a completed node without output": (_set("nodes.1.output", None), "without an output"),
    "a timed-out run with nothing cancelled": (_set("status", "timed_out"), "no cancelled node"),
    "a cancelled node in a partial run": (_set("nodes.3.status", "cancelled"), "only stopped runs"),
    "a negative token count": (_set("nodes.1.calls.0.input_tokens", -5), "negative or non-finite"),
    "an infinite latency": (_set("nodes.1.calls.0.latency_s", float("inf")), "negative or non-finite"),
    "an extra field": (_set("nodes.1.mood", "happy"), "not a ROMA run trace"),
    "the root is not first": (lambda d: d["nodes"].reverse(), "must be the root"),
}


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_a_trace_that_breaks_an_invariant_is_refused_on_load(name):
    data = saved()
    corrupt, message = CORRUPTIONS[name]
    corrupt(data)
    with pytest.raises(InvalidRunError, match=message):
        Run.from_json(json.dumps(data))


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", b"\xff\xfe binary", "null"])
def test_text_that_is_not_a_trace_is_a_typed_error(text):
    with pytest.raises(InvalidRunError, match="not a ROMA run trace"):
        Run.from_json(text)


def test_a_run_built_in_memory_is_checked_too():
    root = Node(id="0", parent_id=None, depth=0, goal="g", task_type="think", status="failed", error="x")
    with pytest.raises(InvalidRunError, match="does not match"):
        Run(goal="g", status="completed", output=None, nodes=(root,), wall_s=1.0)
    with pytest.raises(InvalidRunError, match="at least its root"):
        Run(goal="g", status="failed", output=None, nodes=(), wall_s=1.0)
    assert Run(goal="g", status="failed", output=None, nodes=(root,), wall_s=1.0).status == "failed"


# --- the file form is the records' own (no second list of fields to keep in step) ---

NOT_IN_FILES = {(Node, "in_flight")}  # live state: a finished run has none
OTHER_FORM = {(Run, "settings")}  # written as RomaSettings.record()
FILE_ONLY = {(Run, "kind")}  # what kind of trace the file holds: the file's, not the record's


def _inside(annotation: Any, kind) -> list[type]:
    """The types of ``kind`` named in an annotation (``tuple[RoleCall, ...]`` -> ``[RoleCall]``)."""
    if isinstance(annotation, type) and kind(annotation):
        return [annotation]
    return [t for a in get_args(annotation) for t in _inside(a, kind)]


def _record_forms(record: type, model: type[BaseModel]):
    """Each record type of a run with the model its file form is read with, walking both trees together."""
    yield record, model
    hints = get_type_hints(record)
    for name, field in model.model_fields.items():
        if (record, name) in OTHER_FORM | FILE_ONLY:
            continue
        records = _inside(hints[name], is_dataclass)
        models = _inside(field.annotation, lambda t: issubclass(t, BaseModel))
        assert len(records) == len(models), f"{record.__name__}.{name}: {records} read as {models}"
        for inner, inner_model in zip(records, models):
            yield from _record_forms(inner, inner_model)


def test_every_field_of_every_record_is_in_the_file_in_the_same_order():
    """A field added to a record (ToolCall, RoleCall, Node...) is written and read back with it."""
    seen = set()
    for record, model in _record_forms(Run, _RunModel):
        seen.add(record)
        in_file = [name for name in model.model_fields if (record, name) not in FILE_ONLY]
        assert in_file == [f.name for f in fields(record) if (record, f.name) not in NOT_IN_FILES]
        assert model.model_config.get("extra") == "forbid"  # an unknown key in a file is an error
    assert seen == {Run, Node, RoleCall, LMExchange, ToolCall, ArtifactRef, RepairRecord}


def full_run() -> Run:
    """A run in which every field of every record holds something other than its default."""
    tool = ToolCall("search", "srv", {"q": "x"}, "error", None, 0.5, 1.25, error="boom")
    cut = ToolCall("fetch", "srv", {}, "ok", 5000, 0.5, 1.5, shown_chars=2100, artifact=f"sha256:{'c' * 64}",
                   cost=0.002, replayed=True)
    call = RoleCall("executor:think", {"context": "c"}, {"output": "o"}, 11, 3, 4, 0.01, 0.75, 1.0, model="m",
                    error="late", queued_s=0.5,
                    exchanges=(LMExchange(({"role": "user", "content": "u"},), ("o",), True, recorded_latency_s=2.5,
                                          recorded_at=1.8e9),),
                    tools=(tool, cut))
    root = Node("0", None, 0, "g", "think", "completed", "done", error="note", warnings=("w",), forced_atomic=True,
                is_atomic=False, calls=(call,), created_s=0.0, started_s=0.25, ended_s=3.0)
    first = Node("0.0", "0", 1, "a", "write", "completed", "sum", is_atomic=True, created_s=0.3, started_s=0.3,
                 ended_s=0.3, artifact=ArtifactRef("a" * 64, 9, "text/markdown"), reused=True)
    second = Node("0.1", "0", 1, "b", "think", "degraded", "late", depends_on=("0.0",), error="no plan",
                  is_atomic=True, calls=(call,), created_s=0.3, started_s=1.0, ended_s=2.0)
    return Run("g", "partial", "done", (root, first, second), 3.5, artifact_store="memory://store",
               repair=RepairRecord("b" * 64, "failed", ("failed", "skipped")))


def test_every_field_of_every_record_survives_the_file():
    run = full_run()
    values = [(run, Run)]
    for n in run.nodes:
        values += [(n, Node)] + ([(n.artifact, ArtifactRef)] if n.artifact else [])
        for c in n.calls:
            values += [(c, RoleCall)] + [(e, LMExchange) for e in c.exchanges] + [(t, ToolCall) for t in c.tools]
    values.append((run.repair, RepairRecord))
    for record in {Run, Node, RoleCall, LMExchange, ToolCall, ArtifactRef, RepairRecord}:  # the fixture sets them all
        for f in fields(record):
            if (record, f.name) not in NOT_IN_FILES | {(Run, "settings")} and f.default is not MISSING:
                assert any(getattr(v, f.name) != f.default for v, kind in values if kind is record), \
                    f"full_run() leaves {record.__name__}.{f.name} at its default"
    assert Run.from_json(run.to_json()) == run


def test_a_saved_run_names_its_kind_first_and_older_files_without_it_still_read():
    run = Roma(**ScriptedRoles({}).role_kwargs()).run("goal")
    data = json.loads(run.to_json())
    assert next(iter(data)) == "kind" and data["kind"] == "run"
    del data["kind"]  # a file written before traces named their kind
    assert Run.from_json(json.dumps(data)) == run
    with pytest.raises(InvalidRunError):
        Run.from_json(json.dumps({**data, "kind": "trajectory"}))
