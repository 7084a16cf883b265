"""The computations behind notebooks 01 (quickstart), 02 (structure) and 09 (repair): run, then write
tidy CSVs and traces."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._roma import Observer, Roma
from ._schedule import schedule_bounds
from ._scripted import ScriptedRoles, fixed_latency_roles, tree_plans
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


def measure_references(
    out_dir: str | PathLike[str],
    *,
    depths: Sequence[int] = (1, 2, 3, 4),
    artifact_chars: int = 200,
    summary_chars: int = 80,
    tokenizer: str = "local",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Context size per role call against node depth, with outputs passed whole and by reference.

    The deepening trees of :func:`measure_structure` (``d`` levels of 3 children, scripted roles,
    no latency), each run twice: outputs passed whole (the default settings), and with an artifact
    store in ``out_dir/artifacts`` where outputs longer than ``artifact_chars`` reach their
    dependents and parent as a reference plus their first ``summary_chars`` characters. The
    scripted aggregator joins what it is shown, so by reference it joins summaries (a model that
    needs the full text calls ``read_artifact``, a tool call outside the context).

    ``context_chars`` is what the controller recorded for each call (goal and inputs);
    ``context_tokens`` counts the same text with ``tokenizer``: ``"local"``, the embedded model's
    own vocabulary (its file is read, no generation), or ``"whitespace"`` (words; no model needed).
    Writes ``references.csv`` (one row per role call) and ``references_summary.csv`` (mean per call
    by tree depth, node depth, role and mode). Returns both tables.
    """
    import pandas as pd

    from roma_lab.results import write_table

    count = _token_counter(tokenizer)
    rows = []
    for depth in depths:
        for mode, kwargs in (("whole", {}), ("by_reference", {"artifacts": Path(out_dir) / "artifacts",
                                                             "artifact_chars": artifact_chars,
                                                             "summary_chars": summary_chars})):
            roles = fixed_latency_roles((3,) * depth, latency_s=0.0, chain_every=3,
                                        task_types=("search", "think", "think"))
            run = Roma(**roles.role_kwargs(), max_depth=depth, max_subtasks=3, **kwargs).run(roles.goal)
            if run.status != "completed":
                raise RuntimeError(f"scripted run of depth {depth} ({mode}) ended {run.status}: {run.root.error}")
            rows.extend({"depth": depth, "mode": mode, "node_depth": n.depth, "role": c.role.split(":")[0],
                         "context_chars": c.context_chars, "context_tokens": count(_context_text(n.goal, c.inputs)),
                         "tokenizer": tokenizer} for n in run.nodes for c in n.calls)
    calls = pd.DataFrame(rows)
    summary = (calls.groupby(["depth", "node_depth", "role", "mode"], as_index=False)[["context_chars", "context_tokens"]]
               .mean().round(1))
    write_table(calls, out_dir, "references")
    write_table(summary, out_dir, "references_summary")
    return calls, summary


def _context_text(goal: str, inputs: dict) -> str:
    """The text whose length the controller records as ``context_chars``: the goal and each input."""
    import json

    return goal + "".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in inputs.values())


def _token_counter(tokenizer: str) -> Callable[[str], int]:
    if tokenizer == "whitespace":
        return lambda text: len(text.split())
    if tokenizer != "local":
        raise ValueError(f"tokenizer must be 'local' or 'whitespace', got {tokenizer!r}")
    from llama_cpp import Llama

    from roma_lab.lm import DEFAULT_VARIANT, MODELS, model_file

    vocab = Llama(model_path=str(model_file(MODELS[DEFAULT_VARIANT])), vocab_only=True, verbose=False)
    return lambda text: len(vocab.tokenize(text.encode("utf-8"), add_bos=False))


def plot_references(summary: pd.DataFrame) -> Figure:
    """Mean context per call against node depth in the deepest tree, whole vs by reference, per role."""
    import matplotlib.pyplot as plt

    deepest = summary[summary["depth"] == summary["depth"].max()]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, column, label in ((axes[0], "context_chars", "characters"), (axes[1], "context_tokens", "tokens")):
        for (role, mode), rows in deepest.groupby(["role", "mode"]):
            ax.plot(rows["node_depth"], rows[column], marker="o", linestyle="-" if mode == "whole" else "--",
                    label=f"{role}, {mode}")
        ax.set(xlabel="node depth", ylabel=f"mean context {label} per call", title=f"context {label} vs depth")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


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


def measure_repair(
    out_dir: str | PathLike[str],
    *,
    branching: Sequence[int] = (4, 3),
    fail: Sequence[str] = ("task.1.2",),
    latency_s: float = 0.05,
    max_concurrency: int = 4,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Repair against a full re-run, on scripted roles where every call takes ``latency_s``.

    Three runs of the same tree (:func:`tree_plans` of ``branching``): the first with the executors
    of the goals in ``fail`` raising (an injected failure); the repair of its saved JSON with the
    failure gone; and the whole tree again from scratch with the failure gone, what one pays
    without repair. Writes ``repair.csv`` (one row per run: status, role calls, wall time, nodes
    reused and executed), ``repair_nodes.csv`` (one row per node of the repair: reused or
    re-executed, its role calls) and the runs as ``failed_run.json``, ``repair.json`` and
    ``full_rerun.json`` (the repair's ``repair.source_sha256`` is the SHA-256 of ``failed_run.json``).
    Returns both tables.
    """
    import pandas as pd

    from roma_lab.results import write_table, write_text_atomic

    plans = tree_plans(branching)
    unknown = sorted(set(fail) - {s.goal for subtasks in plans.values() for s in subtasks})
    if unknown:
        raise ValueError(f"fail names goals that are not in the tree: {unknown}")

    def roma(failing: Sequence[str]) -> Roma:
        roles = ScriptedRoles(plans, default_latency_s=latency_s, fail=tuple(failing))
        return Roma(**roles.role_kwargs(), max_depth=len(branching), max_concurrency=max_concurrency,
                    max_subtasks=max(branching))

    failed = roma(fail).run("task")
    repaired = roma(()).repair(Run.from_json(failed.to_json()))  # from the saved file, as after a restart
    rerun = roma(()).run("task")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = {"failed_run": failed, "repair": repaired, "full_rerun": rerun}
    for name, run in runs.items():
        write_text_atomic(out / f"{name}.json", run.to_json())
    table = pd.DataFrame([{"run": name, "status": run.status, "role_calls": sum(len(n.calls) for n in run.nodes),
                           "wall_s": run.wall_s, "nodes": len(run.nodes),
                           "nodes_reused": sum(n.reused for n in run.nodes),
                           "nodes_executed": sum(not n.reused for n in run.nodes)}
                          for name, run in runs.items()])
    nodes = pd.DataFrame([{"node": n.id, "goal": n.goal, "depth": n.depth, "status": n.status,
                           "action": "reused" if n.reused else "re-executed", "role_calls": len(n.calls),
                           "roles": " ".join(c.role for c in n.calls)} for n in repaired.nodes])
    write_table(table, out, "repair")
    write_table(nodes, out, "repair_nodes")
    return table, nodes


def plot_repair(table: pd.DataFrame) -> Figure:
    """Role calls and wall time of the failed run, its repair and a full re-run, side by side."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, column, label in ((axes[0], "role_calls", "role calls"), (axes[1], "wall_s", "wall time (s)")):
        ax.bar(table["run"], table[column], color=["#b0b0b0", "#2e7d32", "#1565c0"])
        ax.set(ylabel=label, title=label)
    fig.tight_layout()
    return fig


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
