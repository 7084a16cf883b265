"""The OAgents study notebooks' experiments, one function each: which conditions (named as the paper
names them), which tasks, which paper artefacts. Fixed before anything was scored: the studies run
on the generated-world agent benchmark (``agents.world_tasks``, design/world_benchmark.md; the
meta-routing suite's tool view stays the router's benchmark), its evaluation split is ``test`` (dev
served only to make a step cheap, train only to mine plan tips and the floors' priors), tasks are
drawn by ``world_tasks`` with the notebook's seed from the ``levels`` it names (every level unless
told: the notebooks name the levels a dev-split pilot showed the model has room at,
design/world_benchmark.md), and every condition of a notebook runs on the same tasks and runs. Each function returns ``run_study``'s tables, with the benchmark's floors on
the same tasks in ``extra["floors"]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from roma_lab.agents import AgentConfig, AgentTask, world_level, world_tasks
from roma_lab.world import LEVELS as WORLD_LEVELS
from roma_lab.stats import DEFAULT_STATS, StatsSettings

from ._study import Condition, OAgentsTables, _model_name, run_conditions, run_study, success

__all__ = ["SAVED_STUDIES", "STUDY_SPLIT", "compare_backbones", "compare_memory", "compare_planning",
           "compare_saved_runs", "compare_search", "compare_tts", "evaluate_browsecomp", "levels_tables",
           "measure_levels", "measure_protocol"]

#: The split every study scores (train: tips and floor priors only; dev: development only).
STUDY_SPLIT = "test"
_WORLD = ("the generated-world agent benchmark ({split} split, levels {levels}, world seed {world_seed}, "
          "GAIA's quasi-exact match)")
WORLD_LEVEL_RULE = ("levels of the generated world (L1: one lookup, L2: two or three hops, L3: hops and a "
                    "computation over a ledger file), GAIA-like, not GAIA's tasks")
_OFFLINE = "offline: this lab runs only the embedded models and configurations of this study"


def _tasks(split: str, n_tasks: int | None, seed: int, **sources: Any) -> list[AgentTask]:
    if split == "train":
        raise ValueError("train is for mining plan tips only; score on dev (development) or test")
    return world_tasks(split, n_tasks, seed=seed, **sources)


def _study(out_dir: str | Path, *, tasks: Sequence[AgentTask], split: str, prefix: str,
           levels: Sequence[str] = WORLD_LEVELS, **study: Any) -> OAgentsTables:
    """``run_study`` on world tasks, plus the floors on the same tasks, written as
    ``<prefix>_floors.csv``: the fixed scripts of ``agents.floors_table`` (priors from the train
    split) and ``closed-book model``, the study's first condition's model answering the same tasks
    with no tool (``agents.closed_book``, its runs under ``runs/``). The room the benchmark leaves."""
    import pandas as pd

    from roma_lab.agents import closed_book, floors_df, floors_table
    from roma_lab.results import write_table

    seed = int(tasks[0].item.metadata["world_seed"]) if tasks else 0
    tables = run_study(out_dir, prefix=prefix, tasks=tasks, level=world_level, level_rule=WORLD_LEVEL_RULE,
                       benchmark=study.pop("benchmark", _WORLD.format(split=split, levels=", ".join(levels),
                                                                      world_seed=seed)), **study)
    first = study["conditions"][0].config  # the closed-book model decodes as the first condition does
    named = {k: v for k, v in first.models.items() if k == "actor"}
    closed = run_conditions([Condition("closed_book", AgentConfig(name="closed_book", models=named,
                                                                  temperature=first.temperature))],
                            closed_book(tasks), Path(out_dir) / "runs" / "closed_book", runs=1, lm=study.get("lm"),
                            progress=False)
    scored = closed.assign(floor="closed-book model", level=closed["stratum"], score=success(closed))
    floors = floors_table(pd.concat([floors_df(tasks, world_tasks("train", world_seed=seed)), scored],
                                    ignore_index=True)).reset_index()
    floors["model"] = floors["floor"].map({"closed-book model": _model_name(first, study.get("lm"))}).fillna(
        "none (a fixed script)")
    write_table(floors, out_dir, f"{prefix}_floors")
    return replace(tables, extra={**tables.extra, "floors": floors})


def measure_protocol(out_dir: str | Path, *, lm: Any = "local", n_tasks: int | None = 6, runs: int = 3,
                     temperature: float = 0.7, split: str = STUDY_SPLIT, seed: int = 0,
                     levels: Sequence[str] = WORLD_LEVELS,
                     stats: StatsSettings = DEFAULT_STATS) -> OAgentsTables:
    """Notebook 21: the protocol on our runs. The baseline agent at temperature 0 (R runs share the
    completion cache: greedy decoding repeats itself) and sampled at ``temperature`` (R seeded runs):
    pass@1 mean and run sd, pass@R, maj@R with its tie rate, the variance decomposition, and sampled
    vs greedy as a paired comparison. The sampled agent stands beside the paper's Table 9 OAgents row."""
    conditions = [Condition("OAgents (temperature 0)", AgentConfig(name="greedy")),
                  Condition("OAgents", AgentConfig(name="sampled", temperature=temperature))]
    return _study(out_dir, prefix="protocol", artefacts=("table9",), conditions=conditions, split=split,
                  tasks=_tasks(split, n_tasks, seed, levels=tuple(levels)), levels=levels,
                  baseline="OAgents (temperature 0)", runs=runs, lm=lm, why_not_measured=_OFFLINE, stats=stats)


