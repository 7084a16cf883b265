"""Compositional meta-routing: the executable 504-task benchmark, the calibrated raw-text router and
its seven comparison policies. The paper's tables are `roma_lab.papers.routing`.

The public names are what the paper wing, widgets, agents, benchmarks and users call: the suite, its
families and split rule, the policies, the operation model and its threshold grid, `execute` /
`evaluate` / `summarize_routes` / `sweep_threshold` to run them, the agent view of the suite's
operations as tools (`OperationSession`, for `roma_lab.agents`), and issue 12's semantic variants
(`SemanticStudy`, the encoders, the natural prompts and their coverage). The router as a ROMA role is
`roma_lab.controller.RouterAtomizer`. Building blocks (costs, grids, the greedy router, helpers of
fitting and selection) stay in the private modules, which tests import directly. Summaries, paired
comparisons and "paper beside ours" are the results vocabulary's (`roma_lab.results`).
"""

from ._evaluate import evaluate, summarize_routes, sweep_threshold
from ._execute import INCORRECT, NO_ANSWER, SUCCESS, UNAVAILABLE, execute
from ._inspect import inspect_route
from ._model import TAU_GRID, Featurizer, OperationModel, TrainingConfig
from ._ops import SUPPORT_OPS
from ._policies import (Direct, FixedAgent, Hybrid, Keyword, Learned, OneShot, Oracle, Random, StaticWorkload,
                        baseline_policies)
from ._semantic import ENCODERS, SemanticStudy, coverage_by_family, natural_prompts, route_natural, with_name
from ._tools import TOOL_DESCRIPTIONS, TOOL_NAMES, OperationSession, tool_outcome
from ._suite import (CHALLENGE_MAX_OVERLAP, DEFAULT_SEED, FAMILIES, PRE_LOCK_TEST_TEMPLATES, SPLITS, STANDARD_OVERLAP,
                     Task, generate_suite, labels_matrix, reword, split_rule_violations, split_tasks,
                     suite_families, suite_hash, train_overlap)

__all__ = [
    "CHALLENGE_MAX_OVERLAP", "DEFAULT_SEED", "ENCODERS", "FAMILIES", "INCORRECT", "NO_ANSWER", "PRE_LOCK_TEST_TEMPLATES",
    "SPLITS", "STANDARD_OVERLAP", "SUCCESS", "SUPPORT_OPS", "TAU_GRID", "TOOL_DESCRIPTIONS", "TOOL_NAMES", "UNAVAILABLE",
    "OperationSession", "tool_outcome",
    "Direct", "Featurizer", "FixedAgent", "Hybrid", "Keyword", "Learned", "OneShot", "OperationModel", "Oracle",
    "Random", "SemanticStudy", "StaticWorkload", "Task", "TrainingConfig",
    "baseline_policies", "coverage_by_family", "evaluate", "execute", "generate_suite",
    "inspect_route", "labels_matrix", "natural_prompts", "reword", "route_natural", "split_rule_violations",
    "split_tasks", "suite_families", "suite_hash", "summarize_routes", "sweep_threshold", "train_overlap", "with_name",
]
