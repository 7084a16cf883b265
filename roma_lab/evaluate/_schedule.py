"""The item runner under ``evaluate``: one system's attempts at its (run, task) jobs, each answered,
graded, and recorded (trace first, then its row in the attempt log) as it finishes.

The path from ``evaluate`` to a model call: ``evaluate`` → :func:`run_jobs` → ``concurrent_map`` →
:func:`attempt` → the system (``SingleCall``; ``Roma.run``, ``Agent.run`` through their bound answer) →
``metered_call``; with a time limit, :func:`attempt` → :func:`_timed` → the system.
A system is always called the same way: ``answer(item, run, previous)``, ``previous`` the trace of the
task before it in the same run for a system whose tasks are a chain (``System.chained``), else None.

Jobs run at once up to ``workers`` (the bound of the model the system calls); a chained system's runs
overlap, each run's tasks in task order. A system that times out ``max_consecutive_timeouts`` times in
a row is stuck (its threads cannot be killed and would starve later jobs): the run stops with
:class:`SystemStalledError`, every finished row on disk. A ``gate`` is asked just before each job
starts (a dollar cap's): False leaves the job without a row, so a rerun runs it. On a cluster
($ROMA_LAB_CLUSTER) each job runs on a worker, which only computes; this process writes every trace
and row, as each job completes.
"""

from __future__ import annotations

import contextvars
import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from roma_lab._concurrent import concurrent_map

from ._log import append_row, log_lock
from ._private import redacted

__all__ = ["Attempt", "Job", "Outcome", "SystemStalledError", "attempt", "gradable", "run_jobs"]

#: ``grader_raw`` of a row whose system returned no answer (None): graded wrong without asking the grader.
NO_ANSWER_RAW = "no answer: the system returned None"
_MAX_INT_BITS = 3_300  # about 1,000 digits: no gold answer is longer (the numeric grader's own bound)


class SystemStalledError(RuntimeError):
    """A system timed out on too many tasks in a row; the run stopped, finished rows kept."""


@dataclass(frozen=True, slots=True)
class Job:
    """One attempt to make: run ``run`` of ``item``."""

    run: int
    item: Any  # roma_lab.bench.Item


@dataclass(frozen=True)
class Attempt:
    """What every attempt of one system shares: its label, its answer function (``System.bind``'s),
    the grader, the folder, the per-task time limit, and the benchmarks whose questions and answers must
    never reach the disk in the clear (their traces and rows are redacted first)."""

    label: str
    answer: Callable[[Any, int, Any], Any]
    grader: Any
    out: Path
    timeout_s: float | None = None
    private: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True, slots=True)
class Outcome:
    """An attempt's row, its trace's JSON text (None: no trace) and the trace itself, and whether the
    system timed out."""

    row: dict[str, Any]
    trace_text: str | None
    trace: Any
    timed_out: bool


def gradable(answer: Any) -> Any:
    """A system's answer as its grader is given it (every answer is graded): numbers and booleans as
    their text (an integer past ~1,000 digits as a note of its length: wrong), lists and dicts as their
    JSON text, None as no answer (None here), a str or any other object as it is (a grader may need it
    whole, e.g. a ``LongformStory``). An answer with no text form raises TypeError or ValueError: a
    system error."""
    if answer is None:
        return None
    if isinstance(answer, bool) or isinstance(answer, list | tuple | dict):
        return json.dumps(answer, ensure_ascii=False, allow_nan=False)
    if isinstance(answer, int) and answer.bit_length() > _MAX_INT_BITS:  # str() refuses past 4,300 digits
        return f"<an integer of about {int(answer.bit_length() * math.log10(2)) + 1} digits>"  # graded wrong
    if isinstance(answer, int | float):
        return str(answer)
    return answer


