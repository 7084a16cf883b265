"""The compositional meta-routing paper: every table, its figures and the router inside ROMA.

`RouterStudy` fits the router on the suite's train split and selects on dev; each table function
is a pure function of the study: `family_table` (Table 1), `standard_test_table` (Table 2),
`challenge_table` (Table 3), `ablation_table` (Table 4), `threshold_table` (Table 5),
`training_size_curve`, `failure_analysis`, `hybrid_table` (the dev-gated back-off beyond the
paper), `semantic_table` and `semantic_hybrid_table` (issue 12's semantic variants), `paraphrase_table` (issue 45: routers trained
on the embedded model's paraphrases of the train split, chosen on a hand-written paraphrase dev set;
`python -m roma_lab.papers.routing paraphrase` regenerates the shipped paraphrases).
`reproduce_tables(out_dir, tables=[...])` runs the requested ones and writes them tidy with the
paper's figures beside ours, returning one `RoutingTables`; `python -m roma_lab.papers.routing
reproduce --out DIR` does so headless. `compare_atomizers` runs ROMA with its LM atomizer and with
the router as atomizer; `semantic_and_atomizer_summary` reads issue 12's closing figures from those tables. The plots
draw Figure 1, Table 5 and the training-size curve.

The mechanism (suite, policies, model, semantic router, `evaluate`) is `roma_lab.router`; the
suite names notebook 10 shows are re-exported here so notebooks import this wing only.
"""

from ...router import CHALLENGE_MAX_OVERLAP, STANDARD_OVERLAP, generate_suite, split_rule_violations, suite_hash
from ._atomizers import compare_atomizers
from ._paraphrase import paraphrase_table
from ._plots import plot_split_contrast, plot_threshold_sweep, plot_training_size
from ._tables import (TABLES, RouterStudy, RoutingTables, ablation_table, challenge_table, failure_analysis,
                      family_table, hybrid_table, reproduce_tables, select_hybrid_gate, semantic_and_atomizer_summary,
                      semantic_hybrid_table, semantic_table, standard_test_table, threshold_table,
                      training_size_curve)

__all__ = [
    "CHALLENGE_MAX_OVERLAP", "STANDARD_OVERLAP", "TABLES", "RouterStudy", "RoutingTables",
    "ablation_table", "challenge_table", "compare_atomizers", "failure_analysis", "family_table", "generate_suite",
    "hybrid_table", "paraphrase_table", "plot_split_contrast", "plot_threshold_sweep", "plot_training_size", "reproduce_tables",
    "select_hybrid_gate", "semantic_and_atomizer_summary", "semantic_hybrid_table", "semantic_table",
    "split_rule_violations", "standard_test_table", "suite_hash", "threshold_table", "training_size_curve",
]
