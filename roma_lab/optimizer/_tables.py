"""ROMA paper Tables 7 and 8 (Appendix G): unoptimised vs GEPA vs GEPA+ on AIME 2025, HotpotQA and
PAPILLON, and the convergence of GEPA vs GEPA+ in metric calls.

Both functions run the same ``compile`` search for the two methods (same data, budget, seed) and
write tidy CSV tables into ``out_dir``. Measured tables never hold paper figures; those are read
from ``paper_reported.csv`` (each with its source line) into separate ``*_vs_paper`` tables.

Cost is counted in metric calls of every kind: ``total_metric_calls`` = GEPA's own
(``gepa_metric_calls``, what its budget caps) + GEPA+'s verifier runs (``verifier_metric_calls``).
The total is the primary figure, also beside the paper's; GEPA's budget count stands beside it,
labelled, so GEPA+ is never credited for metric runs it made outside GEPA's budget.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from importlib import resources
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import dspy

from roma_lab.optimizer._compile import METHODS, OptimizationResult, compile
from roma_lab.optimizer._config import GepaPlusConfig
from roma_lab.optimizer._records import CONVERGENCE_COLUMNS, calls_to_converge
from roma_lab.optimizer._tasks import BENCHMARKS, Splits, Task, as_lm, evaluate_program, make_task, task_splits

if TYPE_CHECKING:
    import pandas as pd

UNOPTIMISED = "unoptimised"
ITEM_COLUMNS = ["benchmark", "method", "repeat", "item_id", "score", "error_stage", "error"]
CURVE_COLUMNS = ["benchmark", "method", "repeat", *CONVERGENCE_COLUMNS]
NO_SEARCH = "no search"  # search_status of the unoptimised program

# Which of our columns each paper metric is compared with (primary), and the GEPA-budget-only
# figure shown beside it, labelled ``ours_gepa_budget_only``.
COMPARED = MappingProxyType({
    "accuracy": ("accuracy", None),
    "calls_to_converge": ("total_calls_to_converge", "gepa_calls_to_converge"),
    "gain_per_call": ("gain_per_total_call", "gain_per_gepa_call"),
})
# "matches" when ours is within 1% of the paper's figure: |ours - paper| <= TOLERANCE * |paper|.
TOLERANCE = 0.01
_WHY_DIFFERS = MappingProxyType({
    "accuracy": "not the paper's setting: our model, sample sizes and metric-call budget (table7_summary: model, "
                "n_items, repeats; table7_runs: budgets); the paper averaged 5 runs with API models as proposers "
                "and judge",
    "calls_to_converge": "our metric-call budget and validation set are far smaller than the paper's; ours counts "
                         "every metric run, GEPA+'s verifier runs included",
    "gain_per_call": "a ratio of two small runs' gains per metric call (GEPA+'s verifier runs included)",
})
_WHY_UNDEFINED = MappingProxyType({
    "accuracy": "no test item was scored (every grade failed)",
    "calls_to_converge": "no validation score was recorded",
    "gain_per_call": "undefined: GEPA's gain per metric call is 0, so the ratio divides by 0",
})


def paper_reported_df() -> pd.DataFrame:
    """The figures the ROMA paper states for Tables 7 and 8, each with the sentence it comes from."""
    import pandas as pd

    with resources.files(__package__).joinpath("paper_reported.csv").open() as f:
        return pd.read_csv(f)


def gepa_plus_config(reflection_lms: Sequence[Any], reflection_temperatures: Sequence[float], *, judge_lm: Any,
                     merger_lm: Any = None, k: int = 3, n: int = 2, **kwargs: Any) -> GepaPlusConfig:
    """GEPA+ settings from notebook parameters: proposer i is (reflection_lms[i], reflection_temperatures[i]);
    the merger defaults to the first reflection model. Plain GEPA uses the first pair only."""
    models, temperatures = list(reflection_lms), list(reflection_temperatures)
    if not models or len(models) != len(temperatures):
        raise ValueError(f"reflection_lms and reflection_temperatures must be non-empty and of equal length, got "
                         f"{len(models)} model(s) and {len(temperatures)} temperature(s)")
    proposers = tuple(zip(models, temperatures, strict=True))
    return GepaPlusConfig(proposers=proposers, k=k, n=n, judge=judge_lm,
                          merger=merger_lm if merger_lm is not None else models[0], **kwargs)


def _optimise(task: Task, splits: Splits, config: GepaPlusConfig, method: str, *, max_metric_calls: int,
              seed: int) -> OptimizationResult:
    return compile(
        task.make_program(), trainset=splits.train, valset=splits.val, metric=task.metric, config=config,
        max_metric_calls=max_metric_calls, method=method, seed=seed,
        reflection_minibatch_size=min(3, len(splits.train)),
    )


def _tag(df: pd.DataFrame, **cols: Any) -> pd.DataFrame:
    return df.assign(**cols)[[*cols, *df.columns]]


def _run_row(benchmark: str, method: str, repeat: int, result: OptimizationResult) -> dict[str, Any]:
    return {
        "benchmark": benchmark, "method": method, "repeat": repeat, "seed": result.seed, "status": result.status,
        "status_detail": result.status_detail, "n_candidates": len(result.candidates),
        "seed_val_score": result.val_scores[0], "best_val_score": result.best_val_score,
        "total_metric_calls": result.total_metric_calls, "gepa_metric_calls": result.gepa_metric_calls,
        "max_metric_calls": result.max_metric_calls, "verifier_metric_calls": result.verifier_metric_calls,
        "judge_calls": result.judge_calls, "verifier_runs": result.verifier_runs, "merge_calls": result.merge_calls,
        "proposal_rounds": result.proposal_rounds, "failed_proposal_rounds": result.failed_proposal_rounds,
    }


def _search_status(statuses: Sequence[str]) -> str:
    """One label for a method's repeats: "completed" only if every search completed, else e.g.
    "proposals_failed in 1 of 2 repeat(s)"."""
    bad = Counter(s for s in statuses if s != "completed")
    if not bad:
        return "completed"
    return "; ".join(f"{status} in {n} of {len(statuses)} repeat(s)" for status, n in bad.items())


def candidates_table(result: OptimizationResult) -> pd.DataFrame:
    """Candidates in long format with parents as text ("0", "1;3" for a crossover, "" for the seed)."""
    df = result.candidates_df()
    df["parents"] = df["parents"].map(lambda ps: ";".join(str(p) for p in ps if p is not None))
    return df


def _search_log() -> dict[str, list]:
    return {"runs": [], "curves": [], "records": [], "candidates": []}


def _log_search(log: dict[str, list], benchmark: str, method: str, repeat: int, result) -> None:
    """File one search's totals, convergence curve, proposal records and candidates under its tags."""
    tags = {"benchmark": benchmark, "method": method, "repeat": repeat}
    log["runs"].append(_run_row(benchmark, method, repeat, result))
    log["curves"].append(_tag(result.convergence_df(), **tags))
    log["records"].append(_tag(result.records_df(), **tags))
    log["candidates"].append(_tag(candidates_table(result), **tags))


