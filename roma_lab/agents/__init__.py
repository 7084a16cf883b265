"""OAgents: the paper's own numbers as data and their consistency audit (notebook 20).

(Minimal export for the protocol branch; the agent room built alongside adds its own names.)
"""

from ._paper import (
    CLAIMS,
    GAIA_SIZES,
    PAPER_REPORTED,
    PARTS,
    PaperAudit,
    RankClaim,
    audit_paper_numbers,
    paper_reported_df,
    plot_paper_comparisons,
)

__all__ = [
    "CLAIMS",
    "GAIA_SIZES",
    "PAPER_REPORTED",
    "PARTS",
    "PaperAudit",
    "RankClaim",
    "audit_paper_numbers",
    "paper_reported_df",
    "plot_paper_comparisons",
]
