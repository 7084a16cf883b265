"""Study planning: what a paired comparison of n tasks can detect, and how many tasks a target needs.

The rule, stated once. A comparison of two conditions on the same n tasks is judged by the tests the
tables use (``roma_lab.results.compare``): the exact two-sided sign test over per-task scores
(``sign_test``, reject when p <= alpha) and the paired CI (``StatsSettings.paired_ci``, a t-interval
on the per-task differences by default; it excludes 0 exactly when the paired t-test rejects). The
planner predicts the power of those tests, not of a normal approximation to them:

* from the **discordance** psi (share of tasks on which two binary, one-run conditions disagree,
  from a pilot; 1 when nothing is known): the exact sign test. The number of discordant tasks is
  D ~ Binomial(n, psi); given D, the wins are Binomial(D, (psi + delta) / (2 psi)) for a true
  difference delta; power is the sum over D of the binomial test's rejection probability. Exact for
  the model (independent tasks, a common discordance); no normal approximation.
* from **sd_diff** (sd of the per-task differences, each a mean over R runs; more runs shrink it;
  1 is the largest 0/1 or [0, 1] scores allow): the paired t-test, by the noncentral t
  (``statsmodels.stats.power.TTestPower`` computes the same number).

``plan_paired(n, ...)`` gives the minimum detectable effect (MDE) at n, ``n_for_mde(mde, ...)`` the
smallest n whose MDE is at most the target; both return a :class:`PairedPlan` that also carries the
no-pilot bound (``mde_worst``: discordance 1, or sd_diff 1) and the expected half-width of the paired
95% CI at no effect. ``plan_rate`` / ``n_for_half_width`` size one condition's rate (normal
half-width, worst case rate 0.5; with a pilot's variance components, R runs per task).
The tables' ``mde`` and ``mde_bound`` columns (``roma_lab.results.compare``) are this planner's.
``min_detectable_effect`` (``_power.py``) keeps its closed-form normal approximations for notebook 20's
audit of papers' marginal counts and for the calibration study, which measures how far they fall short;
design/calibration.md shows, by simulation, how far each prediction is from the rejection rate the tests
reach.

For a command that plans runs (``python -m roma_lab.experiments plan``): take n from the budget and
call ``plan_paired(n, discordance=psi)`` with the discordance a pilot (or earlier rows) measured
between the two conditions' 0/1 outcomes on the same tasks (share of tasks where exactly one
succeeded), or with no discordance for the no-pilot bound; for a requested MDE call
``n_for_mde(mde, discordance=psi)`` and price its ``.n``. With R runs per task, measure ``sd_diff``
on per-task means of R runs and plan with it (the CI's test). ``PairedPlan.as_dict()`` holds plain
numbers and strings (NaN for what does not apply: write it as null in strict JSON); ``plan_rate``
and ``n_for_half_width`` answer "how precise is one condition's rate". Every function validates
its input and raises ``ValueError`` with the reason. Example: ``plan_paired(100,
discordance=0.35).mde`` is 0.17 (the sign test detects a 17-point difference with 80% power);
``n_for_mde(0.10, discordance=0.35).n`` is 289.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from roma_lab.stats._power import _check_n, _z
from roma_lab.stats._settings import DEFAULT_STATS

SIGN_TEST = "exact sign test"
T_TEST = "paired t-test"
#: The largest n ``n_for_mde`` considers (a target no n up to this reaches is an error).
MAX_N = 1_000_000


@dataclass(frozen=True, slots=True)
class PairedPlan:
    """What a paired comparison of ``n`` tasks detects.

    ``mde``: the smallest true difference (a fraction: 0.10 = 10 points) that ``test`` detects with
    probability ``power`` at two-sided level ``alpha``, from the given ``discordance`` or ``sd_diff``
    (the other is NaN); NaN when no difference the design allows reaches the power (with a
    discordance the difference cannot exceed it). ``mde_worst``: the same with no pilot (discordance
    1, or sd_diff 1): for 0/1 scores a true difference this large is detected with ``power``
    whatever the discordance (tested). ``ci_half_width``: expected half-width of the
    paired t CI at level ``1 - alpha`` when there is no effect (sd of the differences sqrt(psi), or
    sd_diff). ``target``: the MDE asked of ``n_for_mde`` (NaN from ``plan_paired``).
    """

    n: int
    mde: float
    mde_worst: float
    ci_half_width: float
    alpha: float
    power: float
    discordance: float
    sd_diff: float
    test: str
    target: float = math.nan

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class RatePlan:
    """Half-width of the normal CI of one condition's rate over ``n`` tasks with ``runs`` runs each.

    ``sd_task``: sd of a task's mean score (sqrt(rate (1 - rate)) with no pilot, whatever the runs;
    sqrt(between + within / runs) from a pilot's variance components). ``target``: the half-width asked
    of ``n_for_half_width`` (NaN from ``plan_rate``).
    """

    n: int
    half_width: float
    level: float
    runs: int
    sd_task: float
    method: str
    target: float = math.nan

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def sign_test_power(n_tasks: int, discordance: float, effect: float, *, alpha: float = DEFAULT_STATS.alpha) -> float:
    """Probability that the exact two-sided sign test rejects at ``alpha`` (p <= alpha) when binary
    outcomes of two conditions disagree on a share ``discordance`` of tasks and differ by ``effect``
    (|effect| <= discordance)."""
    from scipy import stats

    _check_n(n_tasks)
    if not 0.0 < discordance <= 1.0:
        raise ValueError(f"discordance must lie in (0, 1], got {discordance!r}")
    if not abs(effect) <= discordance + 1e-12:
        raise ValueError(f"|effect| cannot exceed the discordance: {effect!r} > {discordance!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    # D outside its central 1 - 2e-13 adds nothing the sum can show; skipping it keeps large n cheap
    d = np.arange(int(stats.binom.ppf(1e-13, n_tasks, discordance)),
                  int(stats.binom.isf(1e-13, n_tasks, discordance)) + 1)
    # Largest k with P(W <= k) <= alpha / 2 under p = 1/2: binomtest's two-sided p is 2 P(W <= min(w, D - w)).
    k = stats.binom.ppf(alpha / 2, d, 0.5)
    k = np.where(stats.binom.cdf(k, d, 0.5) <= alpha / 2, k, k - 1)
    q = min(max((discordance + effect) / (2 * discordance), 0.0), 1.0)
    reject = np.where(k >= 0, stats.binom.cdf(k, d, q) + stats.binom.sf(d - k - 1, d, q), 0.0)
    return float(np.clip(np.sum(stats.binom.pmf(d, n_tasks, discordance) * reject), 0.0, 1.0))


def t_test_power(n_tasks: int, sd_diff: float, effect: float, *, alpha: float = DEFAULT_STATS.alpha) -> float:
    """Power of the two-sided paired t-test (n - 1 degrees of freedom) for a true mean difference
    ``effect`` when the per-task differences have sd ``sd_diff`` (noncentral t)."""
    from scipy import stats

    _check_n(n_tasks)
    if not math.isfinite(sd_diff) or sd_diff <= 0:
        raise ValueError(f"sd_diff must be a finite number > 0, got {sd_diff!r}")
    df, nc = n_tasks - 1, abs(effect) * math.sqrt(n_tasks) / sd_diff
    critical = stats.t.ppf(1 - alpha / 2, df)
    # the far tail (rejecting on the wrong side) underflows to NaN in scipy's nct for small df and large nc
    wrong_side = float(np.nan_to_num(stats.nct.cdf(-critical, df, nc), nan=0.0))
    return float(stats.nct.sf(critical, df, nc)) + wrong_side


def plan_paired(
    n: int,
    *,
    discordance: float | None = None,
    sd_diff: float | None = None,
    alpha: float = DEFAULT_STATS.alpha,
    power: float = DEFAULT_STATS.power,
) -> PairedPlan:
    """The MDE of a paired comparison of ``n`` tasks (see the module docstring for the rule).

    Give ``discordance`` (binary scores, one run per task: plans the exact sign test), ``sd_diff``
    (per-task differences of means over R runs: plans the paired t-test), or neither (no pilot: the
    sign test at discordance 1, the worst case). ``ValueError`` on anything out of range.
    """
    _check_n(n)
    _z(alpha, power)
    test, value, worst = _design(discordance, sd_diff)
    mde = _mde(n, test, value, alpha, power)
    return PairedPlan(
        n=n, mde=mde, mde_worst=_mde(n, test, worst, alpha, power), ci_half_width=_half_width(n, test, value, alpha),
        alpha=alpha, power=power, discordance=value if test == SIGN_TEST else math.nan,
        sd_diff=value if test == T_TEST else math.nan, test=test,
    )


def n_for_mde(
    mde: float,
    *,
    discordance: float | None = None,
    sd_diff: float | None = None,
    alpha: float = DEFAULT_STATS.alpha,
    power: float = DEFAULT_STATS.power,
) -> PairedPlan:
    """The plan at the n (>= 2) where the power at ``mde`` first reaches ``power`` (n - 1 falls
    short): the test then detects a true difference ``mde`` with at least ``power``, and ``.mde`` is
    at most the target. Same designs as :func:`plan_paired`.

    Found by bisection between 1 and a bracket that reaches the power. The exact test's power
    saw-tooths slightly in n (it averages over the discrete number of discordant tasks), so a
    neighbouring n can differ by a point either way. ``ValueError`` when the target cannot be
    reached (with a discordance, ``mde`` above it) or needs more than ``MAX_N`` tasks.
    """
    z_a, z_b = _z(alpha, power)
    if not mde > 0:
        raise ValueError(f"mde must be a positive difference, got {mde!r}")
    test, value, _ = _design(discordance, sd_diff)
    if test == SIGN_TEST and mde > value:
        raise ValueError(f"no design detects {mde:g}: the difference cannot exceed the discordance {value:g}")

    def reaches(n: int) -> bool:
        return _power(n, test, value, mde, alpha) >= power

    # Start at the normal approximation's n (z-test at the no-effect spread), double until the
    # power is reached, then bisect down to where it is first reached.
    spread = math.sqrt(value) if test == SIGN_TEST else value
    root_n = (z_a + z_b) * spread / mde
    if not root_n <= math.sqrt(2 * MAX_N):  # far beyond MAX_N (squaring a tiny mde's would overflow)
        raise ValueError(f"more than {MAX_N} tasks needed for an MDE of {mde:g}")
    high = max(2, math.ceil(root_n ** 2))
    while not reaches(high):
        if high >= MAX_N:
            raise ValueError(f"more than {MAX_N} tasks needed for an MDE of {mde:g}")
        high = min(2 * high, MAX_N)
    low = 1
    while high - low > 1:  # invariant: reaches(high); low is below the crossing or 1
        middle = (low + high) // 2
        if reaches(middle):
            high = middle
        else:
            low = middle
    plan = plan_paired(high, **({"discordance": value} if test == SIGN_TEST else {"sd_diff": value}),
                       alpha=alpha, power=power)
    return dataclasses.replace(plan, target=float(mde))


def plan_rate(
    n: int,
    *,
    rate: float = 0.5,
    runs: int = 1,
    between: float | None = None,
    within: float | None = None,
    level: float = DEFAULT_STATS.level,
) -> RatePlan:
    """Expected half-width of the normal CI, ``z_{(1+level)/2} * sd_task / sqrt(n)``, of one
    condition's mean score over ``n`` tasks (the task bootstrap's interval has the same width to
    first order).

    With no pilot, ``sd_task = sqrt(rate (1 - rate))`` (largest at the default rate 0.5): the
    variance of a 0/1 score, which bounds that of a task's mean over any number of runs. With a
    pilot's ``between`` and ``within`` (``variance_components``: task-to-task and run-to-run),
    ``sd_task = sqrt(between + within / runs)``: more runs shrink only the second part.
    """
    _check_n(n)
    sd_task, method = _task_sd(rate, runs, between, within)
    return RatePlan(n=n, half_width=_z_level(level) * sd_task / math.sqrt(n), level=level, runs=runs, sd_task=sd_task,
                    method=method)


def n_for_half_width(
    half_width: float,
    *,
    rate: float = 0.5,
    runs: int = 1,
    between: float | None = None,
    within: float | None = None,
    level: float = DEFAULT_STATS.level,
) -> RatePlan:
    """The plan at the smallest n (>= 2) whose half-width (:func:`plan_rate`) is at most ``half_width``."""
    if not 0.0 < half_width:
        raise ValueError(f"half_width must be > 0, got {half_width!r}")
    sd_task, _ = _task_sd(rate, runs, between, within)
    n = max(2, math.ceil((_z_level(level) * sd_task / half_width) ** 2 - 1e-9))
    plan = plan_rate(n, rate=rate, runs=runs, between=between, within=within, level=level)
    return dataclasses.replace(plan, target=float(half_width))


def _design(discordance, sd_diff) -> tuple[str, float, float]:
    """(test, the given spread, its no-pilot worst case)."""
    if discordance is not None and sd_diff is not None:
        raise ValueError("give at most one of discordance and sd_diff")
    if sd_diff is not None:
        if not math.isfinite(sd_diff) or sd_diff <= 0:
            raise ValueError(f"sd_diff must be a finite number > 0, got {sd_diff!r}")
        return T_TEST, float(sd_diff), 1.0
    discordance = 1.0 if discordance is None else discordance
    if not 0.0 < discordance <= 1.0:
        raise ValueError(f"discordance must lie in (0, 1], got {discordance!r}")
    return SIGN_TEST, float(discordance), 1.0


def _power(n, test, value, effect, alpha) -> float:
    if test == SIGN_TEST:
        return sign_test_power(n, value, effect, alpha=alpha)
    return t_test_power(n, value, effect, alpha=alpha)


def _mde(n, test, value, alpha, power) -> float:
    from scipy import optimize

    def gap(effect):
        return _power(n, test, value, effect, alpha) - power

    if test == SIGN_TEST:
        largest = value  # the difference cannot exceed the discordance
        if gap(largest) < 0:
            return math.nan
    else:  # widen from the z-test's MDE until the t-test's power is reached (nct is NaN far out)
        z_a, z_b = _z(alpha, power)
        largest = (z_a + z_b) * value / math.sqrt(n)
        while gap(largest) < 0:
            largest *= 1.5
    effect = float(optimize.brentq(gap, 0.0, largest, xtol=1e-10))
    return effect if effect <= 1.0 else math.nan  # scores in [0, 1] never differ by more than 1


def _half_width(n, test, value, alpha) -> float:
    from scipy import stats

    sd = math.sqrt(value) if test == SIGN_TEST else value
    return float(stats.t.ppf(1 - alpha / 2, n - 1) * sd / math.sqrt(n))


def _z_level(level: float) -> float:
    from scipy import stats

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    return float(stats.norm.ppf((1 + level) / 2))


def _task_sd(rate, runs, between, within) -> tuple[float, str]:
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be an int >= 1, got {runs!r}")
    if (between is None) != (within is None):
        raise ValueError("give both between and within (a pilot's variance components) or neither")
    if between is not None:
        if not (math.isfinite(between) and math.isfinite(within) and within >= 0):
            raise ValueError(f"between and within must be finite and within >= 0, got {between!r}, {within!r}")
        # between is unbiased and may come out < 0 (variance_components); a variance cannot
        return math.sqrt(max(between, 0.0) + within / runs), f"pilot: sqrt(between + within / {runs})"
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must lie in [0, 1], got {rate!r}")
    return math.sqrt(rate * (1 - rate)), f"no pilot: sqrt(rate (1 - rate)) at rate {rate:g}"
