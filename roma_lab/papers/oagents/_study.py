"""One entry point for the OAgents study notebooks (21-29): conditions x tasks x R runs, the
evaluation protocol's statistics, and the paper's figures beside ours.

``run_study`` runs every condition (an ``AgentConfig`` under the paper's name for it) over the same
tasks R times with ``roma_lab.evaluate`` (resumable, completion-cached), then writes four tidy tables
under ``out_dir`` with a common prefix: ``_rows.csv`` (the evaluation's rows, one per condition x task
x run, with what the agent's trajectory says of each run: ``Evaluation.facts``),
``_protocol.csv`` (``roma_lab.results.summarize_protocol`` per subset: the whole sample and each
level), ``_comparisons.csv`` (each condition against the baseline: difference, CI, sign test,
Holm, MDE) and ``_vs_paper.csv`` (``roma_lab.results.beside_paper`` for the study's artefacts).
Which split, levels, sizes and conditions a notebook uses is fixed in its study function
(``_studies.py``) and experiment spec before anything is scored (design/agents.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roma_lab.agents import AgentConfig, AgentTask
from roma_lab.stats import DEFAULT_STATS, StatsSettings

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ALL", "Condition", "OAgentsTables", "comparisons_df", "run_conditions", "run_study", "study_rows",
           "success", "suite_level"]

#: The subset holding every task of a study (the paper's "Average" column).
ALL = "all"
#: Our subsets as the paper's GAIA columns name them, for ``beside_paper``; every measured row's
#: ``setting`` says that ours are levels of the meta-routing suite, not of GAIA.
GAIA_SUBSETS = {ALL: "GAIA avg", "L1": "GAIA L1", "L2": "GAIA L2", "L3": "GAIA L3"}
_COMPARISON_METRICS = ("pass@1_diff", "sign_test_p", "sign_test_p_holm", "mde", "mde_bound")
_LEVEL_RULE = ("levels of the meta-routing suite by the length of a family's minimum tool route "
               "(L1: answer only or one tool, L2: two, L3: three), not GAIA's levels")


@dataclass(frozen=True, slots=True)
class Condition:
    """One row of a paper table: the paper's name for it and the configuration that realises it."""

    name: str
    config: AgentConfig


@dataclass(frozen=True, slots=True)
class OAgentsTables:
    """The OAgents paper's tables as measured: those ``run_study`` wrote (as DataFrames), the folder
    they are in, and the statistics settings they were computed with (also in the folder's provenance)."""

    out_dir: Path
    rows: pd.DataFrame
    protocol: pd.DataFrame
    comparisons: pd.DataFrame
    vs_paper: pd.DataFrame
    extra: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    stats: StatsSettings = DEFAULT_STATS


@functools.cache
def _route_lengths() -> dict[str, int]:
    from roma_lab.router import suite_families

    table = suite_families()
    return {f: 0 if r == "(answer only)" else len(r) for f, r in zip(table["family"], table["minimum_route"])}


def suite_level(task: AgentTask) -> str:
    """The level of a meta-routing suite task: L1, L2 or L3 by its family's minimum route length."""
    route = _route_lengths()[task.stratum]
    return "L1" if route <= 1 else f"L{route}"


def _model_name(config: AgentConfig, lm: Any) -> str:
    from roma_lab.lm import model_label

    actor = config.models.get("actor", lm)
    return model_label(actor if actor is not None else "local")


def _greedy_repeats(config: AgentConfig, lm: Any) -> bool:
    """Whether R runs of ``config`` repeat each other: greedy decoding on an in-process model that
    batches nothing (outputs of llama.cpp's server at several slots depend on the batch)."""
    from roma_lab.lm import in_process, local_engine_settings

    model = config.models.get("actor", lm)
    name = model if isinstance(model, str) else str(getattr(model, "model", "") or "")
    if config.temperature != 0 or not in_process(name):
        return False
    engine = local_engine_settings(name) if name.startswith("local") else None
    return engine is None or engine["engine"] == "llama-cpp-python" or engine["slots"] == 1


def success(rows: pd.DataFrame) -> pd.Series:
    """Each row's protocol score: 1.0 when graded fully correct, else 0.0 (a system error or no answer
    is a wrong answer); NaN only where the grader failed (not scored, left out and counted)."""
    score = rows["score"].astype(float)
    return (score == 1.0).astype(float).mask(rows["status"].eq("grader_error"), float("nan"))


def _scores(rows: pd.DataFrame, level: Callable[[AgentTask], str] | None,
            tasks: Sequence[AgentTask]) -> pd.DataFrame:
    """Tidy scores for the protocol: every row once in ``ALL`` and once in its level."""
    import pandas as pd

    from roma_lab.bench import answer_key

    keys = {t.item.item_id: answer_key(t.grader) for t in tasks}  # maj@R votes on each task's grader's key
    scores = rows.assign(success=success(rows),
                         answer_key=[keys[t](a) if isinstance(a, str) else ""
                                     for t, a in zip(rows["task_id"], rows["prediction"])])
    parts = [scores.assign(subset=ALL)]
    if level is not None:
        levels = {t.item.item_id: level(t) for t in tasks}
        parts.append(scores.assign(subset=scores["task_id"].map(levels)))
    return pd.concat(parts, ignore_index=True)


