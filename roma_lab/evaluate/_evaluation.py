"""The rows of an evaluation and every table made from them (the results vocabulary's): a paper's
table is a view of an :class:`Evaluation`, never a second loop over tasks."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roma_lab.results import MODEL
from roma_lab.stats import DEFAULT_STATS, StatsSettings

from ._budget import BudgetReport
from ._log import ROW_COLUMNS, read_log_df

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["NOT_RUN", "Evaluation", "tidy_rows"]

_METRIC = "score"
#: The status of a (system, task, run) that never started because the dollar cap was reached.
NOT_RUN = "not_run_budget"


#: Graders that read an answer whole (their names as ``Grader.name`` gives them), for ``length_warnings``.
_WHOLE_ANSWER_GRADERS = ("exact", "gaia", "quasi", "numeric")


@dataclass(frozen=True)
class Evaluation:
    """The rows of an evaluation and the tables made from them.

    ``rows``: one per (system, task, run), in system, run and task order (:data:`ROW_COLUMNS`).
    ``summary()``: mean score per system with the task-bootstrap CI (runs averaged per task first);
    ``paired(a, b)``: ``a - b`` paired on tasks (bootstrap CI, exact sign test, MDE); each names its
    systems' models (``models``) in the results vocabulary's ``model`` column; ``trace(...)``
    loads a row's saved trace; ``view(...)`` opens it in the viewer (a ROMA tree, an agent
    trajectory); ``side_by_side(task_id, a, b)`` two systems' traces for one task; ``facts()`` what the
    tables need of each row's trace. ``budget``: what a
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

    def length_warnings(self) -> list[str]:
        """One line per system whose answers are systematically longer than the golds (median words at
        least twice the golds' and above 3) under a grader that reads an answer whole: such a grader
        counts "The capital of France is Paris." wrong against "Paris", so a low score may be a form,
        not a fact, and the line says what to do."""
        import pandas as pd

        if not any(self.grader.startswith(g) for g in _WHOLE_ANSWER_GRADERS):
            return []
        answered = self.rows[self.rows["prediction"].notna() & self.rows["status"].ne(NOT_RUN)]
        words = answered["prediction"].astype(str).str.split().str.len()
        gold = pd.Series(answered["gold"].astype(str).str.split().str.len(), index=answered.index)
        said = []
        for system in self.systems:
            mine = answered["condition"].eq(system)
            if not mine.any():
                continue
            answer_words, gold_words = float(words[mine].median()), float(gold[mine].median())
            if answer_words > 3 and answer_words >= 2 * max(gold_words, 1):
                said.append(f"{system}: its answers are longer than the golds (median {answer_words:g} words vs "
                            f"{gold_words:g}); the {self.grader} grader reads an answer whole and counts a correct "
                            "sentence wrong: ask for short answers (the CLI's default --answer-form short) or "
                            "grade with --grader contains or judge")
        return said

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
        """Where the trace of that row is: the path its row records (a folder saved with the shorter
        hashed names of before issue 53 keeps them), else where it would be saved."""
        from roma_lab.trace import trace_path

        rows = self.rows
        named = rows.loc[rows["condition"].eq(system) & rows["task_id"].eq(str(task_id)) & rows["run"].eq(run)
                         & rows["trace"].notna(), "trace"]
        return self.out / named.iloc[0] if len(named) else trace_path(self.out, system, run, task_id)

    def trace(self, system: str, task_id: str, run: int = 0) -> Any:
        """The saved trace of one row: a ``roma_lab.trace.Run`` (ROMA, or a single call's one-node run)
        or an agent ``Trajectory``."""
        from roma_lab.trace import load_trace

        path = self.trace_path(system, task_id, run)
        if not path.is_file():
            raise FileNotFoundError(f"no trace saved for {system!r} on task {task_id!r}, run {run} ({path})")
        return load_trace(path, task_id)

    def facts(self) -> pd.DataFrame:
        """What tables need of each row's trace beyond the row (``Run.facts`` / ``Trajectory.facts``:
        an agent's steps, tool and repeated calls, rollouts; a run's nodes and depth), one row per row
        with a trace, keyed by ``condition``, ``run`` and ``task_id``: the one accessor of trace fields."""
        import pandas as pd

        from roma_lab.trace import load_trace

        kept = self.rows[self.rows["trace"].notna()]
        facts = [{"condition": c, "run": r, "task_id": t, **load_trace(self.out / path, t).facts()}
                 for c, r, t, path in zip(kept["condition"], kept["run"], kept["task_id"], kept["trace"], strict=True)]
        return pd.DataFrame(facts, columns=None if facts else ["condition", "run", "task_id"])

    def view(self, system: str, task_id: str, run: int = 0):
        """The viewer of one row's trace: a run's execution tree (a single call's has one node), an
        agent's trajectory."""
        from roma_lab.widgets import ExecutionTreeWidget, TrajectoryWidget

        trace = self.trace(system, task_id, run)
        return ExecutionTreeWidget(trace) if hasattr(trace, "nodes") else TrajectoryWidget(trace)

    def side_by_side(self, task_id: str | None, a: str, b: str, run: int = 0):
        """Two systems' traces for one task (None: the first task), side by side (``RunComparison``;
        an agent's trajectory as a run tree when the other is ROMA's)."""
        from roma_lab.widgets import RunComparison, TrajectoryComparison

        task_id = self.rows["task_id"].iloc[0] if task_id is None or task_id == "" else task_id

        traces = {name: self.trace(name, task_id, run) for name in (a, b)}
        if all(hasattr(t, "rollouts") for t in traces.values()):
            return TrajectoryComparison(traces)
        return RunComparison({name: t.as_run() if hasattr(t, "rollouts") else t for name, t in traces.items()})


