"""``evaluate(systems, tasks, grader, runs=R, out=DIR)``: every system on every task R times, one tidy
row per (system, task, run), traces beside the rows, then the results vocabulary's tables. It is the one
way roma_lab runs systems on tasks: the papers' tables are views of the :class:`Evaluation` it returns.

Each attempt's trace is saved (``traces/<system>/r<run>/<task>.json``, ``roma_lab.trace.trace_path``)
and then its row appended to ``attempts.csv`` as it finishes, so a rerun with the same ``out`` resumes
(finished rows kept; error rows, and rows whose trace is gone or damaged, run again). Tasks run
concurrently up to each system's model bound (``roma_lab.lm.max_concurrency``); run r of a task is
rollout ``r`` (``roma_lab.lm.rollout``), so repeats are asked again, never replayed from a cache.
``evaluation.json`` records what the rows were made with; a rerun that changes the tasks, the grader
or a system's settings under the same label is refused. One process writes a folder at a time.

Files in ``out``: ``attempts.csv`` (every attempt, in the one row schema ``ROW_COLUMNS``, usage
included), ``traces/``, ``rows.csv`` (the latest attempt per system, task and run), ``summary.csv``
(mean with task-bootstrap CI per system), ``paired.csv`` (each system against the first, with two
systems or more), ``evaluation.json`` and ``provenance.json``.

``budget_usd`` (else $ROMA_LAB_BUDGET_USD) caps the dollars the folder's rows may cost: at the cap no
task starts, tasks in flight finish, and each (system, task, run) left without a row is a
``not_run_budget`` row of ``rows.csv`` (not in the mean, counted in the summary's ``n_not_run``); a
rerun with a higher cap runs exactly those (``_budget.py``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from roma_lab._concurrent import fewer_full_collections
from roma_lab.stats import DEFAULT_STATS, StatsSettings

from ._budget import BUDGET_ENV, BudgetReport, BudgetUnknownCostError, Spending, budget_usd_from_env, check_budget
from ._evaluation import NOT_RUN, Evaluation, tidy_rows
from ._log import LOG_FILE, check_layout, read_log_df
from ._record import check_record, record_budget
from ._schedule import Attempt, Job, run_jobs
from ._systems import System, as_system
from ._tasks import TaskSet, tasks_from

__all__ = ["evaluate"]

#: The lock ``evaluate`` holds on its folder (a hidden file, so never a notebook's output).
LOCK_FILE = ".evaluate.lock"


def evaluate(systems: Sequence[Any], tasks: Any, grader: Any = None, *, runs: int = 1,
             out: str | os.PathLike[str], timeout_s: float | None = None, progress: bool = True,
             stats: StatsSettings = DEFAULT_STATS, budget_usd: float | None = None,
             max_consecutive_timeouts: int = 3, cluster: Any = None) -> Evaluation:
    """Run every system on every task ``runs`` times and return the :class:`Evaluation`.

    ``systems``: ``roma_lab.evaluate`` systems (``single_call``, ``roma``, ``agent``, ``function``) or
    callables ``question -> answer``, distinct labels. ``tasks``: anything ``tasks_from`` reads.
    ``grader``: a name (``exact``, ``quasi-exact``, ``numeric``, ``contains``, ``judge``), a grader,
    or a callable ``(prediction, gold) -> bool | float`` (``roma_lab.bench.grader_named``); None:
    the task set's own grader (a registered benchmark's), else GAIA's quasi-exact match.
    ``timeout_s``: a system's hard limit per task (an error row); ``max_consecutive_timeouts`` in a row
    stop a system that stopped answering (``SystemStalledError``). ``stats``: the CIs' settings.
    ``budget_usd``: a cap on the dollars the rows of ``out`` cost, earlier runs' rows included (None:
    $ROMA_LAB_BUDGET_USD, else no cap); the rule is ``_budget.py``'s. A row of unknown cost under a
    cap raises ``BudgetUnknownCostError`` (at the start, for rows already in ``out``). ``cluster``: where
    the jobs run (a cluster name or a ``roma_lab.cluster.Dispatch``; None: $ROMA_LAB_CLUSTER, else this
    process; a dollar cap runs in this process). Another process writing ``out`` at the same time is
    refused (``roma_lab.results.FolderBusyError``)."""
    from roma_lab.results import folder_lock

    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise ValueError(f"runs must be a positive integer, got {runs!r}")
    if timeout_s is not None and not (isinstance(timeout_s, int | float) and 0 < timeout_s < float("inf")):
        raise ValueError(f"timeout_s must be a positive number of seconds (or None), got {timeout_s!r}")
    cap, source = (budget_usd_from_env(), f"${BUDGET_ENV}") if budget_usd is None else (check_budget(budget_usd),
                                                                                         "budget_usd")
    task_set = tasks_from(tasks)
    _check_trace_names(task_set)
    chosen = _systems(systems)
    grading = _grader(grader, task_set)
    # bound before anything is written: a missing model, or a model that must not see these tasks,
    # fails here, once
    answers = [system.bind(task_set) for system in chosen]
    out_dir = Path(out)
    # the run keeps its rows and the LM its replies: full collections of that growing heap would hold the
    # GIL from every call in flight and from the tables after (roma_lab._concurrent)
    with folder_lock(out_dir, LOCK_FILE, "evaluate"), fewer_full_collections():
        check_layout(out_dir)
        record = check_record(out_dir, task_set, grading.name, chosen)
        spending = None if cap is None else Spending(cap, _folder_costs(out_dir))
        from tqdm.auto import tqdm

        # the first system's finished rows read before the bar: a log that cannot be read is said alone
        found = [_finished(out_dir, chosen[0], task_set, runs)]
        # one bar over every (system, run, task); rows found on disk count as done
        with tqdm(total=len(chosen) * runs * len(task_set), desc="evaluate", disable=not progress) as bar:
            for system, answer in zip(chosen, answers, strict=True):
                bar.set_postfix_str(system.label)
                how = Attempt(system.label, answer, grading, out_dir, timeout_s, task_set.private)
                jobs = [Job(run, item) for run in range(runs) for item in task_set.items]
                done = found.pop() if found else _finished(out_dir, system, task_set, runs)
                bar.update(len(done))
                for i, (workers, gate) in enumerate(_passes(system, answer, spending)):
                    if i:  # a later pass: the pass before finished some jobs
                        done = _finished(out_dir, system, task_set, runs)
                    run_jobs(how, jobs, workers=workers, chained=system.chained, gate=gate,
                             done=lambda job, done=done: done.get((job.run, job.item.item_id)),
                             on_row=partial(_on_row, bar, spending, system.label),
                             max_consecutive_timeouts=max_consecutive_timeouts, cluster=cluster)
        labels = [s.label for s in chosen]
        rows = tidy_rows(out_dir, task_set, labels, runs, capped=spending is not None)
        report = None if spending is None else BudgetReport(cap, spending.spent_usd, spending.stopped,
                                                            int(rows["status"].eq(NOT_RUN).sum()), source)
        evaluation = Evaluation(rows, out_dir, tuple(labels), grading.name,
                                {label: d.get("model") for label, d in record["systems"].items()}, stats, report)
        _write(evaluation, task_set, runs, cap, record)
    return evaluation


def _systems(systems: Sequence[Any]) -> list[System]:
    chosen = [as_system(s) for s in systems]
    if not chosen:
        raise ValueError("evaluate needs at least one system")
    labels = [s.label for s in chosen]
    if any(not isinstance(label, str) or not label.strip() for label in labels) or len(set(labels)) != len(labels):
        raise ValueError(f"systems need distinct, non-empty labels, got {labels}")
    return chosen


def _check_trace_names(tasks: TaskSet) -> None:
    """Two task ids whose traces would share one file (their names cut to the same text and the same
    hash: ``roma_lab.results.safe_name``) are refused before anything runs, never one trace overwriting
    another's."""
    from roma_lab.trace import trace_path

    named: dict[str, str] = {}
    for item in tasks.items:
        name = trace_path("", "", 0, item.item_id).name
        if named.setdefault(name, item.item_id) != item.item_id:
            raise ValueError(f"task ids {named[name]!r} and {item.item_id!r} would share the trace file {name!r} "
                             "(a hash collision of their file names); give one of them another id")


