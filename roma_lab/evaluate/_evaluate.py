"""``evaluate(systems, tasks, grader, runs=R, out=DIR)``: every system on every task R times, one
tidy row per (system, task, run), traces beside the rows, then the results vocabulary's tables.

Built on ``roma_lab.bench.run_benchmark`` (the runner the papers' tables use): rows are appended
as each item finishes, so a rerun with the same ``out`` resumes (finished rows kept, error rows run
again), items run concurrently up to each system's model bound (``roma_lab.lm.max_concurrency``),
and run r of a task is rollout ``r`` (``roma_lab.lm.rollout``), so repeats are asked again, never
replayed from a cache. ``evaluation.json`` records what the rows were made with; a rerun that
changes the tasks, the grader or a system's settings under the same label is refused.

Files in ``out``: ``run<r>.csv`` (the runner's rows), ``traces/<system>/r<r>/<task>.json``,
``usage/<system>/r<r>/<task>.json`` (a trace's model calls, tokens and cost, recorded as it is saved),
``rows.csv`` (the tidy rows), ``summary.csv`` (mean with task-bootstrap CI per system), ``paired.csv``
(each system against the first, with two systems or more),
``evaluation.json`` and ``provenance.json``.

``budget_usd`` (else $ROMA_LAB_BUDGET_USD) caps the dollars the folder's rows may cost: at the cap no
task starts, tasks in flight finish, and each (system, task, run) left without a row is a
``not_run_budget`` row of ``rows.csv`` (not in the mean, counted in the summary's ``n_not_run``); a
rerun with a higher cap runs exactly those (``_budget.py``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from roma_lab.results import MODEL, safe_name
from roma_lab.stats import DEFAULT_STATS, StatsSettings

from ._budget import (
    BUDGET_ENV,
    BudgetReport,
    Spending,
    budget_usd_from_env,
    check_budget,
)
from ._systems import SINGLE_CALL_KIND, SingleCallAnswer, as_system, roma_output
from ._tasks import TaskSet, tasks_from

if TYPE_CHECKING:
    import pandas as pd

    from roma_lab.bench import Item

__all__ = ["NOT_RUN", "ROW_COLUMNS", "Evaluation", "EvaluationMismatchError", "evaluate"]

RECORD_FILE = "evaluation.json"
#: The tidy rows: one per (system, task, run). A system is named in ``condition`` and a task in
#: ``task_id``, as in every table of the results vocabulary (design/results_vocabulary.md).
ROW_COLUMNS = ("condition", "run", "benchmark", "task_id", "gold", "prediction", "status", "label", "score", "grader",
               "error", "error_stage", "latency_s", "model_calls", "input_tokens", "output_tokens", "cost", "trace")
_USAGE_COLUMNS = ("model_calls", "input_tokens", "output_tokens", "cost")
_METRIC = "score"
#: The status of a (system, task, run) that never started because the dollar cap was reached.
NOT_RUN = "not_run_budget"
_RUN_FILE = re.compile(r"run(\d+)\.csv")


class EvaluationMismatchError(ValueError):
    """``out`` holds rows made with other tasks, another grader or other settings under a label."""


def _task_hashes(tasks: TaskSet) -> dict[str, str]:
    """Per task id, a hash of what its rows depend on (question and gold answer)."""
    return {it.item_id: hashlib.sha256(json.dumps([it.question, str(it.answer)], ensure_ascii=False).encode())
            .hexdigest()[:16] for it in tasks.items}


def _grader(grader: Any, tasks: TaskSet):
    from roma_lab.bench import GaiaGrader, grader_named

    if grader is None:
        return tasks.grader or GaiaGrader()
    return grader_named(grader)


def _check_record(out: Path, record: dict[str, Any]) -> None:
    """Refuse to mix rows made under another protocol into ``out``; new systems may join."""
    path = out / RECORD_FILE
    if path.exists():
        from roma_lab.results import read_json_file

        old = read_json_file(path)  # a DamagedFileError naming it, whatever is wrong with it
        for key, what in (("tasks", "tasks"), ("grader", "grader")):
            if old.get(key) != record[key]:
                raise EvaluationMismatchError(
                    f"{out} holds rows made with other {what} ({old.get(key)!r}, now {record[key]!r}); "
                    "use another out folder to compare under a different protocol")
        # tasks may join (a larger n reuses the rows of a smaller one); a task that changed may not
        changed = sorted(i for i, h in record["task_hashes"].items() if old.get("task_hashes", {}).get(i, h) != h)
        if changed:
            raise EvaluationMismatchError(
                f"{out} holds rows for tasks {changed[:5]} with another question or gold answer; "
                "use another out folder (or other ids) for the changed tasks")
        for label, settings in record["systems"].items():
            if label in old.get("systems", {}) and old["systems"][label] != settings:
                raise EvaluationMismatchError(
                    f"{out}: system {label!r} was run with {old['systems'][label]}, now {settings}; "
                    "give the changed system another label")
        record = {**record, "systems": {**old.get("systems", {}), **record["systems"]},
                  "task_hashes": {**old.get("task_hashes", {}), **record["task_hashes"]}}
    from roma_lab.results import write_text_atomic

    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(record, indent=2, sort_keys=True) + "\n")


@dataclass(frozen=True, slots=True)
class _Answerer:
    """What ``run_benchmark`` calls for one system and run: the task's answer, its trace saved first.
    It takes the item itself (``takes_item``), never its question text to look the task up again."""

    answer: Callable[[Item, int], Any]
    traces: Path
    usage: Path
    run: int
    takes_item: ClassVar[bool] = True

    def __call__(self, item: Item) -> Any:
        from roma_lab.lm import rollout
        from roma_lab.results import write_text_atomic
        from roma_lab.trace import Run

        with rollout(str(self.run)):
            result = self.answer(item, self.run)
        if hasattr(result, "to_json"):
            write_text_atomic(self.traces / f"{safe_name(item.item_id)}.json", result.to_json())
            # counted from the answer in hand, after the trace: the tables never reread a trace for it
            write_text_atomic(self.usage / f"{safe_name(item.item_id)}.json", json.dumps(_usage(result)))
        if isinstance(result, Run):
            roma_output(result)  # a failed or timed-out run is an error row (its trace is kept)
        return result


def _load_trace(path: Path) -> Any:
    """The trace saved at ``path``, by the ``kind`` it names: a ``roma_lab.trace.Run``, an agent
    ``Trajectory`` or a :class:`SingleCallAnswer`. A damaged one is a ``DamagedFileError`` naming it."""
    from roma_lab.results import DamagedFileError, read_json_file

    data = read_json_file(path)
    kind = data.get("kind")
    try:
        if kind == SINGLE_CALL_KIND:
            return SingleCallAnswer(data["output"], data["input_tokens"], data["output_tokens"], data["cost"],
                                    data["model"])
        if kind == "trajectory" or (kind is None and "rollouts" in data):  # no kind: written before traces named it
            from roma_lab.agents import read_trajectory

            return read_trajectory(path)
        from roma_lab.trace import Run

        return Run.from_json(path.read_bytes())
    except KeyError as err:
        raise DamagedFileError(path, f"is a {kind} trace without its {err.args[0]!r} field") from None
    except ValueError as err:  # InvalidRunError, TrajectoryFormatError: a trace that breaks its format
        if isinstance(err, DamagedFileError):
            raise
        raise DamagedFileError(path, f"is not a {kind or 'run'} trace ({err})") from None


def _usage(trace: Any) -> dict[str, Any]:
    """Model calls, tokens and cost of a trace: a single call's own, a run's or trajectory's total
    row; unknown is None (all of it for a trace that counts no usage)."""
    if isinstance(trace, SingleCallAnswer):
        return {"model_calls": 1, "input_tokens": trace.input_tokens, "output_tokens": trace.output_tokens,
                "cost": trace.cost}
    if not hasattr(trace, "usage_df"):
        return dict.fromkeys(_USAGE_COLUMNS)
    import pandas as pd

    total = trace.usage_df().iloc[-1]

    def known(value: Any, kind: type) -> Any:  # unknown (a sum with an unknown term) stays None, never 0
        return None if pd.isna(value) else kind(value)

    return {"model_calls": int(total["calls"]), "input_tokens": known(total["input_tokens"], int),
            "output_tokens": known(total["output_tokens"], int), "cost": known(total["cost"], float)}


def _recorded_usage(trace: Path, usage: Path) -> dict[str, Any]:
    """A row's usage columns: as recorded when its trace was saved (None without a trace). A trace with
    no record, or a newer one than its record (the old attempt's, when saving stopped in between),
    is read once and its usage recorded; an unreadable record is made again from the trace."""
    from roma_lab.results import write_text_atomic

    if not trace.is_file():
        return dict.fromkeys(_USAGE_COLUMNS)
    try:
        if usage.stat().st_mtime_ns >= trace.stat().st_mtime_ns:
            recorded = json.loads(usage.read_text(encoding="utf-8"))
            if isinstance(recorded, dict) and tuple(recorded) == _USAGE_COLUMNS:
                return recorded
    except (OSError, ValueError):  # no record yet, or a damaged one: the trace says it again
        pass
    counted = _usage(_load_trace(trace))
    write_text_atomic(usage, json.dumps(counted))
    return counted


def _status(row: Mapping[str, Any]) -> str:
    """``system_error`` (scored 0), ``grader_error`` (the grader failed: not scored, and rare),
    ``no_answer`` (None or an empty answer: scored as the wrong answer it is), else the grader's label."""
    if row["error_stage"] == "system":
        return "system_error"
    if row["error_stage"] == "grader":
        return "grader_error"
    prediction = row["prediction"]
    if prediction is None or (isinstance(prediction, float) and math.isnan(prediction)) or not str(prediction).strip():
        return "no_answer"
    label = row["label"]
    if isinstance(label, str) and label:
        return label.lower()
    return "scored"


@dataclass(frozen=True)
class Evaluation:
    """The rows of an evaluation and the tables made from them.

    ``rows``: one per (system, task, run), in system, run and task order (:data:`ROW_COLUMNS`).
    ``summary()``: mean score per system with the task-bootstrap CI (runs averaged per task first);
    ``paired(a, b)``: ``a - b`` paired on tasks (bootstrap CI, exact sign test, MDE); each names its
    systems' models (``models``) in the results vocabulary's ``model`` column; ``trace(...)``
    loads a row's saved trace; ``view(...)`` opens it in the viewer (a ROMA tree, an agent
    trajectory); ``side_by_side(task_id, a, b)`` two systems' traces for one task. ``budget``: what a
    dollar cap let the evaluation spend, and whether it stopped there (None: no cap)."""

    rows: pd.DataFrame
    out: Path
    systems: tuple[str, ...]
    grader: str
    models: Mapping[str, str | None]  # per system, the model it called (None: not known)
    stats: StatsSettings = DEFAULT_STATS
    budget: BudgetReport | None = None

    def scores(self) -> pd.DataFrame:
        """Per (system, task, run) scores under the bench NaN policy: a system error scores 0 (no
        answer), a grader error is NaN (not scored, counted in ``n_missing``); ``model``: the system's.
        A task kept back by the dollar cap (``not_run_budget``) has no score: it is no observation."""
        import pandas as pd

        rows = self.rows[self.rows["status"].ne(NOT_RUN)]
        score = rows["score"].astype(float).mask(rows["error_stage"].eq("system"), 0.0)
        return pd.DataFrame({"condition": rows["condition"], MODEL: rows["condition"].map(self.models),
                             "subset": rows["benchmark"], "task_id": rows["task_id"],
                             "run": rows["run"], _METRIC: score})

    def summary(self) -> pd.DataFrame:
        """Mean score per system with its CI; ``n_no_answer``, ``n_system_error`` and ``n_grader_error``
        count its rows of each kind (the first two are in the mean as wrong answers; the last is not),
        ``n_not_run`` its tasks the dollar cap kept back (not in the mean), and ``cost_usd`` the dollars
        its rows cost, every run together (NaN: some row's cost is unknown, never counted as 0)."""
        import pandas as pd

        from roma_lab.results import summarize

        scores = self.scores()
        table = summarize(scores, [_METRIC], stats=self.stats)
        unscored = [s for s in self.systems if s not in set(scores["condition"])]
        if unscored:  # every task of these was kept back by the cap: a row each, n = 0
            table = pd.concat([table, pd.DataFrame({
                "condition": unscored, "subset": self.rows["benchmark"].iloc[0], "metric": _METRIC, "value": math.nan,
                "ci_method": "no CI: no task run", "n": 0, "n_missing": 0, "runs": 0,
                **({MODEL: [self.models.get(s) for s in unscored]} if MODEL in table.columns else {})})],
                ignore_index=True)
        order = {s: i for i, s in enumerate(self.systems)}
        table = table.sort_values("condition", key=lambda c: c.map(order), kind="stable", ignore_index=True)
        table.insert(1, "grader", self.grader)
        statuses = self.rows.groupby("condition")["status"]
        for status in ("grader_error", "system_error", "no_answer"):  # each inserted right after n_missing
            counts = statuses.apply(lambda column, status=status: int(column.eq(status).sum()))
            table.insert(table.columns.get_loc("n_missing") + 1 if "n_missing" in table.columns else len(table.columns),
                         f"n_{status}", table["condition"].map(counts).fillna(0).astype(int))
        not_run = statuses.apply(lambda column: int(column.eq(NOT_RUN).sum()))
        table["n_not_run"] = table["condition"].map(not_run).fillna(0).astype(int)
        costs = pd.to_numeric(self.rows["cost"], errors="coerce").groupby(self.rows["condition"])
        # a sum with an unknown term is unknown: min_count over the rows, not pandas' skipna sum
        total = costs.apply(lambda c: float(c.sum()) if c.notna().all() else math.nan)
        table["cost_usd"] = table["condition"].map(total)
        return table

    def paired(self, a: str, b: str) -> pd.DataFrame:
        from roma_lab.results import compare

        for name in (a, b):
            if name not in self.systems:
                raise ValueError(f"no system {name!r} in this evaluation; systems: {list(self.systems)}")
        scores = self.scores().groupby(["condition", "subset", "task_id"], as_index=False)[_METRIC].mean()
        scores[MODEL] = scores["condition"].map(self.models)
        return compare(scores, a, b, _METRIC, stats=self.stats)

    def _run_systems(self) -> list[str]:
        """The systems with a row run (the dollar cap may have kept one from every task), in order."""
        ran = set(self.scores()["condition"])
        return [s for s in self.systems if s in ran]

    def can_pair(self) -> bool:
        """Whether ``paired_all`` has a table: the first system and another have rows run."""
        ran = self._run_systems()
        return len(ran) > 1 and ran[0] == self.systems[0]

    def paired_all(self) -> pd.DataFrame:
        """Every system against the first, with Holm's correction over the comparisons (a system the
        dollar cap kept from every task is left out)."""
        import pandas as pd

        from roma_lab.stats import holm_adjust

        if not self.can_pair():
            raise ValueError("a paired table needs the first system and another with rows run")
        table = pd.concat([self.paired(s, self.systems[0]) for s in self._run_systems()[1:]], ignore_index=True)
        table["sign_test_p_holm"] = holm_adjust(table["sign_test_p"].to_numpy())
        return table

    def trace_path(self, system: str, task_id: str, run: int = 0) -> Path:
        return self.out / "traces" / safe_name(system) / f"r{run}" / f"{safe_name(str(task_id))}.json"

    def trace(self, system: str, task_id: str, run: int = 0) -> Any:
        """The saved trace of one row: a ROMA ``Run``, an agent ``Trajectory`` or a single call's answer."""
        path = self.trace_path(system, task_id, run)
        if not path.is_file():
            raise FileNotFoundError(f"no trace saved for {system!r} on task {task_id!r}, run {run} ({path})")
        return _load_trace(path)

    def view(self, system: str, task_id: str, run: int = 0):
        """The viewer of one row's trace: a ROMA run's execution tree, an agent's trajectory."""
        from roma_lab.widgets import ExecutionTreeWidget, TrajectoryWidget

        trace = self.trace(system, task_id, run)
        if isinstance(trace, SingleCallAnswer):
            raise ValueError(f"{system!r} is a single model call: its row holds the whole answer, there is no tree")
        return ExecutionTreeWidget(trace) if hasattr(trace, "nodes") else TrajectoryWidget(trace)

    def side_by_side(self, task_id: str | None, a: str, b: str, run: int = 0):
        """Two systems' traces for one task (None: the first task), side by side (``RunComparison``;
        an agent's trajectory as a run tree when the other is ROMA's)."""
        from roma_lab.widgets import RunComparison, TrajectoryComparison

        task_id = self.rows["task_id"].iloc[0] if task_id is None or task_id == "" else task_id

        traces = {name: self.trace(name, task_id, run) for name in (a, b)}
        single = [name for name, t in traces.items() if isinstance(t, SingleCallAnswer)]
        if single:
            raise ValueError(f"{single[0]!r} is a single model call (no tree); compare its row's prediction")
        if all(hasattr(t, "rollouts") for t in traces.values()):
            return TrajectoryComparison(traces)
        return RunComparison({name: t.as_run() if hasattr(t, "rollouts") else t for name, t in traces.items()})


def evaluate(systems: Sequence[Any], tasks: Any, grader: Any = None, *, runs: int = 1,
             out: str | os.PathLike[str], timeout_s: float | None = None, progress: bool = True,
             stats: StatsSettings = DEFAULT_STATS, budget_usd: float | None = None) -> Evaluation:
    """Run every system on every task ``runs`` times and return the :class:`Evaluation`.

    ``systems``: ``roma_lab.evaluate`` systems (``single_call``, ``roma``, ``agent``, ``function``) or
    callables ``question -> answer``, distinct labels. ``tasks``: anything ``tasks_from`` reads.
    ``grader``: a name (``exact``, ``quasi-exact``, ``numeric``, ``contains``, ``judge``), a grader,
    or a callable ``(prediction, gold) -> bool | float`` (``roma_lab.bench.grader_named``); None:
    the task set's own grader (a registered benchmark's), else GAIA's quasi-exact match.
    ``timeout_s``: a system's hard limit per task (an error row). ``stats``: the CIs' settings.
    ``budget_usd``: a cap on the dollars the rows of ``out`` cost, earlier runs' rows included (None:
    $ROMA_LAB_BUDGET_USD, else no cap); the rule is ``_budget.py``'s. A row of unknown cost under a
    cap raises ``BudgetUnknownCostError`` (at the start, for rows already in ``out``)."""
    from roma_lab.bench import read_results_df, run_benchmark
    from roma_lab.lm import max_concurrency
    from roma_lab.results import write_provenance, write_table

    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise ValueError(f"runs must be a positive integer, got {runs!r}")
    source = "budget_usd"
    if budget_usd is None:
        budget_usd, source = budget_usd_from_env(), f"${BUDGET_ENV}"
    else:
        budget_usd = check_budget(budget_usd)
    task_set = tasks_from(tasks)
    chosen = [as_system(s) for s in systems]
    if not chosen:
        raise ValueError("evaluate needs at least one system")
    labels = [s.label for s in chosen]
    if any(not isinstance(label, str) or not label.strip() for label in labels) or len(set(labels)) != len(labels):
        raise ValueError(f"systems need distinct, non-empty labels, got {labels}")
    grading = _grader(grader, task_set)
    out_dir = Path(out)
    record = {"tasks": task_set.name, "source": task_set.source, "task_hashes": _task_hashes(task_set),
              "grader": grading.name,
              "systems": {s.label: s.describe() for s in chosen}}
    _check_record(out_dir, record)
    spending = None if budget_usd is None else Spending(budget_usd, _folder_costs(out_dir, read_results_df))
    from tqdm.auto import tqdm

    items = list(task_set.items)
    # one bar over every (system, run, task); rows found on disk count as done
    with tqdm(total=len(chosen) * runs * len(items), desc="evaluate", disable=not progress) as bar:
        for system in chosen:
            answer = system.bind(task_set)
            workers = 1 if system.model is None else max_concurrency(system.model)
            for run in range(runs):
                bar.set_postfix_str(f"{system.label}, run {run}")
                before = bar.n
                where = Path(safe_name(system.label)) / f"r{run}"
                traces, usage = out_dir / "traces" / where, out_dir / "usage" / where

                def on_row(row: dict[str, Any], label: str = system.label, run: int = run,
                           traces: Path = traces, usage: Path = usage) -> None:
                    bar.update(1)
                    if spending is not None:
                        name = f"{safe_name(row['item_id'])}.json"
                        spending.finished(label, _recorded_usage(traces / name, usage / name)["cost"],
                                          f"{label}, run {run}, task {row['item_id']}")

                run_items = partial(run_benchmark, items, _Answerer(answer, traces, usage, run), grading,
                                    out_path=out_dir / f"run{run}.csv", system_name=system.label, timeout_s=timeout_s,
                                    progress=False, on_row=on_row)
                if spending is not None and workers > 1 and not spending.known(system.label):
                    run_items(workers=1, gate=spending.gate(system.label, limit=1))  # one task at a price not yet seen
                run_items(workers=workers, gate=None if spending is None else spending.gate(system.label))
                bar.update(len(items) - (bar.n - before))
    rows = _tidy(out_dir, task_set, labels, runs, read_results_df)
    report = None
    if spending is not None:
        report = BudgetReport(budget_usd, spending.spent_usd, spending.stopped,
                              int(rows["status"].eq(NOT_RUN).sum()), source)
    evaluation = Evaluation(rows, out_dir, tuple(labels), grading.name,
                            {label: d.get("model") for label, d in record["systems"].items()}, stats, report)
    write_table(rows, out_dir, "rows")
    write_table(evaluation.summary(), out_dir, "summary")
    if evaluation.can_pair():
        write_table(evaluation.paired_all(), out_dir, "paired")
    else:
        (out_dir / "paired.csv").unlink(missing_ok=True)  # an earlier call's table would pass for this one's
    _record_budget(out_dir, report)
    models = sorted({m for m in evaluation.models.values() if m})
    write_provenance(out_dir, parameters={"tasks": task_set.name, "source": task_set.source, "runs": runs,
                                          "systems": labels, "grader": grading.name, "budget_usd": budget_usd},
                     model=", ".join(models) or None,
                     extra={"systems": record["systems"], "budget": None if report is None else report.as_json()},
                     stats=stats)
    return evaluation


def _folder_costs(out: Path, read) -> list[tuple[str, float]]:
    """(system, cost) of every row in ``out``'s run files, whatever system or task set made it: the
    dollars the folder has spent. A row of unknown cost raises ``BudgetUnknownCostError``."""
    from ._budget import BudgetUnknownCostError

    costs, unknown = [], []
    for path in sorted(out.glob("run*.csv")):
        match = _RUN_FILE.fullmatch(path.name)
        if match is None:
            continue
        for row in read(path).to_dict(orient="records"):
            where = Path(safe_name(row["condition"])) / f"r{match.group(1)}" / f"{safe_name(row['item_id'])}.json"
            cost = _recorded_usage(out / "traces" / where, out / "usage" / where)["cost"]
            if cost is None:
                unknown.append(f"{row['condition']}, run {match.group(1)}, task {row['item_id']}")
            else:
                costs.append((row["condition"], float(cost)))
    if unknown:
        raise BudgetUnknownCostError(
            f"{out} holds {len(unknown)} row(s) of unknown cost (e.g. {unknown[0]}): the dollars spent so far are "
            "unknown, so no cap can be kept; rerun without a dollar cap, or in another out folder")
    return costs


def _record_budget(out: Path, report: BudgetReport | None) -> None:
    """The last call's cap and where it stopped, in evaluation.json (``budget``; gone without a cap)."""
    from roma_lab.results import read_json_file, write_text_atomic

    path = out / RECORD_FILE
    data = read_json_file(path)
    data.pop("budget", None)
    if report is not None:
        data["budget"] = report.as_json()
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _tidy(out: Path, tasks: TaskSet, labels: Sequence[str], runs: int, read) -> pd.DataFrame:
    import pandas as pd

    order = {it.item_id: i for i, it in enumerate(tasks.items)}
    gold = {it.item_id: str(it.answer) for it in tasks.items}
    frames = []
    for run in range(runs):
        table = read(out / f"run{run}.csv")
        table = table[table["condition"].isin(labels) & table["item_id"].isin(order)
                      & table["benchmark"].eq(tasks.name)].copy()
        table["run"] = run
        frames.append(table)
    rows = pd.concat(frames, ignore_index=True)
    # a (system, run, task) without a row never started: the dollar cap kept it back (without a cap,
    # run_benchmark leaves no item without a row)
    have = set(zip(rows["condition"], rows["run"], rows["item_id"], strict=True))
    missing = [(label, run, it.item_id) for label in labels for run in range(runs) for it in tasks.items
               if (label, run, it.item_id) not in have]
    if missing:
        rows = pd.concat([rows, pd.DataFrame({"condition": [m[0] for m in missing], "run": [m[1] for m in missing],
                                              "item_id": [m[2] for m in missing], "benchmark": tasks.name,
                                              "error_stage": NOT_RUN})], ignore_index=True)
    rank = {label: i for i, label in enumerate(labels)}
    rows = rows.iloc[sorted(range(len(rows)), key=lambda i: (rank[rows["condition"].iat[i]], rows["run"].iat[i],
                                                              order[rows["item_id"].iat[i]]))]
    records = []
    for row in rows.to_dict(orient="records"):
        if row["error_stage"] == NOT_RUN:  # no call made: nothing spent, nothing scored
            records.append({"condition": row["condition"], "run": row["run"], "benchmark": row["benchmark"],
                            "task_id": row["item_id"], "gold": gold[row["item_id"]], "prediction": None,
                            "status": NOT_RUN, "label": None, "score": None, "grader": None, "error": None,
                            "error_stage": None, "latency_s": None, "model_calls": 0, "input_tokens": 0,
                            "output_tokens": 0, "cost": 0.0, "trace": None})
            continue
        where = Path(safe_name(row["condition"])) / f"r{row['run']}" / f"{safe_name(row['item_id'])}.json"
        trace = out / "traces" / where
        records.append({
            "condition": row["condition"], "run": row["run"], "benchmark": row["benchmark"], "task_id": row["item_id"],
            "gold": gold[row["item_id"]], "prediction": row["prediction"], "status": _status(row),
            "label": row["label"], "score": row["score"], "grader": row["grader"], "error": row["error"],
            "error_stage": row["error_stage"], "latency_s": row["latency_s"],
            **_recorded_usage(trace, out / "usage" / where),
            "trace": str(trace.relative_to(out)) if trace.is_file() else None})
    return pd.DataFrame(records, columns=list(ROW_COLUMNS))