def _timed(answer: Callable[..., Any], job: Job, previous: Any, timeout_s: float) -> Any:
    """``answer(item, run, previous)`` in a daemon thread, waited for ``timeout_s``: a system that never
    returns cannot block interpreter exit (it keeps running in the background; Python cannot kill a
    thread). The thread runs in a copy of the caller's context (the rollout id, DSPy's settings)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = answer(job.item, job.run, previous)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=contextvars.copy_context().run, args=(target,), daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise TimeoutError(f"system did not answer within {timeout_s} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _row(how: Attempt, job: Job, *, prediction: Any = None, grade: Any = None, error: str | None = None,
         stage: str = "", latency: float, trace: Any = None) -> dict[str, Any]:
    from roma_lab.trace import trace_path

    usage = trace.usage() if trace is not None else None
    text = prediction if isinstance(prediction, str) or prediction is None else getattr(prediction, "output", None)
    text = text if isinstance(text, str) or text is None else repr(prediction)
    row = {"condition": how.label, "run": job.run, "benchmark": job.item.benchmark, "task_id": job.item.item_id,
           "gold": str(job.item.answer), "prediction": text,
           "label": grade.label if grade else None,
           "score": None if grade is None or math.isnan(grade.score) else grade.score,  # empty on disk
           "grader": grade.grader if grade else None, "grader_raw": grade.raw if grade else None,
           "details": json.dumps(dict(grade.details)) if grade and grade.details else None,
           "error": error, "error_stage": stage, "latency_s": round(latency, 6),
           "model_calls": usage and usage.model_calls, "input_tokens": usage and usage.input_tokens,
           "output_tokens": usage and usage.output_tokens, "cost": usage and usage.cost,
           "trace": None if trace is None else trace_path("", how.label, job.run, job.item.item_id).as_posix()}
    return {"status": status_of(row), **row}


def status_of(row: dict[str, Any]) -> str:
    """``system_error`` (scored 0), ``grader_error`` (the grader failed: not scored, and rare),
    ``no_answer`` (None or an empty answer: scored as the wrong answer it is), else the grader's label
    (lower case), else ``scored``."""
    if row["error_stage"] == "system":
        return "system_error"
    if row["error_stage"] == "grader":
        return "grader_error"
    if row["prediction"] is None or not str(row["prediction"]).strip():
        return "no_answer"
    return row["label"].lower() if isinstance(row["label"], str) and row["label"] else "scored"


def _answer_of(result: Any) -> Any:
    """What a system's result answers: a trace's ``final_answer()`` (a ROMA run that failed or was
    stopped raises its typed error: an error row, its trace still saved), else the result itself."""
    answer = getattr(result, "final_answer", None)
    return answer() if callable(answer) else result


def attempt(how: Attempt, job: Job, previous: Any = None, gate: Callable[[], bool] | None = None) -> Outcome | None:
    """One job: call the system (as rollout ``run``: repeats are asked again, never replayed from a
    cache), grade its answer, and make its row and its trace's text. Runs in this process or on a
    cluster worker; either way only the caller writes. No answer is a wrong answer (score 0, prediction
    empty), never a row left out of the mean. None, without a call, when ``gate`` says not to start."""
    from roma_lab.bench import Grade, guarded
    from roma_lab.lm import rollout
    from roma_lab.trace import RecordedGrade

    if gate is not None and not gate():
        return None
    start = time.perf_counter()
    trace = None
    try:
        with rollout(str(job.run)):
            result = (how.answer(job.item, job.run, previous) if how.timeout_s is None
                      else _timed(how.answer, job, previous, how.timeout_s))
        trace = result if hasattr(result, "usage") and hasattr(result, "to_json") else None
        answer = gradable(_answer_of(result))
    except Exception as exc:  # noqa: BLE001 - recorded as an error row, the run goes on
        row = _row(how, job, error=f"{type(exc).__name__}: {exc}", stage="system",
                   latency=time.perf_counter() - start, trace=trace)
        return _recorded(how, job, row, trace, isinstance(exc, TimeoutError))
    except (KeyboardInterrupt, SystemExit) as stop:
        _keep_stopped(how, job, getattr(stop, "run", None))
        raise
    latency = time.perf_counter() - start
    name = getattr(how.grader, "name", type(how.grader).__name__)
    if answer is None:
        grade = Grade(None, 0.0, name, raw=NO_ANSWER_RAW)
    else:  # our graders never raise; guarded() keeps a user-written one from stopping the run
        grade = guarded(name, lambda: how.grader(job.item, answer))
    if trace is not None and hasattr(trace, "with_grade"):  # a trajectory records its own grade
        trace = trace.with_grade(RecordedGrade(label=grade.label, score=None if math.isnan(grade.score) else grade.score,
                                               grader=grade.grader, error=grade.error, raw=grade.raw,
                                               details=dict(grade.details)))
    row = _row(how, job, prediction=answer, grade=grade, error=grade.error, stage="grader" if grade.error else "",
               latency=latency, trace=trace)
    return _recorded(how, job, row, trace, False)


def _keep_stopped(how: Attempt, job: Job, trace: Any) -> None:
    """The trace of a run an interrupt stopped (``Roma.run`` hands it on the exception), kept where its
    task's trace goes, without a row: the task runs again on the next call, and its trace is then
    replaced."""
    from roma_lab.results import write_text_atomic
    from roma_lab.trace import trace_path

    if trace is not None and hasattr(trace, "to_json"):
        outcome = _recorded(how, job, {}, trace, False)
        write_text_atomic(trace_path(how.out, how.label, job.run, job.item.item_id), outcome.trace_text)


def _recorded(how: Attempt, job: Job, row: dict[str, Any], trace: Any, timed_out: bool) -> Outcome:
    """The outcome as it will be written: a private benchmark's trace and row redacted first; the trace's
    file records the task it belongs to (``roma_lab.trace.saved_trace_text``)."""
    from roma_lab.trace import saved_trace_text

    text = None if trace is None else trace.to_json()
    if job.item.benchmark in how.private:
        secrets = (job.item.question, str(job.item.answer))
        text = None if text is None else redacted(text, secrets)
        row = json.loads(redacted(json.dumps(row), secrets))
        if trace is not None:  # what later reads the trace (a chain's next task) sees the redacted copy
            trace = type(trace).from_json(text)
    return Outcome(row, None if text is None else saved_trace_text(text, job.item.item_id), trace, timed_out)


class _Recorder:
    """Writes each outcome (its trace, then its row) under the log's lock, counts timeouts in a row,
    and tells ``on_row``."""

    def __init__(self, how: Attempt, on_row: Callable[[dict[str, Any]], None] | None,
                 max_consecutive_timeouts: int):
        self.how, self.on_row, self.limit = how, on_row, max_consecutive_timeouts
        self.log = how.out / "attempts.csv"
        self.lock = log_lock(self.log)
        self.timeouts_in_a_row = 0

    def __call__(self, outcome: Outcome) -> None:
        from roma_lab.results import write_text_atomic

        with self.lock:
            if outcome.trace_text is not None:
                write_text_atomic(self.how.out / outcome.row["trace"], outcome.trace_text)
            append_row(self.log, outcome.row)
            self.timeouts_in_a_row = self.timeouts_in_a_row + 1 if outcome.timed_out else 0
            stalled = self.timeouts_in_a_row >= self.limit
        if self.on_row is not None:
            self.on_row(outcome.row)
        if stalled:
            raise SystemStalledError(
                f"{self.how.label}: {self.timeouts_in_a_row} timeouts in a row; stopped with finished rows in "
                f"{self.log} (rerun to resume once the system answers again)")


def run_jobs(how: Attempt, jobs: Sequence[Job], *, workers: int = 1, chained: bool = False,
             done: Callable[[Job], Any] | None = None, gate: Callable[[], bool] | None = None,
             on_row: Callable[[dict[str, Any]], None] | None = None, max_consecutive_timeouts: int = 3,
             cluster: Any = None) -> None:
    """Attempt every job of ``jobs`` and record each outcome as it finishes.

    ``chained``: ``jobs`` hold each run's tasks in task order, and each attempt is handed the trace of
    the task before it in its run: the attempt's own, or for a task finished earlier ``done(job)``
    (its saved trace, read back). ``done``: which jobs are finished already (they are not attempted;
    None: none). ``cluster``: a cluster name or ``roma_lab.cluster.Dispatch`` (None: $ROMA_LAB_CLUSTER,
    else this process); a gate and a chain run in this process only.
    """
    from roma_lab import cluster as batch

    if max_consecutive_timeouts < 1:
        raise ValueError(f"max_consecutive_timeouts must be >= 1, got {max_consecutive_timeouts}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    finished = done or (lambda job: None)
    record = _Recorder(how, on_row, max_consecutive_timeouts)
    dispatch = batch.Dispatch.of(cluster)
    if chained:
        runs: dict[int, list[Job]] = {}
        for job in jobs:
            runs.setdefault(job.run, []).append(job)

        def chain(run_jobs: list[Job]) -> None:
            previous = None
            for job in run_jobs:
                kept = finished(job)
                if kept is not None:
                    previous = kept.trace if isinstance(kept, Outcome) else kept
                    continue
                outcome = attempt(how, job, previous, gate)
                if outcome is None:
                    return  # the rest of this chain waits for a rerun: its memory must not skip a task
                record(outcome)
                previous = outcome.trace if outcome.trace is not None else previous

        concurrent_map(chain, list(runs.values()), workers=workers)
        return
    todo = [job for job in jobs if finished(job) is None]
    if not todo:
        return
    if not dispatch.in_process:
        if gate is not None:
            raise ValueError("a gate is asked before each task starts in this process: run without a cluster")
        _on_cluster(how, todo, dispatch, record)
        return

    concurrent_map(partial(attempt, how, gate=gate), todo, workers=workers,
                   on_done=lambda index, outcome: outcome is None or record(outcome))


def _on_cluster(how: Attempt, todo: Sequence[Job], dispatch: Any, record: _Recorder) -> None:
    """Each job on a cluster worker; afterwards (also when stopped) one line in ``cluster.jsonl`` says
    where each job ran and on what."""
    from datetime import UTC, datetime

    from roma_lab import cluster as batch

    started, status, by_worker = datetime.now(UTC), "interrupted", {}
    rows = batch.dispatch(attempt, todo, how=dispatch, shared=(how,), label=f"task-{how.label}")
    try:
        for done in rows:
            job = todo[done.index]
            if done.error is not None:  # no worker could finish it (e.g. each one died running it): an error row
                record(Outcome(_row(how, job, error=f"{type(done.error).__name__}: {done.error}", stage="system",
                                    latency=0.0), None, None, False))
                continue
            by_worker.setdefault(done.worker, []).append(job.item.item_id)
            record(done.value)
        status = "completed"
    except batch.WorkerEnvironmentError:
        status = "refused: a worker's environment differs"
        raise
    finally:
        rows.close()  # cancels the jobs not yet finished
        entry = {"condition": how.label, "status": status, "started_at": started.isoformat(),
                 "finished_at": datetime.now(UTC).isoformat(), **batch.describe(dispatch, by_worker)}
        from roma_lab.results import open_regular

        with open_regular(how.out / "cluster.jsonl", "a") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