def study_rows(evaluation: Any, tasks: Sequence[AgentTask], conditions: Sequence[Condition], lm: Any) -> pd.DataFrame:
    """An evaluation's rows with what each trajectory says of its run (``Evaluation.facts``: the agent's
    status, steps, tool and repeated calls, rollouts, seed...), each task's split and stratum, each
    condition's configuration label and model."""
    from roma_lab.agents import run_label

    task_of = {t.item.item_id: t for t in tasks}
    facts = evaluation.facts()
    rows = evaluation.rows.merge(facts, on=["condition", "run", "task_id"],
                                 how="left")
    config = {c.name: run_label(c.config) for c in conditions}
    model = {c.name: _model_name(c.config, lm) for c in conditions}
    return rows.assign(split=rows["task_id"].map(lambda t: task_of[t].split),
                       stratum=rows["task_id"].map(lambda t: task_of[t].stratum),
                       config=rows["condition"].map(config), model=rows["condition"].map(model))


def run_conditions(conditions: Sequence[Condition], tasks: Sequence[AgentTask], out: Path, *, runs: int, lm: Any,
                   progress: bool, stats: StatsSettings = DEFAULT_STATS) -> pd.DataFrame:
    """Every condition on ``tasks`` x ``runs`` through one ``roma_lab.evaluate`` folder (``out``), as
    :func:`study_rows`."""
    from roma_lab.evaluate import AgentSystem, agent_task_set, evaluate

    evaluation = evaluate([AgentSystem(c.config, lm, c.name) for c in conditions], agent_task_set(tasks), runs=runs,
                          out=out, progress=progress, stats=stats)
    return study_rows(evaluation, tasks, conditions, lm)


def _own_condition(label: str, conditions: Sequence[Condition], pairs: Mapping[str, str]) -> Condition:
    """The condition a protocol row is about: itself, or for "<condition> - <its baseline>" the first."""
    for c in conditions:
        if label == c.name or (c.name in pairs and label == f"{c.name} - {pairs[c.name]}"):
            return c
    raise ValueError(f"protocol row {label!r} names no condition of this study")


def _mirrored(ours: pd.DataFrame, pairs: Mapping[str, str], wanted: set[str]) -> pd.DataFrame:
    """Our "a - b" difference rows also as "b - a" (negated, CI mirrored), where the paper states
    the difference that way round (e.g. "OAgents - r.p. Static workflow" with OAgents our baseline)."""
    diff = ours[ours["metric"] == "pass@1_diff"]
    flips = {f"{c} - {b}": f"{b} - {c}" for c, b in pairs.items()}
    flipped = diff["condition"].map(flips)
    keep = flipped.isin(wanted) & ~flipped.isin(set(ours["condition"]))
    mirror = diff[keep].assign(condition=flipped[keep], value=-diff["value"][keep],
                               ci_low=-diff["ci_high"][keep], ci_high=-diff["ci_low"][keep],
                               wins=diff["losses"][keep], losses=diff["wins"][keep])
    return mirror


def comparisons_df(protocol: pd.DataFrame) -> pd.DataFrame:
    """The comparison rows of a protocol table, one row per condition x subset: the difference
    with its CI and sign-test counts, p, Holm's p, the MDE and its bound (the bound is defined where
    the MDE is not: every task's difference the same), a pure view of ``_protocol.csv``, and the
    model the protocol names (when it names one)."""
    diff = protocol[protocol["metric"] == "pass@1_diff"]
    model = ["model"] if "model" in protocol.columns else []
    table = diff[["condition", "subset", "value", "ci_low", "ci_high", "wins", "losses", "ties", "n", "runs",
                  *model]].rename(columns={"value": "pass@1_diff"})
    for metric in _COMPARISON_METRICS[1:]:
        values = protocol[protocol["metric"] == metric].set_index(["condition", "subset"])["value"]
        table = table.join(values.rename(metric), on=["condition", "subset"])
    return table.reset_index(drop=True)


