"""ROMA paper Tables 1-6: ROMA and its base model on SEAL-0, FRAMES, SimpleQA, EQ-Bench long-form
and AbGen (graded, resumable), and the per-component cost of long-form writing (Table 5).

Measured tables never hold paper figures. Those come from ``paper_reported_roma.csv`` (each with
its seed line and source mark) and sit in separate columns of the ``*_vs_paper`` tables.
See design/roma_tables.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, partial
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from roma_lab.bench._data import (
    DataNotFoundError,
    Item,
    load_abgen,
    load_eqbench_longform,
    load_frames,
    load_seal0,
    load_simpleqa,
    sample,
)
from roma_lab.bench._graders import ABGEN_ASPECTS, grader_for
from roma_lab.bench._grade import DSPyJudge
from roma_lab.bench._run import RunFileError, read_results_df, run_benchmark
from roma_lab.bench._scripted import SCRIPTED, SCRIPTED_LABEL, ScriptedJudge, scripted_lm
from roma_lab.bench._summary import compare_df, summarize_df
from roma_lab.results import quarantine, write_text_atomic

if TYPE_CHECKING:
    import pandas as pd

    from roma_lab.controller import Run

SYSTEMS = ("roma", "base")
# Paper artefact of each benchmark this module runs.
PAPER_TABLES = {"seal0": "table1", "frames": "table2", "simpleqa": "table3", "simpleqa_verified": "table3",
                "eqbench_longform": "table4", "abgen": "table6"}
_LOADERS: Mapping[str, Callable[[], list[Item]]] = {
    "seal0": load_seal0, "frames": load_frames, "simpleqa": load_simpleqa,
    "simpleqa_verified": partial(load_simpleqa, verified=True), "eqbench_longform": load_eqbench_longform,
}
_NOTES = {
    "seal0": "we load the 2026 revision of SEAL-0; the paper (2025) scored an older revision",
    "simpleqa_verified": "the paper reports SimpleQA (4,326), not SimpleQA Verified",
    "eqbench_longform": "compact protocol (one task per prompt, few short chapters), judged as a final piece only; "
                        "the paper used 8 x 1000-word chapter turns and Claude Sonnet 4 as judge",
    "abgen": "the paper's Table 6 body is not in the seed text; only the rankings its prose states",
}
CLOSED_BOOK = "closed-book (offline, no search backend)"
_THREE_WAY_COLUMNS = ("is_correct", "is_incorrect", "is_not_attempted", "accuracy_given_attempted", "f1")

LONGFORM_TASK = (
    "Write a short story in {n_chapters} chapters of about {chapter_words} words each for this writing prompt:\n\n"
    "{prompt}\n\nEach chapter builds on the ones before it. Return the whole story, each chapter headed "
    "'Chapter N'."
)


class RunConfigMismatchError(ValueError):
    """``out_dir`` holds results made with other settings; resuming would mix them."""


class RomaRunError(RuntimeError):
    """ROMA's root task failed; recorded as a system error row (its run JSON is kept)."""