def measure_levels(out_dir: str | Path, *, lm: Any = "local", n_tasks: int | None = 15,
                   systems: Sequence[str] = ("single", "roma"), max_depth: int = 1, plan_root: bool = True,
                   item_timeout_s: float | None = 900, split: str = STUDY_SPLIT, seed: int = 0,
                   levels: Sequence[str] = ("L1", "L2", "L3"),
                   stats: StatsSettings = DEFAULT_STATS) -> OAgentsTables:
    """Notebook 27 (Table 1's levels): whether the generated world gets harder with its level for a
    model, as GAIA does for the paper's agents. The default agent (``AgentConfig()``: no planning,
    current memory, an answer at the step limit; temperature 0, R = 1) on ``n_tasks`` tasks spread
    evenly over the levels, the floors and the oracle on the same tasks, and ``systems`` of
    ``roma_lab.evaluate`` (``single``: one closed-book call; ``roma``: ROMA at ``max_depth`` over the
    world's documents, the root planning when ``plan_root``) on the same tasks, ``item_timeout_s``
    each (their rows, traces and provenance under ``systems/``). ``levels_trend.csv``: per system
    and level the tasks answered, n and pass@1 with its task-bootstrap CI, and per system
    ``stats.level_trend``'s one-sided Fisher test of the easiest level against the hardest with its
    verdict. ``levels_paired.csv``: on the same tasks, per level, every other system minus the single
    call (the agent ``OAgents`` among them): the mean paired difference with its CI
    (``stats.paired_ci``), the exact sign test, Holm over the systems compared in that level, and the
    MDE bound at that n. ``levels`` restricts the draw (``n_tasks`` spread evenly over them). Beside
    the paper: Table 1's OAgents row by GAIA level (the agent). Fixed before it was scored:
    design/world_benchmark.md."""
    from roma_lab.results import write_table

    condition = Condition("OAgents", AgentConfig())
    tasks = _tasks(split, n_tasks, seed, levels=tuple(levels))
    tables = _study(out_dir, prefix="levels", artefacts=("table1",), paper_conditions=("OAgents",), levels=levels,
                    conditions=[condition], split=split, tasks=tasks, baseline=None, runs=1,
                    lm=lm, why_not_measured=_OFFLINE, stats=stats)
    extra = dict(tables.extra)
    system_scores = None
    if systems:
        from roma_lab.evaluate import evaluate, named_systems, world_task_set

        evaluation = evaluate(named_systems(systems, lm, max_depth=max_depth, plan_root=plan_root),
                              world_task_set(split, n_tasks, seed=seed, levels=levels), runs=1,
                              out=Path(out_dir) / "systems",
                              timeout_s=item_timeout_s, progress=False, stats=stats)
        system_scores = evaluation.scores()
        # every system runs on ``lm``: one label for it in every table, the agent's
        extra["systems"] = evaluation.rows.assign(model=_model_name(condition.config, lm))
    extra.update(levels_tables(tables.rows, system_scores, model=_model_name(condition.config, lm), stats=stats))
    write_table(extra["trend"], out_dir, "levels_trend")
    if "paired" in extra:
        write_table(extra["paired"], out_dir, "levels_paired")
    return replace(tables, extra=extra)


