"""The ROMA execution tree in Jupyter: a pure tree builder, a static HTML view and a live widget.

``trace_to_tree`` turns a run into one JSON-able dict; everything else renders that dict. The
widget keeps the dict in ONE synced trait (``tree``) plus ``selected_id``, and re-renders from them,
so tests can drive it exactly as the browser would, and executed notebooks keep a static copy.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from typing import Any

import ipywidgets as widgets
import traitlets

from roma_lab.controller import Node, NodeEvent, Run

# Node statuses, then the run statuses that are not also node statuses (both get a badge).
STATUS_COLORS = {"pending": "#9e9e9e", "running": "#1e88e5", "completed": "#43a047", "degraded": "#c0ca33",
                 "unverified": "#8e24aa", "failed": "#e53935", "skipped": "#fb8c00", "cancelled": "#6d4c41",
                 "partial": "#fdd835", "timed_out": "#6d4c41", "interrupted": "#6d4c41"}
_PREVIEW_CHARS = 160  # node outputs shown inline; the detail pane shows them whole


def _total(values: Iterable[int | None]) -> int | None:
    """A sum with an unknown term is unknown (a timed-out call's usage)."""
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def _call_dict(call) -> dict[str, Any]:
    return {"role": call.role, "model": call.model, "input_tokens": call.input_tokens,
            "output_tokens": call.output_tokens, "cost": call.cost, "latency_s": round(call.latency_s, 4),
            "started_s": round(call.started_s, 4), "context_chars": call.context_chars,
            "inputs": call.inputs, "outputs": call.outputs, "error": call.error}


def nodes_to_tree(nodes: Iterable[Node], *, status: str = "running", output: str | None = None) -> dict[str, Any]:
    """The tree dict for any set of node snapshots (a finished run or one in progress)."""
    nodes = list(nodes)
    children: dict[str, list[str]] = {n.id: [] for n in nodes}
    for n in nodes:
        if n.parent_id in children:
            children[n.parent_id].append(n.id)
    tree_nodes = {}
    for n in nodes:
        tree_nodes[n.id] = {
            "id": n.id, "parent_id": n.parent_id, "depth": n.depth, "goal": n.goal, "task_type": n.task_type,
            "status": n.status, "color": STATUS_COLORS[n.status], "output": n.output, "error": n.error,
            "warnings": list(n.warnings), "forced_atomic": n.forced_atomic, "is_atomic": n.is_atomic,
            "depends_on": list(n.depends_on), "children": children[n.id],
            "calls": [_call_dict(c) for c in n.calls],
            "input_tokens": _total(c.input_tokens for c in n.calls),
            "output_tokens": _total(c.output_tokens for c in n.calls),
            "latency_s": round(sum(c.latency_s for c in n.calls), 4),
        }
    calls = [c for n in nodes for c in n.calls]
    return {
        "status": status,
        "output": output,
        "root": nodes[0].id if nodes else None,
        "nodes": tree_nodes,
        "edges": [{"source": d, "target": n.id} for n in nodes for d in n.depends_on],
        "totals": {"nodes": len(nodes), "calls": len(calls),
                   "input_tokens": _total(c.input_tokens for c in calls),
                   "output_tokens": _total(c.output_tokens for c in calls),
                   "latency_s": round(sum(c.latency_s for c in calls), 4)},
    }


def trace_to_tree(run: Run) -> dict[str, Any]:
    """The whole execution tree of a finished run as one JSON-able dict (nodes by id, dependency
    edges between siblings, per-node role calls and totals)."""
    return nodes_to_tree(run.nodes, status=run.status, output=run.output)


# --- HTML (shared by the static view and the widget) ---

def _esc(value: Any) -> str:
    return html.escape(str(value))


def _badge(status: str) -> str:
    color = STATUS_COLORS.get(status, "#616161")
    return f'<span style="background:{color};color:white;border-radius:3px;padding:0 4px">{_esc(status)}</span>'


def _tokens(value: int | None) -> str:
    return "unknown" if value is None else str(value)


def _summary_html(tree: dict[str, Any]) -> str:
    t = tree["totals"]
    return (f"<div>run {_badge(tree['status'])} &middot; {t['nodes']} nodes &middot; {t['calls']} calls &middot; "
            f"{_tokens(t['input_tokens'])} in / {_tokens(t['output_tokens'])} out tokens &middot; "
            f"{t['latency_s']:.2f} s in calls</div>")


def _node_html(tree: dict[str, Any], node_id: str) -> str:
    n = tree["nodes"][node_id]
    flags = []
    if n["depends_on"]:
        flags.append("after " + ", ".join(n["depends_on"]))
    if n["forced_atomic"]:
        flags.append("max depth: executed directly")
    if n["warnings"]:
        flags.append(f"{len(n['warnings'])} warning(s)")
    detail = f"<br><i>{_esc(n['error'])}</i>" if n["error"] else ""
    if n["output"]:
        preview = n["output"] if len(n["output"]) <= _PREVIEW_CHARS else n["output"][:_PREVIEW_CHARS] + "…"
        detail += f'<br><span style="color:#555">&rarr; {_esc(preview)}</span>'
    label = (f'<b style="color:{n["color"]}">&#9679;</b> <code>{_esc(n["id"])}</code> [{_esc(n["task_type"])}] '
             f'{_esc(n["goal"])} {_badge(n["status"])} <small>{_esc("; ".join(flags))}</small>{detail}')
    if not n["children"]:
        return f'<div style="margin-left:1.2em;border-left:3px solid {n["color"]};padding-left:4px">{label}</div>'
    kids = "".join(_node_html(tree, c) for c in n["children"])
    return (f'<details open style="margin-left:1.2em;border-left:3px solid {n["color"]};padding-left:4px">'
            f"<summary>{label}</summary>{kids}</details>")


def node_detail_html(tree: dict[str, Any], node_id: str) -> str:
    """Role calls of one node: inputs, outputs, tokens, latency, context size; plus warnings."""
    n = tree["nodes"].get(node_id)
    if n is None:
        return f"<i>no node {_esc(node_id)}</i>"
    parts = [f"<b>{_esc(n['id'])}</b> {_badge(n['status'])} [{_esc(n['task_type'])}] {_esc(n['goal'])}"]
    if n["error"]:
        parts.append(f"<div style='color:{n['color']}'>{_esc(n['status'])}: {_esc(n['error'])}</div>")
    parts += [f"<div style='color:{STATUS_COLORS['skipped']}'>warning: {_esc(w)}</div>" for w in n["warnings"]]
    for c in n["calls"]:
        cost = "n/a" if c["cost"] is None else f"${c['cost']:.4f}"
        head = (f"{_esc(c['role'])} &middot; {_esc(c['model'] or 'no model')} &middot; {_tokens(c['input_tokens'])} in / "
                f"{_tokens(c['output_tokens'])} out tokens &middot; {cost} &middot; {c['latency_s']:.3f} s &middot; "
                f"context {c['context_chars']} chars" + (f" &middot; <b>error</b>: {_esc(c['error'])}" if c["error"] else ""))
        body = (f"<b>inputs</b><pre style='white-space:pre-wrap'>{_esc(json.dumps(c['inputs'], indent=1, ensure_ascii=False))}</pre>"
                f"<b>outputs</b><pre style='white-space:pre-wrap'>{_esc(json.dumps(c['outputs'], indent=1, ensure_ascii=False))}</pre>")
        parts.append(f"<details><summary>{head}</summary>{body}</details>")
    if n["output"] is not None:
        parts.append(f"<b>output</b><pre style='white-space:pre-wrap'>{_esc(n['output'])}</pre>")
    return "".join(parts)


def tree_html(tree: dict[str, Any]) -> str:
    """Static HTML of a tree dict: expandable nodes coloured by status, then every node's detail."""
    if tree["root"] is None:
        return "<div><i>no run yet</i></div>"
    details = "".join(
        f"<details><summary>node {_esc(i)}</summary>{node_detail_html(tree, i)}</details>" for i in tree["nodes"])
    return (f"<div class='roma-tree'>{_summary_html(tree)}{_node_html(tree, tree['root'])}"
            f"<details><summary>role calls per node</summary>{details}</details></div>")


def render_tree_html(run: Run) -> str:
    """Self-contained HTML of a run's execution tree (for executed notebooks and reports)."""
    return tree_html(trace_to_tree(run))


class ExecutionTreeWidget(widgets.VBox):
    """Live execution tree. Pass a finished :class:`Run`, or give ``on_event`` to ``Roma.run``::

        tree = ExecutionTreeWidget(); display(tree)
        roma.run(goal, on_event=tree.on_event)

    State is the ``tree`` dict (see :func:`trace_to_tree`) plus ``selected_id``; the views
    (tree, node picker, detail pane) are re-rendered from them.
    """

    tree = traitlets.Dict().tag(sync=True)
    selected_id = traitlets.Unicode("").tag(sync=True)

    def __init__(self, run: Run | None = None, **kwargs: Any):
        self._summary = widgets.HTML()
        self._tree_view = widgets.HTML(layout=widgets.Layout(width="60%", overflow="auto", max_height="600px"))
        self._picker = widgets.Dropdown(description="node", options=[], layout=widgets.Layout(width="95%"))
        self._detail = widgets.HTML(layout=widgets.Layout(overflow="auto", max_height="560px"))
        self._live: dict[str, Node] = {}
        self._rendering = False
        super().__init__(children=[self._summary, widgets.HBox([
            self._tree_view, widgets.VBox([self._picker, self._detail], layout=widgets.Layout(width="40%"))])],
            **kwargs)
        self._picker.observe(self._picked, names="value")
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

    def _picked(self, change: dict[str, Any]) -> None:
        if not self._rendering:
            self.selected_id = change["new"] or ""

    @traitlets.observe("tree")
    def _render_tree(self, change: dict[str, Any]) -> None:
        tree = change["new"]
        has_root = bool(tree.get("root"))
        self._summary.value = _summary_html(tree) if has_root else "<i>no run yet</i>"
        self._tree_view.value = _node_html(tree, tree["root"]) if has_root else ""
        selected = self.selected_id if self.selected_id in tree.get("nodes", {}) else (tree.get("root") or "")
        self._rendering = True  # new options reset the picker; that is not a user's choice
        try:
            self._picker.options = [(f"{'  ' * n['depth']}{i} [{n['status']}] {n['goal'][:60]}", i)
                                    for i, n in tree.get("nodes", {}).items()]
            self._picker.value = selected or None
        finally:
            self._rendering = False
        self.selected_id = selected
        self._detail.value = node_detail_html(tree, selected) if selected else ""

    @traitlets.observe("selected_id")
    def _render_detail(self, change: dict[str, Any]) -> None:
        node_id = change["new"]
        if node_id in self.tree.get("nodes", {}):
            self._picker.value = node_id
        self._detail.value = node_detail_html(self.tree, node_id) if node_id else ""

    def _repr_html_(self) -> str:
        return tree_html(self.tree) if self.tree.get("root") else "<i>no run yet</i>"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # The static HTML travels with the widget view, so saved notebooks show the tree without JS.
        return {**super()._repr_mimebundle_(**kwargs), "text/html": self._repr_html_()}
