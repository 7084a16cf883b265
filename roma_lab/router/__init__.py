"""Compositional meta-routing: the executable 504-task benchmark, the calibrated raw-text router,
its seven comparison policies, and every table of the paper (`reproduce`)."""

from ._evaluate import compare_paired, evaluate, summarize
from ._inspect import inspect_route
from ._model import (TAU_GRID, TEMPERATURE_GRID, Featurizer, OperationModel, TrainingConfig, check_prompt, greedy_route,
                     route_quality)
from ._ops import (BUDGET, COSTS, MAX_SUPPORT_OPS, OUTCOMES, SUPPORT_OPS, Outcome, TraceStep, canonical, execute,
                   is_feasible, route_cost)
from ._plots import plot_split_contrast, plot_threshold_sweep, plot_training_size
from ._policies import (KEYWORD_RULES, STATIC_ROUTES, Direct, FixedAgent, Hybrid, Keyword, Learned, OneShot, Oracle,
                        Random, StaticWorkload, baseline_policies)
from ._reproduce import (TABLES, RouterStudy, ablation_models, beside_paper, model_vs_paper, failure_analysis, hybrid,
                         paper_reported_df, reproduce, select_hybrid_gate, stratified_subset, sweep_threshold,
                         table1, table2, table3, table4, table5, training_size_curve, wording_sensitivity)
from ._suite import (CHALLENGE_MAX_OVERLAP, DEFAULT_SEED, FAMILIES, PRE_LOCK_TEST_TEMPLATES, SPLITS,
                     STANDARD_OVERLAP, WORKLOADS, Family, Task, family_table, generate_suite, labels_matrix,
                     reword, split_rule_violations, split_tasks, suite_hash, template_words, train_overlap)

__all__ = [
    "BUDGET", "CHALLENGE_MAX_OVERLAP", "COSTS", "DEFAULT_SEED", "FAMILIES", "KEYWORD_RULES", "MAX_SUPPORT_OPS",
    "OUTCOMES", "PRE_LOCK_TEST_TEMPLATES", "SPLITS", "STANDARD_OVERLAP", "STATIC_ROUTES", "SUPPORT_OPS", "TABLES",
    "TAU_GRID", "TEMPERATURE_GRID", "WORKLOADS",
    "Direct", "Family", "Featurizer", "FixedAgent", "Hybrid", "Keyword", "Learned", "OneShot", "OperationModel",
    "Oracle", "Outcome", "Random", "RouterStudy", "StaticWorkload", "Task", "TraceStep", "TrainingConfig",
    "ablation_models", "baseline_policies", "beside_paper", "canonical", "check_prompt", "compare_paired",
    "evaluate", "execute", "failure_analysis", "family_table", "generate_suite", "greedy_route", "hybrid",
    "inspect_route", "is_feasible", "labels_matrix", "model_vs_paper", "paper_reported_df", "plot_split_contrast",
    "plot_threshold_sweep", "plot_training_size", "reproduce", "reword", "route_cost", "route_quality",
    "select_hybrid_gate", "split_rule_violations", "split_tasks", "stratified_subset", "suite_hash", "summarize",
    "sweep_threshold", "table1", "table2", "table3", "table4", "table5", "template_words", "train_overlap",
    "training_size_curve", "wording_sensitivity",
]
