"""The computations behind notebooks 01 (quickstart), 02 (structure) and 09 (repair): run, then write
tidy CSVs and traces."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roma_lab.trace import Run, schedule_bounds
from roma_lab.controller import Roma, ScriptedRoles, fixed_latency_roles, tree_plans
from roma_lab.papers.roma._tables import RomaTables

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from roma_lab.trace import NodeEvent


@dataclass(frozen=True, slots=True)
class QuickstartGoal:
    """A candidate goal for the quickstart and the figures a correct answer states (from the corpus)."""

    goal: str
    facts: tuple[str, ...]


# Written, with the rule below, before the embedded model saw any of them. Each needs two look-ups
# in the quickstart corpus and one step that depends on both; the facts are the corpus's answers
# (and, for the first four, the arithmetic on them). The first four were written first; on the
# embedded Qwen 1.5B the atomizer called all four atomic ("code": a script with invented years),
# so four more, phrased as explicit parts, were appended after that run. Nothing was reordered or
# removed: a run still tries the first four first, and candidates.csv shows each verdict. The model
# called all eight atomic too; only then was the rule's fallback (the root planned without asking the
# atomizer) added. Both changes are about the tree's structure; neither looked at an answer's quality.
QUICKSTART_GOALS = (
    QuickstartGoal("Find the year Seiko became the Official Timer of the Olympics and the year the first Zildjian "
                   "cymbals were created, then compute how many years apart the two events are.",
                   ("1964", "1618", "346")),
    QuickstartGoal("Find the year the first Zildjian cymbals were created and the year the bronze loincloth was added "
                   "to Michelangelo's Risen Christ, then compute how many years apart the two events are.",
                   ("1618", "1546", "72")),
    QuickstartGoal("Find the year Stepan Timoshenko received the Worcester Reed Warner Medal and the year Alexej von "
                   "Jawlensky was expelled from Germany, then compute how many years apart the two events are.",
                   ("1935", "1914", "21")),
    QuickstartGoal("Find the year the Computer History Museum had its first exhibit and the year the University of "
                   "Michigan began developing the MICRO Information Management System, then compute how many years "
                   "apart the two events are.", ("1975", "1970", "5")),
    QuickstartGoal("Write a short report in three parts: (1) the year Seiko became the Official Timer of the Olympics, "
                   "(2) the year the first Zildjian cymbals were created, (3) one closing sentence saying which came "
                   "first.", ("1964", "1618")),
    QuickstartGoal("Research two separate facts, then combine them: first, the year the Computer History Museum had "
                   "its first exhibit; second, the year the University of Michigan began developing the MICRO "
                   "Information Management System; finally, write one paragraph saying which came first.",
                   ("1975", "1970")),
    QuickstartGoal("Prepare a two-item fact sheet, looking each item up separately: the year Jon Kleinberg became a "
                   "fellow of the ACM, and the year Galip Ulsoy received the Charles Russ Richards Memorial Award; end "
                   "with one sentence on whether they fall in the same year.", ("2013",)),
    QuickstartGoal("Carry out a small research task in steps: look up the year Alexej von Jawlensky was expelled from "
                   "Germany, look up the year Stepan Timoshenko received the Worcester Reed Warner Medal, then write a "
                   "two-sentence summary putting the two events in order.", ("1914", "1935")),
)
QUICKSTART_RULE = ("the first goal of QUICKSTART_GOALS, in the order written, whose run plans at the root (the "
                   "model's atomizer calls it not atomic); if the model plans none of them, the first goal again "
                   "with the root's atomize step skipped (RomaSettings.plan_root: the root always plans; the model "
                   "still writes the plan, runs the subtasks and aggregates). A rule about the tree's structure, "
                   "never about the answer; candidates.csv lists every run tried and which was kept.")
QUICKSTART_PLAN_ROOT = ("the root plans without asking the atomizer (RomaSettings.plan_root, recorded in run.json): "
                        "the model writes the plan, runs the subtasks and aggregates whatever the goal")


def quickstart_rule(goal: str | None, plan_root: bool) -> str:
    """How the quickstart's goal and its root's structure were chosen, for the notebook to print."""
    chosen = "the goal as given" if goal is not None else "the first goal of QUICKSTART_GOALS"
    if plan_root:
        return f"{chosen}; {QUICKSTART_PLAN_ROOT}"
    return "the goal as given; the model's atomizer decides whether it plans" if goal is not None else QUICKSTART_RULE
_YEAR_QUESTION = re.compile(r"\b(in what|in which|what|which) year\b", re.IGNORECASE)


def quickstart_corpus() -> list[str]:
    """The search executor's corpus: every SimpleQA Verified row (data/benchmarks/simpleqa, checked
    against its SHA-256 when loaded) that asks for a year and is answered by a four-digit year, as
    "Q: ... A: ..." passages (99 rows; the candidate goals' facts are ten of them)."""
    from roma_lab.bench import load_simpleqa

    return [f"Q: {item.question} A: {item.answer}" for item in load_simpleqa(verified=True)
            if _YEAR_QUESTION.search(item.question) and re.fullmatch(r"\d{4}", str(item.answer).strip())]


def run_quickstart(
    goal: str | None,
    out_dir: str | PathLike[str],
    *,
    lm: Any = "local",
    max_depth: int = 1,
    max_concurrency: int = 2,
    corpus: Sequence[str] | str | PathLike[str] | None = None,
    on_event: Callable[[NodeEvent], None] | None = None,
    plan_root: bool = False,
) -> Run:
    """Run ROMA's default DSPy roles on ``goal`` as given (None: chosen by QUICKSTART_RULE from
    QUICKSTART_GOALS) with the search executor over ``corpus`` (None: ``quickstart_corpus()``).
    ``plan_root``: the root plans without asking the atomizer (any goal shows the recursion; with
    ``goal=None`` the first of QUICKSTART_GOALS, the one run).

    Writes ``run.json`` (the run kept: the last one tried), ``usage.csv``, ``calls.csv``,
    ``candidates.csv`` (every run tried, in order, with its atomizer and whether its root was
    planned) and ``checks.csv`` (what the kept
    run's trace shows: see ``quickstart_checks``)."""
    import pandas as pd

    from roma_lab.lm import model_label
    from roma_lab.results import write_table, write_text_atomic

    corpus = quickstart_corpus() if corpus is None else corpus
    settings = {"lm": lm, "max_depth": max_depth, "max_concurrency": max_concurrency, "corpus": corpus}
    candidates = [QuickstartGoal(goal, ())] if goal is not None else list(QUICKSTART_GOALS)
    tried: list[tuple[QuickstartGoal, str, Run]] = []
    for candidate in candidates[:1] if plan_root else candidates:
        atomizer = "skipped at the root" if plan_root else "model"
        tried.append((candidate, atomizer, Roma(plan_root=plan_root, **settings).run(candidate.goal, on_event=on_event)))
        if _planned(tried[-1][2]):
            break
    if goal is None and not plan_root and not _planned(tried[-1][2]):
        # the model planned none: the first again, its root planned without asking the atomizer
        tried.append((candidates[0], "skipped at the root",
                      Roma(plan_root=True, **settings).run(candidates[0].goal, on_event=on_event)))
    kept, _, run = tried[-1]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "run.json", run.to_json())
    model = model_label(lm)  # every table names its model, so a smoke run's tables read as smoke
    write_table(run.usage_df().assign(model=model), out, "usage")
    write_table(run.calls_df(), out, "calls")
    write_table(pd.DataFrame([{"order": i, "goal": c.goal, "chosen_by": "given" if goal is not None else "rule",
                               "atomizer": atomizer, "root_planned": _planned(r), "status": r.status,
                               "calls": len(r.calls_df()), "wall_s": r.wall_s, "facts": len(c.facts),
                               "facts_stated": sum(_states(r.output, f) for f in c.facts),
                               "kept": i == len(tried) - 1}
                              for i, (c, atomizer, r) in enumerate(tried)]).assign(model=model), out, "candidates")
    write_table(quickstart_checks(run, kept.facts).assign(model=model), out, "checks")
    return run


