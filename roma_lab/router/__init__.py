"""Compositional meta-routing: the executable 504-task benchmark, the calibrated raw-text router and
its comparison policies. The paper's tables are `roma_lab.papers.routing`.

The public names are what other rooms (the paper wing, widgets, agents) and users call: the
benchmark (`_benchmark`: its tasks, families, split rule and hash), the policies the paper's tables
name, the operation model, `evaluate` / `summarize_routes` / `count_failures` / `sweep_threshold`
to run them, `inspect_route` for the route inspector, the agent view of the operations as tools
(`OperationSession`, `TOOLS`, `tool_outcome`, for `roma_lab.agents`), and issue 12's semantic
variants (`SemanticStudy`, `ENCODERS`, the natural prompts). The router as a ROMA role is
`roma_lab.controller.RouterAtomizer`. The router's parts a speed script times are public too
(`Featurizer`, `train_heads`, `execute`); what only tests and this package use (the other policies
`Direct`, `Random`, `Keyword`, `FixedAgent`, `Oracle`; `TAU_GRID`, the statuses of `execute`,
`train_overlap`, costs, grids, the greedy router) stays in the private modules. Summaries, paired comparisons and "paper beside ours" are the results
vocabulary's (`roma_lab.results`).
"""

from ._benchmark import (CHALLENGE_MAX_OVERLAP, DEFAULT_SEED, FAMILIES, PRE_LOCK_TEST_TEMPLATES, SPLITS,
                         STANDARD_OVERLAP, Task, generate_suite, labels_matrix, reword, split_rule_violations,
                         split_tasks, suite_families, suite_hash)
from ._evaluate import count_failures, evaluate, summarize_routes, sweep_threshold
from ._execute import SUCCESS, execute
from ._inspect import inspect_route
from ._model import Featurizer, OperationModel, TrainingConfig, train_heads
from ._ops import SUPPORT_OPS
from ._policies import Hybrid, Learned, OneShot, StaticWorkload, baseline_policies
from ._semantic import ENCODERS, SemanticStudy, natural_prompts, route_natural
from ._tools import TOOLS, OperationSession, tool_outcome

__all__ = [
    # the benchmark
    "CHALLENGE_MAX_OVERLAP", "DEFAULT_SEED", "FAMILIES", "PRE_LOCK_TEST_TEMPLATES", "SPLITS", "STANDARD_OVERLAP",
    "SUPPORT_OPS", "Task", "generate_suite", "labels_matrix", "reword", "split_rule_violations", "split_tasks",
    "suite_families", "suite_hash",
    # the router, its policies and their evaluation
    "Hybrid", "Learned", "OneShot", "OperationModel", "StaticWorkload", "TrainingConfig", "baseline_policies",
    # the parts a speed script times
    "Featurizer", "execute", "train_heads",
    "count_failures", "evaluate", "inspect_route", "summarize_routes", "sweep_threshold",
    # the semantic variants and the natural prompts
    "ENCODERS", "SemanticStudy", "natural_prompts", "route_natural",
    # the operations as an agent's tools
    "SUCCESS", "TOOLS", "OperationSession", "tool_outcome",
]
