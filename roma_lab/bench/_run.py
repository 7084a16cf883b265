"""Resumable graded runs: one row per (benchmark, item, condition), appended as each item finishes.

The condition is the system that answered (the results vocabulary's name for what varies,
design/results_vocabulary.md); files written before that vocabulary call the column ``system``
and are read, then rewritten with the current header."""

from __future__ import annotations

import contextvars
import csv
import io
import json
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Collection, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from roma_lab._concurrent import concurrent_map
from roma_lab.bench._data import PRIVATE_BENCHMARKS, Item
from roma_lab.bench._grade import Grade, Grader, guarded
from roma_lab.results import quarantine, write_text_atomic

COLUMNS = (
    "benchmark", "item_id", "condition", "prediction", "label", "score", "grader",
    "error", "error_stage", "latency_s", "details", "grader_raw",
)
# Files written before the results vocabulary name the condition column "system".
_OLD_COLUMNS = tuple("system" if c == "condition" else c for c in COLUMNS)

_STAGES = ("", "system", "grader")
#: ``grader_raw`` of a row whose system returned no answer (None): graded wrong without asking the grader.
NO_ANSWER_RAW = "no answer: the system returned None"
_MAX_INT_BITS = 3_300  # about 1,000 digits: no gold answer is longer (the numeric grader's own bound)
_TEXT_COLUMNS = tuple(c for c in COLUMNS if c not in ("score", "latency_s"))


class RunFileError(ValueError):
    """A run file cannot be used: an unknown format, a file of another table, or a damaged saved
    trace; the message names the file and what to do."""


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise RunFileError(f"run file must end in .csv or .jsonl, got {path.name!r}")
    return suffix[1:]


def _storable(value: Any) -> Any:
    """``value`` with lone surrogates (text decoded with errors="surrogateescape", say), which UTF-8
    cannot encode, written as their ``\\udcff`` escapes, so the row can be written and read back."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(value, str) else value


def _serialize(row: dict[str, Any], fmt: str) -> str:
    row = {c: _storable(v) for c, v in row.items()}
    if fmt == "jsonl":
        return json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n"
    fields = ["" if row[c] is None else row[c] for c in COLUMNS]
    # csv quotes a field holding the line terminator ("\n") but not a lone "\r", which the reader
    # then takes for the end of the record: such rows quote every field.
    carriage_return = any(isinstance(f, str) and "\r" in f for f in fields)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL if carriage_return else csv.QUOTE_MINIMAL
               ).writerow(fields)
    return buffer.getvalue()


def _number(value: Any) -> float | None:
    """A finite float from a CSV cell or JSON value, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _row_problem(row: Any) -> str | None:
    """Why a parsed record is not a row this module wrote (None when it is one)."""
    if not isinstance(row, dict) or set(row) != set(COLUMNS):
        return "not the run columns"
    text = {c: "" if row[c] is None else row[c] for c in _TEXT_COLUMNS}
    if not all(isinstance(v, str) for v in text.values()):
        return "a text field holds another type"
    try:
        "".join(text.values()).encode("utf-8")
    except UnicodeEncodeError:
        return "bytes that are not UTF-8"
    if not (text["benchmark"] and text["item_id"] and text["condition"]):
        return "no benchmark, item or condition"
    if text["error_stage"] not in _STAGES:
        return "unknown error_stage"
    if row["score"] not in (None, "") and _number(row["score"]) is None:
        return "score is not a number"
    if (row["score"] in (None, "")) != bool(text["error"]):  # a score exactly when there is no error
        return "score and error disagree"
    if _number(row["latency_s"]) is None or _number(row["latency_s"]) < 0:
        return "latency is not a non-negative number"
    if text["details"]:
        try:
            if not isinstance(json.loads(text["details"]), dict):
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


def _csv_records(text: str) -> list[tuple[list[str] | None, str]]:
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