def levels_tables(agent_rows, system_scores=None, *, model: str, stats: StatsSettings = DEFAULT_STATS) -> dict:
    """Notebook 27's two tables from its rows: ``agent_rows`` (``levels_rows.csv``: the agent's
    rows, each with its task's level in ``stratum``) and ``system_scores`` (the systems'
    ``Evaluation.scores()`` on the same tasks, or None), every system labelled ``model``.
    ``{"trend": levels_trend, "paired": levels_paired}`` (``paired`` only when the single call ran):
    ``tests/test_findings.py`` recomputes the committed finding through it."""
    import pandas as pd

    level_of = dict(zip(agent_rows["task_id"], agent_rows["stratum"]))
    # the protocol's own 0/1/NaN scores (NaN: not scored, left out of its level)
    scores = [agent_rows.assign(success=success(agent_rows))[["condition", "model", "task_id", "run", "success"]]]
    if system_scores is not None:
        scores.append(system_scores.drop(columns="subset").rename(columns={"score": "success"}).assign(model=model))
    scores = pd.concat(scores, ignore_index=True)
    scores = scores.assign(subset=scores["task_id"].map(level_of))
    tables = {"trend": _trend_df(scores, stats)}
    if "single" in set(scores["condition"]):
        tables["paired"] = _paired_df(scores, "single", stats)
    return tables


#: The rows of ``levels_paired.csv``: each comparison's difference, its tests and what n can detect.
PAIRED_METRICS = ("pass@1_diff", "sign_test_p", "sign_test_p_holm", "mde_bound")


def _paired_df(scores, baseline: str, stats: StatsSettings):
    """Every condition minus ``baseline`` per level, on the tasks both scored, one row per comparison
    (``results.summarize_protocol``'s comparison rows, pivoted): difference, CI, wins/losses/ties,
    sign-test p, its Holm adjustment over the conditions compared in that level, and the MDE bound with
    ``mde_method``, which says in words what n detects."""
    from roma_lab.results import summarize_protocol

    rows = summarize_protocol(scores, baseline=baseline, metric="success", by=("subset",), stats=stats)
    rows = rows[rows["metric"].isin(PAIRED_METRICS)]
    diff = rows[rows["metric"] == "pass@1_diff"].set_index(["condition", "subset"])
    table = diff[["n", "value", "ci_low", "ci_high", "ci_method", "wins", "losses", "ties"]].rename(
        columns={"value": "diff"})
    for metric in PAIRED_METRICS[1:]:
        table[metric.replace("sign_test_p_holm", "p_holm").replace("sign_test_p", "p")] = rows[
            rows["metric"] == metric].set_index(["condition", "subset"])["value"]
    # what n detects, in words: the bound is NaN where n detects nothing
    table["mde_method"] = rows[rows["metric"] == "mde_bound"].set_index(["condition", "subset"])["method"]
    table["excludes_0"] = (table["ci_low"] > 0) | (table["ci_high"] < 0)
    if "model" in diff.columns:
        table["model"] = diff["model"]
    return table.reset_index().rename(columns={"subset": "level"})


def _trend_df(scores, stats: StatsSettings):
    """Per condition: one row per level present (L1 first) with correct, n, pass@1 and its CI
    (``results.summarize``), then one row for the test of the first level against the last; with one
    level (a budget that runs notebook 27 at its primary comparison's level only, design/planning.md)
    that row says there is no trend to test."""
    import pandas as pd

    from roma_lab.world import LEVELS
    from roma_lab.results import summarize
    from roma_lab.stats import level_trend

    summary = summarize(scores, ["success"], by=("condition", "subset"), stats=stats).set_index(
        ["condition", "subset"])
    table = []
    for condition, group in scores.groupby("condition", sort=False):
        scored = group.dropna(subset=["success"])
        outcomes = {level: scored.loc[scored["subset"] == level, "success"].tolist()
                    for level in LEVELS if (scored["subset"] == level).any()}
        model = summary.loc[condition, "model"].iloc[0]
        for level, values in outcomes.items():
            cell = summary.loc[(condition, level)]
            table.append({"condition": condition, "level": level, "correct": int(sum(values)), "n": len(values),
                          "pass@1": cell["value"], "ci_low": cell["ci_low"], "ci_high": cell["ci_high"], "test": "",
                          "p_value": float("nan"), "verdict": "", "model": model})
        if len(outcomes) == 1:
            table.append({"condition": condition, "level": "one level", "correct": int(sum(map(sum, outcomes.values()))),
                          "n": sum(map(len, outcomes.values())), "pass@1": float("nan"), "ci_low": float("nan"),
                          "ci_high": float("nan"), "test": "", "p_value": float("nan"),
                          "verdict": f"one level run ({', '.join(outcomes)}): no trend by level to test",
                          "model": model})
            continue
        trend = level_trend(outcomes, alpha=stats.alpha)
        first, last = trend.levels[0], trend.levels[-1]
        verdict = (f"difficulty rises with level: {' >= '.join(trend.levels)}, {first} > {last} at p < {trend.alpha:g}"
                   if trend.falls else
                   f"not shown at this n ({'rates never rise' if trend.monotone else 'a later level scores higher'}; "
                   f"{first} > {last} needs p < {trend.alpha:g})")
        table.append({"condition": condition, "level": f"{first} vs {last}", "correct": sum(trend.successes),
                      "n": sum(trend.n), "pass@1": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
                      "test": f"Fisher's exact, one-sided ({first} > {last})", "p_value": trend.p_value,
                      "verdict": verdict, "model": model})
    return pd.DataFrame(table)