def run_study(
    out_dir: str | Path,
    *,
    prefix: str,
    artefacts: Sequence[str],
    conditions: Sequence[Condition],
    tasks: Sequence[AgentTask],
    baseline: str | Mapping[str, str] | None,
    runs: int = 1,
    lm: Any = None,
    benchmark: str,
    level: Callable[[AgentTask], str] | None = suite_level,
    level_rule: str = _LEVEL_RULE,
    paper_subsets: Mapping[str, str] = GAIA_SUBSETS,
    paper_conditions: Sequence[str] | None = None,
    why_not_measured: str | Callable[[Mapping[str, Any]], str] = "",
    ks: Sequence[int] | None = None,
    stats: StatsSettings = DEFAULT_STATS,
    progress: bool = False,
) -> OAgentsTables:
    """Run ``conditions`` over ``tasks`` x ``runs`` and write the study's tables under ``out_dir``.

    ``baseline``: the condition the others are compared with, or a mapping condition -> the
    condition it is compared with (each baseline's comparisons are one Holm family), or None (no
    comparisons). ``lm``: the
    actor's model for conditions whose config names none. ``benchmark`` says in words what the
    tasks are (it goes into every measured row's ``setting`` with the model, n, R and temperature).
    ``level``: the breakdown of each task (None: the whole sample only), ``level_rule`` says in words
    what the levels are (it goes into every measured row's ``setting``); ``paper_subsets`` maps our
    subsets to the paper's columns for ``beside_paper``; ``paper_conditions`` keeps only those rows
    of the artefacts (None: all; Table 1 lists seventeen systems, a levels study compares with one).
    ``why_not_measured`` explains paper rows we do not run. The evaluation (rows, trajectories) goes
    under ``out_dir/runs`` (a rerun resumes; with a warm completion cache it makes no model call). ``stats``: the statistics settings of every CI and
    test; they are recorded in the returned tables' ``stats`` and the folder's provenance.
    """
    import pandas as pd

    from roma_lab.results import beside_paper, record_stats, summarize_protocol, write_table

    from ._audit import paper_reported_df

    names = [c.name for c in conditions]
    if len(set(names)) != len(names):
        raise ValueError(f"condition names must be unique, got {names}")
    pairs = ({} if baseline is None else dict(baseline) if isinstance(baseline, Mapping)
             else {n: baseline for n in names if n != baseline})
    unknown = sorted((set(pairs) | set(pairs.values())) - set(names))
    if unknown:
        raise ValueError(f"baseline names conditions that are not in the study: {unknown}; conditions are {names}")
    if not tasks:
        raise ValueError("a study needs at least one task")
    out_dir = Path(out_dir)
    rows = run_conditions(conditions, tasks, out_dir / "runs", runs=runs, lm=lm, progress=progress, stats=stats)
    scores = _scores(rows, level, tasks)
    settings = dict(metric="success", answer="answer_key", ks=ks, stats=stats)
    protocol = [summarize_protocol(scores, **settings)]
    for base in dict.fromkeys(pairs.values()):  # one family of comparisons per baseline
        group = scores[scores["condition"].isin([base, *(c for c, b in pairs.items() if b == base)])]
        table = summarize_protocol(group, baseline=base, **settings)
        protocol.append(table[table["metric"].isin(_COMPARISON_METRICS)])
    protocol = pd.concat(protocol, ignore_index=True)
    comparisons = comparisons_df(protocol)

    def setting(condition: str, n: float) -> str:
        own = _own_condition(condition, conditions, pairs)
        model = _model_name(own.config, lm)
        repeats = ("; greedy on an in-process model: the R runs repeat each other, so run-to-run variance is 0 "
                   "by construction" if runs > 1 and _greedy_repeats(own.config, lm) else "")
        return (f"model {model}; {benchmark}; {level_rule if level is not None else 'no levels'}; "
                f"n = {int(n)} tasks, R = {runs} run(s), temperature {own.config.temperature:g}{repeats}")

    paper = paper_reported_df()
    if paper_conditions is not None:
        paper = paper[paper["condition"].isin(paper_conditions)]
    ours = protocol.assign(subset=protocol["subset"].map(lambda s: paper_subsets.get(s, s)))
    ours = ours.assign(setting=[setting(c, n) for c, n in zip(ours["condition"], ours["n"])])

    def why(row: Mapping[str, Any]) -> str:
        return (f"a different model, benchmark and size ({row['setting']}); the paper runs GPT-4.1 "
                "(Claude-3.7 for its Table 1 and 9 rows) on GAIA once per configuration")

    sampled = set(ours["subset"])

    def not_measured(row: Mapping[str, Any]) -> str:
        if row["condition"] in names or row["condition"] in {f"{c} - {b}" for c, b in pairs.items()}:
            if row["subset"] in sampled:  # the subset was sampled, but this row could not be computed on it
                return (f"our sample of {row['subset']} is too small for this row (a paired difference needs two "
                        "tasks both conditions scored)")
            return f"this subset was not in our sample ({row['subset']})"
        return why_not_measured(row) if callable(why_not_measured) else (
            why_not_measured or "a configuration or model this study does not run offline")

    stated = set(paper.loc[paper["artefact"].isin(artefacts), "condition"])
    ours = pd.concat([ours, _mirrored(ours, pairs, stated)], ignore_index=True)
    vs_paper = pd.concat([beside_paper(ours, paper, a, why=why, why_not_measured=not_measured).assign(artefact=a)
                          for a in artefacts], ignore_index=True)
    tables = {"rows": rows, "protocol": protocol, "comparisons": comparisons, "vs_paper": vs_paper}
    for name, table in tables.items():
        write_table(table, out_dir, f"{prefix}_{name}")
    record_stats(out_dir, stats)
    return OAgentsTables(out_dir=out_dir, **tables, stats=stats)