def _split(raw: bytes, fmt: str, path: Path) -> tuple[list[dict[str, Any]], list[bytes], bool, bool]:
    """Valid rows (in the current column names), raw bytes of damaged records, whether the last
    record was cut mid-write, and whether the file's header or names are not the current ones
    (a CSV header missing, or the old column names)."""
    good, bad, old = [], [], False
    if fmt == "jsonl":
        *lines, tail = raw.split(b"\n")  # not splitlines(): JSON strings may hold raw U+2028 etc.
        for line in lines:
            if not line.strip():
                continue
            try:
                row = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError, nesting too deep
                row = None
            if isinstance(row, dict) and "system" in row and "condition" not in row:  # an old file's row
                row, old = {"condition" if k == "system" else k: v for k, v in row.items()}, True
            if _row_problem(row):
                bad.append(line + b"\n")
            else:
                good.append(row)
        return good, bad, bool(tail), old
    text = raw.decode("utf-8", errors="surrogateescape")  # undecodable bytes survive, to be quarantined
    records = _csv_records(text)
    torn = not text.endswith("\n")  # this module ends every record with a newline
    if torn:
        records.pop()
    header = records[0][0] if records else None
    has_header = header in (list(COLUMNS), list(_OLD_COLUMNS))
    for fields, record in records[1:] if has_header else records:
        if fields == []:  # a blank line
            continue
        row = dict(zip(COLUMNS, fields, strict=True)) if fields and len(fields) == len(COLUMNS) else None
        if _row_problem(row):
            bad.append(record.encode("utf-8", errors="surrogateescape"))
        else:
            good.append(row)
    first = records[0][0] if records else None
    if not has_header and not good and first and all(f.strip() and f.isprintable() for f in first):
        raise RunFileError(f"{path} is not a roma_lab.bench run file: its columns are {first}, expected "
                           f"{list(COLUMNS)}; pass a new out_path (or move this file aside to start over)")
    return good, bad, torn, header != list(COLUMNS)


