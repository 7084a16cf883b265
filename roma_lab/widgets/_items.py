"""Pick a benchmark item, see ROMA's execution tree for it (notebooks 03-08)."""

from __future__ import annotations

import html
import os
from typing import Any

import ipywidgets as widgets

from roma_lab.bench import load_item_run, saved_item_ids
from roma_lab.widgets._tree import ExecutionTreeWidget


class ItemRunPicker(widgets.VBox):
    """A dropdown of the items whose ROMA run was saved in ``out_dir``, above that item's tree.

    ``item_id`` chooses the first item shown ("" or None: the first saved one); with no saved run
    (e.g. AbGen without data) the tree says "no run yet". The static HTML of
    the shown tree travels with the widget, so executed notebooks show it without widget JS.
    """

    def __init__(self, out_dir: str | os.PathLike[str], benchmark: str, item_id: str | None = None, **kwargs: Any):
        self.out_dir, self.benchmark = out_dir, benchmark
        ids = saved_item_ids(out_dir, benchmark)
        first = str(item_id) if item_id else (ids[0] if ids else None)
        if first is not None and first not in ids:
            raise ValueError(f"item {first!r} has no saved ROMA run; saved items: {ids}")
        self.picker = widgets.Dropdown(description="item", options=ids, value=first)
        self.tree = ExecutionTreeWidget(load_item_run(out_dir, benchmark, first) if first else None)
        super().__init__(children=[self.picker, self.tree], **kwargs)
        self.picker.observe(self._picked, names="value")

    def _picked(self, change: dict[str, Any]) -> None:
        if change["new"]:
            self.tree.show_run(load_item_run(self.out_dir, self.benchmark, change["new"]))

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        static = f"<p>item <code>{html.escape(str(self.picker.value))}</code></p>" + self.tree._repr_html_()
        return {**super()._repr_mimebundle_(**kwargs), "text/html": static}
