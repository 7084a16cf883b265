"""ROMA paper Table 5: per-component cost, tokens and latency per chapter of long-form writing at
depth 1, set beside the paper's DeepSeek-V3.1 figures (design/roma_tables.md).

In the vocabulary the Table 5 components are **subsets**: the condition is the system that wrote
(ROMA on a model), and its components split one run's usage the way levels split a benchmark, with
``total`` as their sum.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roma_lab.bench import LONGFORM_TASK, Grade, load_eqbench_longform, sample
from roma_lab.lm import in_process, model_label, resolve_lm
from roma_lab.papers.roma._benchmark_tables import paper_reported_roma_df
from roma_lab.papers.roma._run_config import RunConfig, check_config
from roma_lab.papers.roma._systems import SYSTEMS, TaskWording, check_run
from roma_lab.papers.roma._tables import RomaTables
from roma_lab.trace import RomaRunError

if TYPE_CHECKING:
    import pandas as pd

    from roma_lab.trace import Run

ARTEFACT = "table5"
PAPER_NAME = "ROMA (DeepSeek-V3.1)"  # the paper's row our ROMA stands beside
_USAGE_COLUMNS = ("cost", "input_tokens", "output_tokens", "latency_s")
_UNITS = {"cost_usd": "usd", "input_tokens": "tokens", "output_tokens": "tokens", "latency_s": "s"}
UNGRADED = "not graded: Table 5 measures cost, not quality"


class _Ungraded:
    """Table 5 grades nothing: every story's row says so (score 0, never averaged)."""

    name = UNGRADED

    def __call__(self, item: Any, answer: Any) -> Grade:
        return Grade(UNGRADED, 0.0, UNGRADED)


def component_cost_df(runs: Mapping[str, Run], n_chapters: int) -> pd.DataFrame:
    """Table 5 layout from each run's ``usage_df()``: per component (atomizer, planner, executor,
    aggregator, total), the mean over stories of usage divided by the story's chapter count.

    Cost is 0 for local and scripted models (no API price) and NaN when a priced model reported none.
    """
    import pandas as pd

    if not runs:
        raise ValueError("component_cost_df needs at least one run")
    if n_chapters < 1:
        raise ValueError(f"n_chapters must be >= 1, got {n_chapters}")
    per_story = []
    for item_id, run in runs.items():
        usage = run.usage_df()
        models = [str(m) for m in (run.settings.models.values() if run.settings else ())]
        # in-process models cost 0 even where a call recorded no cost (cut off by a timeout, or a run
        # saved before the controller costed scripted calls so)
        if models and all(in_process(m) for m in models):
            usage["cost"] = usage["cost"].fillna(0.0)
        for col in ("calls", *_USAGE_COLUMNS):
            usage[col] = usage[col].astype(float) / n_chapters
        per_story.append(usage.assign(item_id=item_id))
    stacked = pd.concat(per_story, ignore_index=True)
    grouped = stacked.groupby("component", sort=False)
    table = grouped[["calls", *_USAGE_COLUMNS]].mean()  # NaN cost stays NaN (unknown is not zero)
    table["n_stories"] = grouped["item_id"].nunique()
    order = ["atomizer", "planner", "executor", "aggregator", "verifier", "total"]
    table = table.reindex([c for c in order if c in table.index])
    table.index.name = "component"
    return table.rename(columns={"calls": "calls_per_chapter", "cost": "cost_usd"}).reset_index()


def _beside_paper(components: pd.DataFrame, model: Any, task: TaskWording) -> pd.DataFrame:
    """The paper's Table 5 beside ours (``model``: the LM that wrote): one row per component x metric,
    in the paper's units."""
    from roma_lab.results import beside_paper

    label = model_label(model)

    ours = components.melt(id_vars=["component", "n_stories"], value_vars=list(_UNITS), var_name="metric")
    ours = ours.rename(columns={"component": "subset", "n_stories": "n"}).assign(
        condition=PAPER_NAME, unit=ours["metric"].map(_UNITS))
    n = int(components["n_stories"].max())
    ours["model"] = label
    ours["setting"] = (f"roma on {label}, depth 1; {n} stories of {task.n_chapters} chapters of about "
                       f"{task.chapter_words} words, one task each; per chapter = a run's usage / {task.n_chapters}")
    differs = (f"our roma runs on {label}, not as the paper's {PAPER_NAME}; our stories are {task.n_chapters} chapters "
               f"of about {task.chapter_words} words asked in one task, the paper's 8 chapter turns of 1000 words "
               f"in a 13-turn conversation; {n} stories")
    unpriced = "; our model has no API price, so its cost is 0" if in_process(model.model) else ""
    why = {"*": differs, "cost_usd": differs + unpriced}
    return beside_paper(ours, paper_reported_roma_df(), ARTEFACT, why=why,
                        why_not_measured="no call of this component in our finished stories")


