"""ROMA paper Tables 7 and 8 (Appendix G): unoptimised vs GEPA vs GEPA+ on AIME 2025, HotpotQA and
PAPILLON, and the convergence of GEPA vs GEPA+ in metric calls.

Both functions build one :class:`SearchSettings` from their keywords, run the same ``compile``
search for the two methods (same data, budget, seed) and write tidy CSV tables into ``out_dir`` in
the results vocabulary (design/results_vocabulary.md): the method is the ``condition``, the
benchmark the ``subset``, the repeat the ``run``; summaries come from ``results.summarize`` and the
paper's figures (``paper_reported_gepa.csv``, each with its source sentence) stand beside ours only in
the ``*_vs_paper`` tables, through ``results.beside_paper``.

Cost is counted in metric calls of every kind: ``total_metric_calls`` = GEPA's own
(``gepa_metric_calls``, what its budget caps) + GEPA+'s verifier runs (``verifier_metric_calls``).
The total is the primary figure, also beside the paper's; GEPA's budget count stands beside it,
labelled, so GEPA+ is never credited for metric runs it made outside GEPA's budget.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import dspy

import roma_lab.lm
from roma_lab.evaluate import System
from roma_lab.optimizer import (BENCHMARKS, CONVERGENCE_COLUMNS, METHODS, GepaPlusConfig, OptimizationResult,
                                SearchSettings, Splits, Task, calls_to_converge, candidates_table, compile,
                                example_of, item_of, make_task, task_splits)
from roma_lab.papers.roma._tables import RomaTables
from roma_lab.stats import DEFAULT_STATS, StatsSettings

if TYPE_CHECKING:
    import pandas as pd

UNOPTIMISED = "unoptimised"
RATIO = "gepa+ / gepa"  # the condition of the GEPA+/GEPA ratios the paper quotes
NO_SEARCH = "no search"  # search_status of the unoptimised program
KEYS = ["condition", "subset", "run"]
ITEM_COLUMNS = [*KEYS, "task_id", "score", "error_stage", "error"]
CURVE_COLUMNS = [*KEYS, *CONVERGENCE_COLUMNS]
# Table 8's figures per search, averaged over repeats in table8_summary.
TABLE8_METRICS = ("seed_val_score", "best_val_score", "gain", "total_calls_to_converge", "gain_per_total_call",
                  "gepa_calls_to_converge", "gain_per_gepa_call", "total_metric_calls", "gepa_metric_calls",
                  "verifier_metric_calls", "judge_calls", "merge_calls")
_RATIO_METRICS = ("total_calls_to_converge", "gain_per_total_call", "gepa_calls_to_converge", "gain_per_gepa_call")
# Table 8 beside the paper: for each paper metric, the conditions it states it for, its unit, our
# figure (every metric run counted) and GEPA's budget count shown beside it as ours_gepa_budget_only.
_TABLE8_FIGURES = (
    ("calls_to_converge", METHODS, "count", "total_calls_to_converge", "gepa_calls_to_converge"),
    ("gain_per_call", (RATIO,), "ratio", "gain_per_total_call", "gain_per_gepa_call"),
)
_WHY_DIFFERS = MappingProxyType({
    "accuracy": "not the paper's setting (see setting): our model, sample sizes and metric-call budget; the paper "
                "averaged 5 runs with API models as proposers and judge",
    "calls_to_converge": "our metric-call budget and validation set are far smaller than the paper's; ours counts "
                         "every metric run, GEPA+'s verifier runs included",
    "gain_per_call": "a ratio of two small runs' gains per metric call (GEPA+'s verifier runs included)",
})
_WHY_UNDEFINED = MappingProxyType({
    "accuracy": "no test item was scored (every grade failed)",
    "calls_to_converge": "no validation score was recorded",
    "gain_per_call": "undefined: GEPA's gain per metric call is 0, so the ratio divides by 0",
})


def _paper_reported() -> pd.DataFrame:
    """The figures the ROMA paper states for Tables 7 and 8, each with the sentence it comes from."""
    from roma_lab.results import read_paper_reported

    with resources.as_file(resources.files(__package__).joinpath("paper_reported_gepa.csv")) as path:
        return read_paper_reported(path)


def _models(settings: SearchSettings) -> tuple[dspy.BaseLM, dspy.BaseLM, GepaPlusConfig]:
    """The task and judge models, resolved once (``max_tokens`` caps both), and GEPA+'s settings."""
    cap = {"max_tokens": settings.max_tokens} if settings.max_tokens else {}
    resolve = roma_lab.lm.resolve_lm
    task_lm, judge_lm = resolve(settings.lm, **cap), resolve(settings.judge_lm, **cap)
    return task_lm, judge_lm, settings.gepa_plus_config(judge_lm)


