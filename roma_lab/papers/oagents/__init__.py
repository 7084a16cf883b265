"""The OAgents paper (arXiv 2506.15741) reproduced: its numbers as data with their consistency audit
(notebook 20) and its design-choice studies on our own runs (notebooks 21-29).

``audit_paper_numbers`` checks the paper's own figures (``paper_reported.csv``) and returns a
``PaperAudit``; each study function (``measure_protocol``, ``measure_levels``, ``compare_planning``,
``compare_memory``, ``compare_tts``, ``compare_backbones``, ``compare_search``, ``compare_saved_runs``,
``evaluate_browsecomp``) runs its conditions through ``run_study`` (``roma_lab.evaluate`` underneath:
``run_conditions``, ``study_rows``) and returns an ``OAgentsTables``. The agent itself and its tool
benchmarks are the mechanism room ``roma_lab.agents``.
See design/agents.md and design/protocol.md.
"""

from ._audit import (CLAIMS, GAIA_SIZES, PAPER_REPORTED, PARTS, ROW_SIZES, PaperAudit, RankClaim,
                     audit_paper_numbers, paper_reported_df, plot_paper_comparisons)
from ._studies import (ADVANCED, SAVED_STUDIES, STUDY_SPLIT, compare_backbones, compare_memory, compare_planning,
                       compare_saved_runs, compare_search, compare_tts, evaluate_browsecomp, levels_tables,
                       measure_levels, measure_protocol)
from ._study import ALL, Condition, OAgentsTables, comparisons_df, run_conditions, run_study, study_rows, suite_level

__all__ = [
    "ADVANCED", "ALL", "CLAIMS", "GAIA_SIZES", "PAPER_REPORTED", "PARTS", "ROW_SIZES", "SAVED_STUDIES", "STUDY_SPLIT",
    "Condition", "PaperAudit", "RankClaim", "OAgentsTables",
    "audit_paper_numbers", "compare_backbones", "compare_memory", "compare_planning", "compare_saved_runs",
    "compare_search", "compare_tts", "comparisons_df", "evaluate_browsecomp", "levels_tables", "measure_levels",
    "measure_protocol",
    "paper_reported_df", "plot_paper_comparisons", "run_conditions", "run_study", "study_rows", "suite_level",
]
