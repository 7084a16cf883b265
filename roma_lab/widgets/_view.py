"""The pattern every roma_lab view follows: Python renders the HTML, the browser only selects and filters.

A view's HTML is built by pure functions from plain data, so it is tested without a browser, and the
same HTML is the static view that executed and exported notebooks show (no JavaScript, no network).
:class:`HTMLView` syncs that HTML and a ``selected_id`` with the browser; ``_assets/view.js`` makes
``[data-select]`` rows clickable, shows the ``[data-detail]`` block of the selected id, and applies
``<select data-filter>`` filters. See design/viewer.md.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets

ASSETS = Path(__file__).with_name("_assets")

# Behaviour classes used by view.js; without JavaScript every detail block is shown, in order.
BASE_CSS = """
.roma-view{font-family:system-ui,sans-serif;font-size:13px;line-height:1.35}
.roma-view pre{white-space:pre-wrap;word-break:break-word;margin:2px 0 6px;padding:4px;background:rgba(127,127,127,.08)}
.roma-view .rv-live-only{display:none}
.roma-view.rv-live .rv-live-only{display:inline-block}
.roma-view.rv-live .rv-static-only{display:none}
.roma-view.rv-live [data-detail]{display:none}
.roma-view.rv-live [data-detail].rv-shown{display:block}
.roma-view [data-select]{cursor:pointer}
.roma-view [data-select]:hover{background:rgba(127,127,127,.08)}
.roma-view .rv-selected,.roma-view .rv-selected:hover{background:rgba(30,136,229,.16)}
.roma-view .rv-hidden{display:none}
"""


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


def exchanges_html(exchanges: list[Mapping[str, Any]], empty: str) -> str:
    """A role call's model requests: each message, then each completion; ``empty`` when none was recorded."""
    parts = []
    for i, e in enumerate(exchanges, 1):
        messages = "".join(f"<div><b>{esc(m.get('role', '?'))}</b>{text_pre(m.get('content', ''))}</div>"
                           for m in e["messages"])
        completions = "".join(f"<div><b>completion</b>{text_pre(out)}</div>" for out in e["completions"])
        parts.append(f"<div><u>model request {i}{' (cached)' if e['cached'] else ''}</u>{messages}{completions}</div>")
    return "".join(parts) or f"<div><i>{esc(empty)}</i></div>"


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