def compare_planning(out_dir: str | Path, *, lm: Any = "local", n_tasks: int | None = 4, n_train: int = 4,
                     runs: int = 1, revise_every: int = 2, split: str = STUDY_SPLIT, seed: int = 0,
                     levels: Sequence[str] = WORLD_LEVELS,
                     stats: StatsSettings = DEFAULT_STATS) -> OAgentsTables:
    """Notebook 22 (Table 7): plan-and-revise (the paper's OAgents baseline, revised every
    ``revise_every`` steps), a static workflow, + subtask decomposition through ROMA, + plan tips
    mined from the baseline's failures on ``n_train`` TRAIN tasks (of the same ``levels``), and the official code's
    behaviour as named rows (interval 1 with revisions never shown; tips only on a retry after a
    failed gold check). The tips are written to ``planning_tips.json``."""
    import pandas as pd

    from roma_lab.agents import mine_tips, run_label
    from roma_lab.results import write_table, write_text_atomic
    from roma_lab.trace import read_trajectories

    base = AgentConfig(name="plan_review", planning="revise", revise_every=revise_every)
    train = world_tasks("train", n_train, seed=seed, levels=tuple(levels))
    train_dir = Path(out_dir) / "train"
    run_conditions([Condition(run_label(base), base)], train, train_dir, runs=1, lm=lm, progress=False)
    mined = mine_tips(read_trajectories(train_dir), lm=lm)
    write_text_atomic(Path(out_dir) / "planning_tips.json", _tips_json(mined))
    conditions = [
        Condition("OAgents", base),
        Condition("r.p. Static workflow", AgentConfig(name="static", planning="static")),
        Condition("+ Subtask", replace(base, name="subtask", subtasks=True)),
        Condition("+ Plan tips", replace(base, name="tips", tips=mined)),
        Condition("OAgents [official code: interval 1, revision never shown]",
                  replace(base, name="plan_review_official", revise_every=1, revision_visibility="official")),
        Condition("+ Plan tips [official code: retry with tips after a failed gold check]",
                  replace(base, name="tips_official", tips=mined, tips_usage="official")),
    ]
    tables = _study(out_dir, prefix="planning", artefacts=("table7", "table7 text"), conditions=conditions,
                    split=split, tasks=_tasks(split, n_tasks, seed, levels=tuple(levels)), levels=levels,
                    baseline="OAgents", runs=runs, lm=lm,
                    why_not_measured=_OFFLINE, stats=stats)
    tips = pd.DataFrame({"tip": list(mined.tips) or [f"(no tips: {mined.error or 'no train failure to mine'})"],
                         "model": mined.model, "mined_from": ", ".join(mined.source_task_ids) or "(no failures)"})
    write_table(tips, out_dir, "planning_tips")
    return replace(tables, extra={**tables.extra, "tips": tips})


def _tips_json(tips) -> str:
    import json
    from dataclasses import asdict

    return json.dumps(asdict(tips), indent=1)