class RunConfig(BaseModel):
    """What must match for a rerun to resume into the same results (``<benchmark>_run_config.json``).

    The sample size and seed are not part of it: rows are keyed by item, so a larger sample
    reuses every finished item.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: str
    model: str
    judge: str
    max_depth: int
    max_concurrency: int
    search_backend: str
    longform_task: str


def paper_reported_roma_df() -> pd.DataFrame:
    """Every figure of ROMA paper Tables 1-6 as reported, with its seed line and source mark."""
    import pandas as pd

    with resources.files(__package__).joinpath("paper_reported_roma.csv").open(encoding="utf-8") as f:
        return pd.read_csv(f, keep_default_na=False, na_values={"value": [""]})


def longform_task(prompt: str, *, n_chapters: int, chapter_words: int) -> str:
    """The task both systems get for one EQ-Bench prompt (the judge sees the original prompt)."""
    return LONGFORM_TASK.format(n_chapters=n_chapters, chapter_words=chapter_words, prompt=prompt)


def _identity(question: str) -> str:
    return question


# --- models, judges and the two systems ----------------------------------------------------------


def resolve_model(lm: Any, **kwargs: Any) -> Any:
    """``"scripted"`` -> the scripted test double; any other name -> ``roma_lab.lm.resolve_lm``;
    an LM object is used as it is."""
    if lm == SCRIPTED:
        return scripted_lm()
    if isinstance(lm, str):
        from roma_lab.lm import resolve_lm

        return resolve_lm(lm, **kwargs)
    return lm


def model_label(lm: Any) -> str:
    name = str(getattr(lm, "model", type(lm).__name__))
    return SCRIPTED_LABEL if name.startswith(f"{SCRIPTED}/") else name


def resolve_judge(judge_lm: Any, model: Any = None, model_name: Any = None):
    """None or "" -> no judge (string-match fallback); "scripted" -> :class:`ScriptedJudge`; a model
    name or LM -> :class:`DSPyJudge`. A judge named like the task model reuses that model object."""
    if judge_lm is None or judge_lm == "":
        return None
    if judge_lm == SCRIPTED:
        return ScriptedJudge()
    if isinstance(judge_lm, str):
        return DSPyJudge(model if judge_lm == model_name and model is not None else resolve_model(judge_lm))
    if hasattr(judge_lm, "forward") or hasattr(judge_lm, "model"):  # a dspy LM object
        return DSPyJudge(judge_lm)
    return judge_lm  # already a Judge callable


@cache
def _direct_signature():
    import dspy

    class DirectAnswer(dspy.Signature):
        """Answer the question or carry out the task directly, in one reply."""

        question: str = dspy.InputField()
        answer: str = dspy.OutputField()

    return DirectAnswer


@dataclass(frozen=True, slots=True)
class BaseSystem:
    """The base-model row: the same model called once (``dspy.Predict`` question -> answer, JSON adapter)."""

    lm: Any
    task: Callable[[str], str] = _identity

    def __call__(self, question: str) -> str:
        import dspy

        with dspy.context(lm=self.lm, adapter=dspy.JSONAdapter()):
            return dspy.Predict(_direct_signature())(question=self.task(question)).answer


def _run_file(runs_dir: Path, item_id: str) -> Path:
    safe = re.sub(r"[^\w.-]", "_", item_id)
    if safe != item_id:  # keep distinct ids distinct after cleaning
        safe += "-" + hashlib.sha256(item_id.encode()).hexdigest()[:8]
    return runs_dir / f"{safe}.json"


@dataclass(frozen=True, slots=True)
class RomaSystem:
    """ROMA as a benchmark system: runs the controller, saves each item's Run JSON, answers with the
    root output. A failed root raises :class:`RomaRunError` (an error row; the JSON is still saved)."""

    roma: Any  # roma_lab.controller.Roma
    runs_dir: Path
    item_ids: Mapping[str, str]  # question -> item_id, to name the run file
    task: Callable[[str], str] = _identity

    def __call__(self, question: str) -> str:
        run = self.roma.run(self.task(question))
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(_run_file(self.runs_dir, self.item_ids[question]), run.to_json())
        if run.status == "failed" or run.output is None:
            raise RomaRunError(f"ROMA root failed: {run.root.error}")
        return run.output


def load_item_run(out_dir: str | os.PathLike[str], benchmark: str, item_id: str | None = None) -> Run:
    """The saved ROMA run of one item (``item_id=None``: the first saved item in sorted order)."""
    runs_dir = Path(out_dir) / f"{benchmark}_runs"
    if item_id is None or item_id == "":
        files = sorted(runs_dir.glob("*.json"))
        if not files:
            raise FileNotFoundError(f"no saved ROMA runs in {runs_dir}")
        path = files[0]
    else:
        path = _run_file(runs_dir, str(item_id))
        if not path.is_file():
            raise FileNotFoundError(f"no saved ROMA run for item {item_id!r} in {runs_dir}")
    saved = _saved_run(path)
    if saved is None:
        raise RunFileError(f"{path} is not a saved ROMA run (damaged or edited); rerun the table to run that item again")
    return saved


def _saved_run(path: Path) -> Run | None:
    """The Run saved at ``path``, or None when the file is damaged (not a valid Run JSON)."""
    from roma_lab.controller import Run

    try:
        return Run.from_json(path.read_bytes())  # bytes: invalid UTF-8 is a validation error too
    except ValueError:
        return None


def _damaged_traces(runs_dir: Path, results_path: Path, items: Sequence[Item]) -> set[str]:
    """Items whose saved ROMA trace is damaged (moved aside) or missing although their row is
    finished: they run again, so every finished item can be shown."""
    finished: set[str] = set()
    if results_path.is_file():
        rows = read_results_df(results_path)
        finished = set(rows.loc[(rows["system"] == "roma") & rows["error"].isna(), "item_id"])
    redo = set()
    for item in items:
        path = _run_file(runs_dir, item.item_id)
        if path.is_file() and _saved_run(path) is None:
            quarantine(path, "damaged ROMA trace; the item is run again")
            redo.add(item.item_id)
        elif not path.is_file() and item.item_id in finished:
            redo.add(item.item_id)
    return redo


def saved_item_ids(out_dir: str | os.PathLike[str], benchmark: str) -> list[str]:
    """Item ids with a saved ROMA run: in results-file order, or the run files' names (Table 5)."""
    runs_dir = Path(out_dir) / f"{benchmark}_runs"
    results = Path(out_dir) / f"{benchmark}_results.csv"
    if not results.is_file():
        return sorted(p.stem for p in runs_dir.glob("*.json"))
    df = read_results_df(results)
    ids = df.loc[df["system"] == "roma", "item_id"].tolist()
    return [i for i in ids if _run_file(runs_dir, i).is_file()]


