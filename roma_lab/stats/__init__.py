"""Statistics shared by every paper reproduction.

Task-bootstrap confidence intervals (one-sample and paired) and the paired t-interval
(``paired_ci``: the tables' paired CI, its method chosen by ``StatsSettings.paired_ci``), the exact
bound that replaces a zero-width interval when a sample has no spread (``no_spread_ci``), the exact
sign test over discordant pairs, rates per hour (correct answers per hour) and two systems' ratio of
them (``per_hour_ci``, ``paired_rate_ratio_ci``), the unbiased pass@k estimator and plurality voting,
family-stratified sampling, Holm's adjustment, the run-to-run vs task-to-task variance
decomposition, the minimum detectable effect of a paired comparison
(``roma_lab.results.summarize_protocol`` applies all of them to tidy per-run scores), whether
success falls over ordered difficulty levels (``level_trend``), the study planner (``plan_paired``,
``n_for_mde``, ``plan_rate``, ``n_for_half_width``: the power of the tests the tables use) and the
simulated paired design the calibration study draws from (``PairedDesign``). ``StatsSettings``
(``DEFAULT_STATS``) holds the one set of defaults (resamples, seed, level, alpha, power, paired CI
method). Resampling always uses a seeded ``numpy.random.Generator``; the global NumPy RNG is never
touched. See ``design/bootstrap.md``, ``design/protocol.md`` and ``design/calibration.md``.
"""

from roma_lab.stats._calibration import DesignTruth, PairedDesign, design_truth, simulate_scores
from roma_lab.stats._ci import CI, bootstrap_ci, no_spread_ci, paired_bootstrap_ci, paired_ci
from roma_lab.stats._multiple import holm_adjust
from roma_lab.stats._planner import (
    PairedPlan,
    RatePlan,
    n_for_half_width,
    n_for_mde,
    plan_paired,
    plan_rate,
    sign_test_power,
    t_test_power,
)
from roma_lab.stats._power import MDE, max_discordance, min_detectable_effect
from roma_lab.stats._rates import paired_rate_ratio_ci, per_hour_ci
from roma_lab.stats._sampling import Vote, majority_vote, pass_at_k, vote
from roma_lab.stats._settings import DEFAULT_STATS, PAIRED_CI_METHODS, StatsSettings
from roma_lab.stats._sign import SignTest, sign_test
from roma_lab.stats._stratified import SampleSizeError, check_sample_size, stratified_sample
from roma_lab.stats._trend import LevelTrend, level_trend
from roma_lab.stats._variance import VarianceComponents, variance_components

__all__ = [
    "CI",
    "DEFAULT_STATS",
    "MDE",
    "PAIRED_CI_METHODS",
    "DesignTruth",
    "LevelTrend",
    "PairedDesign",
    "PairedPlan",
    "RatePlan",
    "SampleSizeError",
    "SignTest",
    "StatsSettings",
    "VarianceComponents",
    "Vote",
    "bootstrap_ci",
    "check_sample_size",
    "design_truth",
    "holm_adjust",
    "level_trend",
    "majority_vote",
    "max_discordance",
    "min_detectable_effect",
    "n_for_half_width",
    "n_for_mde",
    "no_spread_ci",
    "paired_bootstrap_ci",
    "paired_ci",
    "paired_rate_ratio_ci",
    "per_hour_ci",
    "pass_at_k",
    "plan_paired",
    "plan_rate",
    "sign_test",
    "sign_test_power",
    "simulate_scores",
    "stratified_sample",
    "t_test_power",
    "variance_components",
    "vote",
]