def _searches(task: Task, splits: Splits, settings: SearchSettings,
              config: GepaPlusConfig) -> Iterator[tuple[int, str, OptimizationResult]]:
    """Each run (repeat) searches with both methods on the same data and budget, with seed ``seed + run``."""
    for run in range(settings.repeats):
        for method in METHODS:
            yield run, method, compile(
                task.make_program(), trainset=splits.train, valset=splits.val, metric=task.metric, config=config,
                max_metric_calls=settings.max_metric_calls, method=method, seed=settings.seed + run,
                reflection_minibatch_size=min(3, len(splits.train)),
            )


def _tag(df: pd.DataFrame, **cols: Any) -> pd.DataFrame:
    return df.assign(**cols)[[*cols, *df.columns]]


def _search_status(statuses: Sequence[str]) -> str:
    """One label for a method's repeats: "completed" only if every search completed, else e.g.
    "proposals_failed in 1 of 2 repeat(s)"."""
    bad = Counter(s for s in statuses if s != "completed")
    if not bad:
        return "completed"
    return "; ".join(f"{status} in {n} of {len(statuses)} repeat(s)" for status, n in bad.items())


class _SearchLog:
    """Each search's totals, convergence curve, proposal records and candidates, under its keys."""

    def __init__(self, settings: SearchSettings):
        self.settings = settings
        self.runs: list[dict[str, Any]] = []
        self.curves: list[pd.DataFrame] = []
        self.records: list[pd.DataFrame] = []
        self.candidates: list[pd.DataFrame] = []

    def add(self, subset: str, method: str, run: int, result: OptimizationResult) -> None:
        keys = {"condition": method, "subset": subset, "run": run}
        self.runs.append(keys | {
            "search_seed": result.seed, "status": result.status, "status_detail": result.status_detail,
            "n_candidates": len(result.candidates), "seed_val_score": result.val_scores[0],
            "best_val_score": result.best_val_score, "total_metric_calls": result.total_metric_calls,
            "gepa_metric_calls": result.gepa_metric_calls, "verifier_metric_calls": result.verifier_metric_calls,
            "judge_calls": result.judge_calls, "verifier_runs": result.verifier_runs,
            "merge_calls": result.merge_calls, "proposal_rounds": result.proposal_rounds,
            "failed_proposal_rounds": result.failed_proposal_rounds,
        } | self.settings.as_row())
        self.curves.append(_tag(result.convergence_df(), **keys))
        self.records.append(_tag(result.records_df(), **keys))
        self.candidates.append(_tag(candidates_table(result), **keys))

    def tables(self, name: str) -> dict[str, pd.DataFrame]:
        import pandas as pd

        return {f"{name}_runs": pd.DataFrame(self.runs),
                f"{name}_curves": pd.concat(self.curves, ignore_index=True)[CURVE_COLUMNS],
                f"{name}_records": pd.concat(self.records, ignore_index=True),
                f"{name}_candidates": pd.concat(self.candidates, ignore_index=True)}

    def statuses(self) -> dict[tuple[str, str], str]:
        """(condition, subset) -> the search status of all its repeats."""
        by: dict[tuple[str, str], list[str]] = {}
        for row in self.runs:
            by.setdefault((row["condition"], row["subset"]), []).append(row["status"])
        return {key: _search_status(statuses) for key, statuses in by.items()}


