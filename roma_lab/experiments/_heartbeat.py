"""Which cell is running: one line as each code cell starts, then a heartbeat while it runs
(design/runner.md, "Which cell is running")."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

HEARTBEAT_S = 10.0  # a running cell says it is still running at least this often


def _rows_so_far(out_dir: Path) -> int:
    """Result rows written so far under ``out_dir``: every evaluation folder's attempts log, a row per
    attempt done."""
    from roma_lab.evaluate import LOG_FILE
    from roma_lab.results import DamagedFileError, open_regular

    rows = 0
    for path in out_dir.rglob(LOG_FILE):
        try:
            with open_regular(path, "rb") as f:
                rows += max(0, sum(1 for _ in f) - 1)
        except (OSError, DamagedFileError):  # being replaced right now: counted at the next beat; a FIFO: never
            pass
    return rows


class Announce:
    """nbclient's hook before each code cell: one line saying which notebook and cell is running and
    how it starts, then every ``HEARTBEAT_S`` while it runs a line with its time and the result rows
    written so far, so a notebook that runs for an hour is never a silent terminal."""

    def __init__(self, stem: str, n_cells: int, out_dir: Path):
        self.stem, self.n_cells, self.out_dir = stem, n_cells, out_dir
        self.cell, self.started = 0, time.monotonic()
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._run, name=f"heartbeat-{stem}", daemon=True)

    def __call__(self, cell, cell_index: int, **_: Any) -> None:
        from tqdm.auto import tqdm

        self.cell, self.started = cell_index + 1, time.monotonic()
        tqdm.write(f"{self.stem}: cell {self.cell}/{self.n_cells}: {self._starts(cell)}", file=sys.stderr)
        if not self._beat.is_alive():
            self._beat.start()

    def _starts(self, cell) -> str:
        """How the cell starts; for the two parameters cells, what they mean for this run: the notebook's
        own cell holds defaults (its OUT_DIR is not where this run writes), papermill's sets this run's."""
        tags = getattr(cell, "metadata", {}).get("tags", [])
        if "parameters" in tags:
            return "the notebook's default parameters (the next cell sets this run's)"
        if "injected-parameters" in tags:
            return f"this run's parameters; it writes to {self.out_dir}"
        return next((line.strip() for line in cell.source.splitlines()
                     if line.strip() and not line.lstrip().startswith("#")), "")[:90]

    def _run(self) -> None:
        from tqdm.auto import tqdm

        while not self._stop.wait(HEARTBEAT_S):
            tqdm.write(f"{self.stem}: cell {self.cell}/{self.n_cells} still running ({time.monotonic() - self.started:.0f} s); "
                       f"{_rows_so_far(self.out_dir)} result rows written so far", file=sys.stderr)

    def stop(self) -> None:
        self._stop.set()