def _summary(items: pd.DataFrame, *, n_resamples: int, seed: int) -> pd.DataFrame:
    """Mean and task-bootstrap CI per (benchmark, method): repeats averaged per item, items resampled.

    Grader errors (NaN) are excluded and counted; fewer than two scored items gives no CI.
    """
    import pandas as pd

    from roma_lab.stats import bootstrap_ci

    rows = []
    for (benchmark, method), group in items.groupby(["benchmark", "method"], sort=False):
        # mean() skips NaN, so an item is NaN (and dropped) only if every repeat failed grading.
        per_item = group.groupby("item_id", sort=False)["score"].mean().dropna()
        row = {
            "benchmark": benchmark, "method": method, "n_items": group["item_id"].nunique(),
            "n_scored_items": len(per_item), "repeats": group["repeat"].nunique(),
            "n_system_errors": int((group["error_stage"] == "system").sum()),
            "n_grader_errors": int((group["error_stage"] == "grader").sum()),
            "mean": float(per_item.mean()) if len(per_item) else math.nan,
            "ci_low": math.nan, "ci_high": math.nan, "ci_method": "",
        }
        if len(per_item) >= 2:
            ci = bootstrap_ci(per_item.to_numpy(), n_resamples=n_resamples, seed=seed)
            row.update(ci_low=ci.low, ci_high=ci.high,
                       ci_method=f"task bootstrap {ci.method}, {ci.level:.0%}, {ci.n_resamples} resamples")
        else:
            row["ci_method"] = "no CI: fewer than 2 scored items"
        rows.append(row)
    return pd.DataFrame(rows)