def _annotate(summary: pd.DataFrame, statuses: dict[tuple[str, str], str], described: dict[str, str],
              model: str) -> pd.DataFrame:
    """Every summary row says what produced it (``setting``: benchmark, models, sizes, budget; ``model``:
    the task model) and whether its searches ever proposed anything (a search that did not returns
    the starting program)."""
    keys = list(zip(summary["condition"], summary["subset"], strict=True))
    return summary.assign(setting=summary["subset"].map(described),
                          search_status=[statuses.get(key, NO_SEARCH) for key in keys], model=model)


def _vs_paper(ours: pd.DataFrame, artefact: str) -> pd.DataFrame:
    """Every paper figure of ``artefact`` beside ours (``results.beside_paper``). A figure of a
    condition whose searches made no proposal measures the starting program: not comparable."""
    from roma_lab.results import beside_paper

    keys = list(zip(ours["condition"], ours["subset"], strict=True))
    status = dict(zip(keys, ours["search_status"], strict=True))

    def why_not_measured(row: dict[str, Any]) -> str:
        if (row["condition"], row["subset"]) in status:
            return _WHY_UNDEFINED[row["metric"]]
        return f"this run did not measure {row['subset']} with {row['condition']}"

    return beside_paper(
        ours.assign(comparable=ours["search_status"].isin(["completed", NO_SEARCH])), _paper_reported(), artefact,
        why=_WHY_DIFFERS, why_not_measured=why_not_measured,
        why_not_comparable=lambda row: (f"a search made no proposal ({status[row['condition'], row['subset']]}), "
                                        "so the figure is the starting program's"),
    )


@dataclass(frozen=True, slots=True)
class _Answer:
    """A program's prediction, with its answer text as the row's prediction."""

    prediction: Any

    @property
    def output(self) -> str:
        return str(getattr(self.prediction, "answer", self.prediction))


@dataclass(frozen=True, slots=True)
class _Program:
    """The program of each run (search repeat), called on an item's example."""

    programs: tuple[Any, ...]

    def __call__(self, item: Any, run: int, previous: Any = None) -> _Answer:
        return _Answer(self.programs[run](**example_of(item).inputs()))


@dataclass(frozen=True, slots=True)
class _TaskGrade:
    """The benchmark task's grade of a program's prediction (``Task.grade``: NaN when the grader failed)."""

    task: Task

    @property
    def name(self) -> str:
        return getattr(self.task.grader, "name", type(self.task.grader).__name__)

    def __call__(self, item: Any, answer: _Answer) -> Any:
        return self.task.grade(example_of(item), answer.prediction)


def _digest(program: Any) -> str:
    """A short hash of what a program says to its model (every predictor's instructions)."""
    import hashlib

    text = "\n".join(p.signature.instructions for p in program.predictors())
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class ProgramSystem(System):
    """One method's optimised programs as a ``roma_lab.evaluate`` system: run r is search repeat r's
    program (the unoptimised program has one run). Its record names every program by a hash of its
    instructions, so a rerun whose search found other programs is refused, never mixed in."""

    def __init__(self, label: str, programs: Sequence[Any]):
        self.label, self.programs = label, tuple(programs)

    def describe(self) -> dict[str, Any]:
        return {"kind": "dspy program", "programs": [_digest(p) for p in self.programs]}

    def bind(self, tasks: Any) -> _Program:
        return _Program(self.programs)


def held_out(task: Task, programs: Mapping[str, Sequence[Any]], test: Sequence[Any], out: Path,
             stats: StatsSettings = DEFAULT_STATS) -> pd.DataFrame:
    """Each method's programs (``programs``: label -> one per run) on the held-out ``test`` examples
    through ``roma_lab.evaluate`` (into ``out``), as ``ITEM_COLUMNS`` rows under the bench NaN policy:
    a program that raises scores 0 (``error_stage="system"``); a grader that fails gives NaN
    (``"grader"``), excluded from means and counted."""
    from roma_lab.evaluate import TaskSet, evaluate

    tasks = TaskSet(task.benchmark, tuple(item_of(task.benchmark, gold) for gold in test), source=task.setting)
    rows = []
    for label, runs in programs.items():  # one call per method: the methods differ in how many runs they have
        evaluation = evaluate([ProgramSystem(label, runs)], tasks, _TaskGrade(task), runs=len(runs), out=out,
                              progress=False, stats=stats)
        rows.append(evaluation.rows)
    import pandas as pd

    table = pd.concat(rows, ignore_index=True)
    stage = table["error_stage"].fillna("")
    return pd.DataFrame({"condition": table["condition"], "subset": task.benchmark, "run": table["run"],
                         "task_id": table["task_id"], "score": table["score"].astype(float).mask(stage.eq("system"), 0.0),
                         "error_stage": stage, "error": table["error"].fillna("")})[ITEM_COLUMNS]


