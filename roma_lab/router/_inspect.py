"""Per-task view of one routing decision: prompt, probabilities, route, state trace, verdict."""

from __future__ import annotations

from ._execute import execute
from ._ops import SUPPORT_OPS, route_cost


def inspect_route(study, task_id: str) -> dict:
    """Everything the route inspector shows for one task, as plain data (unit-testable)."""
    task = study.task(task_id)
    model = study.model
    probs = model.probability(task.prompt)
    route = model.route(task.prompt)
    outcome = execute(task, route)
    return {
        "task_id": task.task_id, "split": task.split, "workload": task.workload, "family": task.family,
        "kind": task.kind, "prompt": task.prompt, "expected_answer": task.answer,
        "minimum_route": "".join(task.labels), "tau": model.tau,
        "known_features": model.known_features(task.prompt),   # 0: no evidence, routed direct
        "probabilities": {op: float(p) for op, p in zip(SUPPORT_OPS, probs)},
        "route": "".join(route), "cost": route_cost(route),
        "trace": [{"op": s.op, "effect": s.effect, "candidate": s.candidate} for s in outcome.trace],
        "answer": outcome.answer, "status": outcome.status,
    }
