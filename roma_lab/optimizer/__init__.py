"""GEPA+ (ROMA paper §2.2, Appendix G) on top of dspy.GEPA, with plain GEPA as the baseline.

    from roma_lab.optimizer import GepaPlusConfig, compile
    cfg = GepaPlusConfig(proposers=(("model-a", 0.7), ("model-b", 1.0)), k=4, n=2, judge="judge-model",
                         merger="model-a")
    run = compile(program, trainset=train, valset=val, metric=metric, config=cfg, max_metric_calls=200)
    run.program, run.records_df(), run.convergence_df()

ROMA paper Tables 7 and 8 (benchmark programs, feedback metrics, tidy tables in the results
vocabulary); the keywords after the table's own are the fields of :class:`SearchSettings`::

    from roma_lab.optimizer import run_table7, run_table8, plot_convergence
    tables = run_table7(out_dir, lm="local", reflection_lms=["local"], reflection_temperatures=[1.0])

Importing this package imports dspy, which is slow to import; ``import roma_lab`` does not.
"""

from roma_lab.optimizer._compile import METHODS, SEARCH_STATUSES, OptimizationResult, compile, min_metric_calls
from roma_lab.optimizer._config import GepaPlusConfig, SearchSettings
from roma_lab.optimizer._contracts import Contract
from roma_lab.optimizer._proposer import GepaPlusProposer, ProposalError
from roma_lab.optimizer._records import RunLog
from roma_lab.optimizer._tables import candidates_table, plot_convergence, run_table7, run_table8
from roma_lab.optimizer._tasks import BENCHMARKS
from roma_lab.optimizer._roma_program import ROMA_REQUIRED_TERMS, RomaProgram, roma_contracts

__all__ = [
    "BENCHMARKS",
    "METHODS",
    "SEARCH_STATUSES",
    "Contract",
    "GepaPlusConfig",
    "GepaPlusProposer",
    "OptimizationResult",
    "ProposalError",
    "RunLog",
    "SearchSettings",
    "candidates_table",
    "compile",
    "min_metric_calls",
    "plot_convergence",
    "run_table7",
    "run_table8",
    "ROMA_REQUIRED_TERMS",
    "RomaProgram",
    "roma_contracts",
]