def _agreement(paper: float, ours: float) -> str:
    return "matches" if abs(ours - paper) <= TOLERANCE * abs(paper) else "differs"


def _vs_paper(ours: pd.DataFrame, artefact: str) -> pd.DataFrame:
    """Every paper figure of ``artefact`` beside our primary figure for it (``COMPARED``), with the
    GEPA-budget-only figure beside that, and a verdict: ``matches`` / ``differs`` (with why), ``not
    measured`` (why: benchmark not run, no such column, undefined value) or ``not comparable`` (a
    search made no proposal, so its figure measures the starting program)."""
    import pandas as pd

    paper = paper_reported_df().query("artefact == @artefact")
    rows = []
    for _, p in paper.iterrows():
        column, beside = COMPARED[p["metric"]]
        match = ours[(ours["benchmark"] == p["benchmark"]) & (ours["method"] == p["method"])]
        row = match.iloc[0] if len(match) else pd.Series(dtype=object)
        value = float(row[column]) if column in row else math.nan
        if row.empty:
            agreement, why = "not measured", f"this run did not measure {p['benchmark']} with {p['method']}"
        elif column not in row:
            agreement, why = "not measured", f"the measured table has no {column!r} column"
        elif row.get("search_status", "completed") != "completed":
            agreement, why = "not comparable", f"a search made no proposal ({row['search_status']})"
        elif math.isnan(value):
            agreement, why = "not measured", _WHY_UNDEFINED[p["metric"]]
        else:
            agreement = _agreement(p["value"], value)
            why = "" if agreement == "matches" else _WHY_DIFFERS[p["metric"]]
        rows.append({
            "benchmark": p["benchmark"], "method": p["method"], "metric": p["metric"], "unit": p["unit"],
            "paper": p["value"], "ours_metric": column, "ours": value,
            "ours_ci_low": float(row["ci_low"]) if "ci_low" in row else math.nan,
            "ours_ci_high": float(row["ci_high"]) if "ci_high" in row else math.nan,
            "ours_gepa_budget_only": float(row[beside]) if beside is not None and beside in row else math.nan,
            "difference": value - p["value"], "agreement": agreement, "why": why, "paper_source": p["source"],
        })
    return pd.DataFrame(rows, columns=["benchmark", "method", "metric", "unit", "paper", "ours_metric", "ours",
                                       "ours_ci_low", "ours_ci_high", "ours_gepa_budget_only", "difference",
                                       "agreement", "why", "paper_source"])


