"""Resumable graded runs: one row per (benchmark, item, system), appended as each item finishes."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from roma_lab.bench._data import Item
from roma_lab.bench._grade import Grade, Grader, guarded

COLUMNS = (
    "benchmark", "item_id", "system", "prediction", "label", "score", "grader",
    "error", "error_stage", "latency_s", "details", "grader_raw",
)


class RunFileError(ValueError):
    """The run file cannot be resumed (unknown format, different columns)."""


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise RunFileError(f"run file must end in .csv or .jsonl, got {path.name!r}")
    return suffix[1:]


def _serialize(row: dict[str, Any], fmt: str) -> str:
    if fmt == "jsonl":
        return json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n"
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(["" if row[c] is None else row[c] for c in COLUMNS])
    return buffer.getvalue()


def _parse_records(text: str, fmt: str) -> tuple[list[dict[str, str]], bool]:
    """Complete records in ``text`` and whether the last write was torn (crash mid-write)."""
    if fmt == "jsonl":
        lines = text.split("\n")  # not splitlines(): JSON strings may hold raw U+2028 etc.
        torn = not text.endswith("\n")
        return [json.loads(line) for line in lines[:-1] if line.strip()], torn
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records, torn = [], False
    try:
        records.extend(reader)
    except csv.Error:  # end of file inside a quoted field: the last row was cut there
        torn = True
    if not torn and records and not text.endswith("\n"):  # cut outside quotes: last record partial
        records.pop()
        torn = True
    if not records:
        return [], torn
    if tuple(records[0]) != COLUMNS:
        raise RunFileError(f"run file columns {records[0]} differ from {list(COLUMNS)}; use a new out_path")
    complete = [r for r in records[1:] if r]
    if any(len(r) != len(COLUMNS) for r in complete):
        raise RunFileError("run file has rows with the wrong number of fields; it was edited or is corrupt")
    return [dict(zip(COLUMNS, r, strict=True)) for r in complete], torn


def _load_finished(path: Path, fmt: str) -> list[dict[str, str]]:
    """Rows already on disk. A torn last row is dropped (with a warning) so the item is re-run."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    records, torn = _parse_records(path.read_text(encoding="utf-8"), fmt)
    if torn:
        warnings.warn(f"{path}: the last row was cut mid-write; it is dropped and that item re-run", stacklevel=3)
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", encoding="utf-8", newline="") as f:
            if fmt == "csv":
                f.write(_serialize(dict(zip(COLUMNS, COLUMNS, strict=True)), fmt))
            for record in records:
                f.write(_serialize(record, fmt))
        os.replace(tmp, path)
    return records


class SystemStalledError(RuntimeError):
    """A system timed out on too many items in a row; the run stopped, finished rows kept."""


