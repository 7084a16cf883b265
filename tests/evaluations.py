"""Helpers of the tests that run systems through ``roma_lab.evaluate`` and read what it saved."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd


def graded_rows(out: Path, items: Sequence[Any], systems: Mapping[str, Callable[[str], Any]], grader: Any,
                **kwargs: Any) -> pd.DataFrame:
    """The rows of ``evaluate`` over ``items`` with each function of ``systems`` (label -> fn(question))."""
    from roma_lab.evaluate import TaskSet, evaluate, function

    tasks = TaskSet(items[0].benchmark, tuple(items))
    return evaluate([function(fn, label=label) for label, fn in systems.items()], tasks, grader, out=out,
                    progress=False, **kwargs).rows


def attempts(folder: Path) -> pd.DataFrame:
    """Every attempt an evaluation folder logged, as text."""
    return pd.read_csv(Path(folder) / "attempts.csv", dtype=str, keep_default_na=False)


def saved_ids(out_dir: Path, name: str, system: str = "roma") -> list[str]:
    """The task ids with a saved trace of ``system`` in a table's evaluation folder ``<name>_runs``."""
    from roma_lab.widgets import saved_traces

    return list(saved_traces(Path(out_dir) / f"{name}_runs", system))


def saved_run(out_dir: Path, name: str, task_id: str, system: str = "roma"):
    """The trace ``system`` saved for ``task_id`` in a table's evaluation folder ``<name>_runs`` (run 0)."""
    from roma_lab.trace import load_trace, trace_path

    return load_trace(trace_path(Path(out_dir) / f"{name}_runs", system, 0, task_id))


def trace_file(out_dir: Path, name: str, task_id: str, system: str = "roma") -> Path:
    from roma_lab.trace import trace_path

    return trace_path(Path(out_dir) / f"{name}_runs", system, 0, task_id)


def run_agent(config, tasks, *, out_dir: Path, runs: int = 1, lm: Any = None, progress: bool = False) -> pd.DataFrame:
    """``config`` on agent ``tasks`` x ``runs`` through ``roma_lab.evaluate`` into ``out_dir/<its run label>``:
    the evaluation's rows with the trajectories' facts (``roma_lab.papers.oagents.run_conditions``)."""
    from roma_lab.agents import run_label
    from roma_lab.papers.oagents import Condition, run_conditions

    label = run_label(config)
    return run_conditions([Condition(label, config)], tasks, Path(out_dir) / label, runs=runs, lm=lm, progress=progress)
