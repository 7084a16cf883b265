"""ROMA paper Tables 1-4 and 6: ROMA and a single call of its model on a benchmark of the registry,
run by ``roma_lab.evaluate`` (graded, resumable, traces saved), summarised in the results vocabulary
and set beside the paper's figures.

Measured tables never hold paper figures; those come from ``paper_reported_roma.csv`` through
``roma_lab.results.beside_paper``. See design/roma_tables.md and design/results_vocabulary.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roma_lab.bench import (BENCHMARKS, STRING_MATCH, BenchmarkSpec, DataNotFoundError, Item, benchmark_spec,
                            compare_systems, sample, summarize_results)
from roma_lab.lm import model_label, resolve_lm
from roma_lab.papers.roma._run_config import RunConfig, check_config
from roma_lab.papers.roma._systems import (
    CLOSED_BOOK,
    SINGLE_CALL,
    SYSTEMS,
    TaskWording,
    check_run,
    make_system,
    resolve_judge,
    system_setting,
)
from roma_lab.papers.roma._tables import RomaTables
from roma_lab.stats import DEFAULT_STATS, StatsSettings

if TYPE_CHECKING:
    import pandas as pd

#: Why a paper row of a system we do not run has no measurement.
OTHER_SYSTEM = "another system: this lab runs ROMA and a single call of its model only (offline: no API models, no web search)"


def paper_reported_roma_df() -> pd.DataFrame:
    """Every figure of ROMA paper Tables 1-6 in the vocabulary schema, each with its seed line."""
    from roma_lab.results import read_paper_reported

    with resources.as_file(resources.files(__package__).joinpath("paper_reported_roma.csv")) as path:
        return read_paper_reported(path)


@dataclass(frozen=True, slots=True)
class _Measured:
    """How one of our systems was measured: the facts behind its ``setting`` and its reasons."""

    system: str
    model: str
    grader: str
    setting: str  # closed-book, or the search corpus
    n_sampled: int
    n_total: int
    seed: int

    def describe(self) -> str:
        return (f"{self.system} on {self.model}; {self.setting}; graded by {self.grader}; sample of {self.n_sampled} "
                f"of {self.n_total} items (seed {self.seed})")


def _difference(row: Mapping[str, Any], measured: _Measured, spec: BenchmarkSpec) -> str:
    """Why our figure differs from the paper's, from the facts of the run (never typed per table)."""
    reasons = [f"our {measured.system} runs on {measured.model}, not as the paper's {row['condition']}"]
    if "search: yes" in row["paper_note"]:
        closed_book = measured.setting in (CLOSED_BOOK, SINGLE_CALL)
        reasons.append("closed-book here, the paper's row searched the web" if closed_book
                       else f"the paper's row searched the web; ours: {measured.setting}")
    reasons.append("graded by string match, not the official judge" if measured.grader == STRING_MATCH
                   else f"graded by {measured.grader}")
    ci = {True: "inside our 95% CI: the gap may be sampling noise", False: "outside our 95% CI",
          None: "no CI (fewer than 2 scored items)"}[row["paper_in_ci"]]
    reasons.append(f"{row['n']:.0f} scored items of {measured.n_total}; the paper's figure is {ci}")
    return "; ".join(reasons + ([spec.note] if spec.note else []))


def _beside_paper(spec: BenchmarkSpec, summary: pd.DataFrame | None, measured: Mapping[str, _Measured],
                  not_run: str) -> pd.DataFrame:
    """The paper's figures of ``spec.artefact`` beside our ``summary`` rows of its score metric.

    Our systems take the names of the paper's rows they stand beside (``spec.paper_names``); a
    system without one is ``not in paper``. ``not_run`` says why a system we have was not measured.
    """
    import pandas as pd

    from roma_lab.results import beside_paper

    if summary is None:
        ours = pd.DataFrame(columns=["condition", "subset", "metric", "value"])
    else:
        ours = summary[summary["metric"] == spec.metric]
        ours = ours.assign(setting=[measured[system].describe() for system in ours["condition"]],
                           condition=ours["condition"].replace(dict(spec.paper_names)))
    by_paper_name = {spec.paper_names.get(system, system): m for system, m in measured.items()}

    def why(row: Mapping[str, Any]) -> str:
        return _difference(row, by_paper_name[row["condition"]], spec)

    def why_not_measured(row: Mapping[str, Any]) -> str:
        if spec.unmeasured:
            return spec.unmeasured
        if row["condition"] not in spec.paper_names.values():
            return OTHER_SYSTEM
        if row["subset"] != spec.name:
            return f"this run measured {spec.name}: {spec.note}"
        return not_run

    return beside_paper(ours, paper_reported_roma_df(), spec.artefact, why=why, why_not_measured=why_not_measured)


