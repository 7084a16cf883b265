"""The files a table run keeps in its folder besides the results: each item's ROMA run JSON, and the
settings guard that stops a rerun with other settings from mixing into earlier results. A damaged
file of either kind is moved aside (``roma_lab.results.quarantine``) and its work done again
(design/integrity.md)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from roma_lab.bench._data import Item
from roma_lab.bench._run import RunFileError, read_results_df
from roma_lab.results import quarantine, write_text_atomic

if TYPE_CHECKING:
    from roma_lab.controller import Run


class RunConfigMismatchError(ValueError):
    """``out_dir`` holds results made with other settings; resuming would mix them."""


class RunConfig(BaseModel):
    """What must match for a rerun to resume into the same results (``<benchmark>_run_config.json``).

    The sample size and seed are not part of it: rows are keyed by item, so a larger sample
    reuses every finished item.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: str
    model: str
    judge: str
    max_depth: int
    max_concurrency: int
    search_backend: str
    longform_task: str


def check_config(out_dir: Path, config: RunConfig) -> None:
    """Refuse to resume into results made with other settings; record the settings otherwise."""
    path = out_dir / f"{config.benchmark}_run_config.json"
    previous = None
    if path.is_file():
        try:
            previous = RunConfig.model_validate_json(path.read_bytes())
        except ValidationError:
            # The settings the results were made with are unknown, so they cannot be resumed: keep them
            # aside and start this benchmark over.
            for damaged in (path, out_dir / f"{config.benchmark}_results.csv", out_dir / f"{config.benchmark}_runs"):
                if damaged.exists():
                    quarantine(damaged, f"{path.name} is damaged, so the settings of these results are unknown; "
                                        f"{config.benchmark} starts over")
    if previous is not None:
        if previous != config:
            changed = {k: (getattr(previous, k), getattr(config, k)) for k in RunConfig.model_fields
                       if getattr(previous, k) != getattr(config, k)}
            raise RunConfigMismatchError(
                f"{out_dir} holds {config.benchmark} results made with other settings {changed} (old, new); "
                "use a new out_dir or delete the old results")
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, config.model_dump_json(indent=1))


def run_file(runs_dir: Path, item_id: str) -> Path:
    """Where the ROMA run of ``item_id`` is saved: its id made file-safe (and kept distinct)."""
    safe = re.sub(r"[^\w.-]", "_", item_id)
    if safe != item_id:  # keep distinct ids distinct after cleaning
        safe += "-" + hashlib.sha256(item_id.encode()).hexdigest()[:8]
    return runs_dir / f"{safe}.json"


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
    from roma_lab.controller import Run

    return Run.from_json(path.read_bytes())  # bytes: invalid UTF-8 is a validation error too


def damaged_traces(runs_dir: Path, results_path: Path, items: Sequence[Item], condition: str) -> set[str]:
    """Items whose saved ROMA trace is damaged (moved aside) or missing although their row for
    ``condition`` is finished: they run again, so every finished item can be shown."""
    finished: set[str] = set()
    if results_path.is_file():
        rows = read_results_df(results_path)
        finished = set(rows.loc[(rows["condition"] == condition) & rows["error"].isna(), "item_id"])
    redo = set()
    for item in items:
        path = run_file(runs_dir, item.item_id)
        if path.is_file() and saved_run(path) is None:
            quarantine(path, "damaged ROMA trace; the item is run again")
            redo.add(item.item_id)
        elif not path.is_file() and item.item_id in finished:
            redo.add(item.item_id)
    return redo


def saved_item_ids(out_dir: str | os.PathLike[str], benchmark: str) -> list[str]:
    """Item ids with a saved ROMA run: in results-file order, or the run files' names (Table 5)."""
    runs_dir = Path(out_dir) / f"{benchmark}_runs"
    results = Path(out_dir) / f"{benchmark}_results.csv"
    if not results.is_file():
        return sorted(p.stem for p in runs_dir.glob("*.json"))
    df = read_results_df(results)
    ids = df.loc[df["condition"] == "roma", "item_id"].tolist()
    return [i for i in ids if run_file(runs_dir, i).is_file()]
