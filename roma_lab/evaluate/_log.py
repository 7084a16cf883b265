"""The attempt log of an evaluation folder: ``attempts.csv``, one row per (system, run, task) attempt,
appended as each attempt finishes, in the one row schema (:data:`ROW_COLUMNS`).

A rerun reads it to resume (a finished row is kept, an error row is attempted again; the latest row of
a (system, run, task) is its result). Damaged records (bad bytes, wrong fields, a non-numeric score...)
are moved to a quarantine file beside the log and a torn last row is dropped, each with a warning, so
those attempts simply run again. The file is opened for each record: a handle kept open would write
into the old file once another caller has rewritten it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roma_lab.results import quarantine, write_text_atomic

__all__ = ["KEY", "LOG_FILE", "ROW_COLUMNS", "LogFileError", "OldLayoutError", "append_row", "check_layout", "log_lock",
           "read_log", "read_log_df"]

#: The one row schema: what every evaluation (and every paper table built on one) records per
#: (system, run, task). A system is named in ``condition``, as in every table of the results
#: vocabulary (design/results_vocabulary.md); ``status`` says how the attempt ended; usage columns
#: are the row's trace's totals (empty: unknown, never 0); ``trace`` is the trace file, relative to
#: the folder (empty: none saved).
ROW_COLUMNS = ("condition", "run", "benchmark", "task_id", "gold", "prediction", "status", "label", "score", "grader",
               "grader_raw", "details", "error", "error_stage", "latency_s", "model_calls", "input_tokens",
               "output_tokens", "cost", "trace")
LOG_FILE = "attempts.csv"
#: The key of a row: a later row of the same key replaces an earlier one.
KEY = ("benchmark", "task_id", "condition", "run")

_STAGES = ("", "system", "grader")
_COUNTS = ("run", "model_calls", "input_tokens", "output_tokens")
_NUMBERS = ("score", "latency_s", "cost")
_TEXT = tuple(c for c in ROW_COLUMNS if c not in _COUNTS + _NUMBERS)
# What folders written before the one runner hold: an evaluation's run<r>.csv beside usage/, a ROMA
# table's traces directly in its <benchmark>_runs/ (hidden files are others'), an agent's
# <label>/runs.csv beside trajectories/.
_OWN_JSON = ("evaluation.json", "provenance.json")


class LogFileError(ValueError):
    """The attempt log cannot be used: a file of another table in its place, or rows that do not
    read back; the message names the file and what to do."""


class OldLayoutError(LogFileError):
    """The folder was written by an earlier roma_lab (``run<r>.csv`` and ``usage/``): it resumes once
    migrated, with the command the message gives."""


def check_layout(out: Path) -> None:
    """Refuse a folder in the layout of an earlier roma_lab, naming the one command that migrates it."""
    if (out / LOG_FILE).exists() or not out.is_dir():
        return
    old = ((out / "run0.csv").exists() or (out / "usage").is_dir()
           or (out.name.endswith("_runs") and any(p.name not in _OWN_JSON and not p.name.startswith(".")
                                                  for p in out.glob("*.json")))
           or any(p.is_file() for p in out.glob("*/runs.csv")))
    if old:
        raise OldLayoutError(f"{out} was written by an earlier roma_lab; migrate it once with `python -m "
                             f"roma_lab.evaluate migrate {out.parent}` (it keeps every row and trace it can, and "
                             "sets aside what it cannot), then rerun")


def _storable(value: Any) -> Any:
    """``value`` with lone surrogates (text decoded with errors="surrogateescape", say), which UTF-8
    cannot encode, written as their ``\\udcff`` escapes, so the row can be written and read back."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(value, str) else value


def serialize(row: Mapping[str, Any]) -> str:
    """One CSV record of ``row`` (None as an empty field)."""
    fields = ["" if row[c] is None else _storable(row[c]) for c in ROW_COLUMNS]
    # csv quotes a field holding the line terminator ("\n") but not a lone "\r", which the reader
    # then takes for the end of the record: such rows quote every field.
    carriage_return = any(isinstance(f, str) and "\r" in f for f in fields)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL if carriage_return else csv.QUOTE_MINIMAL
               ).writerow(fields)
    return buffer.getvalue()


_HEADER = serialize(dict(zip(ROW_COLUMNS, ROW_COLUMNS, strict=True)))


def _number(value: Any) -> float | None:
    """A finite float from a CSV cell, or None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _count(value: str) -> bool:
    return value.isdigit() and value.isascii()


def _row_problem(row: Mapping[str, str] | None) -> str | None:
    """Why a parsed record is not a row this module wrote (None when it is one)."""
    if row is None:
        return "not the log's columns"
    try:
        "".join(row.values()).encode("utf-8")
    except UnicodeEncodeError:
        return "bytes that are not UTF-8"
    if not (row["benchmark"] and row["task_id"] and row["condition"] and row["status"]):
        return "no benchmark, task, condition or status"
    if row["error_stage"] not in _STAGES:
        return "unknown error_stage"
    if not _count(row["run"]) or any(row[c] and not _count(row[c]) for c in _COUNTS[1:]):
        return "a run or count that is not a whole number"
    if any(row[c] and (_number(row[c]) is None or _number(row[c]) < 0) for c in ("latency_s", "cost")):
        return "a latency or cost that is not a non-negative number"
    if row["score"] and _number(row["score"]) is None:
        return "score is not a number"
    if bool(row["score"]) == bool(row["error"]):  # a score exactly when there is no error
        return "score and error disagree"
    if not row["latency_s"]:
        return "no latency"
    if row["details"]:
        try:
            if not isinstance(json.loads(row["details"]), dict):
                return "details are not a JSON object"
        except ValueError:
            return "details are not JSON"
        except RecursionError:  # nesting deeper than json can read back: not a row this module writes
            return "details are nested too deep"
    return None


class _Lines:
    """Feeds lines to csv.reader and counts how many it took, so a record's raw text can be cut out."""

    def __init__(self, lines: list[str]) -> None:
        self.lines, self.taken = lines, 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        if self.taken >= len(self.lines):
            raise StopIteration
        self.taken += 1
        return self.lines[self.taken - 1]


