"""Compositional meta-routing: the executable 504-task benchmark, the calibrated raw-text router,
its seven comparison policies, and every table of the paper (`reproduce`).

The public names are what notebooks, widgets, benchmarks and users call: the suite and its split
rule, the policies, `execute` / `evaluate` to run them, the study, the table functions and plots;
the agent view of the suite's operations as tools (`OperationSession`, for `roma_lab.agents`);
issue 12's semantic variants (`SemanticStudy`, `semantic`, the natural prompts) and the router inside
ROMA (`compare_atomizers`; the atomizer itself is `roma_lab.controller.RouterAtomizer`).
Building blocks (costs, grids, the greedy router, helpers of fitting and selection) stay in the
private modules, which tests import directly. Summaries, paired comparisons and "paper beside
ours" are the results vocabulary's (`roma_lab.results`).
"""

from ._evaluate import evaluate
from ._execute import SUCCESS, execute
from ._in_roma import compare_atomizers
from ._inspect import inspect_route
from ._model import Featurizer, OperationModel, TrainingConfig
from ._plots import plot_split_contrast, plot_threshold_sweep, plot_training_size
from ._policies import (Direct, FixedAgent, Hybrid, Keyword, Learned, OneShot, Oracle, Random, StaticWorkload,
                        baseline_policies)
from ._reproduce import (RouterStudy, closing_note, failure_analysis, hybrid, reproduce, semantic, semantic_hybrid, sweep_threshold,
                         table1, table2, table3, table4, table5, training_size_curve)
from ._semantic import SemanticStudy, natural_prompts
from ._tools import TOOL_DESCRIPTIONS, TOOL_NAMES, OperationSession, tool_outcome
from ._suite import (CHALLENGE_MAX_OVERLAP, DEFAULT_SEED, SPLITS, STANDARD_OVERLAP, family_table, generate_suite, labels_matrix,
                     split_rule_violations, split_tasks, suite_hash, train_overlap)

__all__ = [
    "CHALLENGE_MAX_OVERLAP", "DEFAULT_SEED", "SPLITS", "STANDARD_OVERLAP", "SUCCESS", "TOOL_DESCRIPTIONS", "TOOL_NAMES",
    "OperationSession", "tool_outcome",
    "Direct", "Featurizer", "FixedAgent", "Hybrid", "Keyword", "Learned", "OneShot", "OperationModel", "Oracle",
    "Random", "RouterStudy", "SemanticStudy", "StaticWorkload", "TrainingConfig",
    "baseline_policies", "closing_note", "compare_atomizers", "evaluate", "execute", "failure_analysis", "family_table",
    "generate_suite", "hybrid", "inspect_route", "labels_matrix", "natural_prompts", "plot_split_contrast",
    "plot_threshold_sweep", "plot_training_size", "reproduce", "semantic", "semantic_hybrid", "split_rule_violations",
    "split_tasks", "suite_hash", "sweep_threshold", "table1", "table2", "table3", "table4", "table5", "train_overlap",
    "training_size_curve",
]