def _load_finished(path: Path, fmt: str) -> list[dict[str, Any]]:
    """Rows already on disk. Damaged records (bad bytes, wrong fields, a non-numeric score...) are
    moved to a quarantine file beside ``path`` and a torn last row is dropped, each with a warning;
    the file is rewritten with the valid rows, so those items are simply run again."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    good, bad, torn, stale_names = _split(path.read_bytes(), fmt, path)
    if bad:
        quarantine(path, f"{len(bad)} damaged record(s) cut out (not rows this module writes); their items run again",
                   data=b"".join(bad))
    if torn:
        warnings.warn(f"{path}: the last row was cut mid-write; it is dropped and that item re-run", stacklevel=3)
    if bad or torn or stale_names:
        header = _serialize(dict(zip(COLUMNS, COLUMNS, strict=True)), fmt) if fmt == "csv" else ""
        write_text_atomic(path, header + "".join(_serialize(row, fmt) for row in good))
    return good


# One lock per run file for the process: callers sharing a file from threads (run_agent's (task,
# run) pairs) must not read it while another rewrites it, nor append between the two.
_FILE_LOCKS: dict[Path, threading.Lock] = {}
_FILE_LOCKS_LOCK = threading.Lock()


def _file_lock(path: Path) -> threading.Lock:
    with _FILE_LOCKS_LOCK:
        return _FILE_LOCKS.setdefault(path.resolve(), threading.Lock())


def _append(path: Path, text: str) -> None:
    """Append one record and flush it. The file is opened for each record: a handle kept open would
    write into the old file once another caller has rewritten it (``_load_finished``)."""
    with path.open("a", encoding="utf-8", newline="") as f:
        f.write(text)


class PrivateItemsError(ValueError):
    """The items belong to a benchmark that must stay encrypted on disk (``PRIVATE_BENCHMARKS``)."""


class SystemStalledError(RuntimeError):
    """A system timed out on too many items in a row; the run stopped, finished rows kept."""


def _call_with_timeout(fn: Callable[[Any], Any], arg: Any, timeout_s: float | None) -> Any:
    if timeout_s is None:
        return fn(arg)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(arg)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    # Daemon thread: a system that never returns cannot block interpreter exit. It keeps running
    # in the background after the timeout; Python cannot kill a thread. It runs in a copy of the
    # caller's context: DSPy's settings (dspy.context) and the rollout id live in contextvars.
    worker = threading.Thread(target=contextvars.copy_context().run, args=(target,), daemon=True)
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
        "condition": system_name,
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


def gradable(result: Any) -> Any:
    """A system's answer as its grader is given it (every answer is graded): numbers and booleans as
    their text (an integer past ~1,000 digits as a note of its length: wrong), lists and dicts as their
    JSON text, None (or an object whose ``.output`` is None) as
    no answer (None here), a str or any other object as it is (a grader may need it whole, e.g. a
    ``LongformStory``). An answer with no text form raises TypeError or ValueError: a system error."""
    if result is None or (not isinstance(result, str) and hasattr(result, "output") and result.output is None):
        return None
    if isinstance(result, bool) or isinstance(result, list | tuple | dict):
        return json.dumps(result, ensure_ascii=False, allow_nan=False)
    if isinstance(result, int) and result.bit_length() > _MAX_INT_BITS:  # str() refuses past 4,300 digits
        return f"<an integer of about {int(result.bit_length() * math.log10(2)) + 1} digits>"  # graded wrong
    if isinstance(result, int | float):
        return str(result)
    return result


def _attempt(system: Callable[[Any], Any], grader: Grader, system_name: str, timeout_s: float | None,
             item: Item) -> tuple[dict[str, Any], bool]:
    """One item: call the system, grade its answer; (the row, whether the system timed out). Runs in
    this process or on a cluster worker; either way only the caller writes the row. No answer is a
    wrong answer (score 0, prediction empty), never a row left out of the mean."""
    start = time.perf_counter()
    try:
        # a system that takes the item (``takes_item``) gets it whole, never a question text to look up again
        result = _call_with_timeout(system, item if getattr(system, "takes_item", False) else item.question, timeout_s)
        answer = gradable(result)
    except Exception as exc:  # noqa: BLE001 - recorded as an error row, the run goes on
        return (_row(item, system_name, "", None, f"{type(exc).__name__}: {exc}", "system", time.perf_counter() - start),
                isinstance(exc, TimeoutError))
    latency = time.perf_counter() - start
    name = getattr(grader, "name", type(grader).__name__)
    if answer is None:
        return _row(item, system_name, "", Grade(None, 0.0, name, raw=NO_ANSWER_RAW), None, "", latency), False
    # Our graders never raise; guarded() keeps a user-written one from stopping the run.
    grade = guarded(name, lambda: grader(item, answer))
    return _row(item, system_name, _prediction_for_table(answer), grade, grade.error, "grader" if grade.error else "",
                latency), False


def _on_cluster(todo: Sequence[Item], shared: tuple, how, path: Path, system_name: str):
    """(row, timed out) per item as workers finish them; afterwards (also when stopped) one line in
    ``<file stem>.cluster.jsonl`` beside the run file says where each item ran and on what."""
    from datetime import UTC, datetime

    from roma_lab import cluster as batch

    started, status, by_worker = datetime.now(UTC), "interrupted", {}
    try:
        for done in batch.dispatch(_attempt, todo, how=how, shared=shared, label=f"item-{system_name}"):
            item = todo[done.index]
            if done.error is not None:  # no worker could finish it (e.g. each one died running it): an error row
                yield _row(item, system_name, "", None, f"{type(done.error).__name__}: {done.error}", "system", 0.0), False
                continue
            by_worker.setdefault(done.worker, []).append(item.item_id)
            yield done.value
        status = "completed"
    except batch.WorkerEnvironmentError:
        status = "refused: a worker's environment differs"
        raise
    finally:
        record = {"condition": system_name, "status": status, "started_at": started.isoformat(),
                  "finished_at": datetime.now(UTC).isoformat(), **batch.describe(how, by_worker)}
        with path.with_name(f"{path.stem}.cluster.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def _gated(gate: Callable[[], bool], attempt: Callable[[Item], Any], item: Item) -> Any:
    """``attempt(item)`` if the gate lets it start now, else None (not started)."""
    return attempt(item) if gate() else None


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
    redo: Collection[str] = (),
    cluster: Any = None,
    redacted: bool = False,
    workers: int = 1,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    gate: Callable[[], bool] | None = None,
):
    """Run ``system`` on every item, grade it, and append one row per item to ``out_path``.

    ``system(question)`` returns a str or an object with ``.output`` (or what the grader needs,
    e.g. a ``LongformStory``); a system with a true ``takes_item`` attribute is called with the
    ``Item`` itself instead (``roma_lab.evaluate``'s systems, which key traces by the item's id). Its
    rows name it ``system_name`` in the ``condition`` column. Rows
    are flushed as each item finishes; rerunning with the same ``out_path`` and ``system_name``
    skips items already recorded without error (with ``retry_errors=False``, skips every recorded
    item); item ids in ``redo`` run again regardless (e.g. when a trace saved beside the row was
    damaged). Damaged rows on disk are moved to a quarantine file beside ``out_path`` and their
    items run again (see ``_load_finished``). A system exception or timeout becomes a row with
    ``error_stage="system"``; grader failures have ``error_stage="grader"``. A system that times
    out ``max_consecutive_timeouts`` times in a row is stuck (its threads cannot be killed and
    would starve later items): the run stops with ``SystemStalledError``, every finished row on
    disk. KeyboardInterrupt stops the run likewise. Returns this system's latest row per item for
    ``items`` as a DataFrame (see ``read_results_df``).

    ``cluster``: where items run: a cluster name or a ``roma_lab.cluster.Dispatch`` (which also names
    the model, for the workers' weights check and a cluster-wide concurrency limit); None =
    $ROMA_LAB_CLUSTER, else in this process (``workers`` at a time). On a cluster, the system and the
    grader are sent to the workers (they must pickle), each item runs on a worker, and this process
    alone writes each row as its item completes, in completion order: the same resume rules hold,
    and a worker that dies mid-item has the item run again elsewhere (an item whose every attempt
    killed its worker gets a ``KilledWorker`` error row). Where each item ran is appended to
    ``<out_path stem>.cluster.jsonl``. A worker whose environment differs from this process's raises
    ``roma_lab.cluster.WorkerEnvironmentError`` before it computes anything. Items of a benchmark in
    ``PRIVATE_BENCHMARKS`` (BrowseComp) raise ``PrivateItemsError`` before anything is written, unless
    ``redacted``: the caller's system returns (and saves) only redacted questions and answers, as
    ``roma_lab.agents.run_agent`` does.

    ``workers``: how many items run at once in this process (the bound of the model the system
    calls, e.g. ``roma_lab.lm.max_concurrency(lm)``; 1: one after the other). Rows are still written
    once each, as each item finishes (in completion order), by the calling thread; the returned
    rows are in item order. Several calls may share ``out_path`` from threads of one process (as
    ``run_agent``'s (task, run) pairs do): reading the file and appending a row hold a lock per file.
    ``on_row``: called with each row this call writes, once it is on disk (a caller's own progress
    bar over several calls, as ``roma_lab.evaluate`` keeps).
    ``gate``: asked in the item's own thread just before each item starts (a dollar budget's, in
    ``roma_lab.evaluate``); False: the item does not start and gets no row, so a rerun runs it. The
    returned rows are then those of the items that have one. Items run in this process only.
    """
    from tqdm.auto import tqdm

    from roma_lab import cluster as batch

    private = sorted({it.benchmark for it in items} & PRIVATE_BENCHMARKS)
    if private and not redacted:
        # A row holds the gold answer (label) and a saved trace holds the question: both in the clear.
        raise PrivateItemsError(
            f"{', '.join(private)} items must not be written to disk in the clear, and run files and traces hold "
            "questions and answers; run them through roma_lab.papers.oagents.evaluate_browsecomp (notebook 29), which "
            "redacts them and keeps them out of every completion cache")
    how = batch.Dispatch.of(cluster)
    if gate is not None and not how.in_process:
        raise ValueError("a gate is asked before each item starts in this process: run without a cluster")
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
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    with _file_lock(path):
        latest = {(r["benchmark"], r["item_id"]): r for r in _load_finished(path, fmt) if r["condition"] == system_name}
        if not path.exists() or path.stat().st_size == 0:  # a new file: the header first (CSV)
            _append(path, _serialize(dict(zip(COLUMNS, COLUMNS, strict=True)), fmt) if fmt == "csv" else "")
    done = {key for key, r in latest.items() if not (retry_errors and r["error"]) and key[1] not in redo}
    todo = [it for it in items if (it.benchmark, it.item_id) not in done]
    shared = (system, grader, system_name, timeout_s)
    on_cluster = not how.in_process and bool(todo)
    if on_cluster:  # connect (printing the dashboard link) before the bar, which then counts the whole sweep
        where = batch.session(how.cluster).spec.name
    with tqdm(total=len(items), initial=len(items) - len(todo), disable=not progress,
              desc=f"{system_name} on {where}" if on_cluster else system_name) as bar:
        timeouts_in_a_row = 0

        def record(row: dict[str, Any], timed_out: bool) -> None:
            nonlocal timeouts_in_a_row
            with _file_lock(path):
                _append(path, _serialize(row, fmt))
            bar.update(1)
            if on_row is not None:
                on_row(row)
            timeouts_in_a_row = timeouts_in_a_row + 1 if timed_out else 0
            if timeouts_in_a_row >= max_consecutive_timeouts:
                raise SystemStalledError(
                    f"{system_name}: {timeouts_in_a_row} timeouts in a row; stopped with finished rows in {path} "
                    "(rerun to resume once the system answers again)")

        if on_cluster:
            rows = _on_cluster(todo, shared, how, path, system_name)
            try:
                for row, timed_out in rows:
                    record(row, timed_out)
            finally:
                rows.close()  # cancels the items not yet finished
        else:
            attempt = partial(_attempt, *shared)
            outcomes = concurrent_map(attempt if gate is None else partial(_gated, gate, attempt), todo,
                                      workers=workers, on_done=lambda index, outcome: outcome is None or record(*outcome))
            not_started = {(it.benchmark, it.item_id) for it, outcome in zip(todo, outcomes, strict=True)
                           if outcome is None}
    with _file_lock(path):
        table = read_results_df(path)
    mine = table[table["condition"] == system_name].set_index(["benchmark", "item_id"])
    if not on_cluster and gate is not None:  # an item the gate kept back keeps its earlier row, if any
        keys = [key for key in keys if key not in not_started or key in mine.index]
    unread = [key[1] for key in keys if key not in mine.index]
    if unread:  # each was written above or found on disk; a row that does not read back is damaged
        raise RunFileError(f"{path}: the rows of {len(unread)} item(s) written for {system_name!r} do not read back "
                           f"(e.g. item {unread[0]!r}); see the quarantine file beside it and report the item")
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
    return df.drop_duplicates(["benchmark", "item_id", "condition"], keep="last").reset_index(drop=True)
