"""The ROMA run JSON a graded run keeps per item beside its results (``<benchmark>_runs/``): where it
is saved, and loading it back (``load_item_run`` for the item picker, ``saved_run`` for a resume).
A damaged file raises ``RunFileError`` naming it (design/integrity.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from roma_lab.bench._run import RunFileError, read_results_df

if TYPE_CHECKING:
    from roma_lab.trace import Run


def run_file(runs_dir: Path, item_id: str) -> Path:
    """Where the ROMA run of ``item_id`` is saved: its id made file-safe (and kept distinct)."""
    from roma_lab.results import safe_name

    return runs_dir / f"{safe_name(item_id)}.json"


def load_item_run(out_dir: str | os.PathLike[str], benchmark: str, item_id: str | None = None) -> Run:
    """The saved ROMA run of one item (``item_id=None``: the first saved item in sorted order).
    A damaged file raises :class:`RunFileError` naming it."""
    runs_dir = Path(out_dir) / f"{benchmark}_runs"
    if item_id is None or item_id == "":
        files = sorted(runs_dir.glob("*.json"))
        if not files:
            raise FileNotFoundError(f"no saved ROMA runs in {runs_dir}")
        path = files[0]
    else:
        path = run_file(runs_dir, str(item_id))
        if not path.is_file():
            raise FileNotFoundError(f"no saved ROMA run for item {item_id!r} in {runs_dir}")
    try:
        return _read_run(path)
    except ValueError as err:
        reason = str(err) if len(str(err)) <= 300 else f"{str(err)[:297]}..."
        raise RunFileError(f"{path} is not a saved ROMA run (damaged or edited: {reason}); rerun the table to "
                           "run that item again") from None


def saved_run(path: Path) -> Run | None:
    """The Run saved at ``path``, or None when the file is damaged (not a valid Run JSON)."""
    try:
        return _read_run(path)
    except ValueError:
        return None


def _read_run(path: Path) -> Run:
    """The Run saved at ``path``; a damaged file (bad bytes, bad JSON, nested too deep, a broken
    invariant) is an ``InvalidRunError``, a ``ValueError``."""
    from roma_lab.trace import Run

    return Run.from_json(path.read_bytes())  # bytes: invalid UTF-8 is a validation error too


def saved_item_ids(out_dir: str | os.PathLike[str], benchmark: str) -> list[str]:
    """Item ids with a saved ROMA run: in results-file order, or the run files' names (Table 5)."""
    runs_dir = Path(out_dir) / f"{benchmark}_runs"
    results = Path(out_dir) / f"{benchmark}_results.csv"
    if not results.is_file():
        return sorted(p.stem for p in runs_dir.glob("*.json"))
    df = read_results_df(results)
    ids = df.loc[df["condition"] == "roma", "item_id"].tolist()
    return [i for i in ids if run_file(runs_dir, i).is_file()]
