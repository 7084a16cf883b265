"""Compositional meta-routing: the executable 504-task benchmark, the calibrated raw-text router,
its seven comparison policies, and every table of the paper (`reproduce`).

The public names are what notebooks, widgets, benchmarks and users call: the suite and its split
rule, the policies, `execute` / `evaluate` to run them, the study, the table functions and plots.
Building blocks (costs, grids, the greedy router, helpers of fitting and selection) stay in the
private modules, which tests import directly. Summaries, paired comparisons and "paper beside
ours" are the results vocabulary's (`roma_lab.results`).
"""

from ._evaluate import evaluate
from ._execute import execute
from ._inspect import inspect_route
from ._model import Featurizer, OperationModel, TrainingConfig
from ._plots import plot_split_contrast, plot_threshold_sweep, plot_training_size
from ._policies import (Direct, FixedAgent, Hybrid, Keyword, Learned, OneShot, Oracle, Random, StaticWorkload,
                        baseline_policies)
from ._reproduce import (RouterStudy, failure_analysis, hybrid, reproduce, sweep_threshold, table1, table2, table3,
                         table4, table5, training_size_curve)
from ._suite import (CHALLENGE_MAX_OVERLAP, STANDARD_OVERLAP, family_table, generate_suite, labels_matrix,
                     split_rule_violations, split_tasks, suite_hash, train_overlap)

__all__ = [
    "CHALLENGE_MAX_OVERLAP", "STANDARD_OVERLAP",
    "Direct", "Featurizer", "FixedAgent", "Hybrid", "Keyword", "Learned", "OneShot", "OperationModel", "Oracle",
    "Random", "RouterStudy", "StaticWorkload", "TrainingConfig",
    "baseline_policies", "evaluate", "execute", "failure_analysis", "family_table", "generate_suite", "hybrid",
    "inspect_route", "labels_matrix", "plot_split_contrast", "plot_threshold_sweep", "plot_training_size",
    "reproduce", "split_rule_violations", "split_tasks", "suite_hash", "sweep_threshold", "table1", "table2",
    "table3", "table4", "table5", "train_overlap", "training_size_curve",
]
