"""Run policies over tasks: tidy per-task scores, summarised in the results vocabulary.

`evaluate` gives one row per task x policy (the policy in `condition`, the split in `subset`);
`summarize_routes` is `roma_lab.results.summarize` over those scores plus what only the router
knows how to compute from them (micro route quality, failure counts by status: `count_failures`),
as tidy rows;
`sweep_threshold` scores one fitted model at every tau of a grid without refitting.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import pandas as pd

from ..results import summarize
from ..stats import DEFAULT_STATS, StatsSettings
from ._benchmark import labels_matrix
from ._execute import INCORRECT, NO_ANSWER, UNAVAILABLE, execute
from ._model import TAU_GRID, route_matrix, route_quality, routes_at
from ._ops import BUDGET, MAX_SUPPORT_OPS, is_feasible, route_cost

#: Columns of the tidy per-task table (one row per task x policy).
TASK_COLUMNS = ("subset", "condition", "task_id", "workload", "family", "kind", "route", "labels", "status",
                "success", "answer", "cost", "executed_cost", "budget_compliant", "exact_route", "latency_ms")
#: Per-task columns summarised as means; success also gets a task-bootstrap CI.
MEAN_METRICS = ("success", "cost", "latency_ms", "budget_compliant", "exact_route")
_FAILURES = {"incorrect": INCORRECT, "no_answer": NO_ANSWER, "unavailable": UNAVAILABLE}


def evaluate(policies: Sequence, tasks: Sequence, *, repeats: int = 5, budget: float = BUDGET,
             max_ops: int = MAX_SUPPORT_OPS) -> pd.DataFrame:
    """Route and execute every task under every policy; latency is route + execution, averaged
    over `repeats` runs of the same task (sub-millisecond timings need repetition). A policy with a
    `prepare(tasks)` method gets it called first: an embedding router encodes the prompts there in
    one batch, so `latency_ms` is routing from cached features (encoding time is the benchmark's)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    rows = []
    for policy in policies:
        prepare = getattr(policy, "prepare", None)
        if prepare is not None:   # features computed in one batch (sentence embeddings), outside the timing
            prepare(tasks)
        for task in tasks:
            start = time.perf_counter()
            for _ in range(repeats):
                route = policy(task)
                outcome = execute(task, route)
            latency_ms = (time.perf_counter() - start) * 1000 / repeats
            rows.append({
                "subset": task.split, "condition": policy.name, "task_id": task.task_id, "workload": task.workload,
                "family": task.family, "kind": task.kind, "route": "".join(route), "labels": "".join(task.labels),
                "status": outcome.status, "success": outcome.success, "answer": outcome.answer,
                # the paper's cost is the route's normalised cost; execution may stop early on an outage
                "cost": route_cost(tuple(route)), "executed_cost": outcome.cost,
                "budget_compliant": is_feasible(route, budget=budget, max_ops=max_ops),
                "exact_route": tuple(route) == tuple(task.labels), "latency_ms": latency_ms,
            })
    return pd.DataFrame(rows, columns=list(TASK_COLUMNS))


def summarize_routes(scores: pd.DataFrame, *, stats: StatsSettings = DEFAULT_STATS) -> pd.DataFrame:
    """Per policy x split, long: the means of `MEAN_METRICS` (success with its task-bootstrap CI),
    then micro action precision/recall/F1 and the failure counts by status."""
    means = summarize(scores, MEAN_METRICS, ci=["success"], run=None, stats=stats)
    rows = []
    for (condition, subset), g in scores.groupby(["condition", "subset"], sort=False):
        quality = route_quality(list(g["route"]), route_matrix(g["labels"]))
        figures = {m: quality[m] for m in ("precision", "recall", "f1")} | {"n_failures": int((~g["success"]).sum())}
        figures |= {f"n_{name}": n for name, n in count_failures(g["status"]).items()}
        rows += [{"condition": condition, "subset": subset, "metric": metric, "value": value, "n": len(g)}
                 for metric, value in figures.items()]
    return pd.concat([means, pd.DataFrame(rows)], ignore_index=True)


def count_failures(statuses) -> dict[str, int]:
    """How many of `statuses` are each kind of failure: `incorrect`, `no_answer`, `unavailable`."""
    statuses = list(statuses)
    return {name: sum(s == status for s in statuses) for name, status in _FAILURES.items()}


def sweep_threshold(model, tasks: Sequence, taus: Sequence[float] = TAU_GRID) -> pd.DataFrame:
    """Success, cost and route quality per tau without refitting (probabilities computed once)."""
    probs = model.probabilities([t.prompt for t in tasks])
    labels = labels_matrix(tasks)
    rows = []
    for tau in taus:
        routes = routes_at(probs, tau, budget=model.budget, max_ops=model.max_ops)
        success = [execute(t, r).success for t, r in zip(tasks, routes)]
        rows.append({"tau": float(tau), "success": float(np.mean(success)),
                     "mean_cost": float(np.mean([route_cost(r) for r in routes])), **route_quality(routes, labels)})
    return pd.DataFrame(rows)