def quickstart_usage_df(out_dir: str | PathLike[str]) -> pd.DataFrame:
    """A quickstart run's ``usage.csv`` as notebook 01 shows it: seconds to 0.1 s (33.6, not 33.566707).
    Only the display is rounded: the file keeps each sum as measured, the data later tables add up."""
    from roma_lab.results import read_table

    return read_table(out_dir, "usage").round({"latency_s": 1})


def _states(text: str | None, fact: str) -> bool:
    """``fact`` (a figure) appears in ``text`` as a whole number: 1618 is not in 16180."""
    return re.search(rf"(?<![\d.]){re.escape(fact)}(?![\d])", text or "") is not None


def _planned(run: Run) -> bool:
    return bool(run.children(run.root.id))


def quickstart_checks(run: Run, facts: Sequence[str] = ()) -> pd.DataFrame:
    """What a run's trace shows, one row per check (``check``, ``value``): whether the root was
    planned, how many subtasks and dependencies the plan has, how many subtasks ran at the same
    time, whether the aggregator answered, plan warnings, nodes that did not complete, and for
    each expected fact whether a subtask output and the final answer state it."""
    import pandas as pd

    subtasks = run.children(run.root.id)
    ids = {n.id for n in subtasks}
    spans = [(n.started_s, n.ended_s) for n in subtasks if n.started_s is not None and n.ended_s is not None]
    overlap = max((sum(s <= t < e for s, e in spans) for t, _ in spans), default=0)
    rows = [("root planned (not atomic)", _planned(run)),
            ("subtasks", len(subtasks)),
            ("dependencies between subtasks", sum(len([d for d in n.depends_on if d in ids]) for n in subtasks)),
            ("most subtasks running at once", overlap),
            ("aggregator answered", any(c.role == "aggregator" and c.error is None for c in run.root.calls)),
            ("plan warnings", sum(len(n.warnings) for n in run.nodes)),
            ("nodes not completed", sum(n.status != "completed" for n in run.nodes))]
    outputs = " ".join(n.output or "" for n in subtasks)
    for fact in facts:
        rows.append((f"a subtask output states {fact}", _states(outputs, fact)))
        rows.append((f"the final answer states {fact}", _states(run.output, fact)))
    return pd.DataFrame({"check": [r[0] for r in rows], "value": [str(r[1]) for r in rows]})