def _allow_fields_up_to(size: int) -> None:
    """Let csv read fields of ``size`` characters. Its default limit (131,072) would make a row with a
    long prediction or grader reply, which this module writes, read back as damaged. No field is
    longer than its file; the limit is process-wide, so it is only ever raised."""
    if csv.field_size_limit() < size:
        csv.field_size_limit(size)


def _records(text: str) -> list[tuple[list[str] | None, str]]:
    """(fields, raw text) of each CSV record; fields None where the CSV itself is malformed."""
    _allow_fields_up_to(len(text))
    lines = io.StringIO(text, newline="").readlines()
    feed = _Lines(lines)
    records = []
    while feed.taken < len(lines):
        first = feed.taken
        try:
            fields = next(csv.reader(feed, strict=True))
        except csv.Error:  # e.g. a stray quote: the lines read so far are one bad record
            fields = None
        records.append((fields, "".join(lines[first:feed.taken])))
    return records


def _split(raw: bytes, path: Path) -> tuple[list[dict[str, str]], list[bytes], bool]:
    """Valid rows, raw bytes of damaged records, and whether the last record was cut mid-write."""
    text = raw.decode("utf-8", errors="surrogateescape")  # undecodable bytes survive, to be quarantined
    records = _records(text)
    torn = not text.endswith("\n")  # this module ends every record with a newline
    if torn:
        records.pop()
    header = records[0][0] if records else None
    has_header = header == list(ROW_COLUMNS)
    good, bad = [], []
    for fields, record in records[1:] if has_header else records:
        if fields == []:  # a blank line
            continue
        row = dict(zip(ROW_COLUMNS, fields, strict=True)) if fields and len(fields) == len(ROW_COLUMNS) else None
        if _row_problem(row):
            bad.append(record.encode("utf-8", errors="surrogateescape"))
        else:
            good.append(row)
    if not has_header and not good and header and all(f.strip() and f.isprintable() for f in header):
        raise LogFileError(f"{path} is not a roma_lab attempt log: its columns are {header}, expected "
                           f"{list(ROW_COLUMNS)}; use another out folder (or move this file aside to start over)")
    return good, bad, torn


# One lock per log for the process: systems sharing a folder from threads must not read it while
# another rewrites it, nor append between the two.
_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def log_lock(path: Path) -> threading.Lock:
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(path.resolve(), threading.Lock())


def read_log(path: Path) -> list[dict[str, str]]:
    """Every valid row of the log (as text), damaged records quarantined and the file rewritten with
    the valid rows (with its header), so their attempts run again. [] without a log; a FIFO, device or
    folder in its place is a ``roma_lab.results.DamagedFileError`` naming it (never waited on)."""
    from roma_lab.results import read_regular_bytes

    try:
        raw = read_regular_bytes(path)
    except FileNotFoundError:
        return []
    if not raw:
        return []
    good, bad, torn = _split(raw, path)
    if bad:
        quarantine(path, f"{len(bad)} damaged record(s) cut out (not rows this module writes); their tasks run again",
                   data=b"".join(bad))
    if torn:
        warnings.warn(f"{path}: the last row was cut mid-write; it is dropped and that task run again", stacklevel=3)
    if bad or torn or not raw.startswith(_HEADER.encode()):
        write_text_atomic(path, _HEADER + "".join(serialize(row) for row in good))
    return good


def append_row(path: Path, row: Mapping[str, Any]) -> None:
    """Append one row (the header first into a new or empty log) and flush it."""
    from roma_lab.results import open_regular

    with open_regular(path, "a") as f:
        if f.tell() == 0:
            f.write(_HEADER)
        f.write(serialize(row))


def read_log_df(path: Path):
    """The log as a DataFrame of typed columns, the latest row per (benchmark, task, condition, run)."""
    import pandas as pd

    df = pd.DataFrame.from_records(read_log(path), columns=list(ROW_COLUMNS))
    for column in _NUMBERS:
        df[column] = pd.to_numeric(df[column].replace("", None), errors="raise").astype(float)
    for column in _COUNTS:
        df[column] = pd.to_numeric(df[column].replace("", None), errors="raise").astype("Int64")
    df["run"] = df["run"].astype(int)
    for column in _TEXT:  # text as Python strings, an empty field as None (not pandas' NaN)
        df[column] = df[column].astype(object).where(df[column].ne(""), None)
    return df.drop_duplicates(list(KEY), keep="last").reset_index(drop=True)