def _error_counts(items: pd.DataFrame) -> pd.DataFrame:
    """Rows of system errors (a program that raised: scored 0) and grader errors (NaN, left out)."""
    import pandas as pd

    rows = [{"condition": condition, "subset": subset, "metric": f"{stage}_errors",
             "value": int((group["error_stage"] == stage).sum()), "n": len(group)}
            for (condition, subset), group in items.groupby(["condition", "subset"], sort=False)
            for stage in ("system", "grader")]
    return pd.DataFrame(rows)


def table7_gepa(
    out_dir,
    *,
    benchmarks: Sequence[str] = BENCHMARKS,
    n_test: int = 6,
    stats: StatsSettings = DEFAULT_STATS,
    **search: Any,
) -> RomaTables:
    """Table 7: held-out accuracy of the unoptimised program, GEPA and GEPA+ per benchmark.

    ``search`` are the :class:`SearchSettings` (models, sizes, budget, repeats, seed). For each
    benchmark the data split is fixed by ``seed``; each repeat runs both methods and scores the
    optimised program on the ``n_test`` test items. The unoptimised program has no search, so it is
    scored once (run 0). Scores are in [0, 1]; a grader error is NaN, left out and counted.

    Writes table7_items (one row per condition x subset x run x task), table7_summary (mean score
    with its task-bootstrap CI, error counts, ``setting`` and ``search_status``), table7_paired
    (GEPA+ - GEPA per benchmark: paired bootstrap CI and sign test), table7_vs_paper (percent),
    table7_runs (one row per search: status, cost with ``total_metric_calls`` first, settings),
    table7_curves, table7_records and table7_candidates (for the evolution widget). Returns them as
    :class:`RomaTables`; the statistics settings used (``stats``) go to the provenance.
    """
    import pandas as pd

    from roma_lab.results import compare, record_stats, summarize, write_table

    settings = SearchSettings(**search)
    _check_benchmarks(benchmarks)
    task_lm, judge_lm, config = _models(settings)
    items, described = [], {}
    log = _SearchLog(settings)
    with dspy.context(lm=task_lm):
        for benchmark in benchmarks:
            task = make_task(benchmark, judge_lm=judge_lm, external_lm=settings.external_lm)
            described[benchmark] = f"{task.setting}; {settings.describe()}; {n_test} test items"
            splits = task_splits(benchmark, n_train=settings.n_train, n_val=settings.n_val, n_test=n_test,
                                 seed=settings.seed)
            programs: dict[str, list[Any]] = {UNOPTIMISED: [task.make_program()]}
            for run, method, result in _searches(task, splits, settings, config):
                programs.setdefault(method, []).append(result.program)
                log.add(benchmark, method, run, result)
            items.append(held_out(task, programs, splits.test, Path(out_dir) / "table7_runs" / benchmark, stats))

    items_df = pd.concat(items, ignore_index=True)[ITEM_COLUMNS]
    scores = summarize(items_df, ["score"], stats=stats)
    model = roma_lab.lm.model_label(task_lm)
    summary = _annotate(pd.concat([scores, _error_counts(items_df)], ignore_index=True), log.statuses(), described,
                        model)
    # the paper calls the mean held-out score accuracy and states it in percent
    accuracy = summary[summary["metric"] == "score"].assign(metric="accuracy", unit="fraction")
    tables = {
        "table7_items": items_df,
        "table7_summary": summary,
        "table7_paired": compare(items_df, "gepa+", "gepa", "score", stats=stats).assign(model=model),
        "table7_vs_paper": _vs_paper(accuracy, "table7"),
        **log.tables("table7"),
    }
    tables["table7_runs"] = tables["table7_runs"].assign(model=model)
    for name, df in tables.items():
        write_table(df, out_dir, name)
    record_stats(out_dir, stats)
    return RomaTables(tables, Path(out_dir), stats)


