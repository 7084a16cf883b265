"""Preparing a results folder for a run: start clean, or resume what the same run left.

Kept, so package functions that append per-item rows resume: an unfinished run with the same
parameters, inputs and package source; a completed one whose outputs changed (minus those files,
moved aside); a folder without a readable record whose executed notebook shows today's parameters.
Anything else is emptied, or moved aside whole when it cannot be attributed (design/runner.md,
"Preparing the folder: what is kept").
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from roma_lab.results import (PROVENANCE_FILE, ProvenanceError, changed_outputs, quarantine, read_provenance,
                              read_regular_bytes)

from ._kernel import stop_kernel
from ._key import RunKey, recorded_parameters
from ._spec import ExperimentSpec


def _executed_parameters(spec: ExperimentSpec, out_dir: Path) -> dict[str, Any] | None:
    """Parameters papermill stored in the executed copy of an earlier attempt (None if unreadable)."""
    try:
        nb = json.loads(read_regular_bytes(out_dir / spec.notebook.name))
        return recorded_parameters(spec, dict(nb["metadata"]["papermill"]["parameters"]))
    except (OSError, ValueError, RecursionError, KeyError, TypeError):
        return None


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def prepare_folder(spec: ExperimentSpec, out_dir: Path, key: RunKey, force: bool) -> str | None:
    """Empty ``out_dir`` unless it holds work of this same run that can be continued; returns a note
    for the record when damaged files had to be moved aside.

    Kept: an unfinished run (running, failed, interrupted) with the same parameters, inputs and
    package source, so package functions that append per-item rows resume; a completed one whose
    outputs were edited or removed (not when forced), minus the changed files, which are moved
    aside; and, when provenance.json is missing or unreadable, a folder whose executed notebook
    copy shows these parameters (the package source of such a folder cannot be checked).
    A folder that cannot be attributed to this run is moved aside whole; one of another run is emptied.
    """
    stop_kernel(out_dir)
    note = None
    try:
        record = read_provenance(out_dir)
    except FileNotFoundError:
        record = None
    except ProvenanceError:
        moved = quarantine(out_dir / PROVENANCE_FILE, "not a valid provenance record")
        record = None
        note = f"provenance.json was unreadable (kept as {moved.name})"
    if record is None:
        if _has_files(out_dir) and _executed_parameters(spec, out_dir) == key.recorded:
            note = ((note + "; ") if note else "provenance.json was missing; ") + (
                "kept the items of the earlier attempt, whose executed notebook shows these parameters")
        elif _has_files(out_dir):
            aside = quarantine(out_dir, "results folder without a readable record of its parameters; starting over")
            note = f"the earlier folder, without a readable record of its parameters, was moved to {aside.name}"
    elif not key.matches(record) or (record.status == "completed" and force):
        shutil.rmtree(out_dir)  # another run's results, or a forced fresh start
    elif record.status == "completed":
        changed = changed_outputs(out_dir, record)
        for name in changed:
            if (out_dir / name).is_file():
                quarantine(out_dir / name, "changed since the completed run recorded it; the run resumes")
        note = f"outputs changed after the completed run were moved aside: {', '.join(changed)}" if changed else None
    out_dir.mkdir(parents=True, exist_ok=True)
    for tmp in out_dir.rglob(".*.tmp*"):  # a write cut short by the kill; the finished file is intact
        if tmp.is_file():
            tmp.unlink()
    return note
