"""The README's run-time table, generated from each ``results/<stem>/provenance.json``.

Run times in the README are this command's output, never typed by hand:
``python -m roma_lab.experiments times``. A folder without a record, or with a damaged one, is a
row that says so; it never stops the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from roma_lab.results import ProvenanceError, read_provenance


@dataclass(frozen=True, slots=True)
class RunTime:
    """One experiment's last recorded run, as the table shows it (None: not recorded)."""

    stem: str
    status: str  # the record's status, or "not run" / "unreadable"
    started: datetime | None = None
    finished: datetime | None = None
    model: str | None = None
    smoke: bool | None = None

    @property
    def seconds(self) -> float | None:
        """Wall time from start to end; None when the run never wrote its end (killed hard: "running")."""
        if self.started is None or self.finished is None or self.status == "running":
            return None
        return (self.finished - self.started).total_seconds()


def read_run_time(results_root: str | Path, stem: str) -> RunTime:
    """The run recorded in ``<results_root>/<stem>/provenance.json``."""
    try:
        record = read_provenance(Path(results_root) / stem)
    except FileNotFoundError:
        return RunTime(stem, "not run")
    except ProvenanceError:
        return RunTime(stem, "unreadable")
    smoke = record.extra.get("smoke")
    return RunTime(stem, record.status, record.started_at, record.finished_at, record.model,
                   smoke if isinstance(smoke, bool) else None)


def run_times(results_root: str | Path, stems: Sequence[str] = ()) -> list[RunTime]:
    """``stems`` in order (missing ones as "not run"), then any other folder of ``results_root``
    that holds a provenance.json, sorted by name."""
    root = Path(results_root)
    extra = sorted(p.parent.name for p in root.glob("*/provenance.json") if p.parent.name not in stems)
    return [read_run_time(root, stem) for stem in [*dict.fromkeys(stems), *extra]]


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment is not None else "—"


def times_markdown(rows: Sequence[RunTime]) -> str:
    """A markdown table, one row per experiment, times in UTC."""
    header = ["notebook", "status", "tier", "model", "started (UTC)", "finished (UTC)", "run time"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        tier = {True: "smoke", False: "default", None: "—"}[row.smoke]
        cells = [f"`{row.stem}`", row.status, tier, row.model or "—", _when(row.started), _when(row.finished),
                 format_seconds(row.seconds)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
