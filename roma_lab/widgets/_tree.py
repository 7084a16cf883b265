"""The ROMA execution tree in Jupyter: a pure tree builder, one HTML renderer, a live widget.

``trace_to_tree`` (a finished run) and ``nodes_to_tree`` (the nodes of a run in progress) build one
JSON-able dict: per node its state read from the trace (waiting on dependencies, queued for a
concurrency slot, in a role call, waiting on its subtasks, or its final status), its timeline
segments, its role calls with full prompts and completions, usage and cached marks. ``tree_html``
and ``compare_html`` render that dict as a waterfall (one row per node: state, calls, latency,
tokens and its timeline on the run's clock), each row opening its node's detail block below it
(warnings collapsed), with or without JavaScript.
The widgets keep the dict in a trait and send the HTML to the browser (see ``_view.py``); the same
HTML is the static view of saved and exported notebooks. See design/viewer.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import traitlets

from roma_lab.trace import Node, NodeEvent, ReplayedSchedule, Run, replayed_schedule, without_evidence

from ._view import (
    LabelledComparison,
    SingleView,
    ViewKind,
    call_data,
    call_html,
    detail_section,
    esc,
    expandable_row,
    filter_select,
    known_sum,
    pane_css,
    pane_title,
    row_hint,
    select_row,
    table_head,
    tokens,
    view_html,
)

# Node and run statuses (all get a badge), then the states of a node while its run goes on.
STATUS_COLORS = {"pending": "#9e9e9e", "running": "#1e88e5", "completed": "#43a047", "degraded": "#c0ca33",
                 "unverified": "#8e24aa", "failed": "#e53935", "skipped": "#fb8c00", "cancelled": "#6d4c41",
                 "partial": "#fdd835", "timed_out": "#6d4c41", "interrupted": "#6d4c41",
                 "waiting": "#bdbdbd", "queued": "#ffb300", "subtasks": "#64b5f6", "between": "#90a4ae"}
LIVE_STATES = {"pending": "created, not started yet", "waiting": "waiting on dependencies",
               "queued": "queued for a concurrency slot", "running": "in a role call",
               "subtasks": "waiting on its subtasks", "between": "between role calls"}
NO_EVIDENCE_COLOR = "#ff8f00"  # amber: an answer without the evidence its node looked for is never green
ROLE_COLORS = {"atomizer": "#7e57c2", "planner": "#00897b", "executor": "#1e88e5", "aggregator": "#2e7d32",
               "verifier": "#f4511e"}
_GOAL_CHARS = 90  # goals in a row; the detail block shows them whole
REPLAYED_NOTE = "replayed from cache: recorded timings"  # a cache replay's timeline (trace_to_tree)
_WIDTHS = (28, 12, 12, 8, 11, 29)  # node, state, calls, latency, tokens, timeline (percent)


def _component(role: str) -> str:
    return role.split(":")[0]


def node_state(node: Node, by_id: Mapping[str, Node], *, children: Sequence[str] = ()) -> str:
    """What a node is doing, read from the trace: its status once final; while the run goes on,
    ``waiting`` (a dependency has not ended), ``queued`` (its role call waits for one of
    ``max_concurrency`` slots), ``running`` (a role call holds a slot), ``subtasks`` (it waits for
    subtasks it planned), ``between`` (the controller works on it between role calls, holding no
    slot) or ``pending`` (created, about to start)."""
    if node.status == "pending":
        unfinished = any(by_id[d].status in ("pending", "running") for d in node.depends_on if d in by_id)
        return "waiting" if unfinished else "pending"
    if node.status != "running":
        return node.status
    if node.in_flight is not None:
        return "queued" if node.in_flight.started_s is None else "running"
    if any(by_id[c].status in ("pending", "running") for c in children if c in by_id):
        return "subtasks"
    return "between"


def _latest(nodes: Sequence[Node]) -> float:
    """The last moment a trace in progress records (its 'now')."""
    times = [0.0]
    for n in nodes:
        times += [t for t in (n.created_s, n.started_s, n.ended_s) if t is not None]
        times += [c.started_s + c.latency_s for c in n.calls]
        if n.in_flight is not None:
            times += [t for t in (n.in_flight.queued_s, n.in_flight.started_s) if t is not None]
    return max(times)


def _segments(node: Node, kids: Sequence[Node], now: float,
              schedule: ReplayedSchedule | None = None) -> list[dict[str, Any]]:
    """The node's timeline: ``waiting`` on dependencies, ``subtasks`` it waits for, and per role
    call the time ``queued`` for a slot and the ``call`` itself (one still in flight ends at ``now``).
    With a ``schedule`` (a replay, :func:`roma_lab.trace.replayed_schedule`) the times are the
    schedule's, the run's recorded model timings, and every segment says ``replayed``."""
    segments: list[dict[str, Any]] = []
    replayed = schedule is not None

    def add(kind: str, start: float | None, end: float | None, role: str | None = None,
            cached: bool | None = None) -> None:
        if start is None or end is None or end < start or (kind != "call" and end == start):
            return  # not recorded, or nothing to draw (a call of no duration is still drawn)
        segments.append({"kind": kind, "start_s": round(start, 6), "end_s": round(end, 6), "role": role,
                         "cached": cached, "replayed": replayed})

    def times(n: Node) -> tuple[float | None, float | None, float | None]:
        t = n if schedule is None else schedule.nodes[n.id]
        return t.created_s, t.started_s, t.ended_s

    created, started, ended = times(node)
    if node.depends_on and created is not None:
        add("waiting", created, next((t for t in (started, ended) if t is not None), now))
    kid_times = [times(k) for k in kids]
    if kids and all(c is not None for c, _, _ in kid_times):
        add("subtasks", min(c for c, _, _ in kid_times), max(now if e is None else e for _, _, e in kid_times))
    calls = ([(c.queued_s, c.started_s, c.started_s + c.latency_s) for c in node.calls] if schedule is None
             else [(t.queued_s, t.started_s, t.ended_s) for t in schedule.nodes[node.id].calls])
    for c, (queued, start, end) in zip(node.calls, calls, strict=True):
        add("queued", queued, start, c.role)
        add("call", start, end, c.role, c.cached)
    flight = node.in_flight
    if flight is not None:
        add("queued", flight.queued_s, now if flight.started_s is None else flight.started_s, flight.role)
        add("call", flight.started_s, now, flight.role)
    return segments


def nodes_to_tree(nodes: Iterable[Node], *, status: str = "running", output: str | None = None,
                  wall_s: float | None = None, schedule: ReplayedSchedule | None = None) -> dict[str, Any]:
    """The tree dict for any set of node snapshots (a finished run or one in progress).
    ``wall_s``: the run's length; for a run in progress, the latest time its trace records.
    ``schedule``: the run is a cache replay drawn at its recorded timings (its nodes' times and
    timeline are the schedule's; the tree says ``replayed`` and why in ``timing_note``)."""
    nodes = list(nodes)
    by_id = {n.id: n for n in nodes}
    children: dict[str, list[str]] = {n.id: [] for n in nodes}
    for n in nodes:
        if n.parent_id in children:
            children[n.parent_id].append(n.id)
    now = _latest(nodes) if wall_s is None else wall_s
    unsupported = without_evidence(nodes)
    tree_nodes = {}
    for n in nodes:
        state = node_state(n, by_id, children=children[n.id])
        times = n if schedule is None else schedule.nodes[n.id]
        roles = {_component(c.role) for c in n.calls} | ({_component(n.in_flight.role)} if n.in_flight else set())
        tree_nodes[n.id] = {
            "id": n.id, "parent_id": n.parent_id, "depth": n.depth, "goal": n.goal, "task_type": n.task_type,
            "status": n.status, "state": state, "output": n.output, "no_evidence": unsupported.get(n.id),
            "color": NO_EVIDENCE_COLOR if n.id in unsupported else STATUS_COLORS[state],
            "error": n.error, "warnings": list(n.warnings), "forced_atomic": n.forced_atomic,
            "is_atomic": n.is_atomic, "depends_on": list(n.depends_on), "children": children[n.id],
            "created_s": times.created_s, "started_s": times.started_s, "ended_s": times.ended_s,
            "in_flight": None if n.in_flight is None else asdict(n.in_flight),
            "roles": sorted(roles), "calls": [call_data(c) for c in n.calls],
            "cached_calls": sum(c.cached is True for c in n.calls),
            "input_tokens": known_sum(c.input_tokens for c in n.calls),
            "output_tokens": known_sum(c.output_tokens for c in n.calls),
            "latency_s": round(sum(c.latency_s for c in n.calls), 6),
            "segments": _segments(n, [by_id[k] for k in children[n.id]], now, schedule),
            "now_s": round(now, 6),  # the latest moment the trace records (a live run's clock)
        }
    calls = [c for n in nodes for c in n.calls]
    return {
        "status": status,
        "output": output,
        "root": nodes[0].id if nodes else None,
        "span_s": round(now, 6),
        "timed": any(n.created_s is not None for n in nodes),
        "replayed": schedule is not None,
        "timing_note": None if schedule is None else REPLAYED_NOTE,
        "nodes": tree_nodes,
        "edges": [{"source": d, "target": n.id} for n in nodes for d in n.depends_on],
        "totals": {"nodes": len(nodes), "calls": len(calls), "cached_calls": sum(c.cached is True for c in calls),
                   "input_tokens": known_sum(c.input_tokens for c in calls),
                   "output_tokens": known_sum(c.output_tokens for c in calls),
                   "latency_s": round(sum(c.latency_s for c in calls), 6),
                   "states": dict(Counter(t["state"] for t in tree_nodes.values())),
                   "no_evidence": len(unsupported)},
    }


def trace_to_tree(run: Run) -> dict[str, Any]:
    """The whole execution tree of a finished run as one JSON-able dict (nodes by id with state,
    timeline, role calls and totals; dependency edges between siblings). A run replayed from the
    completion cache with recorded latencies is drawn at those timings (``replayed``), not at the
    lookup times its own clock measured."""
    schedule = replayed_schedule(run)
    return nodes_to_tree(run.nodes, status=run.status, output=run.output,
                         wall_s=run.wall_s if schedule is None else schedule.wall_s, schedule=schedule)


# --- HTML: one renderer for the widget and the static view ---

TREE_CSS = pane_css("rt", 560, _WIDTHS) + """\
.roma-view .rt-summary{margin:2px 0}
.roma-view .rt-badge{color:#fff;border-radius:3px;padding:0 4px;font-size:12px;white-space:nowrap}
/* a flagged label wraps in the narrow state column rather than being cut */
.roma-view .rt-flag{display:inline-block;white-space:normal;line-height:1.2}
.roma-view .rt-cached{border:1px solid #888;border-radius:3px;padding:0 3px;font-size:11px;white-space:nowrap}
.roma-view .rt-legend{font-size:11px;opacity:.8;margin:2px 0}
.roma-view .rt-legend i{display:inline-block;width:16px;height:9px;margin:0 3px 0 9px;vertical-align:middle}
.roma-view .rt-type{opacity:.7;font-size:11px}
.roma-view .rt-lane,.roma-view .rt-axis{position:relative;height:18px}
.roma-view .rt-axis span{position:absolute;top:0;font-weight:400;font-size:11px}
.roma-view .rt-seg{position:absolute;box-sizing:border-box}
.roma-view .rt-seg[data-kind=waiting]{top:7px;height:4px;background:#bdbdbd}
.roma-view .rt-seg[data-kind=subtasks]{top:7px;height:4px;background:#64b5f6}
.roma-view .rt-seg[data-kind=queued]{top:3px;height:12px;
  background:repeating-linear-gradient(45deg,#ffb300 0 3px,rgba(255,179,0,.25) 3px 6px)}
.roma-view .rt-seg[data-kind=call]{top:2px;height:14px;border-radius:2px;min-width:2px}
.roma-view .rt-seg[data-cached=true]{opacity:.45;border:1px dashed #333}
.roma-view .rt-warn{color:#e65100}
"""
_LEGEND = (
    '<div class="rt-legend">timeline: <i style="background:#bdbdbd;height:4px"></i>waiting on dependencies'
    '<i style="background:repeating-linear-gradient(45deg,#ffb300 0 3px,rgba(255,179,0,.25) 3px 6px)"></i>'
    "queued for a slot"
    + "".join(f'<i style="background:{c}"></i>{r}' for r, c in ROLE_COLORS.items())
    + '<i style="background:#888;opacity:.45;border:1px dashed #333"></i>cached (looked up)'
    '<i style="background:#64b5f6;height:4px"></i>waiting on subtasks'
    f'<i style="background:{NO_EVIDENCE_COLOR}"></i>an answer without evidence (its search, or one it used, found nothing)</div>')


def _badge(state: str, no_evidence: str | None = None, *, in_row: bool = False) -> str:
    """A state's badge; amber, "no evidence", when the node's answer is flagged. In a row's narrow state
    column a flagged completed node reads "no evidence" (its state in the tooltip, and in full in its detail)."""
    if no_evidence:
        label = "no evidence" if in_row and state == "completed" else f"{state}, no evidence"
        return (f'<span class="rt-badge rt-flag" style="background:{NO_EVIDENCE_COLOR}" '
                f'title="{esc(state)}, no evidence: {esc(no_evidence)}">{esc(label)}</span>')
    color = STATUS_COLORS.get(state, "#616161")
    return f'<span class="rt-badge" style="background:{color}" title="{esc(LIVE_STATES.get(state, state))}">{esc(state)}</span>'


def _order(tree: dict[str, Any]) -> list[str]:
    """Node ids depth first from the root, as the tree reads; nodes no parent lists come last."""
    nodes, order = tree["nodes"], []
    stack = [tree["root"]] if tree["root"] in nodes else []
    while stack:
        node_id = stack.pop()
        order.append(node_id)
        stack.extend(reversed(nodes[node_id]["children"]))
    return order + [i for i in nodes if i not in set(order)]


def _summary_html(tree: dict[str, Any]) -> str:
    t = tree["totals"]
    live = ", ".join(f"{t['states'][s]} {s}" for s in LIVE_STATES if t["states"].get(s))
    note = "" if tree["timed"] or tree["root"] is None else (
        " &middot; <i>this trace predates schedule times: the timeline shows role calls only</i>")
    cached = (f' (<span class="rt-warn" title="no model ran: a replay of recorded completions">{t["cached_calls"]} of '
              f'{t["calls"]} replayed from the cache</span>)') if t["cached_calls"] else ""
    bare = t.get("no_evidence", 0)
    unsupported = (f' &middot; <span class="rt-warn" title="answers that rest on a search that found nothing">'
                   f'{bare} without evidence</span>') if bare else ""
    return (f'<div class="rt-summary">run {_badge(tree["status"])} &middot; {t["nodes"]} nodes'
            f'{" (" + esc(live) + ")" if live else ""}{unsupported} &middot; {t["calls"]} calls{cached} &middot; '
            f'{tokens(t["input_tokens"])} in / {tokens(t["output_tokens"])} out tokens &middot; '
            f'{t["latency_s"]:.2f} s in calls &middot; {tree["span_s"]:.2f} s on the clock{note}</div>')


def _lane_html(node: dict[str, Any], span: float) -> str:
    parts = []
    for s in node["segments"]:
        left, width = 100 * s["start_s"] / span, 100 * (s["end_s"] - s["start_s"]) / span
        color = f"background-color:{ROLE_COLORS.get(_component(s['role']), '#757575')};" if s["kind"] == "call" else ""
        what = s["kind"] if s["role"] is None else f"{s['kind']} {s['role']}"
        cached = f" ({REPLAYED_NOTE})" if s["replayed"] else " (cached)" if s["cached"] else ""
        parts.append(
            f'<div class="rt-seg" data-kind="{s["kind"]}" data-role="{esc(s["role"] or "")}" '
            f'data-cached="{str(bool(s["cached"])).lower()}" data-replayed="{str(s["replayed"]).lower()}" '
            f'data-start="{s["start_s"]}" data-end="{s["end_s"]}" '
            f'style="left:{left:.3f}%;width:{width:.3f}%;{color}" '
            f'title="{esc(what)}{cached}: {s["start_s"]:.3f}–{s["end_s"]:.3f} s"></div>')
    return f'<td class="rt-lane">{"".join(parts)}</td>'


def _row_html(n: dict[str, Any], span: float) -> str:
    goal = n["goal"] if len(n["goal"]) <= _GOAL_CHARS else n["goal"][:_GOAL_CHARS] + "…"
    doing = f' <small>{esc(n["in_flight"]["role"])}</small>' if n["in_flight"] else ""
    cached = (f' <span class="rt-cached" title="{n["cached_calls"]} of {len(n["calls"])} calls were served from '
              f'a completion cache">{n["cached_calls"]} cached</span>' if n["cached_calls"] else "")
    cells = (f'<td style="padding-left:{4 + 14 * n["depth"]}px" title="{esc(n["goal"])}">'
             f'{esc(n["id"])} <span class="rt-type">{esc(n["task_type"])}</span> {esc(goal)}</td>'
             f'<td>{_badge(n["state"], n.get("no_evidence"), in_row=True)}{doing}</td><td class="rt-num">{len(n["calls"])}{cached}</td>'
             f'<td class="rt-num">{n["latency_s"]:.3f}</td>'
             f'<td class="rt-num">{tokens(n["input_tokens"])} / {tokens(n["output_tokens"])}</td>{_lane_html(n, span)}')
    return select_row(n["id"], {"state": n["state"], "roles": " ".join(n["roles"])}, cells)


def _warnings_html(warnings: list[str], key: str) -> str:
    if not warnings:
        return ""
    counts = Counter(warnings)
    items = "".join(f"<li>{esc(w)}{f' (×{k})' if k > 1 else ''}</li>" for w, k in counts.items())
    return (f'<details data-key="{esc(key)}"><summary class="rt-warn">{len(warnings)} warning(s)</summary>'
            f"<ul>{items}</ul></details>")


def _times_html(n: dict[str, Any]) -> str:
    parts = []
    if n["created_s"] is not None:
        parts.append(f"created {n['created_s']:.3f} s")
    if n["depends_on"]:
        waited = next((s for s in n["segments"] if s["kind"] == "waiting"), None)
        after = "after " + ", ".join(n["depends_on"])
        parts.append(after + ("" if waited is None else f" (waited {waited['end_s'] - waited['start_s']:.3f} s)"))
    if n["started_s"] is not None:
        parts.append(f"started {n['started_s']:.3f} s")
    if n["ended_s"] is not None:
        parts.append(f"ended {n['ended_s']:.3f} s")
    queued = sum(c["wait_s"] or 0 for c in n["calls"])
    if queued >= 5e-4:  # shown to the millisecond
        parts.append(f"{queued:.3f} s queued for slots")
    if n["in_flight"]:
        f = n["in_flight"]
        since = f["queued_s"] if f["started_s"] is None else f["started_s"]
        waited = max(0.0, (n.get("now_s") or since) - since)
        # the live view ticks this on (view.js: .rt-tick), so a long model call never reads as frozen
        clock = f'<span class="rt-tick" data-tick-from="{waited:.3f}">{waited:.0f}</span> s'
        doing = f"queued for a slot of {esc(f['role'])}" if f["started_s"] is None else \
            f"waiting on the model in {esc(f['role'])}"
        parts.append(f"now {doing}: {clock} (since {since:.3f} s)")
    if n["forced_atomic"]:
        parts.append("max depth: executed directly")
    return f"<div>{' &middot; '.join(parts)}</div>" if parts else ""


def node_detail_html(tree: dict[str, Any], node_id: str, *, key: str = "") -> str:
    """One node in full: state, times, error, its role calls (inputs, outputs, full prompts and
    completions, usage, cached mark, time queued), its output, then its warnings collapsed."""
    n = tree["nodes"].get(node_id)
    if n is None:
        return f"<i>no node {esc(node_id)}</i>"
    parts = [f"<div><b>{esc(n['id'])}</b> {_badge(n['state'], n.get('no_evidence'))} [{esc(n['task_type'])}] "
             f"{esc(n['goal'])}</div>", _times_html(n)]
    if n.get("no_evidence"):
        parts.append(f'<div class="rt-warn">no evidence: {esc(n["no_evidence"])}</div>')
    if n["error"]:
        parts.append(f'<div class="rt-error">{esc(n["status"])}: {esc(n["error"])}</div>')
    parts.append(f"<h5>role calls ({len(n['calls'])})</h5>")
    parts += [call_html(c, f"{key}/{node_id}/call/{i}", prefix="rt", mark="rt-cached",
                        empty="no model request recorded for this call", inputs=True)
              for i, c in enumerate(n["calls"])]
    if n["output"] is not None:
        parts.append(f"<h5>output</h5><pre>{esc(n['output'])}</pre>")
    parts.append(_warnings_html(n["warnings"], f"{key}/{node_id}/warnings"))
    return "".join(parts)


_CLICK = "click a row to see its role calls"


def _pane_html(tree: dict[str, Any], *, span: float, label: str = "", controls: bool = True) -> str:
    title = pane_title(label)
    if tree["root"] is None:
        return f"{title}<div><i>no run yet</i></div>"
    order = _order(tree)
    nodes = tree["nodes"]
    filters = ""
    if controls:
        states = sorted({nodes[i]["state"] for i in order})
        roles = sorted({r for i in order for r in nodes[i]["roles"]})
        filters = (f"<div>{filter_select('state', 'state', states)}{filter_select('roles', 'role', roles)}"
                   f"{row_hint(_CLICK)}</div>")
    axis = (f'<span style="left:0">0</span><span style="left:45%">{span / 2:.2f}</span>'
            f'<span style="right:0">{span:.2f} s</span>')
    head = table_head("rt-table", [("node", ""), ("state", ""), ("calls", "rt-num"), ("latency s", "rt-num"),
                                   ("tokens in/out", "rt-num"), (axis, "rt-axis")])
    rows = "".join(expandable_row(_row_html(nodes[i], span),
                                  detail_section("rt-detail", i, node_detail_html(tree, i, key=label)), "rt-table")
                   for i in order)
    return f"{title}{_summary_html(tree)}{filters}{head}<div>{rows}</div>"


def tree_html(tree: dict[str, Any]) -> str:
    """The execution tree as self-contained HTML: summary, filters (live only), the waterfall of
    nodes with their timelines, each row opening its node's detail block."""
    span = max(tree.get("span_s") or 0.0, 1e-9)
    return view_html(_LEGEND + _pane_html(tree, span=span), TREE_CSS, data_view="execution-tree")


def compare_html(trees: Sequence[dict[str, Any]], labels: Sequence[str]) -> str:
    """Runs side by side on one time axis (the longest run's), with one set of filters."""
    if len(trees) != len(labels):
        raise ValueError(f"{len(trees)} trees but {len(labels)} labels")
    span = max([t.get("span_s") or 0.0 for t in trees] + [1e-9])
    states = sorted({n["state"] for t in trees for n in t["nodes"].values()})
    roles = sorted({r for t in trees for n in t["nodes"].values() for r in n["roles"]})
    controls = (f"<div>{filter_select('state', 'state', states)}{filter_select('roles', 'role', roles)}"
                f'{row_hint("click a row: the node with that id is shown in every run", _CLICK)}</div>')
    panes = "".join(f'<div class="rt-pane">{_pane_html(t, span=span, label=label, controls=False)}</div>'
                    for t, label in zip(trees, labels, strict=True))
    return view_html(f'{_LEGEND}{controls}<div class="rt-compare">{panes}</div>', TREE_CSS, data_view="run-comparison")


def render_tree_html(run: Run) -> str:
    """Self-contained HTML of a run's execution tree (for executed notebooks and reports)."""
    return tree_html(trace_to_tree(run))


RUNS = ViewKind(noun="run", data=trace_to_tree, ids=lambda tree: tree.get("nodes", {}),
                first=lambda tree: tree.get("root") or "", find=lambda tree, i: tree.get("nodes", {}).get(i),
                page=tree_html, compare=compare_html)


class ExecutionTreeWidget(SingleView):
    """Live execution tree. Pass a finished :class:`Run`, or give ``on_event`` to ``Roma.run``::

        tree = ExecutionTreeWidget(); display(tree)
        roma.run(goal, on_event=tree.on_event)

    State is the ``tree`` dict (see :func:`trace_to_tree`) plus ``selected_id`` (the clicked node,
    synced with the browser); the HTML is rendered from ``tree`` whenever it changes and
    ``selected`` is the selected node's entry in it.
    """

    kind, data_trait = RUNS, "tree"
    tree = traitlets.Dict()

    def __init__(self, run: Run | None = None, **kwargs: Any):
        self._live: dict[str, Node] = {}
        super().__init__(**kwargs)
        if run is not None:
            self.show_run(run)
        else:
            self.tree = nodes_to_tree([])

    def show_run(self, run: Run) -> None:
        self._live = {n.id: n for n in run.nodes}
        self.tree = trace_to_tree(run)

    def on_event(self, event: NodeEvent) -> None:
        """Observer for ``Roma.run(..., on_event=...)``: updates the tree as nodes change."""
        self._live[event.node.id] = event.node
        self.tree = nodes_to_tree(self._live.values())


class RunComparison(LabelledComparison):
    """Runs side by side on one time axis; clicking a node selects the node of that id in every run
    (``selected``: per label, that node's entry in the run's tree, or None).

    ``runs``: a mapping label -> :class:`Run`, or a sequence (labelled "run 1", "run 2", ...).
    """

    kind, data_trait = RUNS, "trees"
    trees = traitlets.List()

    def show_runs(self, runs: Mapping[str, Run] | Sequence[Run]) -> None:
        self._compare(runs)
