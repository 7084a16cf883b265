"""The atomizer protocol of design/atomizer.md, as one call: the default atomizer on the held-out
goals, GEPA+ on the train goals only, the optimised atomizer on the held-out goals (notebook 32).

The train goals are split in two halves by a rule fixed before the look (``search_halves``): GEPA
reflects on minibatches of the first and selects candidates on the second; the held-out goals are
never shown to it. The metric is right or not, with the goal's own ``why`` as feedback.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dspy

from roma_lab.controller import TASK_TYPES, Atomizer
from roma_lab.lm import model_label
from roma_lab.optimizer import Contract, SearchSettings, compile
from roma_lab.papers.roma._atomizer import AtomizerGoal, atomizer_goals, atomizer_summary, score_atomizer
from roma_lab.papers.roma._gepa_tables import _models, _SearchLog
from roma_lab.papers.roma._tables import RomaTables

__all__ = ["BEFORE", "AFTER", "atomizer_metric", "atomizer_study", "search_halves"]

BEFORE, AFTER = "default", "gepa+"
SUBSET = "atomizer goals"


def _kind(atomic: bool) -> str:
    return "atomic" if atomic else "multi-part"


def search_halves(goals: Sequence[AtomizerGoal]) -> tuple[list[AtomizerGoal], list[AtomizerGoal]]:
    """GEPA's trainset and valset from the train goals: within each kind, in the file's order, the
    goals at even positions reflect (trainset) and those at odd positions select (valset)."""
    halves: tuple[list[AtomizerGoal], list[AtomizerGoal]] = ([], [])
    for atomic in (True, False):
        for i, goal in enumerate(g for g in goals if g.atomic is atomic):
            halves[i % 2].append(goal)
    return halves


def _example(goal: AtomizerGoal) -> dspy.Example:
    return dspy.Example(goal=goal.goal, context="", atomic=goal.atomic, why=goal.why).with_inputs("goal", "context")


def atomizer_metric(gold: dspy.Example, pred: Any, trace: Any = None, pred_name: str | None = None,
                    pred_trace: Any = None) -> dspy.Prediction:
    """GEPA's feedback metric: 1.0 when the atomizer's ``is_atomic`` is the goal's kind, else 0.0; the
    feedback names the kind and why (the goal set's own reason), so the proposer can see the rule."""
    said = getattr(pred, "is_atomic", None)
    kind = _kind(gold.atomic)
    if not isinstance(said, bool):
        return dspy.Prediction(score=0.0, feedback=f"No is_atomic true/false could be read. This goal is {kind}: "
                                                  f"{gold.why}")
    if said == gold.atomic:
        return dspy.Prediction(score=1.0, feedback=f"Right: this goal is {kind} ({gold.why}).")
    return dspy.Prediction(score=0.0, feedback=f"Wrong: is_atomic should be {str(gold.atomic).lower()}; this goal is "
                                              f"{kind}: {gold.why}")


def atomizer_study(out_dir: str | Path, *, goals_per_kind: int | None = None, **search: Any) -> RomaTables:
    """Steps 1-4 of design/atomizer.md on the models and budget of ``search`` (the fields of
    :class:`SearchSettings` but ``n_train``/``n_val``/``repeats``, which follow from the goals: one
    search). ``goals_per_kind`` keeps the first goals of each kind of each split (the smoke tier);
    None, the protocol: all 24 train and 16 held-out goals.

    Writes and returns atomizer_scores (one row per held-out goal and condition), atomizer_summary
    (share right per condition and kind, with CIs), atomizer_paired (after minus before per kind:
    paired bootstrap and sign test), atomizer_instructions (each condition's instruction),
    atomizer_runs, atomizer_records and atomizer_candidates (the search)."""
    import pandas as pd

    from roma_lab.results import compare, record_stats, write_table
    from roma_lab.stats import StatsSettings

    for fixed in ("n_train", "n_val", "repeats"):
        if fixed in search:
            raise TypeError(f"atomizer_study sets {fixed} from the goal set; do not pass it")
    train, heldout = (_first(atomizer_goals(split), goals_per_kind) for split in ("train", "heldout"))
    reflect, select = search_halves(train)
    settings = SearchSettings(**search, n_train=len(reflect), n_val=len(select), repeats=1)
    task_lm, _, config = _models(settings)
    seed_program = Atomizer()
    # what the controller reads from an atomizer: the signature's fields the seed names, and the task types
    contract = Contract("predict", required_terms=tuple(
        dict.fromkeys([f for f in ("goal", "context", "is_atomic", "task_type")
                       if f in seed_program.predict.signature.instructions] + list(TASK_TYPES))))
    with dspy.context(lm=task_lm):
        result = compile(seed_program, trainset=[_example(g) for g in reflect],
                         valset=[_example(g) for g in select], metric=atomizer_metric, config=config,
                         max_metric_calls=settings.max_metric_calls, method="gepa+", seed=settings.seed,
                         reflection_minibatch_size=min(3, len(reflect)), contracts={"predict": contract})
    scores = pd.concat([score_atomizer(Atomizer(), heldout, lm=task_lm, condition=BEFORE),
                        score_atomizer(result.program, heldout, lm=task_lm, condition=AFTER)], ignore_index=True)
    summary = atomizer_summary(scores, seed=settings.seed)
    table = scores.assign(subset=scores["kind"], task_id=scores["goal"], right=scores["right"].astype(float))
    table = pd.concat([table, table.assign(subset="all")], ignore_index=True)
    stats = StatsSettings(seed=settings.seed)
    paired = compare(table, AFTER, BEFORE, "right", stats=stats)
    log = _SearchLog(settings)
    log.add(SUBSET, AFTER, 0, result)
    searched = log.tables("atomizer")
    model = model_label(task_lm)  # the tables a notebook shows name their model
    searched["atomizer_runs"] = searched["atomizer_runs"].assign(model=model)
    instructions = pd.DataFrame([
        {"condition": BEFORE, "instruction": seed_program.predict.signature.instructions},
        {"condition": AFTER, "instruction": result.program.predict.signature.instructions,
         "search_status": result.status, "best_val_score": result.best_val_score}]).assign(model=model)
    tables = {"atomizer_scores": scores, "atomizer_summary": summary, "atomizer_paired": paired,
              "atomizer_instructions": instructions, **searched}
    tables = {name: tables[name] for name in ("atomizer_scores", "atomizer_summary", "atomizer_paired",
                                              "atomizer_instructions", "atomizer_runs", "atomizer_records",
                                              "atomizer_candidates", "atomizer_curves")}
    for name, df in tables.items():
        write_table(df, out_dir, name)
    record_stats(out_dir, stats)
    return RomaTables(tables, Path(out_dir), stats)


def _first(goals: list[AtomizerGoal], per_kind: int | None) -> list[AtomizerGoal]:
    if per_kind is None:
        return goals
    if isinstance(per_kind, bool) or not isinstance(per_kind, int) or per_kind < 2:
        raise ValueError(f"goals_per_kind must be an int >= 2 (each half needs a goal of each kind) or None, "
                         f"got {per_kind!r}")
    kept = [g for g in goals if g.atomic][:per_kind] + [g for g in goals if not g.atomic][:per_kind]
    return [g for g in goals if g in kept]
