"""``python -m roma_lab.evaluate migrate FOLDER...``: results folders written before the one runner, made
resumable by it (design/evaluate.md, "One runner").

Every folder under each FOLDER is looked at once, and what is found is said in one line:

- an ``evaluate`` folder (``evaluation.json`` beside ``run<r>.csv``): its rows become ``attempts.csv``
  (usage read from ``usage/`` where recorded, else counted from the trace); traces stay where they are
  (the layout is the same);
- a ROMA table's folder (``<benchmark>_results.csv`` beside ``<benchmark>_runs/<item>.json``): its rows
  and traces move into the evaluation folder ``<benchmark>_runs/`` (the system ``base`` is now ``single``);
- an agent study's run folder (``<label>/runs.csv`` with ``trajectories/``): its systems are now named by
  the study's conditions, which the folder does not record, so it cannot be resumed: it is set aside.

Nothing is deleted: the files replaced are moved into ``.pre-one-runner/`` inside the folder they were in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._log import LOG_FILE, ROW_COLUMNS, append_row
from ._schedule import status_of

__all__ = ["KEPT", "migrate"]

#: Where a migration keeps what it replaced.
KEPT = ".pre-one-runner"
_RUN_FILE = re.compile(r"run(\d+)\.csv")
#: Hex of a name's hash in the file names an earlier roma_lab wrote (``safe_name`` keeps 16 since issue 53).
_OLD_HASH_HEX = 8
_OLD = ("benchmark", "item_id", "condition", "prediction", "label", "score", "grader", "error", "error_stage",
        "latency_s", "details", "grader_raw")


def _old_name(name: str) -> str:
    from roma_lab.results import safe_name

    return safe_name(name, hash_hex=_OLD_HASH_HEX)


def _old_rows(path: Path) -> list[dict[str, str]]:
    import pandas as pd

    from roma_lab.results import open_regular

    with open_regular(path, "rb") as f:
        table = pd.read_csv(f, dtype=str, keep_default_na=False)
    if "system" in table.columns and "condition" not in table.columns:  # before the results vocabulary
        table = table.rename(columns={"system": "condition"})
    missing = [c for c in _OLD if c not in table.columns]
    if missing:
        raise ValueError(f"{path} is not a run file of an earlier roma_lab: it has no {missing}")
    return table.to_dict(orient="records")


def _usage(trace: Path | None, recorded: Path | None) -> dict[str, Any]:
    from roma_lab.results import DamagedFileError, read_regular_bytes
    from roma_lab.trace import load_trace

    if recorded is not None and recorded.is_file():
        try:
            usage = json.loads(read_regular_bytes(recorded))
            if isinstance(usage, dict) and set(usage) == {"model_calls", "input_tokens", "output_tokens", "cost"}:
                return usage
        except ValueError:  # DamagedFileError too: the trace says it again
            pass
    if trace is not None and trace.is_file():
        try:
            u = load_trace(trace).usage()
            return {"model_calls": u.model_calls, "input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                    "cost": u.cost}
        except DamagedFileError:
            pass
    return dict.fromkeys(("model_calls", "input_tokens", "output_tokens", "cost"))


def _row(old: dict[str, str], run: int, condition: str, trace: str | None, usage: dict[str, Any]) -> dict[str, Any]:
    row = {"condition": condition, "run": run, "benchmark": old["benchmark"], "task_id": old["item_id"], "gold": "",
           **{c: old[c] or None for c in ("prediction", "label", "score", "grader", "grader_raw", "details", "error")},
           "error_stage": old["error_stage"], "latency_s": old["latency_s"] or 0.0, **usage, "trace": trace}
    return {c: row.get(c) for c in ROW_COLUMNS} | {"status": status_of(row)}


def _keep(path: Path) -> None:
    """Move ``path`` into the ``KEPT`` folder beside it."""
    kept = path.parent / KEPT
    kept.mkdir(exist_ok=True)
    shutil.move(str(path), str(kept / path.name))


def _evaluate_folder(folder: Path) -> str:
    log = folder / LOG_FILE
    n = 0
    for path in sorted(folder.glob("run*.csv")):
        match = _RUN_FILE.fullmatch(path.name)
        if match is None:
            continue
        run = int(match.group(1))
        for old in _old_rows(path):
            # where it was saved: its row records it, so the trace stays there
            trace = folder / "traces" / _old_name(old["condition"]) / f"r{run}" / f"{_old_name(old['item_id'])}.json"
            recorded = folder / "usage" / trace.relative_to(folder / "traces")
            append_row(log, _row(old, run, old["condition"], trace.relative_to(folder).as_posix() if trace.is_file()
                                 else None, _usage(trace, recorded)))
            n += 1
        _keep(path)
    if (folder / "usage").is_dir():
        _keep(folder / "usage")
    return f"{folder}: an evaluation folder; {n} row(s) now in {LOG_FILE}"


def _table_folder(folder: Path, results: Path) -> str:
    from roma_lab.trace import trace_path

    benchmark = results.name[: -len("_results.csv")]
    runs = folder / f"{benchmark}_runs"
    n = 0
    for old in _old_rows(results):
        system = "single" if old["condition"] == "base" else old["condition"]
        saved = runs / f"{_old_name(old['item_id'])}.json"
        trace = None
        if system == "roma" and saved.is_file():
            target = trace_path(runs, system, 0, old["item_id"])
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(saved), str(target))
            trace = target.relative_to(runs).as_posix()
        append_row(runs / LOG_FILE, _row(old, 0, system, trace, _usage(runs / trace if trace else None, None)))
        n += 1
    _keep(results)
    return f"{folder}: a ROMA table ({benchmark}); {n} row(s) and their traces now in {runs.name}/"


def _agent_folder(folder: Path) -> str:
    _keep(folder)
    return (f"{folder}: an agent run folder of an earlier roma_lab (run_agent); the new runner names a study's "
            f"systems by its conditions, which this folder does not record: set aside in {KEPT}/, rerun to redo it")


def _found(root: Path) -> Iterator[tuple[str, Path, Path | None]]:
    """(kind, folder, file) of every old layout under ``root``, deepest first (so a folder moved aside
    is never looked into again)."""
    for folder, dirs, files in sorted(os.walk(root), key=lambda entry: -entry[0].count(os.sep)):
        here = Path(folder)
        if KEPT in here.parts:
            continue
        if "runs.csv" in files and (here / "trajectories").is_dir():
            yield "agent", here, None
        elif LOG_FILE not in files and any(_RUN_FILE.fullmatch(f) for f in files):
            yield "evaluate", here, None
        for name in sorted(files):
            if name.endswith("_results.csv") and (here / name.replace("_results.csv", "_runs")).is_dir() \
                    and not (here / name.replace("_results.csv", "_runs") / LOG_FILE).exists():
                yield "table", here, here / name


def migrate(*folders: str | os.PathLike[str]) -> list[str]:
    """Migrate every old layout under ``folders``; one line per folder found (what it was, what now)."""
    said = []
    for root in map(Path, folders):
        if not root.is_dir():
            raise FileNotFoundError(f"{root} is not a folder")
        for kind, folder, results in list(_found(root)):
            if kind == "agent":
                said.append(_agent_folder(folder))
            elif kind == "evaluate":
                said.append(_evaluate_folder(folder))
            else:
                said.append(_table_folder(folder, results))
    return said or [f"{', '.join(map(str, folders))}: nothing written by an earlier roma_lab was found"]
