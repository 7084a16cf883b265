"""Exact two-sided sign test over discordant task pairs."""

import dataclasses
from dataclasses import dataclass

import numpy as np

from roma_lab.stats._scores import paired_scores


@dataclass(frozen=True, slots=True)
class SignTest:
    """Outcome counts of a paired comparison and the exact two-sided p-value.

    Ties are reported but carry no information about which condition is better, so the test
    uses only the ``wins + losses`` discordant pairs.
    """

    wins: int
    losses: int
    ties: int
    p_value: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def sign_test(a, b) -> SignTest:
    """Sign test of ``a`` against ``b`` on the same tasks (same order).

    ``wins`` counts tasks where ``a > b``, ``losses`` where ``a < b``; the p-value is the exact
    two-sided binomial test of ``wins`` out of the discordant pairs at p = 0.5, and 1.0 when there
    are no discordant pairs. 2-D inputs ``(n_tasks, n_runs)`` are averaged per task first.
    """
    from scipy import stats

    a_scores, b_scores = paired_scores(a, b)
    wins = int(np.count_nonzero(a_scores > b_scores))
    losses = int(np.count_nonzero(a_scores < b_scores))
    ties = a_scores.size - wins - losses
    discordant = wins + losses
    p_value = 1.0 if discordant == 0 else float(stats.binomtest(wins, discordant, 0.5).pvalue)
    return SignTest(wins=wins, losses=losses, ties=ties, p_value=p_value)