def quickstart_notes(checks: pd.DataFrame, candidates: pd.DataFrame | None = None) -> str:
    """Markdown sentences about one quickstart run, written only from its ``checks.csv`` and
    ``candidates.csv``."""
    value = dict(zip(checks["check"], checks["value"], strict=True))
    if value["root planned (not atomic)"] != "True":
        notes = ["The atomizer called the goal atomic, so this run is a single node: no plan, no aggregation."]
    else:
        notes = [f"The planner split the goal into {value['subtasks']} subtasks with "
                 f"{value['dependencies between subtasks']} dependencies between them; at most "
                 f"{value['most subtasks running at once']} ran at the same time, and the aggregator "
                 + ("answered." if value["aggregator answered"] == "True" else "gave no answer.")]
    facts = [c.removeprefix("the final answer states ") for c in value if c.startswith("the final answer states ")]
    found = [f for f in facts if value[f"a subtask output states {f}"] == "True"]
    stated = [f for f in facts if value[f"the final answer states {f}"] == "True"]
    lost = [f for f in found if f not in stated]
    if not facts:
        notes.insert(0, "**Not graded**: no expected figures come with this goal, so nothing here checks whether "
                        "the answer is right; `completed` in the tree means every node finished, not that the "
                        "answer is correct.")
    else:
        notes.append(f"Of the figures a correct answer states ({', '.join(facts)}), the final answer states "
                     f"{', '.join(stated) or 'none'}; the subtasks' outputs state {', '.join(found) or 'none'}"
                     + (f", so {', '.join(lost)} got lost on the way to the answer." if lost else "."))
    notes.append(f"{value['plan warnings']} plan warning(s) (parts of a plan the controller had to repair) and "
                 f"{value['nodes not completed']} node(s) that did not complete.")
    if candidates is not None:
        asked = candidates[candidates["atomizer"] == "model"]
        atomic = asked[~asked["root_planned"].astype(bool)]
        if len(atomic):
            notes.append(f"The model's own atomizer called {len(atomic)} of {len(asked)} goal(s) tried atomic; "
                         f"answered in one step, without a plan, those runs stated "
                         f"{int(atomic['facts_stated'].sum())} of the {int(atomic['facts'].sum())} expected figures.")
    return " ".join(notes)


def measure_structure(
    out_dir: str | PathLike[str],
    *,
    widths: Sequence[int] = (1, 2, 4, 8, 16),
    depths: Sequence[int] = (1, 2, 3, 4),
    latency_s: float = 0.02,
    max_concurrency: int = 8,
) -> RomaTables:
    """Run scripted fixed-latency trees that widen (one level, ``w`` children) and deepen (``d``
    levels of 3 children). Siblings cycle through task types search, think, think; search calls take
    3x ``latency_s``; every third sibling depends on its left neighbour (a fast chain beside a slow
    independent search, which a barrier schedule cannot overlap).

    Writes ``timing.csv`` (one row per tree x schedule: measured wall, critical-path bound,
    barrier schedule, sequential) and ``context.csv`` (one row per role call: depth, role,
    context size). Returns both as :class:`RomaTables`.
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
    tables = {"timing": timing_df, "context": context_df}
    for name, df in tables.items():
        write_table(df, out_dir, name)
    return RomaTables(tables, Path(out_dir))


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
) -> RomaTables:
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
    by tree depth, node depth, role and mode). Returns both as :class:`RomaTables`.
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
    tables = {"references": calls, "references_summary": summary}
    for name, df in tables.items():
        write_table(df, out_dir, name)
    return RomaTables(tables, Path(out_dir))


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
) -> RomaTables:
    """Repair against a full re-run, on scripted roles where every call takes ``latency_s``.

    Three runs of the same tree (:func:`tree_plans` of ``branching``): the first with the executors
    of the goals in ``fail`` raising (an injected failure); the repair of its saved JSON with the
    failure gone; and the whole tree again from scratch with the failure gone, what one pays
    without repair. Writes ``repair.csv`` (one row per run: status, role calls, wall time, nodes
    reused and executed), ``repair_nodes.csv`` (one row per node of the repair: reused or
    re-executed, its role calls) and the runs as ``failed_run.json``, ``repair.json`` and
    ``full_rerun.json`` (the repair's ``repair.source_sha256`` is the SHA-256 of ``failed_run.json``).
    Returns both as :class:`RomaTables`.
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
    tables = {"repair": table, "repair_nodes": nodes}
    for name, df in tables.items():
        write_table(df, out, name)
    return RomaTables(tables, out)


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