def compare_memory(out_dir: str | Path, *, lm: Any = "local", n_tasks: int | None = 6, runs: int = 1,
                   memory_window: int = 1, split: str = STUDY_SPLIT, seed: int = 0,
                   levels: Sequence[str] = WORLD_LEVELS,
                   stats: StatsSettings = DEFAULT_STATS) -> OAgentsTables:
    """Notebook 23 (Figure 2): current memory (the last ``memory_window`` steps), + a summary of
    every older step, + retrieval of the summaries BM25 ranks highest (the paper embeds them in a
    vector space), + long-term memory fused every step and carried across the tasks of a run, and
    the official code's long-term memory (computed, never shown)."""
    current = AgentConfig(name="current", memory="current", memory_window=memory_window)
    conditions = [
        Condition("Current Memory", current),
        Condition("+ Memory Summarization", replace(current, name="summary", memory="summary")),
        Condition("+ Vectorized Memory Retrieval", replace(current, name="retrieval", memory="retrieval")),
        Condition("+ Long-Term Memory", replace(current, name="long_term", memory="long_term")),
        Condition("+ Long-Term Memory [official code: computed, never shown]",
                  replace(current, name="long_term_official", memory="long_term", long_term_visibility="official")),
    ]
    return _study(out_dir, prefix="memory", artefacts=("figure2",), conditions=conditions, split=split,
                  tasks=_tasks(split, n_tasks, seed, levels=tuple(levels)), levels=levels, baseline="Current Memory",
                  runs=runs, lm=lm,
                  why_not_measured=_OFFLINE, stats=stats)


def compare_tts(out_dir: str | Path, *, lm: Any = "local", n_tasks: int | None = 6, runs: int = 1,
                temperature: float = 0.7, split: str = STUDY_SPLIT, seed: int = 0,
                levels: Sequence[str] = WORLD_LEVELS,
                stats: StatsSettings = DEFAULT_STATS) -> OAgentsTables:
    """Notebook 24 (Figure 3): the baseline, reflection as the paper's formula has it (a critique of
    every step, shown at the next; c_t), reflection on the answer as a named variant (one retry with
    the critique when it is judged wrong), best-of-2 and best-of-4 with list-wise selection (what the
    official code always does), and best-of-4 with the scoring and the voting selector. All sample at
    ``temperature``; rollout i of run r is seeded r + 1000 i, so the baseline is every best-of-N's
    first rollout and BO2's rollouts are BO4's first two (the completion cache computes them once)."""
    base = AgentConfig(name="sampled", temperature=temperature)
    bo2 = replace(base, name="bo2_list", tts="best_of_n", n_rollouts=2, selection="list")
    bo4 = replace(bo2, name="bo4_list", n_rollouts=4)
    conditions = [
        Condition("baseline", base),
        Condition("Reflection", replace(base, name="reflection_step", tts="reflection", reflect_at="step")),
        Condition("Reflection [on the final answer, one retry]",
                  replace(base, name="reflection", tts="reflection", reflect_at="end")),
        Condition("BO2", bo2),
        Condition("BO4", bo4),
        Condition("BO4 (scoring)", replace(bo4, name="bo4_score", selection="score")),
        Condition("BO4 (voting)", replace(bo4, name="bo4_vote", selection="vote")),
    ]
    return _study(out_dir, prefix="tts", artefacts=("figure3",), conditions=conditions, split=split,
                  tasks=_tasks(split, n_tasks, seed, levels=tuple(levels)), levels=levels, baseline="baseline",
                  runs=runs, lm=lm,
                  why_not_measured=_OFFLINE, stats=stats)


#: T6's advanced stack, as far as it exists offline: the paper adds a multimodal toolkit, a
#: better reader and multi-source search (none of which the world's single source has) to its
#: planning, memory and test-time scaling; ours adds the last three.
ADVANCED = dict(planning="revise", revise_every=2, memory="summary", tts="reflection", reflect_at="step")


def compare_backbones(out_dir: str | Path, *, models: Sequence[str] = ("local",), n_tasks: int | None = 6,
                      runs: int = 1, split: str = STUDY_SPLIT, seed: int = 0,
                      levels: Sequence[str] = WORLD_LEVELS,
                      stats: StatsSettings = DEFAULT_STATS) -> OAgentsTables:
    """Notebook 25 (Table 6): each backbone with the baseline agent and with the advanced stack
    (``ADVANCED``), every role played by that backbone; each model's Advance - Baseline gap is a
    paired comparison of its own. Models are ``roma_lab.lm.resolve_lm`` names."""
    from roma_lab.lm import model_label, resolve_lm

    if len(set(models)) != len(models) or not models:
        raise ValueError(f"models must be distinct and at least one, got {list(models)}")
    for model in models:  # a model that is not installed fails here, before any other model has run
        resolve_lm(model)
    conditions, pairs = [], {}
    for i, model in enumerate(models):
        label = model_label(model)
        baseline = Condition(f"{label} Baseline", AgentConfig(name=f"baseline_m{i}", models={"actor": model}))
        advance = Condition(f"{label} Advance", AgentConfig(name=f"advance_m{i}", models={"actor": model}, **ADVANCED))
        conditions += [baseline, advance]
        pairs[advance.name] = baseline.name
    return _study(out_dir, prefix="backbones", artefacts=("table6", "table6 text"), conditions=conditions,
                  split=split, tasks=_tasks(split, n_tasks, seed, levels=tuple(levels)), levels=levels, baseline=pairs,
                  runs=runs, lm=None,
                  why_not_measured=_OFFLINE, stats=stats)



