"""Does the atomizer split a multi-part goal? A fixed set of goals to measure it on, before any
prompt is changed (issue 26: the embedded 1.5B model's atomizer called all eight quickstart goals
atomic, so a teacher's own goal ran as one node).

``atomizer_goals.csv`` holds 40 goals: 24 ``train`` (12 atomic, 12 multi-part) for an optimizer to
learn from, and 16 ``heldout`` (8 and 8) to measure on. They were written on 2026-12-02, before any
model was asked about any of them; the held-out goals are never shown to an optimizer. A goal is
multi-part when it needs several look-ups, computations or pieces of writing, at least one needing
another's result; otherwise it is atomic. ``score_atomizer`` asks an atomizer about each goal (no
context, as the root is asked) and ``atomizer_summary`` gives the share it got right per kind, with
the task-bootstrap CI.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ATOMIZER_SPLITS", "AtomizerGoal", "atomizer_goals", "atomizer_summary", "plot_atomizer", "score_atomizer"]

ATOMIZER_SPLITS = ("train", "heldout")


@dataclass(frozen=True, slots=True)
class AtomizerGoal:
    """A goal, whether it is atomic (one step) or multi-part, and why."""

    split: str
    goal: str
    atomic: bool
    why: str


def atomizer_goals(split: str) -> list[AtomizerGoal]:
    """The goals of ``split`` (``train`` or ``heldout``), in the file's order."""
    import csv
    import io

    if split not in ATOMIZER_SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {ATOMIZER_SPLITS}")
    text = resources.files("roma_lab.papers.roma").joinpath("atomizer_goals.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    return [AtomizerGoal(r["split"], r["goal"], r["atomic"] == "True", r["why"]) for r in rows if r["split"] == split]


def score_atomizer(atomizer: Any, goals: list[AtomizerGoal], *, lm: Any = None,
                   condition: str = "atomizer") -> pd.DataFrame:
    """One row per goal: what ``atomizer(goal=, context="")`` said (``is_atomic``), whether that is
    right, and the error when the call failed (then it is not right). ``lm``: the model DSPy roles
    use (None: the one configured), named in the ``model`` column; ``condition`` labels the rows."""
    import contextlib

    import dspy
    import pandas as pd

    from roma_lab.lm import model_label

    model = model_label(lm) if lm is not None else model_label(dspy.settings.lm) if dspy.settings.lm else ""

    rows = []
    for g in goals:
        said, error = None, None
        with dspy.context(lm=lm) if lm is not None else contextlib.nullcontext():
            try:
                said = bool(atomizer(goal=g.goal, context="").is_atomic)
            except Exception as exc:  # noqa: BLE001 - a failed call is a row, never a crash
                error = f"{type(exc).__name__}: {exc}"
        rows.append({"condition": condition, "model": model, "split": g.split, "goal": g.goal, "kind": "atomic" if g.atomic else "multi-part",
                     "expected_atomic": g.atomic, "said_atomic": said, "right": said == g.atomic, "error": error})
    return pd.DataFrame(rows)


def atomizer_summary(scores: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Share right per condition and kind of goal (atomic, multi-part, all), with the task-bootstrap
    95% CI."""
    import pandas as pd

    from roma_lab.results import summarize
    from roma_lab.stats import StatsSettings

    table = scores.assign(subset=scores["kind"], task_id=scores["goal"], right=scores["right"].astype(float))
    return summarize(pd.concat([table, table.assign(subset="all")], ignore_index=True), ["right"],
                     by=("condition", "model", "subset"), run=None, stats=StatsSettings(seed=seed))


def plot_atomizer(summary: pd.DataFrame, *, ax: Any = None) -> Any:
    """Share right per kind of goal, one bar per condition with its 95% CI, from
    :func:`atomizer_summary`'s table (the model in the title)."""
    import matplotlib.pyplot as plt
    import numpy as np

    from roma_lab.results import label_if_not_measured

    if summary.empty:
        raise ValueError("no atomizer rows to plot")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.2))
    kinds = list(dict.fromkeys(summary["subset"]))
    conditions = list(dict.fromkeys(summary["condition"]))
    width = 0.8 / len(conditions)
    for i, condition in enumerate(conditions):
        rows = summary[summary["condition"] == condition].set_index("subset").reindex(kinds)
        x = np.arange(len(kinds)) + (i - (len(conditions) - 1) / 2) * width
        low = (rows["value"] - rows["ci_low"]).fillna(0).clip(lower=0)
        high = (rows["ci_high"] - rows["value"]).fillna(0).clip(lower=0)
        ax.bar(x, rows["value"], width, yerr=[low, high], capsize=3, label=condition)
    ax.set_xticks(np.arange(len(kinds)), kinds)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share right (95% CI)")
    ax.set_title("Atomizer on held-out goals: " + ", ".join(dict.fromkeys(summary["model"])), fontsize="small")
    ax.legend(fontsize="small")
    label_if_not_measured(ax.figure, summary["model"])
    return ax.figure