def _call_with_timeout(fn: Callable[[str], Any], arg: str, timeout_s: float | None) -> Any:
    if timeout_s is None:
        return fn(arg)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(arg)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    # Daemon thread: a system that never returns cannot block interpreter exit. It keeps running
    # in the background after the timeout; Python cannot kill a thread.
    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise TimeoutError(f"system did not answer within {timeout_s} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _prediction_for_table(result: Any) -> str:
    if isinstance(result, str):
        return result
    output = getattr(result, "output", None)
    return output if isinstance(output, str) else repr(result)


def _row(item: Item, system_name: str, prediction: str, grade: Grade | None, error: str | None,
         stage: str, latency: float) -> dict[str, Any]:
    return {
        "benchmark": item.benchmark,
        "item_id": item.item_id,
        "system": system_name,
        "prediction": prediction,
        "label": grade.label if grade else None,
        "score": None if grade is None or math.isnan(grade.score) else grade.score,  # empty / null on disk
        "grader": grade.grader if grade else None,
        "error": error,
        "error_stage": stage,
        "latency_s": round(latency, 6),
        "details": json.dumps(dict(grade.details)) if grade and grade.details else "",
        "grader_raw": grade.raw if grade else "",
    }


def run_benchmark(
    items: Sequence[Item],
    system: Callable[[str], Any],
    grader: Grader,
    *,
    out_path: str | os.PathLike[str],
    system_name: str,
    timeout_s: float | None = None,
    progress: bool = True,
    retry_errors: bool = True,
    max_consecutive_timeouts: int = 3,
):
    """Run ``system`` on every item, grade it, and append one row per item to ``out_path``.

    ``system(question)`` returns a str or an object with ``.output`` (or what the grader needs,
    e.g. a ``LongformStory``). Rows are flushed as each item finishes; rerunning with the same
    ``out_path`` and ``system_name`` skips items already recorded without error (with
    ``retry_errors=False``, skips every recorded item). A system exception or timeout becomes a
    row with ``error_stage="system"``; grader failures have ``error_stage="grader"``. A system
    that times out ``max_consecutive_timeouts`` times in a row is stuck (its threads cannot be
    killed and would starve later items): the run stops with ``SystemStalledError``, every
    finished row on disk. KeyboardInterrupt stops the run likewise. Returns this system's latest
    row per item for ``items`` as a DataFrame (see ``read_results_df``).
    """
    from tqdm.auto import tqdm

    path = Path(out_path)
    fmt = _format(path)
    keys = [(it.benchmark, it.item_id) for it in items]
    if len(set(keys)) != len(keys):
        raise ValueError("items contain duplicate (benchmark, item_id) pairs")
    if timeout_s is not None and timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if max_consecutive_timeouts < 1:
        raise ValueError(f"max_consecutive_timeouts must be >= 1, got {max_consecutive_timeouts}")
    latest = {(r["benchmark"], r["item_id"]): r for r in _load_finished(path, fmt) if r["system"] == system_name}
    done = {key for key, r in latest.items() if not (retry_errors and r["error"])}
    todo = [it for it in items if (it.benchmark, it.item_id) not in done]
    new_file = not path.exists() or path.stat().st_size == 0
    with path.open("a", encoding="utf-8", newline="") as f, tqdm(
        total=len(items), initial=len(items) - len(todo), disable=not progress, desc=system_name
    ) as bar:
        if new_file and fmt == "csv":
            f.write(_serialize(dict(zip(COLUMNS, COLUMNS, strict=True)), fmt))
            f.flush()
        timeouts_in_a_row = 0
        for item in todo:
            start = time.perf_counter()
            try:
                result = _call_with_timeout(system, item.question, timeout_s)
            except Exception as exc:  # noqa: BLE001 - recorded as an error row, the run goes on
                row = _row(item, system_name, "", None, f"{type(exc).__name__}: {exc}", "system",
                           time.perf_counter() - start)
                timeouts_in_a_row = timeouts_in_a_row + 1 if isinstance(exc, TimeoutError) else 0
            else:
                latency = time.perf_counter() - start
                # Our graders never raise; guarded() keeps a user-written one from stopping the run.
                grade = guarded(getattr(grader, "name", type(grader).__name__), lambda: grader(item, result))
                row = _row(item, system_name, _prediction_for_table(result), grade, grade.error,
                           "grader" if grade.error else "", latency)
                timeouts_in_a_row = 0
            f.write(_serialize(row, fmt))
            f.flush()
            bar.update(1)
            if timeouts_in_a_row >= max_consecutive_timeouts:
                raise SystemStalledError(
                    f"{system_name}: {timeouts_in_a_row} timeouts in a row; stopped with finished rows in {path} "
                    "(rerun to resume once the system answers again)")
    table = read_results_df(path)
    mine = table[table["system"] == system_name].set_index(["benchmark", "item_id"])
    return mine.loc[keys].reset_index()[list(COLUMNS)]


def read_results_df(path: str | os.PathLike[str]):
    """A run file (.csv or .jsonl) as a DataFrame with typed columns (score/latency float)."""
    import pandas as pd

    path = Path(path)
    fmt = _format(path)
    records = _load_finished(path, fmt)
    df = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    for col in ("score", "latency_s"):
        df[col] = pd.to_numeric(df[col].replace("", None), errors="raise").astype(float)
    for col in ("label", "grader", "error"):
        df[col] = df[col].replace("", None)
    df["item_id"] = df["item_id"].astype(str)
    # a retried item has several rows: the latest one is its result
    return df.drop_duplicates(["benchmark", "item_id", "system"], keep="last").reset_index(drop=True)