# --- settings guard -------------------------------------------------------------------------------


def _check_config(out_dir: Path, config: RunConfig) -> None:
    """Refuse to resume into results made with other settings; record the settings otherwise."""
    path = out_dir / f"{config.benchmark}_run_config.json"
    previous = None
    if path.is_file():
        try:
            previous = RunConfig.model_validate_json(path.read_bytes())
        except ValidationError:
            # The settings the results were made with are unknown, so they cannot be resumed: keep them
            # aside and start this benchmark over.
            for damaged in (path, out_dir / f"{config.benchmark}_results.csv", out_dir / f"{config.benchmark}_runs"):
                if damaged.exists():
                    quarantine(damaged, f"{path.name} is damaged, so the settings of these results are unknown; "
                                        f"{config.benchmark} starts over")
    if previous is not None:
        if previous != config:
            changed = {k: (getattr(previous, k), getattr(config, k)) for k in RunConfig.model_fields
                       if getattr(previous, k) != getattr(config, k)}
            raise RunConfigMismatchError(
                f"{out_dir} holds {config.benchmark} results made with other settings {changed} (old, new); "
                "use a new out_dir or delete the old results")
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, config.model_dump_json(indent=1))


def _check_common(n_items: int | None, max_depth: int, max_concurrency: int, systems: Sequence[str]) -> None:
    if n_items is not None and (not isinstance(n_items, int) or n_items < 1):
        raise ValueError(f"n_items must be a positive integer or None (all items), got {n_items!r}")
    if max_depth < 0 or max_concurrency < 1:
        raise ValueError(f"need max_depth >= 0 and max_concurrency >= 1, got {max_depth}, {max_concurrency}")
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown or not systems or len(set(systems)) != len(systems):
        raise ValueError(f"systems must be distinct names from {SYSTEMS}, got {list(systems)!r}")


# --- tables -----------------------------------------------------------------------------------------


def _setting(system: str, search_backend: str) -> str:
    if system == "base":
        return "closed-book (single call)"
    return f"search: BM25 over {search_backend}" if search_backend else CLOSED_BOOK


def _aspect_means(results: pd.DataFrame) -> pd.DataFrame:
    """AbGen's four Likert aspects, mean per system over graded items (the score is 'overall')."""
    import pandas as pd

    graded = results[results["details"].astype(str).str.len() > 0]
    rows = [{"system": r.system, **json.loads(r.details)} for r in graded.itertuples()]
    if not rows:
        return pd.DataFrame(columns=["system", *ABGEN_ASPECTS])
    return pd.DataFrame(rows).groupby("system", sort=False)[list(ABGEN_ASPECTS)].mean().reset_index()


