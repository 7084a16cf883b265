"""Statistics shared by every paper reproduction.

Task-bootstrap confidence intervals (one-sample and paired), the exact sign test over discordant
pairs, the unbiased pass@k estimator and plurality voting, family-stratified sampling, Holm's
adjustment, the run-to-run vs task-to-task variance decomposition, the minimum detectable effect
of a paired comparison (``roma_lab.results.summarize_protocol`` applies all of them to tidy
per-run scores), and whether success falls over ordered difficulty levels (``level_trend``).
``StatsSettings`` (``DEFAULT_STATS``) holds the one set of defaults (resamples, seed, level, alpha,
power). Resampling always uses a seeded ``numpy.random.Generator``; the global NumPy RNG is never
touched. See ``design/bootstrap.md`` and ``design/protocol.md``.
"""

from roma_lab.stats._ci import CI, bootstrap_ci, paired_bootstrap_ci
from roma_lab.stats._multiple import holm_adjust
from roma_lab.stats._power import MDE, max_discordance, min_detectable_effect
from roma_lab.stats._sampling import Vote, majority_vote, pass_at_k, vote
from roma_lab.stats._settings import DEFAULT_STATS, StatsSettings
from roma_lab.stats._sign import SignTest, sign_test
from roma_lab.stats._stratified import SampleSizeError, check_sample_size, stratified_sample
from roma_lab.stats._trend import LevelTrend, level_trend
from roma_lab.stats._variance import VarianceComponents, variance_components

__all__ = [
    "CI",
    "DEFAULT_STATS",
    "LevelTrend",
    "MDE",
    "SampleSizeError",
    "SignTest",
    "StatsSettings",
    "VarianceComponents",
    "Vote",
    "bootstrap_ci",
    "check_sample_size",
    "holm_adjust",
    "level_trend",
    "majority_vote",
    "max_discordance",
    "min_detectable_effect",
    "paired_bootstrap_ci",
    "pass_at_k",
    "sign_test",
    "stratified_sample",
    "variance_components",
    "vote",
]
