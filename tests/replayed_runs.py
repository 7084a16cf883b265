"""A run recorded through a completion cache over a scripted model that takes known times, and its
replay: shared by the controller's replay-schedule tests and the execution-tree view's."""

from __future__ import annotations

import hashlib
import json
import time

import dspy

from roma_lab.trace import Run
from roma_lab.controller import Roma
from roma_lab.lm import CachingEngine, ReplayEngine, ScriptedEngine

# Executor times by goal; the atomizer, planner and aggregator take SHORT each.
SLOW = {"A": 0.3, "B": 0.3, "C": 0.1}
SHORT = 0.02


def respond(request):
    """Plan A and B (independent) and C (after A) under the root; every reply after its time."""
    goal = request.inputs.get("goal", "").strip()
    if "subtasks" in request.outputs:
        reply = {"subtasks": [{"goal": "A", "task_type": "think", "depends_on": []},
                              {"goal": "B", "task_type": "think", "depends_on": []},
                              {"goal": "C", "task_type": "think", "depends_on": [0]}]}
    elif "is_atomic" in request.outputs:
        reply = {"is_atomic": False, "task_type": "think"}
    else:
        reply = {name: f"done: {goal}" for name in request.outputs}
    time.sleep(SLOW.get(goal, SHORT) if "subtask_results" not in request.inputs else SHORT)
    return reply


def run_with(engine, **settings) -> Run:
    return Roma(lm=dspy.LM("local/fake", engine=engine, cache=False), max_depth=1, **settings).run("root goal")


def record(directory) -> Run:
    return run_with(CachingEngine(ScriptedEngine(respond), model_id="fake", directory=directory))


def replay(directory, **settings) -> Run:
    return run_with(ReplayEngine(model_id="fake", directory=directory), **settings)


def old_digest(data: dict) -> str:
    """An entry's digest as the code before recorded latencies computed it (every field but the digest)."""
    fields = {k: v for k, v in data.items() if k != "digest"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