def _vs_paper(benchmark: str, summary: pd.DataFrame | None, aspects: pd.DataFrame | None) -> pd.DataFrame:
    """Paper rows (as reported, with marks) and measured rows in one long table, in separate columns."""
    import pandas as pd

    artefact = PAPER_TABLES[benchmark]
    paper = paper_reported_roma_df().query("artefact == @artefact")
    rows = [{
        "origin": "paper", "group": p.group, "system": p.system, "mark": p.mark, "mark_meaning": p.mark_meaning,
        "search": p.search, "metric": p.metric, "unit": p.unit, "paper_value": p.value, "measured_value": math.nan,
        "ci_low": math.nan, "ci_high": math.nan, "n_items": math.nan, "model": "", "judge": "",
        "setting": "as reported", "source": p.source,
    } for p in paper.itertuples()]
    percent = benchmark not in ("eqbench_longform", "abgen")
    scale = 100.0 if percent else 1.0
    for s in ([] if summary is None else summary.itertuples()):
        measured = [("accuracy" if percent else "score", s.mean_score, s.ci_low, s.ci_high)]
        if aspects is not None:
            mine = aspects[aspects["system"] == s.system]
            measured = [(a, float(mine[a].iloc[0]) if len(mine) else math.nan,
                         s.ci_low if a == "overall" else math.nan, s.ci_high if a == "overall" else math.nan)
                        for a in ABGEN_ASPECTS]
        for metric, value, low, high in measured:
            rows.append({
                "origin": "measured", "group": "this run", "system": s.system, "mark": "", "mark_meaning": "",
                "search": s.setting, "metric": metric,
                "unit": "percent" if percent else ("score 0-100" if benchmark == "eqbench_longform" else "Likert 1-5"),
                "paper_value": math.nan, "measured_value": value * scale, "ci_low": low * scale,
                "ci_high": high * scale, "n_items": s.n_items, "model": s.model, "judge": s.grader,
                "setting": s.setting, "source": f"this run; {_NOTES[benchmark]}" if benchmark in _NOTES else "this run",
            })
    return pd.DataFrame(rows)


