"""The computations behind notebooks 01 (quickstart) and 02 (structure): run, then write tidy CSVs and traces."""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._roma import Observer, Roma
from ._schedule import schedule_bounds
from ._scripted import fixed_latency_roles
from ._types import Run

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


def run_quickstart(
    goal: str,
    out_dir: str | PathLike[str],
    *,
    lm: Any = "local",
    max_depth: int = 1,
    max_concurrency: int = 1,
    corpus: Sequence[str] | str | PathLike[str] | None = None,
    on_event: Observer | None = None,
) -> Run:
    """Run ROMA's default DSPy roles on ``goal``; write ``run.json``, ``usage.csv`` and ``calls.csv``."""
    from roma_lab.results import write_table, write_text_atomic

    run = Roma(lm=lm, max_depth=max_depth, max_concurrency=max_concurrency, corpus=corpus).run(goal, on_event=on_event)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "run.json", run.to_json())
    write_table(run.usage_df(), out, "usage")
    write_table(run.calls_df(), out, "calls")
    return run


def measure_structure(
    out_dir: str | PathLike[str],
    *,
    widths: Sequence[int] = (1, 2, 4, 8, 16),
    depths: Sequence[int] = (1, 2, 3, 4),
    latency_s: float = 0.02,
    max_concurrency: int = 8,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run scripted fixed-latency trees that widen (one level, ``w`` children) and deepen (``d``
    levels of 3 children). Siblings cycle through task types search, think, think; search calls take
    3x ``latency_s``; every third sibling depends on its left neighbour (a fast chain beside a slow
    independent search, which a barrier schedule cannot overlap).

    Writes ``timing.csv`` (one row per tree x schedule: measured wall, critical-path bound,
    barrier schedule, sequential) and ``context.csv`` (one row per role call: depth, role,
    context size). Returns both tables.
    """
    import pandas as pd

    from roma_lab.results import write_table

    shapes = [("widen", (w,)) for w in widths] + [("deepen", (3,) * d) for d in depths]
    timing, context = [], []
    for sweep, branching in shapes:
        run = _structure_run(branching, latency_s, max_concurrency)
        bounds = schedule_bounds(run)
        shape = {"sweep": sweep, "width": branching[0], "depth": len(branching), "nodes": len(run.nodes)}
        for schedule, seconds in (("measured", bounds.wall_s), ("critical_path", bounds.critical_path_s),
                                  ("barrier", bounds.barrier_s), ("sequential", bounds.sequential_s)):
            timing.append({**shape, "schedule": schedule, "seconds": seconds})
        calls = run.calls_df()
        context.extend({**shape, "node_depth": r.depth, "role": r.component, "context_chars": r.context_chars}
                       for r in calls.itertuples())
    timing_df, context_df = pd.DataFrame(timing), pd.DataFrame(context)
    write_table(timing_df, out_dir, "timing")
    write_table(context_df, out_dir, "context")
    return timing_df, context_df


def _structure_run(branching: Sequence[int], latency_s: float, max_concurrency: int) -> Run:
    """One scripted tree of ``measure_structure``: siblings cycle search, think, think; search calls
    take 3x ``latency_s``; every third sibling depends on its left neighbour."""
    roles = fixed_latency_roles(branching, latency_s=latency_s, chain_every=3, task_types=("search", "think", "think"),
                                executor_latency_s={"search": 3 * latency_s})
    roma = Roma(**roles.role_kwargs(), max_depth=len(branching), max_concurrency=max_concurrency,
                max_subtasks=max(branching))
    run = roma.run(roles.goal)
    if run.status != "completed":
        raise RuntimeError(f"scripted run {tuple(branching)} ended {run.status}: {run.root.error}")
    return run


def compare_schedules(
    out_dir: str | PathLike[str],
    *,
    concurrencies: Sequence[int] = (1, 8),
    branching: Sequence[int] = (3, 3),
    latency_s: float = 0.02,
) -> dict[str, Run]:
    """The same scripted tree (as in ``measure_structure``, two levels of three) run once per bound on
    concurrent role calls, to be viewed side by side. Writes each run as ``schedule_<k>_slots.json``;
    returns ``{"max_concurrency=<k>": run}``."""
    from roma_lab.results import write_text_atomic

    runs = {}
    for slots in concurrencies:
        run = _structure_run(branching, latency_s, slots)
        write_text_atomic(Path(out_dir) / f"schedule_{slots}_slots.json", run.to_json())
        runs[f"max_concurrency={slots}"] = run
    return runs


def plot_structure(timing: pd.DataFrame, context: pd.DataFrame) -> Figure:
    """Wall time vs bounds as the tree widens and deepens, and context size per call vs depth."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, sweep, x in ((axes[0], "widen", "width"), (axes[1], "deepen", "depth")):
        part = timing[timing["sweep"] == sweep]
        for schedule, rows in part.groupby("schedule"):
            ax.plot(rows[x], rows["seconds"], marker="o", label=schedule)
        ax.set(xlabel=f"tree {x}", ylabel="seconds", title=f"{sweep}: wall time vs bounds")
        ax.legend()
    deepest = context[(context["sweep"] == "deepen") & (context["depth"] == context["depth"].max())]
    for role, rows in deepest.groupby("role"):
        mean = rows.groupby("node_depth")["context_chars"].mean()
        axes[2].plot(mean.index, mean.values, marker="o", label=role)
    axes[2].set(xlabel="node depth", ylabel="mean context chars per call", title="context size vs depth")
    axes[2].legend()
    fig.tight_layout()
    return fig