def _user_data(spec: BenchmarkSpec, path: str | os.PathLike[str] | None) -> tuple[pd.DataFrame, list[Item] | None]:
    """A user-supplied benchmark file (AbGen): the status table, and the items (None: not available)."""
    import pandas as pd

    try:
        if not path:
            raise DataNotFoundError(f"no {spec.name} file given (data_path is empty).")
        items = spec.load(path)
    except DataNotFoundError as exc:
        return pd.DataFrame([{"status": "data not available", "data": str(path or ""), "n_items_in_file": 0,
                              "message": f"{spec.name} was not run: {exc} {spec.user_file}"}]), None
    return pd.DataFrame([{"status": "ran", "data": str(path), "n_items_in_file": len(items),
                          "message": f"ran on the user-supplied file {path}"}]), items


def _web_spec(web: Any) -> str:
    """The provider spec of ``web`` ("" without one), as the run's settings record it."""
    if not web:
        return ""
    if isinstance(web, str):
        return web
    return web.provider.spec if hasattr(web, "provider") else web.search


# The controller stops itself at its deadline and saves its trace; the runner's thread timeout (which
# cannot stop the thread) is only for the base model and a controller that fails to stop.
_BACKSTOP_S = 60.0


def run_roma_table(
    benchmark: str,
    out_dir: str | os.PathLike[str],
    *,
    lm: Any = "local",
    judge_lm: Any = None,
    n_items: int | None = 5,
    seed: int = 0,
    max_depth: int = 1,
    max_concurrency: int = 1,
    search_backend: str | None = None,
    web: Any = None,
    systems: Sequence[str] = SYSTEMS,
    n_chapters: int = 3,
    chapter_words: int = 150,
    data_path: str | os.PathLike[str] | None = None,
    item_timeout_s: float | None = None,
    stats: StatsSettings = DEFAULT_STATS,
    progress: bool = True,
) -> RomaTables:
    """ROMA paper Table 1 (``seal0``), 2 (``frames``), 3 (``simpleqa``/``simpleqa_verified``),
    4 (``eqbench_longform``) or 6 (``abgen``): ROMA vs its base model on a seeded sample.

    ``lm``: a model name for ``roma_lab.lm.resolve_lm`` (``"local"`` = embedded Qwen2.5-Coder-1.5B),
    ``"scripted"`` (a deterministic test double, labelled so), or a ``dspy.LM``. ``judge_lm``: the
    grading model (same forms, or a judge callable; None or "" = the benchmark's string-match
    fallback, labelled "string-match, not the official judge"; EQ-Bench and AbGen need a judge).
    ``search_backend``: a corpus (folder or .jsonl) for ROMA's BM25 search executor; ``web``: the web
    instead (a provider spec such as ``"serper"`` or ``"searxng=http://host:port"``, a
    ``roma_lab.web.WebSettings`` or ``Web``; "" or None: none). Neither: closed-book. ``n_items=None`` runs the whole benchmark. Long-form tasks ask for ``n_chapters`` of
    ``chapter_words`` words. ``item_timeout_s``: ROMA stops an item's run at this deadline (a
    ``timed_out`` run, trace saved, an error row naming it); the runner's hard limit per item, for
    the base model and as a backstop, is a minute later. None = no deadline. ``data_path``: the user's file for a benchmark not available offline
    (AbGen JSON/JSONL); without one only a status table and the paper's figures are written.

    Writes into ``out_dir``: ``<benchmark>_runs/`` (the ``roma_lab.evaluate`` folder of the run: its
    attempt log, a trace per item and system, rows; a rerun with the same settings skips finished items
    and retries error rows), ``<benchmark>_results.csv`` (its rows, with the model), ``<benchmark>_summary.csv``
    (one row per system x metric: mean with task-bootstrap 95% CI; simple-evals' metrics for three-way
    graders), ``<benchmark>_paired.csv`` (ROMA minus the single call: paired CI, exact sign test),
    ``<benchmark>_vs_paper.csv`` (``roma_lab.results.beside_paper``); for AbGen also ``abgen_status.csv``.
    Returns them as :class:`RomaTables` by file stem. ``seed`` draws the items; ``stats`` (resamples,
    bootstrap seed, level, alpha, power) computes the CIs and tests, and goes to the folder's provenance.
    """
    spec = benchmark_spec(benchmark)
    if not spec.artefact:
        raise ValueError(f"{benchmark!r} is not in a ROMA paper table; tables run "
                         f"{sorted(name for name, s in BENCHMARKS.items() if s.artefact)}")
    check_run(n_items, max_depth, max_concurrency, systems)
    task = TaskWording(spec.task, n_chapters, chapter_words)
    from roma_lab.results import record_stats, write_table

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables: dict[str, pd.DataFrame] = {}
    if spec.user_file:
        status, all_items = _user_data(spec, data_path)
        tables[f"{benchmark}_status"] = status
        if all_items is None:
            tables[f"{benchmark}_vs_paper"] = _beside_paper(spec, None, {}, status.at[0, "message"])
            for name, df in tables.items():
                write_table(df, out, name)
            return RomaTables(tables, out)
    else:
        all_items = spec.load()
    items = sample(all_items, n_items, seed)
    model = resolve_lm(lm)
    judge = resolve_judge(judge_lm, model, lm)
    grader = spec.grader(judge)  # raises for rubric benchmarks without a judge
    config = RunConfig(benchmark=benchmark, model=model_label(model), judge=grader.name, max_depth=max_depth,
                       max_concurrency=max_concurrency, search_backend=str(search_backend or ""),
                       web=_web_spec(web),
                       longform_task=task("{prompt}"))
    check_config(out, config)

    from roma_lab.evaluate import TaskSet, evaluate
    from roma_lab.web import open_web

    built = [make_system(name, model, task, max_depth=max_depth, max_concurrency=max_concurrency,
                         run_timeout_s=item_timeout_s) for name in systems]
    tasks = TaskSet(benchmark, tuple(items), corpus=config.search_backend or None, grader=grader,
                    source=f"benchmark:{benchmark}", web=open_web(web) if web else None)
    evaluation = evaluate(built, tasks, grader, out=out / f"{benchmark}_runs", progress=progress, stats=stats,
                          timeout_s=None if item_timeout_s is None else item_timeout_s + _BACKSTOP_S)
    results = evaluation.rows
    summary = summarize_results(results, spec, stats=stats)
    settings = {name: system_setting(name, config.search_backend, config.web) for name in systems}
    summary = summary.assign(model=config.model, setting=summary["condition"].map(settings))
    # the graders as they named themselves on the rows (EQ-Bench's says "final-piece-only")
    graders = dict(zip(summary["condition"], summary["grader"]))
    measured = {name: _Measured(name, config.model, graders[name], settings[name], len(items), len(all_items), seed)
                for name in systems}
    # the run file keeps its columns; the model is the run's (check_config holds one per folder)
    tables[f"{benchmark}_results"] = results.reset_index(drop=True).assign(model=config.model)
    tables[f"{benchmark}_summary"] = summary
    if set(SYSTEMS) <= set(systems):
        tables[f"{benchmark}_paired"] = compare_systems(results, spec, "roma", "single", stats=stats).assign(
            model=config.model)
    tables[f"{benchmark}_vs_paper"] = _beside_paper(spec, summary, measured,
                                                    f"not run: this call's systems were {list(systems)}")
    for name, df in tables.items():
        write_table(df, out, name)
    record_stats(out, stats)
    return RomaTables(tables, out, stats)
