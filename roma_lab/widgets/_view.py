"""The pattern every roma_lab view follows: Python renders the HTML, the browser only selects and filters.

A view's HTML is built by pure functions from plain data, so it is tested without a browser, and the
same HTML is the static view that executed and exported notebooks show (no JavaScript, no network).
Each row is the ``<summary>`` of a ``<details>`` holding its detail block (:func:`expandable_row`), so
without JavaScript a click on a row opens its detail in place. :class:`HTMLView` syncs that HTML and a
``selected_id`` with the browser; ``_assets/view.js`` makes a click on a ``[data-select]`` row select
it, keeps open only the row of the selected id, and applies ``<select data-filter>`` filters. A view
of one item (:class:`SingleView`) and a labelled comparison of several (:class:`LabelledComparison`)
follow one :class:`ViewKind` (how an item becomes plain data, its ids, its page), so the execution
tree and the trajectory views select and compare alike; a model call is rendered by one pair,
:func:`call_data` and :func:`call_html`. See design/viewer.md.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import anywidget
import traitlets

if TYPE_CHECKING:
    from roma_lab.trace import RoleCall

ASSETS = Path(__file__).with_name("_assets")
T = TypeVar("T")

# What a view drawn from a saved notebook's widget state says in place of ipywidgets' bare red chain-broken
# icon (``.jupyter-widgets-disconnected::before``, no tooltip): view.js marks the view's element
# ``rv-host``, and the icons of the controls around it (a picker's box and dropdown) are hidden.
DISCONNECTED_NOTE = "a saved view, not connected to the kernel: rows open on click; rerun the cell to reconnect"
# Behaviour classes used by view.js. A row's own marker (▸, ▾ once open) replaces the summary's, which
# would stand on a line of its own above the row's table.
BASE_CSS = """
.roma-view{font-family:system-ui,sans-serif;font-size:13px;line-height:1.35}
.roma-view pre{white-space:pre-wrap;word-break:break-word;margin:2px 0 6px;padding:4px;background:rgba(127,127,127,.08)}
.roma-view .rv-live-only{display:none}
.roma-view.rv-live .rv-live-only{display:inline-block}
.roma-view.rv-live .rv-static-only{display:none}
.roma-view details.rv-row>summary{display:block;list-style:none}
.roma-view details.rv-row>summary::-webkit-details-marker{display:none}
.roma-view details.rv-row>summary td:first-child::before{content:"▸ ";opacity:.6}
.roma-view details.rv-row[open]>summary td:first-child::before{content:"▾ "}
.roma-view [data-select]{cursor:pointer}
.roma-view [data-select]:hover{background:rgba(127,127,127,.08)}
.roma-view .rv-selected,.roma-view .rv-selected:hover{background:rgba(30,136,229,.16)}
.roma-view .rv-hidden{display:none}
.jupyter-widgets-disconnected:has(.rv-host)::before,.jupyter-widgets-disconnected:has(~.rv-host)::before,
.rv-host~.jupyter-widgets-disconnected::before{display:none}
.rv-host.jupyter-widgets-disconnected::before{display:block;font:italic 11px system-ui,sans-serif;color:#757575;
  padding:0 0 2px;content:""" + json.dumps(DISCONNECTED_NOTE) + "}\n"

# The table-and-details views (execution tree ``rt``, trajectory ``tj``) share their table, detail
# and side-by-side styles; ``{p}`` is the view's class prefix. The head and each row are tables of
# their own (a row is a <summary>): the fixed layout and the column widths line their columns up.
_PANE_CSS = """
.roma-view table.{p}-table{border-collapse:collapse;width:100%;min-width:{min_width}px;table-layout:fixed}
.roma-view .{p}-table th{text-align:left;font-weight:600;border-bottom:1px solid #bbb;font-size:12px;padding:1px 4px}
.roma-view .{p}-table td{border-bottom:1px solid rgba(127,127,127,.15);padding:1px 4px;white-space:nowrap;
  overflow:hidden;text-overflow:ellipsis;text-align:left}
.roma-view .{p}-num{text-align:right}
.roma-view .{p}-detail{border-left:3px solid rgba(30,136,229,.35);margin:2px 0 8px 4px;padding:2px 0 2px 8px}
.roma-view .{p}-detail h5{margin:6px 0 2px;font-size:12px}
.roma-view .{p}-call{margin:2px 0 2px 4px}
.roma-view .{p}-call>div{margin-left:14px}
.roma-view .{p}-error{color:#e53935}
.roma-view .{p}-compare{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}
.roma-view .{p}-pane{flex:1 1 {pane_width}px;min-width:0;overflow-x:auto}
"""
# Narrower panes cut every status to "unkn…": below this width side-by-side panes wrap onto a new
# row (six configurations on a normal page: two per row, not six of 165 px).
PANE_WIDTH = 420


def pane_css(prefix: str, min_width: int, widths: Sequence[int]) -> str:
    """The shared styles of a table-and-details view whose classes start with ``prefix-``; ``widths``:
    its columns' widths in percent, in order (the head's and every row's)."""
    # border-box: a row's indent (the tree's depth) must not widen its first column
    columns = "".join(f".roma-view .{prefix}-table>*>tr>:nth-child({i}){{width:{width}%;box-sizing:border-box}}\n"
                      for i, width in enumerate(widths, 1))
    return (_PANE_CSS.replace("{p}", prefix).replace("{min_width}", str(min_width))
            .replace("{pane_width}", str(PANE_WIDTH)) + columns)


def esc(value: Any) -> str:
    """Text (any value) escaped for HTML content and quoted attributes."""
    return html.escape(str(value), quote=True)


def tokens(value: int | None) -> str:
    """A token count, or "unknown" where the provider did not report one."""
    return "unknown" if value is None else str(value)


def json_pre(value: Any) -> str:
    return f"<pre>{esc(json.dumps(value, indent=1, ensure_ascii=False))}</pre>"


def text_pre(value: Any) -> str:
    return f"<pre>{esc(value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False))}</pre>"


def known_sum(values: Iterable[int | None]) -> int | None:
    """A sum with an unknown term is unknown (e.g. the usage of a call that timed out)."""
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def exchanges_data(exchanges: Iterable[Any]) -> list[dict[str, Any]]:
    """A call's recorded model requests (``roma_lab.trace.LMExchange``) as plain data."""
    return [{"messages": list(e.messages), "completions": list(e.completions), "cached": e.cached} for e in exchanges]


def exchanges_html(exchanges: list[Mapping[str, Any]], empty: str) -> str:
    """A role call's model requests: each message, then each completion; ``empty`` when none was recorded."""
    parts = []
    for i, e in enumerate(exchanges, 1):
        messages = "".join(f"<div><b>{esc(m.get('role', '?'))}</b>{text_pre(m.get('content', ''))}</div>"
                           for m in e["messages"])
        completions = "".join(f"<div><b>completion</b>{text_pre(out)}</div>" for out in e["completions"])
        parts.append(f"<div><u>model request {i}{' (cached)' if e['cached'] else ''}</u>{messages}{completions}</div>")
    return "".join(parts) or f"<div><i>{esc(empty)}</i></div>"


def call_data(call: RoleCall) -> dict[str, Any]:
    """A model call (a ROMA role call or an agent's call: both are ``trace.RoleCall``) as plain data."""
    wait = None if call.queued_s is None else round(call.started_s - call.queued_s, 6)
    return {"role": call.role, "component": call.role.split(":")[0], "model": call.model,
            "input_tokens": call.input_tokens, "output_tokens": call.output_tokens, "cost": call.cost,
            "latency_s": round(call.latency_s, 6), "started_s": round(call.started_s, 6),
            "queued_s": None if call.queued_s is None else round(call.queued_s, 6), "wait_s": wait,
            "context_chars": call.context_chars, "inputs": call.inputs, "outputs": call.outputs,
            "error": call.error, "cached": call.cached, "exchanges": exchanges_data(call.exchanges)}


def call_html(c: Mapping[str, Any], key: str, *, prefix: str, mark: str, empty: str, inputs: bool = False) -> str:
    """A model call (:func:`call_data`), collapsed to one line (role, cached mark of class ``mark``,
    model, tokens, cost, the latency (a lookup when cached), the wait for a slot, start and context
    size, the error); open, its inputs (when ``inputs``), outputs and requests as sent (``empty``
    when none was recorded)."""
    cached = f' <span class="{mark}">cached</span>' if c["cached"] is True else ""
    error = f' &middot; <span class="{prefix}-error">error: {esc(c["error"])}</span>' if c["error"] else ""
    cost = "cost unknown" if c["cost"] is None else f"${c['cost']:.4f}"
    waited = "" if (c["wait_s"] or 0) < 5e-4 else f" &middot; waited {c['wait_s']:.3f} s for a slot"
    head = (f"<b>{esc(c['role'])}</b>{cached} &middot; {esc(c['model'] or 'no model')} &middot; "
            f"{tokens(c['input_tokens'])} in / {tokens(c['output_tokens'])} out tokens &middot; {cost} &middot; "
            f"{c['latency_s']:.3f} s{' lookup' if c['cached'] else ''}{waited} &middot; started {c['started_s']:.3f} s"
            f" &middot; context {c['context_chars']} chars{error}")
    shown = f"<b>inputs</b>{json_pre(c['inputs'])}" if inputs else ""
    return (f'<details class="{prefix}-call" data-key="{esc(key)}"><summary>{head}</summary>'
            f"<div>{shown}<b>outputs</b>{json_pre(c['outputs'])}{exchanges_html(c['exchanges'], empty)}</div></details>")


def pane_title(label: str) -> str:
    return f"<h4 style='margin:4px 0'>{esc(label)}</h4>" if label else ""


def table_head(table_class: str, columns: Sequence[tuple[str, str]]) -> str:
    """The head of a table-and-details view, a table of its own: per column its header (HTML) and
    class ("" for none); the widths are the view's :func:`pane_css`."""
    cells = "".join(f'<th class="{cls}">{header}</th>' if cls else f"<th>{header}</th>" for header, cls in columns)
    return f'<table class="{table_class}"><thead><tr>{cells}</tr></thead></table>'



def select_row(item_id: str, data: Mapping[str, str], cells: str, *, css_class: str = "") -> str:
    """A row the user clicks to select ``item_id``, with the ``data-<name>`` words its filters read."""
    cls = f' class="{css_class}"' if css_class else ""
    words = "".join(f' data-{name}="{esc(value)}"' for name, value in data.items())
    return f'<tr{cls} data-select="{esc(item_id)}"{words}>{cells}</tr>'


def detail_section(css_class: str, item_id: str, body: str) -> str:
    """The detail block of ``item_id``, for :func:`expandable_row`."""
    return f'<section class="{css_class}" data-detail="{esc(item_id)}">{body}</section>'


def expandable_row(row: str, detail: str, table_class: str) -> str:
    """A row (:func:`select_row`) that opens its detail (:func:`detail_section`) below it, with or
    without JavaScript: the row, in a table of its own, is the ``<summary>`` of a ``<details>`` that
    holds the detail, once. Without view.js a click (or Enter on the focused row) opens or closes it,
    even where a sanitiser drops styles and data attributes (untrusted JupyterLab); view.js opens the
    row of the selected id instead."""
    return f'<details class="rv-row"><summary><table class="{table_class}">{row}</table></summary>{detail}</details>'


def row_hint(live: str, static: str | None = None) -> str:
    """What a click on a row does: ``live`` where view.js runs, ``static`` in the page without it
    (None: the same)."""
    if static is None:
        return f"<span><i>{esc(live)}</i></span>"
    return (f'<span class="rv-live-only"><i>{esc(live)}</i></span>'
            f'<span class="rv-static-only"><i>{esc(static)}</i></span>')


def labelled(items: Mapping[str, T] | Iterable[T], noun: str, owner: str) -> dict[str, T]:
    """What a comparison shows, by label: a mapping as given, else "<noun> 1", "<noun> 2"... in order.
    Nothing to show is an error (``owner`` needs at least one)."""
    found = dict(items) if isinstance(items, Mapping) else {f"{noun} {i}": x for i, x in enumerate(items, 1)}
    if not found:
        raise ValueError(f"{owner} needs at least one {noun}")
    return found


def view_html(body: str, css: str = "", *, data_view: str = "") -> str:
    """Wrap a view's body with its style, so the HTML renders alone (static page or widget)."""
    return f'<div class="roma-view" data-view="{esc(data_view)}"><style>{BASE_CSS}{css}</style>{body}</div>'


def filter_select(attr: str, label: str, values: list[str]) -> str:
    """A filter over the rows' ``data-<attr>`` words; only shown where view.js runs."""
    options = '<option value="">all</option>' + "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)
    return f'<label class="rv-live-only">{esc(label)} <select data-filter="{esc(attr)}">{options}</select></label> '


class HTMLView(anywidget.AnyWidget):
    """A widget drawn from HTML that Python renders; subclasses set ``_html`` from their state.

    ``selected_id`` is what the user clicked (a ``data-select`` id), synced both ways. The static
    HTML travels with the widget view, so a notebook saved or exported without widget JavaScript
    shows the same content.
    """

    _esm = ASSETS / "view.js"
    _html = traitlets.Unicode("").tag(sync=True)
    selected_id = traitlets.Unicode("").tag(sync=True)

    def _repr_html_(self) -> str:
        return self._html

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        data, metadata = super()._repr_mimebundle_(**kwargs)
        return {**data, "text/html": self._html}, metadata


@dataclass(frozen=True, slots=True)
class ViewKind:
    """How one kind of item (a run, a trajectory) is shown: ``data`` makes its plain data, ``ids`` the
    selectable ids of that data, ``first`` the id selected first, ``find`` the entry of an id (None:
    no such id), ``page`` the HTML of one and ``compare`` of several side by side (data, labels);
    ``noun`` names an item in default labels ("run 1") and errors."""

    noun: str
    data: Callable[[Any], dict[str, Any]]
    ids: Callable[[Mapping[str, Any]], Container[str]]
    first: Callable[[Mapping[str, Any]], str]
    find: Callable[[Mapping[str, Any], str], dict[str, Any] | None]
    page: Callable[[Mapping[str, Any]], str]
    compare: Callable[[Sequence[Mapping[str, Any]], Sequence[str]], str]


class SingleView(HTMLView):
    """One item of a :class:`ViewKind`: its plain data in the trait named ``data_trait``; the HTML is
    rendered from it whenever it changes, and a selection the new data lacks falls back to ``first``."""

    kind: ClassVar[ViewKind]
    data_trait: ClassVar[str]

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.observe(self._render, names=self.data_trait)

    @property
    def selected(self) -> dict[str, Any] | None:
        """The selected id's entry in the data (None when nothing is selected)."""
        data = getattr(self, self.data_trait)
        return self.kind.find(data, self.selected_id) if data else None

    def _render(self, change: dict[str, Any]) -> None:
        data = change["new"]
        self._html = self.kind.page(data)
        if self.selected_id not in self.kind.ids(data):
            self.selected_id = self.kind.first(data)


class LabelledComparison(HTMLView):
    """Items of a :class:`ViewKind` side by side under labels (their data, a list, in the
    trait named ``data_trait``); clicking an id selects the entry of that id in every pane."""

    kind: ClassVar[ViewKind]
    data_trait: ClassVar[str]
    labels = traitlets.List()

    def __init__(self, items: Mapping[str, Any] | Sequence[Any], **kwargs: Any):
        super().__init__(**kwargs)
        self._compare(items)

    def _compare(self, items: Mapping[str, Any] | Sequence[Any]) -> None:
        """Show ``items``: a mapping label -> item, or a sequence (labelled "<noun> 1", ...)."""
        found = labelled(items, self.kind.noun, type(self).__name__)
        data = [self.kind.data(x) for x in found.values()]
        self.labels = list(found)
        setattr(self, self.data_trait, data)
        self._html = self.kind.compare(data, self.labels)
        if not any(self.selected_id in self.kind.ids(d) for d in data):
            self.selected_id = self.kind.first(data[0])

    @property
    def selected(self) -> dict[str, dict[str, Any] | None]:
        """Per label, the selected id's entry (None where that item has no such id)."""
        shown = getattr(self, self.data_trait)
        return {label: self.kind.find(d, self.selected_id) for label, d in zip(self.labels, shown, strict=True)}