#: The studies whose saved runs notebook 28 reads (the results folders of notebooks 21-24).
SAVED_STUDIES = ("21_measure_protocol", "22_compare_planning_table7", "23_compare_memory_figure2",
                 "24_compare_tts_figure3")


def compare_saved_runs(out_dir: str | Path, *, saved_root: str | Path | None = None,
                       sources: Sequence[str] = SAVED_STUDIES, k: int = 3,
                       stats: StatsSettings = DEFAULT_STATS) -> OAgentsTables:
    """Notebook 28 (Table 9 / Table 1): Pass@1 beside Pass@k from the SAVED runs of other studies,
    with no model call: it reads each source's ``*_rows.csv`` (under ``saved_root``, default the
    parent of ``out_dir``), and every condition with at least ``k`` runs gets pass@1, pass@k and
    maj@R per level (``summarize_protocol``). ``pass_at_k_sources.csv`` lists each source (its rows
    file's SHA-256, or why it was not read) and each condition left out (fewer than ``k`` runs)."""
    import pandas as pd

    from roma_lab.bench import GaiaGrader, exact_key
    from roma_lab.world import LEVELS, WORLD_BENCHMARK
    from roma_lab.results import (beside_paper, models_of, read_table, record_stats, sha256_file, summarize_protocol,
                                  write_table)

    from ._audit import paper_reported_df
    from ._study import _LEVEL_RULE, ALL, GAIA_SUBSETS, _route_lengths

    out_dir = Path(out_dir)
    root = Path(saved_root) if saved_root else out_dir.parent
    frames, listed = [], []
    for stem in sources:
        files = sorted((root / stem).glob("*_rows.csv"))
        if len(files) != 1:
            listed.append({"source": stem, "status": "missing" if not files else "ambiguous", "rows_file": "",
                           "sha256": "", "note": f"{len(files)} *_rows.csv files under {root / stem}; "
                                                 "run its notebook first" if not files else "several rows files"})
            continue
        rows = _saved_rows(read_table(files[0].parent, files[0].stem,
                                      dtype={"task_id": str, "prediction": str, "answer": str, "status": str}))
        listed.append({"source": stem, "status": "read", "rows_file": files[0].name, "sha256": sha256_file(files[0]),
                       "note": f"{len(rows)} rows", "model": models_of(rows["model"]) if "model" in rows else ""})
        frames.append(rows.assign(source=stem))
    if not frames:
        raise FileNotFoundError(f"no saved runs under {root} for {list(sources)}: run notebooks "
                                f"{', '.join(s[:2] for s in sources)} first (or set saved_root)")
    rows = pd.concat(frames, ignore_index=True)
    runs = rows.groupby(["source", "condition"])["run"].nunique()
    kept = runs[runs >= k].index
    for source, condition in runs.index.difference(kept):
        listed.append({"source": source, "status": "condition left out", "rows_file": "", "sha256": "",
                       "note": f"{condition!r}: {runs[source, condition]} run(s) < k = {k}"})
    rows = rows.set_index(["source", "condition"]).loc[kept].reset_index()
    if rows.empty:
        raise ValueError(f"no saved condition has k = {k} runs; run a study with runs >= {k} first")
    unique = rows.groupby("condition")["source"].nunique()
    rows["condition"] = [c if unique[c] == 1 else f"{c} [{s}]" for c, s in zip(rows["condition"], rows["source"])]
    # maj@R votes on the key of the grader that graded each saved row: GAIA's for the world, the
    # suite's exact evaluator's otherwise
    keys = {WORLD_BENCHMARK: GaiaGrader.answer_key}
    scores = rows.assign(success=success(rows),
                         answer_key=[keys.get(b, exact_key)(a) if isinstance(a, str) else ""
                                     for b, a in zip(rows["benchmark"], rows["prediction"])])
    lengths = _route_lengths()
    level = scores["stratum"].map(lambda f: f if f in LEVELS else None if f not in lengths
                                  else "L1" if lengths[f] <= 1 else f"L{lengths[f]}")
    scores = pd.concat([scores.assign(subset=ALL), scores.assign(subset=level).dropna(subset=["subset"])],
                       ignore_index=True)
    protocol = pd.concat([summarize_protocol(group, metric="success", answer="answer_key", ks=(k,),
                                             stats=stats)
                          for _, group in scores.groupby("source", sort=False)], ignore_index=True)
    protocol = protocol[~protocol["metric"].isin(("var_run_to_run", "var_task_to_task"))].reset_index(drop=True)
    models = rows.groupby("condition")["model"].first()
    temperatures = rows.groupby("condition")["temperature"].first()
    benchmarks = rows.groupby("condition")["benchmark"].first()

    def described(condition: str) -> str:
        if benchmarks[condition] == WORLD_BENCHMARK:
            return f"saved runs of the generated world; {WORLD_LEVEL_RULE}"
        return f"saved runs of the meta-routing suite; {_LEVEL_RULE}"

    ours = protocol.assign(subset=protocol["subset"].map(lambda s: GAIA_SUBSETS.get(s, s)),
                           setting=[f"model {models[c]}; {described(c)}; "
                                    f"n = {n} tasks, R = {r} runs, temperature {temperatures[c]:g}"
                                    for c, n, r in zip(protocol["condition"], protocol["n"], protocol["runs"])])
    vs_paper = beside_paper(ours, paper_reported_df(), "table9",
                            why=lambda row: f"a different model, benchmark and size ({row['setting']})",
                            why_not_measured="a system or model this lab does not run offline").assign(
                                artefact="table9")
    sources_table = pd.DataFrame(listed, columns=["source", "status", "rows_file", "sha256", "note", "model"])
    tables = {"rows": rows, "protocol": protocol, "sources": sources_table, "vs_paper": vs_paper}
    for name, table in tables.items():
        write_table(table, out_dir, f"pass_at_k_{name}")
    record_stats(out_dir, stats)
    return OAgentsTables(out_dir=out_dir, rows=rows, protocol=protocol, comparisons=protocol.iloc[0:0],
                         vs_paper=vs_paper, extra={"sources": sources_table}, stats=stats)


