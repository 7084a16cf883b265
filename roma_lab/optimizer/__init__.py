"""GEPA+ (ROMA paper §2.2, Appendix G) on top of dspy.GEPA, with plain GEPA as the baseline.

    from roma_lab.optimizer import GepaPlusConfig, compile
    cfg = GepaPlusConfig(proposers=(("model-a", 0.7), ("model-b", 1.0)), k=4, n=2, judge="judge-model",
                         merger="model-a")
    run = compile(program, trainset=train, valset=val, metric=metric, config=cfg, max_metric_calls=200)
    run.program, run.records_df(), run.convergence_df()

Importing this package imports dspy (about two seconds); ``import roma_lab`` does not.
"""

from roma_lab.optimizer._compile import METHODS, OptimizationResult, compile
from roma_lab.optimizer._config import GepaPlusConfig
from roma_lab.optimizer._contracts import Contract, atomize, dedupe_sentences, default_contract, edit_size
from roma_lab.optimizer._proposer import GepaPlusProposer, ProposalError, build_program
from roma_lab.optimizer._records import Record, RunLog, calls_to_converge, convergence_df, records_df
from roma_lab.optimizer._signatures import JudgeInstructionEdit, MergeInstructionEdits

__all__ = [
    "METHODS",
    "Contract",
    "GepaPlusConfig",
    "GepaPlusProposer",
    "JudgeInstructionEdit",
    "MergeInstructionEdits",
    "OptimizationResult",
    "ProposalError",
    "Record",
    "RunLog",
    "atomize",
    "build_program",
    "calls_to_converge",
    "compile",
    "convergence_df",
    "dedupe_sentences",
    "default_contract",
    "edit_size",
    "records_df",
]
