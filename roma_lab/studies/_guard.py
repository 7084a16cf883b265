"""Notebook 44: the agent's repeat guard on and off, judged by correct answers per hour.

The guard (``AgentConfig.repeat_guard``) refuses a second identical call of an idempotent tool and has
the rollout answer at once from what it found; without it the agent may run the same search again
until its step limit. Both arms are the default agent on the same tasks (the generated world's dev
split, L1 by default), one run each, through one ``roma_lab.evaluate`` folder (``runs/``: a rerun
resumes; run with ``experiments run --fresh`` so every call is timed, not replayed).

Tables: ``guard_rows.csv`` (every row with what its trajectory says: steps, tool and repeated calls,
re-answers); ``guard_speed.csv`` (per arm: tasks, correct, accuracy, tasks and correct answers per hour
with task-bootstrap intervals, model calls and tokens per task, tasks where the guard fired);
``guard_paired.csv`` (on minus off: the accuracy difference with its paired interval, sign test and MDE,
and the ratios on / off of correct answers per hour and of tasks per hour, each with a paired
task-bootstrap interval) and ``guard_decision.csv`` (the protocol's rule applied: which arm is the
default, and why). The protocol, fixed before the run: design/agents.md, "The repeat guard's A/B".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from roma_lab.stats import DEFAULT_STATS, StatsSettings

__all__ = ["ARMS", "compare_repeat_guard", "guard_decision"]

#: The two arms, by label: the agent's defaults with the guard on and with it off.
ARMS = ("guard on", "guard off")


def _speed(rows, stats: StatsSettings):
    """Per arm: what it answered and what that cost, with rates per hour and their intervals."""
    import pandas as pd

    from roma_lab.stats import per_hour_ci

    out = []
    for arm in ARMS:
        mine = rows[rows["condition"] == arm]
        correct, seconds = mine["correct"].astype(float), mine["latency_s"].astype(float)
        per_task = per_hour_ci([1.0] * len(mine), seconds, stats=stats)
        per_correct = per_hour_ci(correct, seconds, stats=stats)
        out.append({"arm": arm, "model": ", ".join(sorted(set(mine["model"].astype(str)))), "tasks": len(mine), "correct": int(correct.sum()), "accuracy": correct.mean(),
                    "wall_s": seconds.sum(), "tasks_per_hour": per_task.estimate,
                    "tasks_per_hour_low": per_task.low, "tasks_per_hour_high": per_task.high,
                    "correct_per_hour": per_correct.estimate, "correct_per_hour_low": per_correct.low,
                    "correct_per_hour_high": per_correct.high, "model_calls_per_task": mine["model_calls"].mean(),
                    "input_tokens_per_task": mine["input_tokens"].mean(),
                    "output_tokens_per_task": mine["output_tokens"].mean(),
                    "guard_fired_tasks": int(mine["repeated_calls"].fillna(0).gt(0).sum()),
                    "repeated_calls": int(mine["repeated_calls"].fillna(0).sum()),
                    "reanswers": int(mine["reanswered"].fillna(False).astype(bool).sum()),
                    "ci_method": f"task bootstrap, {per_correct.method}, {stats.n_resamples} resamples, "
                                 f"seed {stats.seed}"})
    return pd.DataFrame(out)


def _paired(rows, scores, stats: StatsSettings):
    """On minus off: accuracy (``results.compare``), and the ratios of the two rates per hour."""
    import pandas as pd

    from roma_lab.results import compare
    from roma_lab.stats import paired_rate_ratio_ci

    accuracy = compare(scores, ARMS[0], ARMS[1], "score", stats=stats)
    wide = rows.pivot(index="task_id", columns="condition", values=["correct", "latency_s"]).sort_index()
    ratios = []
    for name, on, off in (("correct_per_hour_ratio", wide["correct"][ARMS[0]], wide["correct"][ARMS[1]]),
                          ("tasks_per_hour_ratio", pd.Series(1.0, index=wide.index),
                           pd.Series(1.0, index=wide.index))):
        ci = paired_rate_ratio_ci(on.astype(float), wide["latency_s"][ARMS[0]], off.astype(float),
                                  wide["latency_s"][ARMS[1]], stats=stats)
        ratios.append({"subset": accuracy["subset"].iloc[0], "condition": f"{ARMS[0]} / {ARMS[1]}", "metric": name, "value": ci.estimate,
                       "ci_low": ci.low, "ci_high": ci.high, "n": ci.n_tasks,
                       "ci_method": f"paired task bootstrap, {ci.method}, {ci.n_resamples} resamples, seed {ci.seed}"})
    return pd.concat([accuracy, pd.DataFrame(ratios)], ignore_index=True)


def guard_decision(paired) -> dict[str, str]:
    """The protocol's rule: the default is the arm with more correct answers per hour, unless its accuracy
    is significantly lower than the other's (the paired 95% interval of on minus off lies wholly on its
    losing side), in which case the other arm is. Returns the arm and the reason in words."""
    import math

    ratio = paired[paired["metric"] == "correct_per_hour_ratio"].iloc[0]
    accuracy = paired[paired["metric"] == "score_diff"].iloc[0]
    if math.isnan(ratio["value"]):  # 0 / 0: neither arm answered a task correctly
        return {"default": ARMS[0], "repeat_guard": "True",
                "why": "neither arm answered a task correctly: correct answers per hour cannot tell them apart, "
                       "so the default stays as it was (guard on)"}
    faster = ARMS[0] if ratio["value"] >= 1 else ARMS[1]
    worse = ((faster == ARMS[0] and accuracy["ci_high"] < 0) or (faster == ARMS[1] and accuracy["ci_low"] > 0))
    chosen = ARMS[1 - ARMS.index(faster)] if worse else faster
    why = (f"{faster} gives more correct answers per hour (on / off {ratio['value']:.2f} "
           f"[{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}]); the accuracy difference on - off is "
           f"{accuracy['value']:+.3f} [{accuracy['ci_low']:+.3f}, {accuracy['ci_high']:+.3f}], "
           + ("a significant loss for it, so the other arm is the default" if worse
              else "no significant loss for it"))
    return {"default": chosen, "repeat_guard": str(chosen == ARMS[0]), "why": why}


def compare_repeat_guard(out_dir: str | Path, *, lm: Any = "local", n_tasks: int = 30, split: str = "dev",
                         levels: Sequence[str] = ("L1",), seed: int = 0, item_timeout_s: float | None = 900,
                         stats: StatsSettings = DEFAULT_STATS, progress: bool = False) -> dict[str, Any]:
    """The module docstring's study on ``n_tasks`` tasks of the world's ``split`` at ``levels`` (drawn
    with ``seed``), both arms on ``lm``, each task stopped at ``item_timeout_s``. Returns the tables by
    name (also written under ``out_dir``)."""
    import pandas as pd

    from roma_lab.agents import AgentConfig
    from roma_lab.evaluate import agent, evaluate, world_task_set
    from roma_lab.results import record_stats, write_table

    out = Path(out_dir)
    arms = [agent(AgentConfig(), lm, label=ARMS[0]), agent(AgentConfig(repeat_guard=False), lm, label=ARMS[1])]
    evaluation = evaluate(arms, world_task_set(split, n_tasks, seed=seed, levels=tuple(levels)), out=out / "runs",
                          timeout_s=item_timeout_s, progress=progress,
                          stats=stats)
    rows = evaluation.rows.merge(evaluation.facts(), on=["condition", "run", "task_id"], how="left")
    rows = rows.assign(model=rows["condition"].map(evaluation.models),
                       correct=rows["score"].astype(float).fillna(0.0).eq(1.0))  # no answer is a wrong answer
    scores = evaluation.scores()
    paired = _paired(rows, scores, stats)
    tables = {"guard_rows": rows, "guard_speed": _speed(rows, stats), "guard_paired": paired,
              "guard_decision": pd.DataFrame([guard_decision(paired)]).assign(
                  model=", ".join(sorted(set(rows["model"].astype(str)))))}
    for name, table in tables.items():
        write_table(table, out, name)
    record_stats(out, stats)
    return tables
