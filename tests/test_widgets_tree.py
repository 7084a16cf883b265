"""Execution-tree view: the pure tree builder, the one HTML renderer (widget and static view), the
widget driven as the browser would, side-by-side runs, and the offline HTML export of an executed
notebook. The browser itself is exercised in tests/browser/."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from types import SimpleNamespace

import dspy
import pytest
from schedules import scheduled_run
from view_pages import assert_loads_nothing_from_a_network, detail, execute_notebook, expandable, rows

from roma_lab.trace import LMExchange, Node, RoleCall, Run, without_evidence
from roma_lab.controller import Roma, ScriptedRoles, Subtask
from roma_lab.lm import CachingEngine
from roma_lab.widgets import (
    ExecutionTreeWidget,
    RunComparison,
    compare_html,
    export_html,
    nodes_to_tree,
    render_tree_html,
    trace_to_tree,
    tree_html,
)
from roma_lab.widgets._tree import STATUS_COLORS, node_detail_html
from roma_lab.lm import ScriptedEngine


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


# --- the tree dict ---

def test_trace_to_tree_structure():
    run = failing_run()
    tree = trace_to_tree(run)
    assert tree["status"] == "partial" and tree["root"] == "0" and tree["span_s"] == round(run.wall_s, 6)
    assert tree["nodes"]["0"]["children"] == ["0.0", "0.1", "0.2"]
    assert tree["edges"] == [{"source": "0.1", "target": "0.2"}]
    assert tree["nodes"]["0.1"]["color"] == STATUS_COLORS["failed"]
    assert tree["nodes"]["0.2"]["state"] == "skipped"
    assert tree["totals"]["calls"] == sum(len(n.calls) for n in run.nodes)
    root_calls = tree["nodes"]["0"]["calls"]
    assert [c["role"] for c in root_calls] == ["atomizer", "planner", "aggregator"]
    assert {"inputs", "outputs", "input_tokens", "latency_s", "queued_s", "wait_s", "cached", "exchanges",
            "context_chars"} <= set(root_calls[0])
    assert tree["nodes"]["0"]["roles"] == ["aggregator", "atomizer", "planner"]
    assert tree["nodes"]["0"]["warnings"]  # "aggregated 1 of 3"


def test_tree_dict_is_json_and_survives_the_run_round_trip():
    run = scheduled_run(2)
    assert trace_to_tree(Run.from_json(run.to_json())) == json.loads(json.dumps(trace_to_tree(run)))


@pytest.mark.parametrize("slots", [1, 2])
def test_live_states_come_from_the_trace_and_never_show_more_running_than_slots(slots):
    """With one slot, six nodes once showed "running" at once: queued ones must say queued."""
    seen: list[dict] = []
    widget = ExecutionTreeWidget()
    widget.observe(lambda change: seen.append(change["new"]["totals"]["states"]), names="tree")
    run = scheduled_run(slots, on_event=widget.on_event)
    assert max(s.get("running", 0) for s in seen) == slots
    assert max(s.get("queued", 0) for s in seen) >= 2
    assert max(s.get("waiting", 0) for s in seen) >= 1  # a chained sibling waits on its dependency
    assert max(s.get("subtasks", 0) for s in seen) >= 1  # a planned node waits on its subtasks
    assert set(widget.tree["totals"]["states"]) == {"completed"}
    widget.show_run(run)
    assert widget.tree == trace_to_tree(run)


def test_node_state_reads_the_node_and_its_dependencies():
    from roma_lab.trace import CallInFlight
    from roma_lab.widgets import node_state

    a = Node(id="0.0", parent_id="0", depth=1, goal="a", task_type="think", status="running",
             in_flight=CallInFlight("executor:think", queued_s=0.1))
    b = Node(id="0.1", parent_id="0", depth=1, goal="b", task_type="think", depends_on=("0.0",))
    by_id = {"0.0": a, "0.1": b}
    assert node_state(a, by_id) == "queued"
    assert node_state(replace(a, in_flight=CallInFlight("executor:think", 0.1, 0.2)), by_id) == "running"
    assert node_state(b, by_id) == "waiting"
    done = replace(a, status="completed", output="x", in_flight=None)
    assert node_state(b, {**by_id, "0.0": done}) == "pending"
    parent = Node(id="0", parent_id=None, depth=0, goal="p", task_type="think", status="running")
    family = {**by_id, "0": parent}
    assert node_state(parent, family, children=["0.0", "0.1"]) == "subtasks"
    assert node_state(parent, {**family, "0.0": done, "0.1": replace(done, id="0.1")},
                      children=["0.0", "0.1"]) == "between"  # about to queue its aggregator
    assert node_state(replace(a, status="failed", error="x", in_flight=None), by_id) == "failed"


def test_timelines_are_the_recorded_schedule():
    run = scheduled_run(1)
    tree = trace_to_tree(run)
    calls = sorted((s["start_s"], s["end_s"]) for n in tree["nodes"].values() for s in n["segments"]
                   if s["kind"] == "call")
    assert len(calls) == sum(len(n.calls) for n in run.nodes)
    assert all(later[0] >= earlier[1] - 1e-6 for earlier, later in zip(calls, calls[1:]))  # one slot: no overlap
    by_id = {n.id: n for n in run.nodes}
    waiting = tree["nodes"]["0.0.2"]["segments"][0]
    assert waiting["kind"] == "waiting" and waiting["start_s"] == round(by_id["0.0.2"].created_s, 6)
    assert waiting["end_s"] == round(by_id["0.0.2"].started_s, 6) >= round(by_id["0.0.1"].ended_s, 6)
    queued = [s for n in tree["nodes"].values() for s in n["segments"] if s["kind"] == "queued"]
    assert max(s["end_s"] - s["start_s"] for s in queued) >= 0.009  # leaves wait for the one slot
    subtasks = next(s for s in tree["nodes"]["0"]["segments"] if s["kind"] == "subtasks")
    assert subtasks["end_s"] == round(max(n.ended_s for n in run.nodes if n.depth == 1), 6)


def test_a_call_in_flight_is_drawn_up_to_the_latest_moment_of_the_trace():
    from roma_lab.trace import CallInFlight

    root = Node(id="0", parent_id=None, depth=0, goal="g", task_type="think", status="running", created_s=0.0,
                started_s=0.1, in_flight=CallInFlight("atomizer", queued_s=0.1, started_s=0.4))
    other = Node(id="0.9", parent_id="0", depth=1, goal="h", task_type="think", created_s=0.7)
    tree = nodes_to_tree([root, other])
    assert tree["span_s"] == 0.7 and tree["nodes"]["0"]["state"] == "running"
    assert [(s["kind"], s["start_s"], s["end_s"]) for s in tree["nodes"]["0"]["segments"]] == [
        ("queued", 0.1, 0.4), ("call", 0.4, 0.7)]
    # the detail says how long the call has waited on the model, in a clock the live view ticks on
    detail = node_detail_html(tree, "0")
    assert "now waiting on the model in atomizer" in detail and 'class="rt-tick" data-tick-from="0.300"' in detail


# --- the HTML ---

def test_static_html_escapes_and_shows_every_node_with_a_row_and_a_detail():
    run = failing_run()
    page = render_tree_html(run)
    assert "fetch &lt;data&gt;" in page and "<data>" not in page
    assert set(rows(page)) == {n.id for n in run.nodes}
    assert "ValueError: boom" in detail(page, "0.1") and "after 0.1" in detail(page, "0.2")
    assert "<script" not in page  # nothing that a sanitiser or an offline page would drop


def test_without_javascript_each_row_opens_its_own_detail_and_no_detail_is_copied():
    """Issue 26: in an exported page or an untrusted notebook a click on a row opens its role calls."""
    run = failing_run()
    page = render_tree_html(run)
    order = ["0", "0.0", "0.1", "0.2"]  # depth first, as the tree reads
    assert expandable(page) == [(i, i) for i in order]
    for node in run.nodes:
        assert page.count(f'data-detail="{node.id}"') == 1
    calls = [c for n in run.nodes for c in n.calls]
    assert page.count('<details class="rt-call"') == len(calls)  # each role call once, in its node's row
    assert "<details class=\"rv-row\" open" not in page and 'href="#' not in page  # closed; the row is the toggle
    assert "click a row to see its role calls" in page


def test_in_side_by_side_runs_each_pane_opens_its_own_node():
    page = compare_html([trace_to_tree(scheduled_run(1)), trace_to_tree(scheduled_run(8))], ["one", "eight"])
    one, eight = page.split("<h4")[1:]
    for pane in (one, eight):
        pairs = expandable(pane)
        assert len(pairs) == 13 and all(row == block for row, block in pairs)


def test_the_item_pickers_static_view_is_its_trees_with_rows_that_open(tmp_path):
    from roma_lab.widgets import ItemRunPicker

    folder = tmp_path / "toy_runs"  # an evaluation folder as roma_lab.evaluate writes it: rows naming traces
    (folder / "traces" / "roma" / "r0").mkdir(parents=True)
    (folder / "traces" / "roma" / "r0" / "a.json").write_text(failing_run().to_json())
    (folder / "rows.csv").write_text("condition,run,task_id,trace\nroma,0,a,traces/roma/r0/a.json\n")
    picker = ItemRunPicker(tmp_path, "toy")
    static = picker._repr_mimebundle_()["text/html"]
    assert static == "<p>item <code>a</code></p>" + picker.tree._html
    assert [row for row, _ in expandable(static)] == ["0", "0.0", "0.1", "0.2"]


def test_role_inputs_and_outputs_are_shown_escaped():
    roles = ScriptedRoles({})
    kwargs = roles.role_kwargs() | {"executors": {"think": lambda goal, context: SimpleNamespace(output="<b>42</b>")}}
    page = render_tree_html(asyncio.run(Roma(**kwargs, max_depth=0).arun("answer")))
    assert "executor:think" in detail(page, "0") and "&lt;b&gt;42&lt;/b&gt;" in detail(page, "0")
    assert "<b>42</b>" not in page


def test_rows_show_state_calls_latency_tokens_and_carry_filter_attributes():
    run = scheduled_run(2)
    page = render_tree_html(run)
    row = rows(page)["0"]
    root = trace_to_tree(run)["nodes"]["0"]
    assert 'data-state="completed"' in row and 'data-roles="aggregator atomizer planner"' in row
    assert f">{len(run.root.calls)}<" in row and f">{root['latency_s']:.3f}<" in row and "0 / 0" in row
    assert row.count('class="rt-seg"') == len(root["segments"])
    for option in ("completed", "aggregator", "atomizer", "executor", "planner"):
        assert f'<option value="{option}">' in page


def test_warnings_are_collapsed_after_the_role_calls():
    run = failing_run()
    root = replace(run.root, warnings=tuple(f"plan (attempt 1): subtask {i} dropped" for i in range(42))
                   + ("plan (attempt 1): subtask 0 dropped",))
    block = detail(tree_html(trace_to_tree(replace(run, nodes=(root, *run.nodes[1:])))), "0")
    assert block.index("role calls (3)") < block.index("43 warning(s)")
    collapsed = re.search(r'<details data-key="/0/warnings"><summary class="rt-warn">43 warning\(s\)</summary>(.*?)'
                          r"</details>", block, re.DOTALL).group(1)
    assert "subtask 41 dropped" in collapsed and "subtask 0 dropped (×2)" in collapsed
    assert "subtask 41" not in block.replace(collapsed, "")


def answer(request):
    return {name: f"answer to {request.inputs.get('goal', '?')}" for name in request.outputs}


def test_prompts_and_completions_are_shown_whole_and_cached_calls_are_marked(tmp_path):
    goal = "Explain " + "very " * 600 + "carefully"  # a long prompt is not cut
    lm = lambda: dspy.LM("local/fake", engine=CachingEngine(ScriptedEngine(answer), model_id="fake",  # noqa: E731
                                                             directory=tmp_path), cache=False)
    fresh = Roma(lm=lm(), max_depth=0).run(goal)
    cached = Roma(lm=lm(), max_depth=0).run(goal)
    fresh_page, cached_page = render_tree_html(fresh), render_tree_html(cached)
    exchange = cached.root.calls[0].exchanges[0]
    for message in exchange.messages:
        assert f"<pre>{__import__('html').escape(message['content'])}</pre>" in cached_page
    assert f"answer to {goal}" in cached_page
    assert 'class="rt-cached"' not in fresh_page and 'data-cached="true"' not in fresh_page and "lookup" not in fresh_page
    assert '1 cached</span>' in rows(cached_page)["0"] and "s lookup" in detail(cached_page, "0")
    assert 'data-cached="true"' in rows(cached_page)["0"] and "1 of 1 replayed from the cache" in cached_page


def test_every_status_has_a_colour_and_a_badge():
    from roma_lab.trace import NODE_STATUSES, RUN_STATUSES

    assert set(NODE_STATUSES) | set(RUN_STATUSES) <= set(STATUS_COLORS)
    run = every_status_run()
    tree = trace_to_tree(run)
    page = render_tree_html(run)
    for node in run.nodes:
        assert tree["nodes"][node.id]["color"] == STATUS_COLORS[node.status]
        assert f">{node.status}</span>" in page
    assert f'background:{STATUS_COLORS["timed_out"]}' in page and ">timed_out</span>" in page
    assert "why degraded" in page and "why unverified" in page and "run deadline of 1 s reached" in page


def every_status_run() -> Run:
    """A timed-out run by hand, without schedule times (as files written before them): one child
    per node status a finished run can hold."""
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


def test_unknown_usage_shows_as_unknown_not_zero_and_an_old_trace_says_it_has_no_schedule():
    run = every_status_run()
    tree = trace_to_tree(run)
    assert tree["totals"]["input_tokens"] is None and tree["nodes"]["0.3"]["output_tokens"] is None
    assert tree["nodes"]["0.0"]["input_tokens"] == 0  # no calls: zero is known
    page = render_tree_html(run)
    assert "unknown in / unknown out tokens" in page and "unknown / unknown" in rows(page)["0.3"]
    assert "failed: why failed" in detail(page, "0.3") and "unverified: why unverified" in detail(page, "0.2")
    assert not tree["timed"] and "predates schedule times" in page
    assert [s["kind"] for s in tree["nodes"]["0.3"]["segments"]] == ["call"]


# --- the widget, driven as the browser would ---

def test_selecting_a_node_as_the_browser_would_reaches_python_observers():
    widget = ExecutionTreeWidget(failing_run())
    assert widget.selected_id == "0" and widget.selected["id"] == "0"
    picked = []
    widget.observe(lambda change: picked.append(widget.selected), names="selected_id")
    widget.set_state({"selected_id": "0.1"})  # the message a click in the browser sends
    assert widget.selected_id == "0.1" and picked[-1]["error"] == "executor:think: ValueError: boom"
    assert 'data-select="0.1"' in widget._html and 'data-detail="0.1"' in widget._html


def test_selection_survives_tree_updates_and_falls_back_to_the_root():
    widget = ExecutionTreeWidget()
    assert widget.selected_id == "" and "no run yet" in widget._repr_mimebundle_()[0]["text/html"]
    run = failing_run(on_event=widget.on_event)
    widget.selected_id = "0.1"
    widget.show_run(run)
    assert widget.selected_id == "0.1"
    widget.show_run(asyncio.run(Roma(**ScriptedRoles({}).role_kwargs(), max_depth=0).arun("other")))
    assert widget.selected_id == "0"  # 0.1 is gone: the root is shown


def test_the_widget_carries_its_static_view_beside_the_widget_view():
    run = failing_run()
    widget = ExecutionTreeWidget(run)
    data, _ = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/html"] == widget._html == render_tree_html(run) == widget._repr_html_()


# --- two runs side by side ---

def test_two_runs_side_by_side_share_one_time_axis():
    slow, fast = scheduled_run(1), scheduled_run(8)
    page = compare_html([trace_to_tree(slow), trace_to_tree(fast)], ["one slot", "eight slots"])
    assert page.index("one slot") < page.index("eight slots")
    span = max(slow.wall_s, fast.wall_s)
    ends = [float(m) for m in re.findall(r'data-end="([0-9.]+)"', page.split("eight slots")[1])]
    lefts = [float(m) for m in re.findall(r"left:([0-9.]+)%;width:([0-9.]+)%", page.split("eight slots")[1])
             for m in m[:1]]
    assert max(ends) <= fast.wall_s + 1e-6 and max(lefts) < 100 * fast.wall_s / span + 1e-3
    assert page.count('data-select="0.0.2"') == 2  # the same node id in each run
    with pytest.raises(ValueError, match="2 trees but 1 labels"):
        compare_html([trace_to_tree(slow), trace_to_tree(fast)], ["one"])


def test_run_comparison_widget_selects_one_id_in_every_run():
    comparison = RunComparison({"one slot": scheduled_run(1), "two slots": scheduled_run(2)})
    assert comparison.labels == ["one slot", "two slots"] and comparison.selected_id == "0"
    comparison.set_state({"selected_id": "0.1.1"})
    assert comparison._html.count('data-detail="0.1.1"') == 2
    assert comparison._repr_mimebundle_()[0]["text/html"] == comparison._html
    unnamed = RunComparison([scheduled_run(2)])
    assert unnamed.labels == ["run 1"]
    with pytest.raises(ValueError, match="at least one run"):
        RunComparison({})


# --- an executed notebook exported as HTML, offline ---

NOTEBOOK_CELLS = [
    "from roma_lab.controller import Roma, ScriptedRoles, Subtask\nfrom roma_lab.widgets import ExecutionTreeWidget",
    "roles = ScriptedRoles({'export <me>': (Subtask('a', 'think'), Subtask('b', 'think', (0,)))})\n"
    "run = Roma(**roles.role_kwargs(), max_depth=1).run('export <me>')\ntree = ExecutionTreeWidget(run)\ntree",
]


@pytest.fixture(scope="module")
def executed_notebook(tmp_path_factory):
    """A notebook showing a tree, executed like papermill does (widget state stored in its metadata)."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in NOTEBOOK_CELLS])
    return execute_notebook(nb, tmp_path_factory.mktemp("export") / "tree.ipynb")