def _abgen_status(abgen_path: str | None, n_loaded: int | None, error: str | None) -> pd.DataFrame:
    import pandas as pd

    from roma_lab.bench._data import _ABGEN_HELP

    if error is None:
        row = {"status": "ran", "data": str(abgen_path), "n_items_in_file": n_loaded, "message": (
            f"ran on the user-supplied file {abgen_path}")}
    else:
        row = {"status": "data not available", "data": str(abgen_path or ""), "n_items_in_file": 0, "message": (
            f"AbGen was not run: {error} To run Table 6, set ABGEN_PATH to the file. {_ABGEN_HELP}")}
    return pd.DataFrame([row])


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
    systems: Sequence[str] = SYSTEMS,
    n_chapters: int = 3,
    chapter_words: int = 150,
    abgen_path: str | os.PathLike[str] | None = None,
    item_timeout_s: float | None = None,
    n_resamples: int = 2000,
    progress: bool = True,
) -> dict[str, pd.DataFrame]:
    """ROMA paper Table 1 (``seal0``), 2 (``frames``), 3 (``simpleqa``/``simpleqa_verified``),
    4 (``eqbench_longform``) or 6 (``abgen``): ROMA vs its base model on a seeded sample.

    ``lm``: a model name for ``roma_lab.lm.resolve_lm`` (``"local"`` = embedded Qwen2.5-Coder-1.5B),
    ``"scripted"`` (a deterministic test double, labelled so), or a ``dspy.LM``. ``judge_lm``: the
    grading model (same forms; None or "" = the benchmark's string-match fallback, labelled
    "string-match, not the official judge"; EQ-Bench and AbGen need a judge). ``search_backend``: a
    corpus (folder or .jsonl) for ROMA's BM25 search executor; None = closed-book. ``n_items=None``
    runs the whole benchmark. Long-form tasks ask for ``n_chapters`` of ``chapter_words`` words.
    ``abgen_path``: the user's AbGen JSON/JSONL file; without one only a status table is written.

    Writes into ``out_dir``: ``<benchmark>_results.csv`` (one row per item x system, appended as each
    finishes: a rerun with the same settings skips finished items and retries error rows),
    ``<benchmark>_runs/<item>.json`` (ROMA's trace per item), ``<benchmark>_summary.csv`` (mean with
    task-bootstrap 95% CI; three-way metrics for SEAL-0/SimpleQA), ``<benchmark>_paired.csv`` (ROMA
    minus base: paired CI, exact sign test), ``<benchmark>_vs_paper.csv``; for AbGen also
    ``abgen_status.csv``. Returns the tables by file stem.
    """
    if benchmark not in PAPER_TABLES:
        raise ValueError(f"benchmark must be one of {sorted(PAPER_TABLES)}, got {benchmark!r}")
    _check_common(n_items, max_depth, max_concurrency, systems)
    if benchmark == "eqbench_longform" and (n_chapters < 1 or chapter_words < 1):
        raise ValueError(f"need n_chapters >= 1 and chapter_words >= 1, got {n_chapters}, {chapter_words}")
    from roma_lab.results import write_table

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tables: dict[str, pd.DataFrame] = {}
    if benchmark == "abgen":
        try:
            if not abgen_path:
                raise DataNotFoundError("no AbGen file given (ABGEN_PATH is empty).")
            all_items = load_abgen(abgen_path)
        except DataNotFoundError as exc:
            tables["abgen_status"] = _abgen_status(abgen_path, None, str(exc))
            tables["abgen_vs_paper"] = _vs_paper(benchmark, None, None)
            for name, df in tables.items():
                write_table(df, out, name)
            return tables
        tables["abgen_status"] = _abgen_status(abgen_path, len(all_items), None)
    else:
        all_items = _LOADERS[benchmark]()
    items = sample(all_items, n_items, seed)
    questions = [it.question for it in items]
    if len(set(questions)) != len(questions):
        raise ValueError(f"{benchmark}: the sample holds duplicate questions; ROMA runs are saved per question")

    model = resolve_model(lm)
    judge = resolve_judge(judge_lm, model, lm)
    grader = grader_for(benchmark, judge)  # raises for rubric benchmarks without a judge
    task = (partial(longform_task, n_chapters=n_chapters, chapter_words=chapter_words)
            if benchmark == "eqbench_longform" else _identity)
    config = RunConfig(benchmark=benchmark, model=model_label(model), judge=grader.name, max_depth=max_depth,
                       max_concurrency=max_concurrency, search_backend=str(search_backend or ""),
                       longform_task=task("{prompt}"))
    _check_config(out, config)

    results_path = out / f"{benchmark}_results.csv"
    for name in systems:
        if name == "roma":
            from roma_lab.controller import Roma

            roma = Roma(lm=model, corpus=search_backend or None, max_depth=max_depth, max_concurrency=max_concurrency)
            system = RomaSystem(roma, out / f"{benchmark}_runs", {it.question: it.item_id for it in items}, task)
            redo = _damaged_traces(out / f"{benchmark}_runs", results_path, items)
        else:
            system, redo = BaseSystem(model, task), set()
        run_benchmark(items, system, grader, out_path=results_path, system_name=name, timeout_s=item_timeout_s,
                      progress=progress, redo=redo)

    results = read_results_df(results_path)
    keys = {(it.benchmark, it.item_id) for it in items}
    results = results[[k in keys for k in zip(results["benchmark"], results["item_id"], strict=True)]]
    summary = summarize_df(results, n_resamples=n_resamples, seed=seed)
    if benchmark in ("eqbench_longform", "abgen"):
        # summarize_df reads an all-None label column as three-way; rubric scores have no such metrics.
        summary = summary.drop(columns=[c for c in _THREE_WAY_COLUMNS if c in summary])
    summary.insert(2, "model", config.model)
    summary.insert(3, "setting", [_setting(s, config.search_backend) for s in summary["system"]])
    aspects = _aspect_means(results) if benchmark == "abgen" else None
    tables[f"{benchmark}_results"] = results.reset_index(drop=True)
    tables[f"{benchmark}_summary"] = summary
    if set(SYSTEMS) <= set(systems):
        tables[f"{benchmark}_paired"] = compare_df(results, "roma", "base", n_resamples=n_resamples, seed=seed)
    tables[f"{benchmark}_vs_paper"] = _vs_paper(benchmark, summary, aspects)
    for name, df in tables.items():
        if name != f"{benchmark}_results":  # run_benchmark wrote that file row by row
            write_table(df, out, name)
    return tables


# --- Table 5: per-component cost of long-form writing at depth 1 -----------------------------------

