"""Statistics shared by every paper reproduction.

Task-bootstrap confidence intervals (one-sample and paired), the exact sign test over discordant
pairs, the unbiased pass@k estimator and majority voting. Resampling always uses a seeded
``numpy.random.Generator``; the global NumPy RNG is never touched. See ``design/bootstrap.md``.
"""

from roma_lab.stats._ci import CI, bootstrap_ci, paired_bootstrap_ci
from roma_lab.stats._sampling import majority_vote, pass_at_k
from roma_lab.stats._sign_test import SignTest, sign_test

__all__ = [
    "CI",
    "SignTest",
    "bootstrap_ci",
    "majority_vote",
    "paired_bootstrap_ci",
    "pass_at_k",
    "sign_test",
]
