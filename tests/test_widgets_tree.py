"""Execution-tree view: the pure tree builder, static HTML, and the widget driven without a browser."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from roma_lab.controller import Node, Roma, Run, ScriptedRoles, Subtask
from roma_lab.widgets._tree import STATUS_COLORS, ExecutionTreeWidget, render_tree_html, trace_to_tree


def failing_run(on_event=None) -> Run:
    roles = ScriptedRoles({"root": (Subtask("fetch <data>", "search"), Subtask("bad", "think"),
                                    Subtask("after bad", "write", (1,)))})
    kwargs = roles.role_kwargs()
    good = kwargs["executors"]["think"]

    async def think(goal, context):
        if goal == "bad":
            raise ValueError("boom")
        return await good(goal=goal, context=context)

    kwargs["executors"]["think"] = think
    return asyncio.run(Roma(**kwargs, max_depth=1).arun("root", on_event=on_event))


def test_trace_to_tree_structure():
    run = failing_run()
    tree = trace_to_tree(run)
    assert tree["status"] == "partial" and tree["root"] == "0"
    assert tree["nodes"]["0"]["children"] == ["0.0", "0.1", "0.2"]
    assert tree["edges"] == [{"source": "0.1", "target": "0.2"}]
    assert tree["nodes"]["0.1"]["color"] == STATUS_COLORS["failed"]
    assert tree["nodes"]["0.2"]["status"] == "skipped"
    assert tree["totals"]["calls"] == sum(len(n.calls) for n in run.nodes)
    root_calls = tree["nodes"]["0"]["calls"]
    assert [c["role"] for c in root_calls] == ["atomizer", "planner", "aggregator"]
    assert {"inputs", "outputs", "input_tokens", "latency_s", "context_chars"} <= set(root_calls[0])
    assert tree["nodes"]["0"]["warnings"]  # "aggregated 1 of 3"


def test_tree_dict_is_json_and_survives_the_run_round_trip():
    import json

    run = failing_run()
    assert trace_to_tree(Run.from_json(run.to_json())) == json.loads(json.dumps(trace_to_tree(run)))


def test_static_html_escapes_and_shows_every_node():
    run = failing_run()
    page = render_tree_html(run)
    assert "fetch &lt;data&gt;" in page and "<data>" not in page
    for node in run.nodes:
        assert f"<code>{node.id}</code>" in page
    assert "ValueError: boom" in page and "after 0.1" in page


def test_widget_follows_a_run_live():
    widget = ExecutionTreeWidget()
    seen_sizes = []
    widget.observe(lambda change: seen_sizes.append(len(change["new"]["nodes"])), names="tree")
    run = failing_run(on_event=widget.on_event)
    assert seen_sizes[0] == 1 and seen_sizes[-1] == len(run.nodes)  # grew while running
    assert {n["status"] for n in widget.tree["nodes"].values()} == {"completed", "failed", "skipped"}
    widget.show_run(run)
    assert widget.tree == trace_to_tree(run)


def test_selecting_a_node_as_the_browser_would_updates_the_detail():
    widget = ExecutionTreeWidget(failing_run())
    assert widget.selected_id == "0"
    widget.selected_id = "0.1"  # a front-end state update
    assert widget._picker.value == "0.1"
    assert "ValueError: boom" in widget._detail.value
    widget._picker.value = "0.2"  # the user picks in the dropdown
    assert widget.selected_id == "0.2"
    assert "dependencies have no output: 0.1" in widget._detail.value


def test_selection_survives_tree_updates_and_static_fallback_exists():
    widget = ExecutionTreeWidget()
    assert "no run yet" in widget._repr_mimebundle_()["text/html"]
    run = failing_run(on_event=widget.on_event)
    widget.selected_id = "0.1"
    widget.show_run(run)
    assert widget.selected_id == "0.1"
    bundle = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"] == render_tree_html(run)


def test_widget_detail_shows_role_inputs_and_outputs():
    roles = ScriptedRoles({})
    kwargs = roles.role_kwargs() | {"executors": {"think": lambda goal, context: SimpleNamespace(output="<b>42</b>")}}
    run = asyncio.run(Roma(**kwargs, max_depth=0).arun("answer"))
    widget = ExecutionTreeWidget(run)
    assert "executor:think" in widget._detail.value and "&lt;b&gt;42&lt;/b&gt;" in widget._detail.value


def every_status_run() -> Run:
    """A timed-out run by hand: one child per node status a finished run can hold."""
    from roma_lab.controller import RoleCall

    unknown = RoleCall(role="executor:think", inputs={"context": ""}, outputs={}, context_chars=1, input_tokens=None,
                       output_tokens=None, cost=None, latency_s=0.3, started_s=0.0, error="timed out; usage unknown")
    kids = [Node(id=f"0.{i}", parent_id="0", depth=1, goal=f"{status} child", task_type="think", status=status,
                 output="out" if status in ("completed", "degraded", "unverified") else None,
                 error=None if status == "completed" else f"why {status}",
                 calls=(unknown,) if status == "failed" else ())
            for i, status in enumerate(["completed", "degraded", "unverified", "failed", "skipped", "cancelled"])]
    root = Node(id="0", parent_id=None, depth=0, goal="root", task_type="think", status="cancelled",
                error="run deadline of 1 s reached")
    return Run(goal="root", status="timed_out", output=None, nodes=(root, *kids), wall_s=1.0)


def test_every_status_has_a_colour_and_a_badge():
    from roma_lab.controller import NODE_STATUSES, RUN_STATUSES

    assert set(NODE_STATUSES) | set(RUN_STATUSES) <= set(STATUS_COLORS)
    run = every_status_run()
    tree = trace_to_tree(run)
    page = render_tree_html(run)
    for node in run.nodes:
        assert tree["nodes"][node.id]["color"] == STATUS_COLORS[node.status]
        assert f">{node.status}</span>" in page
    assert f'background:{STATUS_COLORS["timed_out"]}' in page and ">timed_out</span>" in page
    assert "why degraded" in page and "why unverified" in page and "run deadline of 1 s reached" in page


def test_unknown_usage_shows_as_unknown_not_zero():
    run = every_status_run()
    tree = trace_to_tree(run)
    assert tree["totals"]["input_tokens"] is None and tree["nodes"]["0.3"]["output_tokens"] is None
    assert tree["nodes"]["0.0"]["input_tokens"] == 0  # no calls: zero is known
    widget = ExecutionTreeWidget(run)
    assert "unknown in / unknown out tokens" in widget._summary.value
    widget.selected_id = "0.3"
    assert "unknown in / unknown out tokens" in widget._detail.value and "failed: why failed" in widget._detail.value
    widget.selected_id = "0.2"
    assert "unverified: why unverified" in widget._detail.value