_NO_PRICE_PREFIXES = ("local/", f"{SCRIPTED}/")  # no API bill: cost 0, not unknown
_USAGE_COLUMNS = ("cost", "input_tokens", "output_tokens", "latency_s")


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
        models = [str(m) for m in run.settings.get("models", {}).values()]
        if models and all(m.startswith(_NO_PRICE_PREFIXES) for m in models):
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


def _table5_vs_paper(ours: pd.DataFrame, model: str) -> pd.DataFrame:
    import pandas as pd

    paper = paper_reported_roma_df().query("artefact == 'table5'")
    rows = []
    for p in paper.itertuples():
        mine = ours[ours["component"] == p.component]
        rows.append({
            "component": p.component, "metric": p.metric, "unit": p.unit,
            "paper_value": p.value, "paper_model": p.system,
            "measured_value": float(mine[p.metric].iloc[0]) if len(mine) else math.nan,
            "measured_model": model, "source": p.source,
        })
    return pd.DataFrame(rows)


def measure_component_cost(
    out_dir: str | os.PathLike[str],
    *,
    lm: Any = "local",
    n_items: int | None = 2,
    seed: int = 0,
    n_chapters: int = 3,
    chapter_words: int = 150,
    max_concurrency: int = 1,
) -> dict[str, pd.DataFrame]:
    """ROMA Table 5: ROMA's default roles at depth 1 write ``n_items`` EQ-Bench stories; report each
    component's cost, tokens and latency per chapter (``component_cost_df``) beside the paper's
    DeepSeek-V3.1 figures.

    Latency must be measured, so a named local or remote model is resolved with its completion cache
    off. A story whose completed run JSON is already in ``<out_dir>/table5_runs/`` is reused
    (resume); an unfinished one is run again. Per-chapter figures average finished stories only.
    Writes table5_components, table5_runs (one row per story), table5_vs_paper; returns them.
    """
    import pandas as pd

    from roma_lab.controller import Roma
    from roma_lab.results import write_table

    _check_common(n_items, 1, max_concurrency, SYSTEMS)
    if n_chapters < 1 or chapter_words < 1:
        raise ValueError(f"need n_chapters >= 1 and chapter_words >= 1, got {n_chapters}, {chapter_words}")
    out = Path(out_dir)
    model = resolve_model(lm, cache=False) if isinstance(lm, str) and lm != SCRIPTED else resolve_model(lm)
    task = partial(longform_task, n_chapters=n_chapters, chapter_words=chapter_words)
    _check_config(out, RunConfig(benchmark="table5", model=model_label(model), judge="", max_depth=1,
                                 max_concurrency=max_concurrency, search_backend="", longform_task=task("{prompt}")))
    runs_dir = out / "table5_runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    roma = Roma(lm=model, max_depth=1, max_concurrency=max_concurrency)
    runs: dict[str, Run] = {}
    for item in sample(load_eqbench_longform(), n_items, seed):
        path = _run_file(runs_dir, item.item_id)
        saved = _saved_run(path) if path.is_file() else None
        if path.is_file() and saved is None:
            quarantine(path, "damaged ROMA trace; the story is written again")
        if saved is not None and saved.status == "completed":  # an unfinished story is run again, like an error row
            runs[item.item_id] = saved
            continue
        run = roma.run(task(item.question))
        write_text_atomic(path, run.to_json())
        runs[item.item_id] = run
    # per-chapter cost describes finished stories only; unfinished ones are counted in table5_runs
    finished = {item_id: run for item_id, run in runs.items() if run.status == "completed"}
    if not finished:
        raise RomaRunError(f"no story finished ({len(runs)} tried); see {runs_dir} for their traces")
    components = component_cost_df(finished, n_chapters)
    story_rows = [{
        "item_id": item_id, "status": run.status, "wall_s": run.wall_s, "n_nodes": len(run.nodes),
        "n_calls": sum(len(n.calls) for n in run.nodes), "planned_subtasks": len(run.children("0")),
        "chapters_requested": n_chapters, "output_chars": len(run.output or ""),
    } for item_id, run in runs.items()]
    tables = {"table5_components": components, "table5_runs": pd.DataFrame(story_rows),
              "table5_vs_paper": _table5_vs_paper(components, model_label(model))}
    for name, df in tables.items():
        write_table(df, out, name)
    return tables