def run_table7(
    out_dir,
    *,
    benchmarks: Sequence[str] = BENCHMARKS,
    lm: Any = "local",
    reflection_lms: Sequence[Any] = ("local",),
    reflection_temperatures: Sequence[float] = (1.0,),
    judge_lm: Any = "local",
    merger_lm: Any = None,
    external_lm: str | None = None,
    max_tokens: int | None = None,
    n_train: int = 4,
    n_val: int = 3,
    n_test: int = 6,
    repeats: int = 1,
    max_metric_calls: int = 16,
    k: int = 3,
    n: int = 2,
    seed: int = 0,
    n_resamples: int = 2000,
) -> dict[str, pd.DataFrame]:
    """Table 7: held-out accuracy of the unoptimised program, GEPA and GEPA+ per benchmark.

    For each benchmark the data split is fixed by ``seed``; repeat r runs both methods with search
    seed ``seed + r`` and the same budget, and scores the optimised program on the test sample.
    The unoptimised program has no search, so it is scored once (repeat 0). ``lm`` runs the
    programs; ``reflection_lms`` with ``reflection_temperatures`` are the proposers (plain GEPA uses the first);
    ``judge_lm`` is the GEPA+ judge and PAPILLON's quality/leakage judge; ``max_tokens`` caps the
    task and judge models' outputs (names only; LM objects are used as given). Scores are in [0, 1].

    Writes table7_items (one row per benchmark x method x repeat x item), table7_summary (with each
    method's ``search_status``), table7_vs_paper (percent), table7_runs (one row per search: its status
    and cost, ``total_metric_calls`` first), table7_curves, table7_records and table7_candidates (for
    the evolution widget). Returns them by name.
    """
    import pandas as pd

    from roma_lab.results import write_table

    _check_common(benchmarks, repeats)
    task_lm, judge_lm = _task_and_judge(lm, judge_lm, max_tokens)
    config = gepa_plus_config(reflection_lms, reflection_temperatures, judge_lm=judge_lm, merger_lm=merger_lm, k=k, n=n)
    items, settings = [], {}
    log = _search_log()
    with dspy.context(lm=task_lm):
        for benchmark in benchmarks:
            task = make_task(benchmark, judge_lm=judge_lm, external_lm=external_lm)
            settings[benchmark] = task.setting
            splits = task_splits(benchmark, n_train=n_train, n_val=n_val, n_test=n_test, seed=seed)
            items += [{"benchmark": benchmark, "method": UNOPTIMISED, "repeat": 0, **row}
                      for row in evaluate_program(task, task.make_program(), splits.test)]
            for repeat in range(repeats):
                for method in METHODS:
                    result = _optimise(task, splits, config, method, max_metric_calls=max_metric_calls,
                                       seed=seed + repeat)
                    items += [{"benchmark": benchmark, "method": method, "repeat": repeat, **row}
                              for row in evaluate_program(task, result.program, splits.test)]
                    _log_search(log, benchmark, method, repeat, result)

    items_df = pd.DataFrame(items, columns=ITEM_COLUMNS)
    runs = pd.DataFrame(log["runs"])
    summary = _summary(items_df, n_resamples=n_resamples, seed=seed)
    # every measured row says what produced it: model, judge, benchmark setting (e.g. closed-book) and
    # whether its searches ever proposed anything (a search that did not returns the starting program)
    summary["model"] = str(getattr(task_lm, "model", task_lm))
    summary["judge"] = str(getattr(judge_lm, "model", judge_lm))
    summary["setting"] = summary["benchmark"].map(settings)
    statuses = runs.groupby(["benchmark", "method"])["status"].agg(_search_status)
    summary["search_status"] = [statuses.get((b, m), NO_SEARCH) for b, m in zip(summary["benchmark"],
                                                                                  summary["method"], strict=True)]
    percent = summary.assign(**{c: summary[c] * 100 for c in ("mean", "ci_low", "ci_high")})
    tables = {
        "table7_items": items_df,
        "table7_summary": summary,
        "table7_vs_paper": _vs_paper(percent.rename(columns={"mean": "accuracy"}), "table7"),
        "table7_runs": runs,
        "table7_curves": pd.concat(log["curves"], ignore_index=True)[CURVE_COLUMNS],
        "table7_records": pd.concat(log["records"], ignore_index=True),
        "table7_candidates": pd.concat(log["candidates"], ignore_index=True),
    }
    for name, df in tables.items():
        write_table(df, out_dir, name)
    return tables