def test_the_exported_page_shows_the_static_tree_and_loads_nothing_from_a_network(executed_notebook):
    page = export_html(executed_notebook).read_text()
    assert 'data-view="execution-tree"' in page and "export &lt;me&gt;" in page
    assert set(rows(page)) == {"0", "0.0", "0.1"}
    assert_loads_nothing_from_a_network(page)
    assert "widgets" in json.loads(executed_notebook.read_text())["metadata"]  # the notebook is left as it was


def test_nbconverts_default_page_is_what_fails_offline(executed_notebook):
    """Why export_html exists: the default page draws the widget with scripts from a CDN, not the static view."""
    from nbconvert import HTMLExporter

    page, _ = HTMLExporter().from_filename(str(executed_notebook))
    assert 'data-view="execution-tree"' not in page and "@jupyter-widgets/html-manager" in page
    assert re.search(r"<script[^>]+src=\"https://", page)
    with pytest.raises(AssertionError):  # and the check the exported pages pass says so
        assert_loads_nothing_from_a_network(page)


def test_export_from_the_command_line(executed_notebook, tmp_path, capsys):
    from roma_lab.widgets.__main__ import main

    out = tmp_path / "page.html"
    assert main(["export", str(executed_notebook), "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out) and 'data-view="execution-tree"' in out.read_text()


def test_a_cached_exchange_reads_back_from_json():
    call = RoleCall(role="executor:think", inputs={}, outputs={"output": "x"}, context_chars=0, input_tokens=1,
                    output_tokens=1, cost=0.0, latency_s=0.001, started_s=0.0, queued_s=0.0,
                    exchanges=(LMExchange(({"role": "user", "content": "q"},), ("a",), True),))
    root = Node(id="0", parent_id=None, depth=0, goal="g", task_type="think", status="completed", output="x",
                calls=(call,), created_s=0.0, started_s=0.0, ended_s=0.01)
    run = Run(goal="g", status="completed", output="x", nodes=(root,), wall_s=0.01)
    assert Run.from_json(run.to_json()) == run and trace_to_tree(run)["nodes"]["0"]["cached_calls"] == 1


def test_a_cache_replay_is_drawn_with_its_recorded_timings_and_says_so(tmp_path):
    from replayed_runs import SLOW, record, replay

    from roma_lab.trace import replayed_schedule

    live = trace_to_tree(record(tmp_path))
    assert not live["replayed"] and live["timing_note"] is None
    assert not any(s["replayed"] for n in live["nodes"].values() for s in n["segments"])
    run = replay(tmp_path)
    schedule = replayed_schedule(run)
    tree = trace_to_tree(run)
    assert tree["replayed"] and tree["timing_note"] == "replayed from cache: recorded timings"
    assert tree["span_s"] == round(schedule.wall_s, 6) > run.wall_s  # the axis spans the recorded times
    a, b, c = (next(n for n in tree["nodes"].values() if n["goal"] == goal) for goal in "ABC")
    calls = {goal: next(s for s in n["segments"] if s["kind"] == "call") for goal, n in zip("ABC", (a, b, c))}
    assert calls["A"]["end_s"] - calls["A"]["start_s"] >= SLOW["A"]  # not the lookup time
    assert calls["A"]["start_s"] < calls["B"]["end_s"] and calls["B"]["start_s"] < calls["A"]["end_s"]
    assert calls["C"]["start_s"] >= calls["A"]["end_s"] and c["started_s"] == schedule.nodes[c["id"]].started_s
    waited = next(s for s in c["segments"] if s["kind"] == "waiting")  # C waits on A at A's recorded time
    assert waited["end_s"] == calls["A"]["end_s"]
    assert all(s["replayed"] for n in tree["nodes"].values() for s in n["segments"])
    page = render_tree_html(run)
    assert 'data-replayed="true"' in page and "(replayed from cache: recorded timings)" in page
    assert 'data-replayed="true"' not in render_tree_html(record(tmp_path / "again"))


def teacher_run() -> Run:
    """The teacher's goal as the offline search answers it: population of Canada (no passage matched),
    of Australia (a passage found), then the difference computed by code from the first two."""
    def search(passages):
        return RoleCall(role="executor:search", inputs={"goal": "g", "context": ""},
                        outputs={"output": "not provided in the given passages", "passages": passages},
                        context_chars=1, input_tokens=5, output_tokens=5, cost=0.0, latency_s=0.1, started_s=0.0)

    kids = [Node(id="0.1", parent_id="0", depth=1, goal="population of Canada", task_type="search",
                 status="completed", output="not provided", calls=(search(["(no passage matched the goal)"]),)),
            Node(id="0.2", parent_id="0", depth=1, goal="population of Australia", task_type="search",
                 status="completed", output="27 million", calls=(search(["Australia has 27 million people."]),)),
            Node(id="0.3", parent_id="0", depth=1, goal="which is larger, by how much", task_type="code",
                 status="completed", output="3,000,000", depends_on=("0.1", "0.2"))]
    root = Node(id="0", parent_id=None, depth=0, goal="teacher", task_type="think", status="completed",
                output="Canada by 3 million")
    return Run(goal="teacher", status="completed", output="Canada by 3 million", nodes=(root, *kids), wall_s=1.0)


def test_an_answer_without_the_evidence_its_node_looked_for_is_flagged_amber_never_green():
    from roma_lab.widgets._tree import NO_EVIDENCE_COLOR

    run = teacher_run()
    flagged = without_evidence(run.nodes)
    assert set(flagged) == {"0.1", "0.3", "0"} and "found no passage" in flagged["0.1"]
    assert "0.1" in flagged["0.3"] and "aggregates" in flagged["0"]
    tree = trace_to_tree(run)
    assert {i for i, n in tree["nodes"].items() if n["color"] == NO_EVIDENCE_COLOR} == {"0", "0.1", "0.3"}
    assert tree["nodes"]["0.2"]["color"] == STATUS_COLORS["completed"] and tree["totals"]["no_evidence"] == 3
    page = tree_html(tree)
    assert "3 without evidence" in page and "completed, no evidence" in page and "an answer without evidence" in page
    assert "no evidence: its search found no passage" in node_detail_html(tree, "0.1")
    assert run.status == "completed"  # the recorded status stays; the flag is beside it


def test_a_flagged_row_s_label_fits_its_state_column_whole_and_its_detail_names_the_state():
    """Issue 52: "completed, no evidence" was cut to "completed, no …" in a row's narrow state column."""
    run = teacher_run()
    page = tree_html(trace_to_tree(run))
    badge = re.search(r'<span class="rt-badge rt-flag"[^>]*title="([^"]*)">([^<]*)</span>', rows(page)["0.1"])
    assert badge is not None and badge.group(2) == "no evidence"
    assert badge.group(1).startswith("completed, no evidence: its search found no passage")
    assert ".rt-flag{display:inline-block;white-space:normal" in page  # a longer label wraps, uncut
    assert "completed, no evidence</span>" in detail(page, "0.1")
    degraded = replace(run, status="partial", nodes=tuple(replace(n, status="degraded", error="no plan") if n.id == "0.1" else n
                                        for n in run.nodes))
    assert ">degraded, no evidence</span>" in rows(tree_html(trace_to_tree(degraded)))["0.1"]  # other states named
