"""Run policies over tasks and summarise: tidy per-task rows, then pure summary functions."""

from __future__ import annotations

import time
from typing import Sequence

import pandas as pd

from ..stats import bootstrap_ci, paired_bootstrap_ci, sign_test
from ._model import route_matrix, route_quality
from ._ops import BUDGET, MAX_SUPPORT_OPS, execute, is_feasible, route_cost

#: Columns of the tidy per-task table (one row per task x policy).
TASK_COLUMNS = ("split", "policy", "task_id", "workload", "family", "kind", "route", "labels", "status",
                "success", "answer", "cost", "executed_cost", "budget_compliant", "exact_route", "latency_ms")


def evaluate(policies: Sequence, tasks: Sequence, *, repeats: int = 5, budget: float = BUDGET,
             max_ops: int = MAX_SUPPORT_OPS) -> pd.DataFrame:
    """Route and execute every task under every policy; latency is route + execution, averaged
    over `repeats` runs of the same task (sub-millisecond timings need repetition)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    rows = []
    for policy in policies:
        for task in tasks:
            start = time.perf_counter()
            for _ in range(repeats):
                route = policy(task)
                outcome = execute(task, route)
            latency_ms = (time.perf_counter() - start) * 1000 / repeats
            rows.append({
                "split": task.split, "policy": policy.name, "task_id": task.task_id, "workload": task.workload,
                "family": task.family, "kind": task.kind, "route": "".join(route), "labels": "".join(task.labels),
                "status": outcome.status, "success": outcome.success, "answer": outcome.answer,
                # the paper's cost is the route's normalised cost; execution may stop early on an outage
                "cost": route_cost(tuple(route)), "executed_cost": outcome.cost,
                "budget_compliant": is_feasible(route, budget=budget, max_ops=max_ops),
                "exact_route": tuple(route) == tuple(task.labels), "latency_ms": latency_ms,
            })
    return pd.DataFrame(rows, columns=list(TASK_COLUMNS))


def summarize(results: pd.DataFrame, *, n_resamples: int = 2000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Per split x policy: success with task-bootstrap CI, cost, latency, compliance, route quality."""
    out = []
    for (split, policy), g in results.groupby(["split", "policy"], sort=False):
        ci = bootstrap_ci(g["success"].to_numpy(float), n_resamples=n_resamples, level=level, seed=seed)
        quality = route_quality(list(g["route"]), route_matrix(g["labels"]))
        out.append({"split": split, "policy": policy, "n": len(g), "success": ci.estimate, "ci_low": ci.low,
                    "ci_high": ci.high, "mean_cost": g["cost"].mean(), "latency_ms": g["latency_ms"].mean(),
                    "budget_compliance": g["budget_compliant"].mean(), **quality,
                    "n_failures": int((~g["success"]).sum()),
                    "n_incorrect": int((g["status"] == "incorrect_answer").sum()),
                    "n_no_answer": int((g["status"] == "no_answer").sum()),
                    "n_unavailable": int((g["status"] == "unavailable_component").sum())})
    return pd.DataFrame(out)


def compare_paired(results: pd.DataFrame, a: str, b: str, *, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Success difference a - b per split: paired task-bootstrap CI and exact sign test."""
    out = []
    for split, g in results.groupby("split", sort=False):
        wide = g.pivot(index="task_id", columns="policy", values="success").astype(float)
        missing = {a, b} - set(wide.columns)
        if missing:
            raise ValueError(f"policies {sorted(missing)} not in results for split {split!r}")
        ci = paired_bootstrap_ci(wide[a].to_numpy(), wide[b].to_numpy(), n_resamples=n_resamples, seed=seed)
        st = sign_test(wide[a].to_numpy(), wide[b].to_numpy())
        costs = g.groupby("policy")["cost"].mean()
        out.append({"split": split, "comparison": f"{a} - {b}", "success_diff": ci.estimate, "ci_low": ci.low,
                    "ci_high": ci.high, "wins": st.wins, "losses": st.losses, "ties": st.ties,
                    "sign_test_p": st.p_value, "cost_diff": costs[a] - costs[b]})
    return pd.DataFrame(out)
