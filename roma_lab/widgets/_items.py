"""Pick a task, see a system's execution tree for it (notebooks 03-08: ROMA's run per benchmark item)."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from roma_lab.widgets._tree import ExecutionTreeWidget


def saved_traces(folder: str | os.PathLike[str], system: str, run: int = 0) -> dict[str, Path]:
    """Task id -> trace file of ``system``'s run ``run`` in an evaluation folder (``roma_lab.evaluate``'s
    ``rows.csv`` names them), in row order; {} when the folder has no rows yet."""
    import pandas as pd

    rows_csv = Path(folder) / "rows.csv"
    if not rows_csv.is_file():
        return {}
    rows = pd.read_csv(rows_csv, dtype={"task_id": str, "trace": str}, keep_default_na=False)
    mine = rows[rows["condition"].eq(system) & rows["run"].eq(run) & rows["trace"].ne("")]
    return {task: Path(folder) / trace for task, trace in zip(mine["task_id"], mine["trace"], strict=True)
            if (Path(folder) / trace).is_file()}


class ItemRunPicker(widgets.VBox):
    """A dropdown of the tasks whose trace ``system`` saved in ``out_dir/<name>_runs`` (the evaluation
    folder of a ROMA table: ``name`` is its benchmark, or ``table5``), above that task's tree.

    ``item_id`` chooses the first task shown ("" or None: the first saved one); with no saved trace
    (e.g. AbGen without data) the tree says "no run yet". The static HTML of the shown tree travels
    with the widget, so executed notebooks show it without widget JS.
    """

    def __init__(self, out_dir: str | os.PathLike[str], name: str, item_id: str | None = None, *,
                 system: str = "roma", **kwargs: Any):
        self.traces = saved_traces(Path(out_dir) / f"{name}_runs", system)
        ids = list(self.traces)
        first = str(item_id) if item_id else (ids[0] if ids else None)
        if first is not None and first not in ids:
            raise ValueError(f"item {first!r} has no saved {system} trace; saved items: {ids}")
        self.picker = widgets.Dropdown(description="item", options=ids, value=first)
        self.tree = ExecutionTreeWidget(self._run(first) if first else None)
        super().__init__(children=[self.picker, self.tree], **kwargs)
        self.picker.observe(self._picked, names="value")

    def _run(self, task_id: str):
        from roma_lab.trace import load_trace

        trace = load_trace(self.traces[task_id], task_id)
        return trace.as_run() if hasattr(trace, "as_run") else trace

    def _picked(self, change: dict[str, Any]) -> None:
        if change["new"]:
            self.tree.show_run(self._run(change["new"]))

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        static = f"<p>item <code>{html.escape(str(self.picker.value))}</code></p>" + self.tree._repr_html_()
        return {**super()._repr_mimebundle_(**kwargs), "text/html": static}
