"""The compositional meta-routing paper: every table, its figures and the router inside ROMA.

`RouterStudy` fits the router on the suite's train split and selects on dev; each table function
is a pure function of the study: `family_table` (Table 1), `standard_test_table` (Table 2),
`challenge_table` (Table 3), `ablation_table` (Table 4), `threshold_table` (Table 5),
`training_size_curve`, `failure_analysis`, `hybrid_table` (the dev-gated back-off beyond the
paper), `semantic_table` and `semantic_hybrid_table` (issue 12's semantic variants), `paraphrase_table` (issue 45: routers trained
on the embedded model's paraphrases of the train split, chosen on a hand-written paraphrase dev set;
`python -m roma_lab.papers.routing paraphrase` regenerates the shipped paraphrases), `robust_table`
(issue 52: the robust router, n-grams beside MiniLM trained on those paraphrases, beside the paper's
on test, challenge and the natural prompts, and its ms per routing decision beside a model call).
`RouterStudy.build(router="robust")` (`reproduce --router robust`) holds the robust router instead of
the paper's (`ROUTERS`; the paper's is the default and what the paper's tables reproduce).
`reproduce_tables(out_dir, tables=[...])` runs the requested ones and writes them tidy with the
paper's figures beside ours, returning one `RoutingTables`; `python -m roma_lab.papers.routing
reproduce --out DIR` does so headless. `compare_atomizers` runs ROMA with its LM atomizer and with
the router as atomizer (`router_atomizer`: the robust router by default where MiniLM is installed,
`default_router()` says which); `semantic_and_atomizer_summary` reads issue 12's closing figures from those tables. The plots
draw Figure 1, Table 5 and the training-size curve.

The mechanism (suite, policies, model, semantic router, `evaluate`) is `roma_lab.router`; the
suite names notebook 10 shows are re-exported here so notebooks import this wing only.
"""

from ...router import CHALLENGE_MAX_OVERLAP, STANDARD_OVERLAP, generate_suite, split_rule_violations, suite_hash
from ._atomizers import compare_atomizers, router_atomizer
from ._paraphrase import paraphrase_table
from ._robust import COVERAGE_GOAL, ROUTERS, default_router, model_call_seconds, robust_table
from ._plots import plot_split_contrast, plot_threshold_sweep, plot_training_size
from ._tables import (TABLES, RouterStudy, RoutingTables, ablation_table, challenge_table, failure_analysis,
                      family_table, hybrid_table, reproduce_tables, select_hybrid_gate, semantic_and_atomizer_summary,
                      semantic_hybrid_table, semantic_table, standard_test_table, threshold_table,
                      training_size_curve)

__all__ = [
    "CHALLENGE_MAX_OVERLAP", "COVERAGE_GOAL", "ROUTERS", "STANDARD_OVERLAP", "TABLES", "RouterStudy", "RoutingTables",
    "ablation_table", "challenge_table", "compare_atomizers", "default_router", "failure_analysis", "family_table",
    "generate_suite", "hybrid_table", "model_call_seconds", "paraphrase_table", "plot_split_contrast",
    "plot_threshold_sweep", "plot_training_size", "reproduce_tables", "robust_table", "router_atomizer",
    "select_hybrid_gate", "semantic_and_atomizer_summary", "semantic_hybrid_table", "semantic_table",
    "split_rule_violations", "standard_test_table", "suite_hash", "threshold_table", "training_size_curve",
]
