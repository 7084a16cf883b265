"""GEPA+ (ROMA paper §2.2, Appendix G) on top of dspy.GEPA, with plain GEPA as the baseline.

    from roma_lab.optimizer import GepaPlusConfig, compile
    cfg = GepaPlusConfig(proposers=(("model-a", 0.7), ("model-b", 1.0)), k=4, n=2, judge="judge-model",
                         merger="model-a")
    run = compile(program, trainset=train, valset=val, metric=metric, config=cfg, max_metric_calls=200)
    run.program, run.records_df(), run.convergence_df()

ROMA paper Tables 7 and 8 (benchmark programs, feedback metrics, tidy tables)::

    from roma_lab.optimizer import run_table7, run_table8, plot_convergence
    tables = run_table7(out_dir, lm="local", reflection_lms=[["local", 1.0]], judge_lm="local")

Importing this package imports dspy, which is slow to import; ``import roma_lab`` does not.
"""

from roma_lab.optimizer._compile import METHODS, SEARCH_STATUSES, OptimizationResult, compile
from roma_lab.optimizer._config import GepaPlusConfig
from roma_lab.optimizer._contracts import Contract, atomize, dedupe_sentences, default_contract, edit_size
from roma_lab.optimizer._proposer import GepaPlusProposer, ProposalError, build_program
from roma_lab.optimizer._records import Record, RunLog, calls_to_converge, convergence_df, records_df
from roma_lab.optimizer._signatures import JudgeInstructionEdit, MergeInstructionEdits
from roma_lab.optimizer._tables import (
    UNOPTIMISED,
    candidates_table,
    convergence_summary,
    gepa_plus_config,
    paper_reported_df,
    plot_convergence,
    run_table7,
    run_table8,
)
from roma_lab.optimizer._tasks import (
    BENCHMARKS,
    MATHARENA_AIME,
    AIMESolver,
    ClosedBookQA,
    Papillon,
    Splits,
    Task,
    evaluate_program,
    make_task,
    task_splits,
)
from roma_lab.optimizer._roma_program import ROMA_REQUIRED_TERMS, RomaProgram, roma_contracts

__all__ = [
    "BENCHMARKS",
    "MATHARENA_AIME",
    "METHODS",
    "SEARCH_STATUSES",
    "UNOPTIMISED",
    "AIMESolver",
    "ClosedBookQA",
    "Contract",
    "GepaPlusConfig",
    "GepaPlusProposer",
    "JudgeInstructionEdit",
    "MergeInstructionEdits",
    "OptimizationResult",
    "Papillon",
    "ProposalError",
    "Record",
    "RunLog",
    "Splits",
    "Task",
    "atomize",
    "build_program",
    "calls_to_converge",
    "candidates_table",
    "compile",
    "convergence_df",
    "convergence_summary",
    "dedupe_sentences",
    "default_contract",
    "edit_size",
    "evaluate_program",
    "gepa_plus_config",
    "make_task",
    "paper_reported_df",
    "plot_convergence",
    "records_df",
    "run_table7",
    "run_table8",
    "task_splits",
    "ROMA_REQUIRED_TERMS",
    "RomaProgram",
    "roma_contracts",
]