def convergence_summary(curves: pd.DataFrame, *, tolerance: float = 0.0) -> pd.DataFrame:
    """Table 8 per (benchmark, method, repeat): metric calls to converge and gain per metric call.

    ``total_calls_to_converge`` (the primary figure): every metric run spent when the best validation
    score first came within ``tolerance`` of its final value, GEPA+'s verifier runs included.
    ``gain`` = final best minus the seed's validation score; ``gain_per_total_call`` = gain / that
    count. ``gepa_calls_to_converge`` and ``gain_per_gepa_call`` count GEPA's budget only (GEPA+'s
    verifier runs left out), for reference beside them.
    """
    import pandas as pd

    rows = []
    for (benchmark, method, repeat), curve in curves.groupby(["benchmark", "method", "repeat"], sort=False):
        curve = curve.sort_values("total_metric_calls", kind="stable")
        total = calls_to_converge(curve, tolerance=tolerance)
        gepa = calls_to_converge(curve, tolerance=tolerance, calls="gepa_metric_calls")
        gain = float(curve["best_val_score"].iloc[-1] - curve["val_score"].iloc[0])
        rows.append({
            "benchmark": benchmark, "method": method, "repeat": repeat,
            "seed_val_score": float(curve["val_score"].iloc[0]),
            "best_val_score": float(curve["best_val_score"].iloc[-1]), "gain": gain,
            "total_calls_to_converge": total, "gain_per_total_call": gain / total,
            "gepa_calls_to_converge": gepa, "gain_per_gepa_call": gain / gepa,
        })
    return pd.DataFrame(rows)


def _ratio(numerator: float, denominator: float) -> float:
    # A ratio over 0 (GEPA gained nothing) is undefined, not 1 or infinite: NaN says so.
    return numerator / denominator if denominator != 0 else math.nan


def _table8_means(per_repeat: pd.DataFrame) -> pd.DataFrame:
    """Mean over repeats per (benchmark, method), each method's search status, plus the GEPA+/GEPA
    ratios the paper quotes (on total calls first, GEPA's budget count beside)."""
    import pandas as pd

    cols = ["seed_val_score", "best_val_score", "gain", "total_calls_to_converge", "gain_per_total_call",
            "gepa_calls_to_converge", "gain_per_gepa_call", "total_metric_calls", "gepa_metric_calls",
            "verifier_metric_calls", "judge_calls", "merge_calls"]
    groups = per_repeat.groupby(["benchmark", "method"], sort=False)
    means = groups[cols].mean().reset_index()
    means.insert(2, "repeats", groups.size().to_numpy())
    means.insert(3, "search_status", groups["status"].agg(_search_status).to_numpy())
    ratios = []
    for benchmark, group in means.groupby("benchmark", sort=False):
        by = group.set_index("method")
        if {"gepa", "gepa+"} <= set(by.index):
            plus, base = by.loc["gepa+"], by.loc["gepa"]
            bad = [f"{m}: {by.loc[m, 'search_status']}" for m in METHODS if by.loc[m, "search_status"] != "completed"]
            ratios.append({
                "benchmark": benchmark, "method": "gepa+ / gepa", "search_status": "; ".join(bad) or "completed",
                **{c: _ratio(plus[c], base[c]) for c in ("total_calls_to_converge", "gain_per_total_call",
                                                         "gepa_calls_to_converge", "gain_per_gepa_call")},
            })
    return pd.concat([means, pd.DataFrame(ratios)], ignore_index=True)


