"""Plan tips: heuristics mined from failed trajectories of a split disjoint from the one evaluated.

``mine_tips`` refuses trajectories from any split but the allowed ones (train by default) and
records the task ids it read; ``check_tips`` (asked by ``roma_lab.evaluate`` before the agent runs)
refuses to evaluate those tasks or splits with the tips.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roma_lab.trace import Trajectory

from ._agent import _digest
from ._config import AgentConfig, PlanTips
from ._env import AgentTask

__all__ = ["SplitLeakError", "check_tips", "mine_tips"]


class SplitLeakError(ValueError):
    """Tips would be mined from, or used on, the split being evaluated."""


def check_tips(config: AgentConfig, tasks: Sequence[AgentTask]) -> None:
    """Refuse to evaluate ``config``'s plan tips on the tasks or splits they were mined from."""
    tips = config.tips
    if tips is None:
        return
    source = set(tips.source_task_ids)
    bad = [t.item.item_id for t in tasks if t.item.item_id in source or t.split in tips.source_splits]
    if bad:
        raise SplitLeakError(f"{len(bad)} tasks are from the split or the tasks the plan tips were mined from "
                             f"({tips.source_splits}), e.g. {bad[:3]}; evaluate tips on a disjoint split")


def mine_tips(trajectories: Sequence[Trajectory], *, lm: Any = None, allowed_splits: Sequence[str] = ("train",),
              max_failures: int = 20, miner: Any = None) -> PlanTips:
    """Distil tips from the failed (graded, score != 1) trajectories among ``trajectories``.

    ``lm``: the miner's model (``dspy.LM`` or a ``resolve_lm`` name; None: DSPy's configured LM);
    ``miner``: a replacement for the DSPy module (same contract: ``failures=`` -> ``.tips``).
    The first ``max_failures`` failures, in the order given, are shown to the model. A failed
    miner call (e.g. a reply that does not parse) gives no tips, with the error recorded.
    """
    import dspy

    from roma_lab.lm import resolve_lm

    from ._signatures import MAX_TIPS, default_module

    leaks = sorted({(t.split, t.task_id) for t in trajectories if t.split not in allowed_splits})
    if leaks:
        shown = ", ".join(f"{task_id} ({split})" for split, task_id in leaks[:5])
        raise SplitLeakError(f"tips may be mined from splits {tuple(allowed_splits)} only; got {len(leaks)} "
                             f"trajectories from other splits, e.g. {shown}")
    ungraded = [t.task_id for t in trajectories if t.grade is None]
    if ungraded:
        raise ValueError(f"mine_tips needs graded trajectories (run them with roma_lab.evaluate); ungraded: {ungraded[:5]}")
    failures = [t for t in trajectories if t.grade.score != 1.0][:max_failures]
    model = resolve_lm(lm) if isinstance(lm, str) else lm
    splits = tuple(sorted({t.split for t in failures}))
    ids = tuple(t.task_id for t in failures)
    name = str(getattr(model, "model", None) or getattr(dspy.settings.lm, "model", None) or type(miner).__name__)
    if not failures:
        return PlanTips(tips=(), source_splits=splits, source_task_ids=ids, model=name)
    text = "\n\n".join(f"Failure {i + 1} ({t.grade.label}):\nTask: {t.question}\n{_digest(t.final_rollout)}"
                       for i, t in enumerate(failures))
    module = miner or default_module("tips_miner")
    try:
        with dspy.context(**({"lm": model} if model is not None else {})):
            prediction = module(failures=text)
    except Exception as exc:  # noqa: BLE001 - a failed miner gives no tips, and says why
        return PlanTips(tips=(), source_splits=splits, source_task_ids=ids, model=name,
                        error=f"{type(exc).__name__}: {exc}")
    tips = tuple(dict.fromkeys(str(t).strip() for t in prediction.tips if str(t).strip()))[:MAX_TIPS]
    return PlanTips(tips=tips, source_splits=splits, source_task_ids=ids, model=name)
