"""The router inside ROMA (issue 12 §2): the same benchmark items with ROMA's LM atomizer and with
`RouterAtomizer` (zero LM calls per atomizer decision), paired. `router_atomizer` builds the atomizer
from a router fitted on the suite: the robust one by default (issue 52 §8; the paper's, with a
warning, where MiniLM is not installed), `router="paper"` for the paper's.

Per item and condition: the graded answer (the benchmark's grader, string match without a judge),
and from the saved execution tree the role calls, the LM calls (every role call except the router's
own atomizer decisions), the tokens the LM reported and the run's wall time. Both conditions run
through `roma_lab.evaluate` (graded, resumable, a trace per item), and the table reads the traces.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ...lm import model_label, resolve_lm
from ...results import compare, record_stats, summarize, write_table
from ...router import DEFAULT_SEED
from ...stats import DEFAULT_STATS, StatsSettings
from ._robust import resolve_router
from ._tables import RouterStudy, RoutingTables

CONDITIONS: tuple[str, ...] = ("lm_atomizer", "router_atomizer")
RUN_METRICS: tuple[str, ...] = ("score", "role_calls", "lm_calls", "atomizer_lm_calls", "tokens", "wall_s",
                                "root_atomic")


def run_figures(run, condition: str) -> dict:
    """Role calls, LM calls, tokens and wall time of one saved run."""
    calls = run.calls_df()
    atomizer = int((calls["component"] == "atomizer").sum())
    lm_calls = len(calls) - (atomizer if condition == "router_atomizer" else 0)
    tokens = calls["input_tokens"].sum(skipna=False) + calls["output_tokens"].sum(skipna=False)
    return {"role_calls": len(calls), "lm_calls": lm_calls,
            "atomizer_lm_calls": 0 if condition == "router_atomizer" else atomizer,
            "tokens": float("nan") if pd.isna(tokens) else float(tokens), "wall_s": run.wall_s,
            "root_atomic": float(bool(run.root.is_atomic))}


def router_atomizer(router: str | None = None, *, suite_seed: int = DEFAULT_SEED):
    """`RouterAtomizer` over the router `RouterStudy.build(router=...)` fits on the suite: by default
    (None) the robust one, else the paper's with a warning naming the encoder's package."""
    from ...controller import RouterAtomizer

    return RouterAtomizer(RouterStudy.build(suite_seed=suite_seed, router=resolve_router(router)).model)


def compare_atomizers(out_dir: str | Path, model=None, *, router: str | None = None, benchmark: str = "simpleqa",
                      lm: Any = "local", n_items: int = 3, seed: int = 0, max_depth: int = 1,
                      stats: StatsSettings = DEFAULT_STATS, progress: bool = False) -> RoutingTables:
    """ROMA on `n_items` seeded items of `benchmark`, once with its LM atomizer and once with
    `RouterAtomizer(model)` (every other role the same, on the same `lm`), one call at a time. Without
    `model`, the router is `router_atomizer(router)`'s: the robust one unless `router="paper"`.

    Writes `atomizer_runs/` (the `roma_lab.evaluate` folder: graded rows, resumable, a trace per item),
    `atomizer_results.csv` (its rows), `atomizer_runs.csv` (tidy: item x condition with score, role and LM
    calls, tokens, wall time), `atomizer_summary.csv` (means with task-bootstrap CIs) and
    `atomizer_paired.csv` (router minus LM atomizer, paired CI and exact sign test, under `stats`);
    returns them as `RoutingTables`. `seed` draws the items. The runs' `router` column names the
    router ("paper", "robust", or "given" for a `model` passed in)."""
    from ... import bench
    from ...controller import RouterAtomizer
    from ...evaluate import TaskSet, evaluate, roma
    from ...trace import load_trace

    if n_items < 1 or max_depth < 0:
        raise ValueError(f"need n_items >= 1 and max_depth >= 0, got {n_items}, {max_depth}")
    if model is not None and router is not None:
        raise ValueError("pass a fitted model or the name of a router to fit, not both")
    if model is None:
        study = RouterStudy.build(router=resolve_router(router))
        model, router = study.model, study.router
    spec = bench.BENCHMARKS[benchmark]
    items = bench.sample(spec.load(), n_items, seed)
    grader = bench.grader_for(benchmark)
    engine = resolve_lm(lm)
    out = Path(out_dir)
    systems = [roma(engine, label=condition, max_depth=max_depth, max_concurrency=1,
                    roles={} if condition == "lm_atomizer" else {"atomizer": RouterAtomizer(model)})
               for condition in CONDITIONS]
    evaluation = evaluate(systems, TaskSet(benchmark, tuple(items), grader=grader, source=f"benchmark:{benchmark}"),
                          grader, out=out / "atomizer_runs", progress=progress, stats=stats)
    results = evaluation.rows
    rows = []
    for r in results.itertuples(index=False):
        figures = run_figures(load_trace(evaluation.out / r.trace), r.condition) if r.trace else {}
        # a system that failed to answer scores 0 (results vocabulary); only a failed grader leaves NaN
        score = 0.0 if r.error_stage == "system" else r.score
        rows.append({"condition": r.condition, "subset": benchmark, "task_id": r.task_id, "score": score,
                     "error": r.error, **figures})
    runs = pd.DataFrame(rows).reindex(columns=["condition", "subset", "task_id", "error", *RUN_METRICS]).assign(
        router=router or "given", model=model_label(engine))  # summarize and compare carry the model to their rows
    summary = summarize(runs, list(RUN_METRICS), ci=list(RUN_METRICS), run=None, stats=stats)
    paired = pd.concat([compare(runs, "router_atomizer", "lm_atomizer", m, stats=stats)
                        for m in RUN_METRICS if m != "root_atomic"], ignore_index=True)
    tables = {"atomizer_results": results, "atomizer_runs": runs, "atomizer_summary": summary,
              "atomizer_paired": paired}
    for name, df in tables.items():
        write_table(df, out, name)
    record_stats(out, stats)
    return RoutingTables(tables, out, stats)