def _saved_rows(rows):
    """A study's saved rows in the one row schema: rows written before the one runner name the answer
    ``answer`` and its grade ``correct`` (True: fully correct), where now they are ``prediction`` and
    ``score``."""
    if "prediction" in rows.columns or "answer" not in rows.columns:
        return rows
    correct = rows["correct"].map({True: 1.0, False: 0.0, "True": 1.0, "False": 0.0})
    return rows.rename(columns={"answer": "prediction"}).assign(score=correct)


def evaluate_browsecomp(out_dir: str | Path, *, lm: Any = "local", n_items: int | None = 6, seed: int = 0,
                        web: Any = None, stats: StatsSettings = DEFAULT_STATS) -> OAgentsTables:
    """Notebook 29 (Table 8): a seeded subset of BrowseComp (``roma_lab.bench.sample``; items are
    decrypted in memory, redacted from saved trajectories and never put in a completion cache), closed-book, graded by the
    benchmark's labelled string-match fallback (no judge model). Two conditions, named as Table 8
    names them: the model alone (one answer, no tools) and the agent (plan review and answer
    reflection, the components that exist without search; the paper's OAgents searches the web).
    ``browsecomp_paper_counts.csv`` holds the counts notebook 20's audit infers for Table 8 (the
    paper does not state the subset's size). ``web`` (a provider spec such as ``"serper"``, or a
    ``roma_lab.web.WebSettings`` or ``Web``): the agent searches the web and reads pages, as the paper's
    OAgents did; live only, since a recording would keep the questions (the queries) on disk."""
    from roma_lab.agents import qa_tasks
    from roma_lab.bench import load_browsecomp, sample
    from roma_lab.lm import model_label, resolve_lm
    from roma_lab.results import write_table

    from ._audit import audit_paper_numbers

    label = model_label(lm) if isinstance(lm, str) else str(getattr(lm, "model", lm))
    if isinstance(lm, str):
        # no completion cache (ours or DSPy's): a cached prompt would hold the question in the clear on
        # disk. A rerun still makes no model call: evaluate resumes from the rows already written.
        lm = resolve_lm(lm, cache=False)
    alone = Condition(label, AgentConfig(name="model_alone", max_steps=1, reanswer=False))
    agent = Condition(f"OAgents - {label}", AgentConfig(name="agent_closed_book", max_steps=3, planning="revise",
                                                        tts="reflection", reflect_at="end"))
    setting = "closed-book (offline: no web search)"
    sources = []
    if web:
        from roma_lab.agents import WebSource
        from roma_lab.web import open_web

        client = open_web(web)
        if client.recorder is not None:
            raise ValueError("BrowseComp's questions must not reach the disk in the clear, and a web recording keeps "
                             "each query: run it with the live web (recording off)")
        sources = [WebSource("web", client)]
        # room for a search, a read and an answer, as the paper's agent searched and read
        agent = replace(agent, config=replace(agent.config, name="agent_web", max_steps=6))
        setting = f"the agent searches the web ({client.provider.spec}) and reads pages"
    tasks = qa_tasks(sample(load_browsecomp(), n_items, seed), sources=sources)
    tables = run_study(out_dir, prefix="browsecomp", artefacts=("table8", "table8 text"), conditions=[alone, agent],
                       tasks=tasks, baseline=alone.name, runs=1, lm=lm, level=None,
                       paper_subsets={"all": "BrowseComp subset"},
                       benchmark=f"BrowseComp seeded subset, {setting}, string-match fallback grader (not the "
                                 "official judge)",
                       why_not_measured=_OFFLINE, stats=stats)
    audit = audit_paper_numbers().counts
    counts = audit[audit["artefact"] == "table8"].reset_index(drop=True)
    write_table(counts, out_dir, "browsecomp_paper_counts")
    return replace(tables, extra={"paper_counts": counts})