def convergence_summary(curves: pd.DataFrame, *, tolerance: float = 0.0) -> pd.DataFrame:
    """Table 8 per search (condition, subset, run): metric calls to converge and gain per metric call.

    ``total_calls_to_converge`` (the primary figure): every metric run spent when the best validation
    score first came within ``tolerance`` of its final value, GEPA+'s verifier runs included.
    ``gain`` = final best minus the seed's validation score; ``gain_per_total_call`` = gain / that
    count. ``gepa_calls_to_converge`` and ``gain_per_gepa_call`` count GEPA's budget only (GEPA+'s
    verifier runs left out), for reference beside them.
    """
    import pandas as pd

    rows = []
    for (condition, subset, run), curve in curves.groupby(KEYS, sort=False):
        curve = curve.sort_values("total_metric_calls", kind="stable")
        total = calls_to_converge(curve, tolerance=tolerance)
        gepa = calls_to_converge(curve, tolerance=tolerance, calls="gepa_metric_calls")
        gain = float(curve["best_val_score"].iloc[-1] - curve["val_score"].iloc[0])
        rows.append({
            "condition": condition, "subset": subset, "run": run,
            "seed_val_score": float(curve["val_score"].iloc[0]),
            "best_val_score": float(curve["best_val_score"].iloc[-1]), "gain": gain,
            "total_calls_to_converge": total, "gain_per_total_call": gain / total,
            "gepa_calls_to_converge": gepa, "gain_per_gepa_call": gain / gepa,
        })
    return pd.DataFrame(rows)


def _ratio(numerator: float, denominator: float) -> float:
    # A ratio over 0 (GEPA gained nothing) is undefined, not 1 or infinite: NaN says so.
    return numerator / denominator if denominator != 0 else math.nan


def _ratios(summary: pd.DataFrame) -> pd.DataFrame:
    """The GEPA+/GEPA ratios the paper quotes, per benchmark (on total calls first, GEPA's budget
    count beside), as summary rows of the condition ``RATIO``."""
    import pandas as pd

    rows = []
    for subset, group in summary.groupby("subset", sort=False):
        value = group.set_index(["condition", "metric"])["value"]
        status = group.groupby("condition")["search_status"].first()
        if not set(METHODS) <= set(status.index):
            continue
        bad = [f"{m}: {status[m]}" for m in METHODS if status[m] != "completed"]
        rows += [{"condition": RATIO, "subset": subset, "metric": metric,
                  "value": _ratio(value["gepa+", metric], value["gepa", metric]),
                  "setting": group["setting"].iloc[0], "search_status": "; ".join(bad) or "completed",
                  "model": group["model"].iloc[0]}
                 for metric in _RATIO_METRICS]
    return pd.DataFrame(rows)


def _table8_vs_paper(summary: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 8 figures beside ours under the paper's names (``_TABLE8_FIGURES``: every
    metric run counted), with GEPA's budget count beside each as ``ours_gepa_budget_only``."""
    import pandas as pd

    keys = ["condition", "subset", "metric"]
    value = summary.set_index(keys)["value"]
    parts = []
    for metric, conditions, unit, primary, budget_only in _TABLE8_FIGURES:
        ours = summary[summary["condition"].isin(conditions) & (summary["metric"] == primary)]
        parts.append(ours.assign(metric=metric, unit=unit, budget_only=[
            value[c, s, budget_only] for c, s in zip(ours["condition"], ours["subset"], strict=True)]))
    ours = pd.concat(parts, ignore_index=True)
    table = _vs_paper(ours, "table8")
    beside = table.merge(ours[[*keys, "budget_only"]], how="left", on=keys)["budget_only"]
    table.insert(table.columns.get_loc("ours") + 1, "ours_gepa_budget_only", beside.to_numpy())
    return table