def tidy_rows(out: Path, tasks: Any, labels: Sequence[str], runs: int, *, capped: bool) -> pd.DataFrame:
    """The rows of ``labels`` x ``runs`` x ``tasks`` from ``out``'s attempt log (the latest attempt of
    each), in system, run and task order. Under a dollar cap (``capped``) a (system, run, task) without
    a row never started (the cap kept it back) and is a ``not_run_budget`` row; without one every job
    got a row, so a missing row is one that did not read back: a ``LogFileError`` naming the log."""
    import pandas as pd

    from ._log import LogFileError

    from ._private import REDACTED

    order = {it.item_id: i for i, it in enumerate(tasks.items)}
    # a private benchmark's gold answer is never written, here as in its rows
    private = tasks.private  # a property that reads every task: once, not once per task
    gold = {it.item_id: REDACTED if it.benchmark in private else str(it.answer) for it in tasks.items}
    log = read_log_df(out / "attempts.csv")
    rows = log[log["condition"].isin(labels) & log["task_id"].isin(order) & log["benchmark"].eq(tasks.name)
               & log["run"].lt(runs)]
    have = set(zip(rows["condition"], rows["run"], rows["task_id"], strict=True))
    missing = [{"condition": label, "run": run, "benchmark": tasks.name, "task_id": it.item_id,
                "gold": gold[it.item_id], "status": NOT_RUN, "model_calls": 0, "input_tokens": 0, "output_tokens": 0,
                "cost": 0.0}  # no call made: nothing spent, nothing scored
               for label in labels for run in range(runs) for it in tasks.items if (label, run, it.item_id) not in have]
    if missing and not capped:
        first = missing[0]
        raise LogFileError(f"{out / 'attempts.csv'}: the rows of {len(missing)} attempt(s) do not read back (e.g. "
                           f"{first['condition']}, run {first['run']}, task {first['task_id']!r}); see the quarantine "
                           "file beside it, and rerun to attempt them again")
    if missing:
        rows = pd.concat([rows, pd.DataFrame(missing)], ignore_index=True)
    rows = rows.assign(gold=rows["task_id"].map(gold).astype(object))  # the task's, whatever an attempt recorded
    rank = {label: i for i, label in enumerate(labels)}
    rows = rows.assign(_order=[(rank[c], r, order[t]) for c, r, t in zip(rows["condition"], rows["run"],
                                                                         rows["task_id"], strict=True)])
    return rows.sort_values("_order", kind="stable").drop(columns="_order").reset_index(drop=True)[list(ROW_COLUMNS)]