def compare_search(out_dir: str | Path, *, lm: Any = "local", n_tasks: int | None = 6, runs: int = 1,
                   n_sources: int = 5, coverage: float = 0.6, split: str = STUDY_SPLIT, seed: int = 0,
                   levels: Sequence[str] = WORLD_LEVELS,
                   stats: StatsSettings = DEFAULT_STATS) -> OAgentsTables:
    """Notebook 26 (Tables 3-5): the number of search sources (1, 3, 5 of ``n_sources`` partial
    copies of the generated world's documents, each holding a document with probability
    ``coverage``) and query optimisation (reflection: a model rewrite of each query, then expansion
    into variants with the world's relation synonyms) on world tasks. The floors' oracle
    searches every source, so its row is the ceiling the sources allow. "Raw data" is the k = 5
    agent, as in the paper (Table 5's Raw data row is Table 4's k = 5 row). Table 3's page readers
    need web pages: not measured."""
    # Two passages per source: five sources' results then fit the 12 lines a step keeps in memory.
    k5 = AgentConfig(name="search_k5", search_sources=5, search_k=2)
    conditions = [
        Condition("Single-source", replace(k5, name="search_k1", search_sources=1)),
        Condition("Multi-source (k=3)", replace(k5, name="search_k3", search_sources=3)),
        Condition("Multi-source (k=5)", k5),
        Condition("Raw data", k5),
        Condition("Reflection-Expansion", replace(k5, name="search_k5_reflect_expand",
                                                  query_optimization="reflect+expand")),
    ]
    pairs = {"Multi-source (k=3)": "Single-source", "Multi-source (k=5)": "Single-source",
             "Reflection-Expansion": "Raw data"}

    def why_not_measured(row) -> str:
        if row["artefact"].startswith("table3"):
            return ("page readers (text browser, raw HTML, crawl4ai, Jina) need web pages; the offline corpus is "
                    "plain passages")
        return _OFFLINE

    tasks = _tasks(split, n_tasks, seed, n_sources=n_sources, coverage=coverage, levels=tuple(levels))
    return _study(out_dir, prefix="search", artefacts=("table3", "table3 text", "table4", "table4 text", "table5",
                                                     "table5 text"),
                  conditions=conditions, split=split, tasks=tasks, baseline=pairs, runs=runs, lm=lm,
                  benchmark=(f"offline BM25 search over the generated world's documents ({split} split, levels "
                             f"{', '.join(levels)}; not web "
                             f"search): sources are {n_sources} seeded copies each holding a document with "
                             f"probability {coverage:g}; GAIA's quasi-exact match"),
                  why_not_measured=why_not_measured, stats=stats)