def run_table8(
    out_dir,
    *,
    benchmark: str = "aime2025",
    lm: Any = "local",
    reflection_lms: Sequence[Any] = ("local",),
    reflection_temperatures: Sequence[float] = (1.0,),
    judge_lm: Any = "local",
    merger_lm: Any = None,
    external_lm: str | None = None,
    max_tokens: int | None = None,
    n_train: int = 4,
    n_val: int = 3,
    repeats: int = 1,
    max_metric_calls: int = 24,
    k: int = 3,
    n: int = 2,
    seed: int = 0,
    tolerance: float = 0.0,
) -> dict[str, pd.DataFrame]:
    """Table 8: convergence of GEPA vs GEPA+ on one benchmark (the paper: AIME 2025).

    Same search settings for both methods (``max_metric_calls`` caps GEPA's own count for both);
    repeat r uses search seed ``seed + r``. Calls to converge count every metric run, GEPA+'s
    verifier runs included (``total_calls_to_converge``); GEPA's budget count stands beside it
    (``gepa_calls_to_converge``). Writes table8_curves (best validation score against metric calls),
    table8_runs (one row per method x repeat: convergence, search status and call totals),
    table8_summary (means over repeats and GEPA+/GEPA ratios), table8_vs_paper (the paper's figures
    beside our totals), table8_records and table8_candidates.
    """
    import pandas as pd

    from roma_lab.results import write_table

    _check_common([benchmark], repeats)
    task_lm, judge_lm = _task_and_judge(lm, judge_lm, max_tokens)
    config = gepa_plus_config(reflection_lms, reflection_temperatures, judge_lm=judge_lm, merger_lm=merger_lm, k=k, n=n)
    task = make_task(benchmark, judge_lm=judge_lm, external_lm=external_lm)
    # Only the search is measured here, so the test sample is the smallest the splitter allows.
    splits = task_splits(benchmark, n_train=n_train, n_val=n_val, n_test=2, seed=seed)
    log = _search_log()
    with dspy.context(lm=task_lm):
        for repeat in range(repeats):
            for method in METHODS:
                result = _optimise(task, splits, config, method, max_metric_calls=max_metric_calls, seed=seed + repeat)
                _log_search(log, benchmark, method, repeat, result)
    curves_df = pd.concat(log["curves"], ignore_index=True)[CURVE_COLUMNS]
    # Search status and totals (all metric calls, GEPA's budget count, GEPA+'s extra calls) beside convergence.
    totals = pd.DataFrame(log["runs"])[["benchmark", "method", "repeat", "status", "status_detail",
                                        "total_metric_calls", "gepa_metric_calls", "verifier_metric_calls",
                                        "judge_calls", "verifier_runs", "merge_calls", "proposal_rounds",
                                        "failed_proposal_rounds"]]
    per_repeat = convergence_summary(curves_df, tolerance=tolerance).merge(totals, on=["benchmark", "method", "repeat"])
    summary = _table8_means(per_repeat)
    tables = {
        "table8_curves": curves_df,
        "table8_runs": per_repeat,
        "table8_summary": summary,
        "table8_vs_paper": _vs_paper(summary, "table8"),
        "table8_records": pd.concat(log["records"], ignore_index=True),
        "table8_candidates": pd.concat(log["candidates"], ignore_index=True),
    }
    for name, df in tables.items():
        write_table(df, out_dir, name)
    return tables


def plot_convergence(curves: pd.DataFrame, *, benchmark: str | None = None, ax=None):
    """Best validation score against all metric calls (GEPA's + GEPA+'s verifier runs), one step line
    per method and repeat."""
    import matplotlib.pyplot as plt

    if benchmark is not None:
        curves = curves[curves["benchmark"] == benchmark]
    if curves.empty:
        raise ValueError("no convergence rows to plot" + (f" for benchmark {benchmark!r}" if benchmark else ""))
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    colours = {"gepa": "tab:blue", "gepa+": "tab:orange"}
    for (method, repeat), curve in curves.groupby(["method", "repeat"], sort=False):
        curve = curve.sort_values("total_metric_calls", kind="stable")
        ax.step(curve["total_metric_calls"], curve["best_val_score"], where="post", marker="o", alpha=0.8,
                color=colours.get(method), label=f"{method} (repeat {repeat})")
    ax.set_xlabel("metric calls (GEPA's + GEPA+ verifier runs)")
    ax.set_ylabel("best validation score")
    ax.set_title("Convergence" + (f": {benchmark}" if benchmark else ""))
    ax.legend(fontsize="small")
    return ax.figure


def _task_and_judge(lm: Any, judge_lm: Any, max_tokens: int | None) -> tuple[dspy.BaseLM, dspy.BaseLM]:
    """The task and judge models, resolved once; ``max_tokens`` caps both (reflection and merge
    models keep their default, since a cut-off instruction would be a broken proposal)."""
    cap = {"max_tokens": max_tokens} if max_tokens else {}
    return as_lm(lm, **cap), as_lm(judge_lm, **cap)


def _check_common(benchmarks: Sequence[str], repeats: int) -> None:
    unknown = [b for b in benchmarks if b not in BENCHMARKS]
    if unknown or not benchmarks:
        raise ValueError(f"benchmarks must be a non-empty subset of {BENCHMARKS}; got unknown {unknown or benchmarks}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
