"""``compile``: run GEPA or GEPA+ on a DSPy program through dspy.GEPA with one shared search setup."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import dspy

import roma_lab.lm
from roma_lab.optimizer._config import GepaPlusConfig
from roma_lab.optimizer._contracts import Contract, contracts_for
from roma_lab.optimizer._proposer import BaselineProposer, GepaPlusProposer
from roma_lab.optimizer._records import Record, RunLog, convergence_df, records_df

if TYPE_CHECKING:
    import pandas as pd

METHODS = ("gepa", "gepa+")
# How a search ended (RunLog.outcome): only "completed" means the proposer ever reached GEPA.
SEARCH_STATUSES = ("completed", "proposals_failed", "no_proposal")
# gepa's MergeProposer scores a crossover on at most this many validation examples.
_CROSSOVER_SUBSAMPLE = 5


@dataclass(frozen=True, slots=True)
class OptimizationResult:
    """What ``compile`` returns: the optimised program and everything needed to explain it.

    ``status`` (one of ``SEARCH_STATUSES``) says whether any proposal reached GEPA; when none did
    (e.g. every draft call failed) ``program`` is the starting program and ``status_detail`` says why.
    ``candidates[i]`` maps predictor name -> instruction for GEPA's i-th candidate (0 = seed);
    ``val_scores[i]`` is its mean validation score. ``gepa_metric_calls`` is GEPA's own count (never
    above ``max_metric_calls``); GEPA+'s verifier runs the metric outside that budget
    (``verifier_metric_calls``); ``total_metric_calls`` is both, the figure to compare methods on.
    """

    method: str
    program: dspy.Module
    status: str
    status_detail: str
    candidates: tuple[dict[str, str], ...]
    val_scores: tuple[float, ...]
    parents: tuple[tuple[int | None, ...], ...]
    best_idx: int
    gepa_metric_calls: int
    max_metric_calls: int
    judge_calls: int
    verifier_runs: int
    verifier_metric_calls: int
    merge_calls: int
    proposal_rounds: int
    failed_proposal_rounds: int
    seed: int
    records: tuple[Record, ...]

    @property
    def best_val_score(self) -> float:
        return self.val_scores[self.best_idx]

    @property
    def total_metric_calls(self) -> int:
        return self.gepa_metric_calls + self.verifier_metric_calls

    def records_df(self) -> pd.DataFrame:
        return records_df(self.records)

    def convergence_df(self) -> pd.DataFrame:
        return convergence_df(self.records)

    def candidates_df(self) -> pd.DataFrame:
        """Long format: one row per candidate x component, with its instruction and val score."""
        import pandas as pd

        rows = [
            {"candidate_idx": i, "component": name, "instruction": text, "val_score": self.val_scores[i],
             "parents": list(self.parents[i])}
            for i, cand in enumerate(self.candidates)
            for name, text in cand.items()
        ]
        return pd.DataFrame(rows, columns=["candidate_idx", "component", "instruction", "val_score", "parents"])


class _NamedComponents:
    """gepa component selector cycling through a fixed subset of predictors, per candidate."""

    def __init__(self, names: Sequence[str]):
        self.names = list(names)
        self._next: dict[int, int] = {}

    def __call__(self, state, trajectories, subsample_scores, candidate_idx, candidate) -> list[str]:
        i = self._next.get(candidate_idx, 0)
        self._next[candidate_idx] = (i + 1) % len(self.names)
        return [self.names[i]]


class _HardMetricBudget:
    """Stop before an iteration that could push GEPA's metric calls past the budget.

    gepa checks its budget only between iterations, so one iteration can overshoot; this stopper
    looks one worst-case iteration ahead so ``max_metric_calls`` is a hard ceiling for both methods.
    """

    def __init__(self, max_metric_calls: int, worst_iteration: int):
        self.max_metric_calls = max_metric_calls
        self.worst_iteration = worst_iteration

    def __call__(self, gepa_state: Any) -> bool:
        return gepa_state.total_num_evals + self.worst_iteration > self.max_metric_calls


def _component_selector(components: str | Sequence[str], names: list[str]) -> Any:
    if components in ("round_robin", "all"):
        return components
    chosen = [components] if isinstance(components, str) else list(components)
    unknown = [c for c in chosen if c not in names]
    if unknown or not chosen:
        raise ValueError(
            f"components must be 'round_robin', 'all' or predictor names from {names}; got unknown {unknown or chosen}"
        )
    return _NamedComponents(chosen)


def min_metric_calls(n_val: int, minibatch: int, *, use_merge: bool = True) -> int:
    """The smallest ``max_metric_calls`` that ``compile`` accepts: the seed's validation plus one
    iteration at its worst (a minibatch before and after the edit, then the new candidate's validation,
    or a merge's subsample)."""
    return 2 * n_val + max(2 * minibatch, min(_CROSSOVER_SUBSAMPLE, n_val) if use_merge else 0)


def compile(  # noqa: A001 - DSPy's optimizer verb
    program: dspy.Module,
    *,
    trainset: Sequence[dspy.Example],
    valset: Sequence[dspy.Example],
    metric: Callable[..., Any],
    config: GepaPlusConfig,
    max_metric_calls: int,
    method: Literal["gepa+", "gepa"] = "gepa+",
    components: str | Sequence[str] = "round_robin",
    contracts: Mapping[str, Contract] | None = None,
    seed: int = 0,
    reflection_minibatch_size: int = 3,
    use_merge: bool = True,
    max_merge_invocations: int = 5,
    candidate_selection_strategy: Literal["pareto", "current_best"] = "pareto",
    num_threads: int | None = None,
    failure_score: float = 0.0,
    perfect_score: float = 1.0,
) -> OptimizationResult:
    """Optimise the instructions of ``program``'s predictors with GEPA or GEPA+; never mutates it.

    Both methods run the same dspy.GEPA search (seed, minibatches, Pareto selection, acceptance,
    crossover merges, metric budget). They differ only in the proposer: ``"gepa"`` uses DSPy's
    built-in proposer with ``config.proposers[0]`` as the reflection model; ``"gepa+"`` uses
    :class:`GepaPlusProposer` with the whole ``config``. ``metric`` is a GEPA feedback metric
    ``(gold, pred, trace=None, pred_name=None, pred_trace=None) -> float | dspy.Prediction(score, feedback)``.
    ``components``: ``"round_robin"``, ``"all"``, or one or more predictor names.

    A search in which no proposal reached GEPA (every draft call failed, or no draft was eligible)
    returns the starting program with ``status`` other than ``"completed"`` and warns (RuntimeWarning).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not isinstance(config, GepaPlusConfig):
        raise TypeError(f"config must be a GepaPlusConfig, got {type(config).__name__}")
    if not isinstance(program, dspy.Module):
        raise TypeError(f"program must be a dspy.Module, got {type(program).__name__}")
    predictors = list(program.named_predictors())
    if not predictors:
        raise ValueError("program has no predictors, so there is no instruction to optimise")
    if not trainset or not valset:
        raise ValueError("trainset and valset must both be non-empty")
    if reflection_minibatch_size < 1:
        raise ValueError(f"reflection_minibatch_size must be >= 1, got {reflection_minibatch_size}")
    names = [name for name, _ in predictors]
    selector = _component_selector(components, names)
    seed_info = {name: (p.signature.instructions, tuple(p.signature.fields)) for name, p in predictors}
    if hasattr(program, "default_contracts"):  # a program may ship its roles' contracts; the user's override
        contracts = {**program.default_contracts(), **(contracts or {})}
    all_contracts = contracts_for(seed_info, contracts)

    worst_iteration = min_metric_calls(len(valset), reflection_minibatch_size, use_merge=use_merge) - len(valset)
    if isinstance(max_metric_calls, bool) or not isinstance(max_metric_calls, int):
        raise TypeError(f"max_metric_calls must be an int, got {max_metric_calls!r}")
    if max_metric_calls < len(valset) + worst_iteration:
        raise ValueError(
            f"max_metric_calls={max_metric_calls} cannot fit the seed's validation ({len(valset)} calls) plus one "
            f"iteration (up to {worst_iteration} calls); raise it to at least {len(valset) + worst_iteration}"
        )

    first_lm, first_temperature = config.proposers[0]
    first_lm = roma_lab.lm.resolve_lm(first_lm)
    log = RunLog(
        method, all_contracts,
        baseline_proposer=(roma_lab.lm.model_label(first_lm), float(first_temperature)) if method == "gepa" else None,
    )
    if method == "gepa+":
        proposer_kwargs = {
            "instruction_proposer": GepaPlusProposer(
                config, student=program, metric=metric, contracts=all_contracts, log=log, failure_score=failure_score,
                seed=seed,
            )
        }
    else:
        proposer_kwargs = {"reflection_lm": first_lm.copy(temperature=float(first_temperature)),
                           "instruction_proposer": BaselineProposer(log)}

    optimizer = dspy.GEPA(
        metric=metric,
        max_metric_calls=max_metric_calls,
        reflection_minibatch_size=reflection_minibatch_size,
        candidate_selection_strategy=candidate_selection_strategy,
        component_selector=selector,
        use_merge=use_merge,
        max_merge_invocations=max_merge_invocations,
        num_threads=num_threads,
        failure_score=failure_score,
        perfect_score=perfect_score,
        track_stats=True,
        seed=seed,
        gepa_kwargs={
            "callbacks": [log],
            "stop_callbacks": [_HardMetricBudget(max_metric_calls, worst_iteration)],
        },
        **proposer_kwargs,
    )
    new_program = optimizer.compile(program, trainset=list(trainset), valset=list(valset))
    details = new_program.detailed_results
    status, detail = log.outcome()
    if status != "completed":
        warnings.warn(f"compile(method={method!r}) made no proposal ({status}): {detail}", RuntimeWarning,
                      stacklevel=2)
    return OptimizationResult(
        method=method,
        program=new_program,
        status=status,
        status_detail=detail,
        candidates=tuple(
            {name: p.signature.instructions for name, p in cand.named_predictors()} for cand in details.candidates
        ),
        val_scores=tuple(float(s) for s in details.val_aggregate_scores),
        parents=tuple(tuple(p or ()) for p in details.parents),
        best_idx=details.best_idx,
        gepa_metric_calls=int(details.total_metric_calls),
        max_metric_calls=max_metric_calls,
        judge_calls=log.judge_calls,
        verifier_runs=log.verifier_runs,
        verifier_metric_calls=log.verifier_metric_calls,
        merge_calls=log.merge_calls,
        proposal_rounds=len(log.proposal_rounds),
        failed_proposal_rounds=len(log.failed_rounds),
        seed=seed,
        records=tuple(log.records),
    )


def candidates_table(result: OptimizationResult) -> pd.DataFrame:
    """Candidates in long format with parents as text ("0", "1;3" for a crossover, "" for the seed)."""
    df = result.candidates_df()
    df["parents"] = df["parents"].map(lambda ps: ";".join(str(p) for p in ps if p is not None))
    return df
