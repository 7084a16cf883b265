"""GEPA+ (ROMA paper §2.2, Appendix G) on top of dspy.GEPA, with plain GEPA as the baseline.

    from roma_lab.optimizer import GepaPlusConfig, compile
    cfg = GepaPlusConfig(proposers=(("model-a", 0.7), ("model-b", 1.0)), k=4, n=2, judge="judge-model",
                         merger="model-a")
    run = compile(program, trainset=train, valset=val, metric=metric, config=cfg, max_metric_calls=200)
    run.program, run.records_df(), run.convergence_df()

The benchmark programs and feedback metrics of ROMA paper Tables 7 and 8 (``make_task``,
``task_splits``, ``example_of`` / ``item_of``); the tables themselves are ``roma_lab.papers.roma``'s
``table7_gepa`` / ``table8_convergence``, whose keywords after the table's own are the fields of
:class:`SearchSettings`.

``contracts_for`` gives every component of a program its instruction contract (what a ``RunLog`` and
a proposer check edits against).

Importing this package imports dspy, which is slow to import; ``import roma_lab`` does not.
"""

from roma_lab.optimizer._compile import (METHODS, SEARCH_STATUSES, OptimizationResult, candidates_table, compile,
                                         min_metric_calls)
from roma_lab.optimizer._config import GepaPlusConfig, SearchSettings
from roma_lab.optimizer._contracts import Contract, contracts_for
from roma_lab.optimizer._proposer import GepaPlusProposer, ProposalError
from roma_lab.optimizer._records import CONVERGENCE_COLUMNS, RunLog, calls_to_converge
from roma_lab.optimizer._tasks import BENCHMARKS, Splits, Task, example_of, item_of, make_task, task_splits
from roma_lab.optimizer._roma_program import ROMA_REQUIRED_TERMS, RomaProgram, roma_contracts

__all__ = [
    "BENCHMARKS",
    "CONVERGENCE_COLUMNS",
    "METHODS",
    "SEARCH_STATUSES",
    "Contract",
    "GepaPlusConfig",
    "GepaPlusProposer",
    "OptimizationResult",
    "ProposalError",
    "RunLog",
    "SearchSettings",
    "Splits",
    "Task",
    "calls_to_converge",
    "candidates_table",
    "compile",
    "contracts_for",
    "example_of",
    "item_of",
    "make_task",
    "min_metric_calls",
    "task_splits",
    "ROMA_REQUIRED_TERMS",
    "RomaProgram",
    "roma_contracts",
]