def measure_component_cost(
    out_dir: str | os.PathLike[str],
    *,
    lm: Any = "local",
    n_items: int | None = 2,
    seed: int = 0,
    n_chapters: int = 3,
    chapter_words: int = 150,
    max_concurrency: int = 1,
    item_timeout_s: float | None = None,
) -> RomaTables:
    """ROMA Table 5: ROMA's default roles at depth 1 write ``n_items`` EQ-Bench stories; report each
    component's cost, tokens and latency per chapter (``component_cost_df``) beside the paper's
    DeepSeek-V3.1 figures. ``item_timeout_s``: the controller stops a story at this deadline (status
    ``timed_out``, not averaged); None = no deadline.

    Latency must be measured, so a named local or remote model is resolved with its completion cache
    off. The stories run through ``roma_lab.evaluate`` into ``<out_dir>/table5_runs/`` (a trace per
    story; a rerun resumes, and a story whose run failed or was stopped is written again).
    Per-chapter figures average ``completed`` stories only; ``table5_runs`` lists every story with a
    trace, with its ``status`` and whether it is ``averaged``. Writes table5_components, table5_runs,
    table5_vs_paper; returns them as :class:`RomaTables` (when no story completed, writes table5_runs
    only, then raises ``roma_lab.trace.RomaRunError``).
    """
    import pandas as pd

    from roma_lab.evaluate import TaskSet, evaluate, roma
    from roma_lab.results import write_table
    from roma_lab.trace import load_trace

    check_run(n_items, 1, max_concurrency, SYSTEMS)
    task = TaskWording(LONGFORM_TASK, n_chapters, chapter_words)
    out = Path(out_dir)
    model = resolve_lm(lm, cache=False)
    check_config(out, RunConfig(benchmark=ARTEFACT, model=model_label(model), judge="", max_depth=1,
                                max_concurrency=max_concurrency, search_backend="", longform_task=task("{prompt}")))
    items = sample(load_eqbench_longform(), n_items, seed)
    system = roma(model, task=task, max_depth=1, max_concurrency=max_concurrency, run_timeout_s=item_timeout_s)
    evaluation = evaluate([system], TaskSet(items[0].benchmark, tuple(items), source=f"benchmark:{items[0].benchmark}"),
                          _Ungraded(), out=out / f"{ARTEFACT}_runs", progress=False)
    rows = evaluation.rows[evaluation.rows["trace"].notna()]
    runs: dict[str, Run] = {task_id: load_trace(evaluation.out / path) for task_id, path in zip(rows["task_id"],
                                                                                             rows["trace"], strict=True)}
    # per-chapter cost describes completed stories only; the others are listed in table5_runs
    completed = {item_id: run for item_id, run in runs.items() if run.status == "completed"}
    story_rows = [{
        "task_id": item_id, "status": run.status, "wall_s": run.wall_s, "n_nodes": len(run.nodes),
        "n_calls": sum(len(n.calls) for n in run.nodes), "planned_subtasks": len(run.children("0")),
        "chapters_requested": n_chapters, "output_chars": len(run.output or ""), "averaged": item_id in completed,
    } for item_id, run in runs.items()]
    story_runs = pd.DataFrame(story_rows).assign(model=model_label(model))
    if not completed:
        write_table(story_runs, out, "table5_runs")
        raise RomaRunError(f"no story completed ({len(runs)} tried): their statuses are in "
                           f"{out / 'table5_runs.csv'}, their traces in {evaluation.out / 'traces'}")
    components = component_cost_df(completed, n_chapters).assign(model=model_label(model))
    tables = {"table5_components": components, "table5_runs": story_runs,
              "table5_vs_paper": _beside_paper(components, model, task)}
    for name, df in tables.items():
        write_table(df, out, name)
    return RomaTables(tables, out)