def table8_convergence(
    out_dir,
    *,
    benchmark: str = "aime2025",
    tolerance: float = 0.0,
    **search: Any,
) -> RomaTables:
    """Table 8: convergence of GEPA vs GEPA+ on one benchmark (the paper: AIME 2025).

    ``search`` are the :class:`SearchSettings`; both methods search with them (``max_metric_calls``
    caps GEPA's own count for both). Calls to converge count every metric run, GEPA+'s verifier
    runs included (``total_calls_to_converge``); GEPA's budget count stands beside it
    (``gepa_calls_to_converge``). Writes table8_curves (best validation score against metric calls),
    table8_runs (one row per search: convergence, status, call totals, settings), table8_summary
    (means over repeats, and the GEPA+/GEPA ratios as condition "gepa+ / gepa"), table8_vs_paper
    (the paper's figures beside our totals, ``ours_gepa_budget_only`` beside those), table8_records
    and table8_candidates; returns them as :class:`RomaTables` (no statistics: means over repeats).
    """
    import pandas as pd

    from roma_lab.results import summarize, write_table

    settings = SearchSettings(**search)
    _check_benchmarks([benchmark])
    task_lm, judge_lm, config = _models(settings)
    task = make_task(benchmark, judge_lm=judge_lm, external_lm=settings.external_lm)
    # Only the search is measured here, so the test sample is the smallest the splitter allows.
    splits = task_splits(benchmark, n_train=settings.n_train, n_val=settings.n_val, n_test=2, seed=settings.seed)
    log = _SearchLog(settings)
    with dspy.context(lm=task_lm):
        for run, method, result in _searches(task, splits, settings, config):
            log.add(benchmark, method, run, result)
    searched = log.tables("table8")
    # convergence per search, beside its status, call totals (all metric calls, GEPA's budget
    # count, GEPA+'s extra calls) and settings
    runs = convergence_summary(searched["table8_curves"], tolerance=tolerance).merge(
        searched["table8_runs"].drop(columns=["seed_val_score", "best_val_score"]), on=KEYS)
    means = summarize(runs, TABLE8_METRICS, task="run", ci=False)
    means = _annotate(means, log.statuses(), {benchmark: f"{task.setting}; {settings.describe()}"},
                      roma_lab.lm.model_label(task_lm))
    summary = pd.concat([means, _ratios(means)], ignore_index=True)
    tables = {
        "table8_curves": searched["table8_curves"],
        "table8_runs": runs,
        "table8_summary": summary,
        "table8_vs_paper": _table8_vs_paper(summary),
        "table8_records": searched["table8_records"],
        "table8_candidates": searched["table8_candidates"],
    }
    for name, df in tables.items():
        write_table(df, out_dir, name)
    return RomaTables(tables, Path(out_dir))


def plot_convergence(curves: pd.DataFrame, *, subset: str | None = None, ax=None):
    """Best validation score against all metric calls (GEPA's + GEPA+'s verifier runs), one step line
    per method and repeat; ``subset`` picks a benchmark."""
    import matplotlib.pyplot as plt

    if subset is not None:
        curves = curves[curves["subset"] == subset]
    if curves.empty:
        raise ValueError("no convergence rows to plot" + (f" for subset {subset!r}" if subset else ""))
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    colours = {"gepa": "tab:blue", "gepa+": "tab:orange"}
    for (method, run), curve in curves.groupby(["condition", "run"], sort=False):
        curve = curve.sort_values("total_metric_calls", kind="stable")
        ax.step(curve["total_metric_calls"], curve["best_val_score"], where="post", marker="o", alpha=0.8,
                color=colours.get(method), label=f"{method} (run {run})")
    ax.set_xlabel("metric calls (GEPA's + GEPA+ verifier runs)")
    ax.set_ylabel("best validation score")
    ax.set_title("Convergence" + (f": {subset}" if subset else ""))
    ax.legend(fontsize="small")
    if "model" in curves.columns:
        from roma_lab.results import label_if_not_measured

        label_if_not_measured(ax.figure, curves["model"])
    return ax.figure


def _check_benchmarks(benchmarks: Sequence[str]) -> None:
    unknown = [b for b in benchmarks if b not in BENCHMARKS]
    if unknown or not benchmarks:
        raise ValueError(f"benchmarks must be a non-empty subset of {BENCHMARKS}; got unknown {unknown or benchmarks}")