def _grader(grader: Any, tasks: TaskSet):
    from roma_lab.bench import GaiaGrader, grader_named

    if grader is None:
        return tasks.grader or GaiaGrader()
    return grader_named(grader)


def _passes(system: System, answer: Any, spending: Spending | None) -> list[tuple[int, Any]]:
    """(workers, gate) of each pass over a system's jobs: at its model's bound (``roma_lab.lm.max_concurrency``)
    under the dollar cap's gate; first one task alone while its price is not yet seen."""
    from roma_lab.lm import max_concurrency

    model = getattr(answer, "model", system.model)  # a bound agent knows its resolved actor
    workers = 1 if model is None else max_concurrency(model)
    if spending is None:
        return [(workers, None)]
    passes = [(workers, spending.gate(system.label))]
    if workers > 1 and not spending.known(system.label):
        passes.insert(0, (1, spending.gate(system.label, limit=1)))  # one task at a price not yet seen
    return passes


def _on_row(bar: Any, spending: Spending | None, label: str, row: dict[str, Any]) -> None:
    """A row is on disk: the bar moves and the dollar cap's ledger learns its cost."""
    bar.update(1)
    if spending is not None:
        spending.finished(label, row["cost"], f"{label}, run {row['run']}, task {row['task_id']}")


def _finished(out: Path, system: System, tasks: TaskSet, runs: int) -> dict[tuple[int, str], Any]:
    """(run, task id) -> what a chain needs of each finished job of ``system`` (its trace, or True
    without one): a row without an error whose trace, if it names one, reads back. A job whose trace
    is gone or damaged (or records another task) runs again, so every finished row can be opened; so does
    each task whose row names a trace that rows of other tasks name too (a folder saved with the shorter
    hashed names of before issue 53, where two ids could share a file)."""
    from roma_lab.results import DamagedFileError, quarantine
    from roma_lab.trace import load_trace

    log = read_log_df(out / LOG_FILE)
    ids = {it.item_id for it in tasks.items}
    mine = log[log["condition"].eq(system.label) & log["benchmark"].eq(tasks.name) & log["error"].isna()
               & log["task_id"].isin(ids) & log["run"].lt(runs)]
    named = mine.groupby("trace")["task_id"].nunique()
    shared = set(named.index[named > 1])
    if shared:
        warnings.warn(f"{out}: rows of several tasks name the trace(s) {sorted(shared)} (file names whose hash "
                      "collided); those tasks run again, each into a file of its own", stacklevel=3)
    done = {}
    for run, task_id, trace in zip(mine["run"], mine["task_id"], mine["trace"], strict=True):
        if trace is None:
            done[(run, task_id)] = True
            continue
        if trace in shared:
            continue
        try:
            done[(run, task_id)] = load_trace(out / trace, task_id)
        except FileNotFoundError:
            continue
        except DamagedFileError:
            quarantine(out / trace, "not a trace roma_lab wrote; its task runs again")
    return done


def _folder_costs(out: Path) -> list[tuple[str, float]]:
    """(system, cost) of every row in ``out``'s attempt log (the latest attempt of each), whatever system
    or task set made it: the dollars the folder has spent. A row of unknown cost raises
    ``BudgetUnknownCostError``."""
    log = read_log_df(out / LOG_FILE)
    unknown = log[log["cost"].isna()]
    if len(unknown):
        first = unknown.iloc[0]
        raise BudgetUnknownCostError(
            f"{out} holds {len(unknown)} row(s) of unknown cost (e.g. {first['condition']}, run {first['run']}, task "
            f"{first['task_id']}): the dollars spent so far are unknown, so no cap can be kept; rerun without a "
            "dollar cap, or in another out folder")
    return list(zip(log["condition"], log["cost"].astype(float), strict=True))


def _write(evaluation: Evaluation, tasks: TaskSet, runs: int, cap: float | None, record: dict[str, Any]) -> None:
    """The tables and the record of this call, in its folder."""
    from roma_lab.results import write_provenance, write_table

    out = evaluation.out
    web = _web_record(tasks, out)
    write_table(evaluation.rows, out, "rows")
    write_table(evaluation.summary(), out, "summary")
    if evaluation.can_pair():
        write_table(evaluation.paired_all(), out, "paired")
    else:
        (out / "paired.csv").unlink(missing_ok=True)  # an earlier call's table would pass for this one's
    record_budget(out, evaluation.budget)
    models = sorted({m for m in evaluation.models.values() if m})
    write_provenance(out, parameters={"tasks": tasks.name, "source": tasks.source, "runs": runs,
                                      "systems": list(evaluation.systems), "grader": evaluation.grader,
                                      "budget_usd": cap},
                     model=", ".join(models) or None,
                     extra={"systems": record["systems"], "web": web,
                            "budget": None if evaluation.budget is None else evaluation.budget.as_json()},
                     stats=evaluation.stats)


def _web_record(tasks: TaskSet, out: Path) -> dict[str, Any] | None:
    """What the run's search read of the web, for its provenance: the provider, live or recorded or
    replayed, and a recorded run's snapshot (exported into ``out``, with the SHA-256 of its manifest),
    which replays the run offline, bit for bit (``roma_lab.web.open_snapshot``)."""
    from roma_lab.results import sha256_file

    web = tasks.web
    if web is None:
        return None
    mode = "live" if web.recorder is None else web.recorder.mode
    record: dict[str, Any] = {"search": web.provider.spec, "recording": mode}
    if mode == "record":
        from roma_lab.web import SNAPSHOT_DIR, SNAPSHOT_MANIFEST

        if (out / SNAPSHOT_DIR / SNAPSHOT_MANIFEST).exists():  # a resumed run: its finished rows' calls stay in
            web.recorder.carry(out / SNAPSHOT_DIR)
        folder = web.recorder.export_snapshot(out)
        record |= {"snapshot": folder.relative_to(out).as_posix(),
                   "snapshot_sha256": sha256_file(folder / SNAPSHOT_MANIFEST)}
    return record
