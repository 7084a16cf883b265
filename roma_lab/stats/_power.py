"""Minimum detectable effect of a paired comparison by normal approximation (design/protocol.md): for
notebook 20's audit of papers' marginal counts and the calibration study's comparison; the tables' MDEs
are the exact planner's (``_planner.py``)."""

import dataclasses
import math
from dataclasses import dataclass

from roma_lab.stats._settings import DEFAULT_STATS


@dataclass(frozen=True, slots=True)
class MDE:
    """The smallest true mean difference a paired test detects with probability ``power``.

    Exactly one of ``sd_diff`` (sd of the per-task differences) and ``discordance`` (share of tasks
    on which two single-run configurations disagree) was given; the other is NaN. ``effect`` is NaN
    when no difference the design allows reaches ``power`` (it would exceed the discordance).
    """

    effect: float
    n_tasks: int
    alpha: float
    power: float
    sd_diff: float
    discordance: float
    method: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _z(alpha: float, power: float) -> tuple[float, float]:
    from scipy import stats

    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must lie strictly between 0 and 1, got {alpha!r}, {power!r}")
    return float(stats.norm.ppf(1 - alpha / 2)), float(stats.norm.ppf(power))


def _check_n(n_tasks) -> None:
    if isinstance(n_tasks, bool) or not isinstance(n_tasks, int) or n_tasks < 2:
        raise ValueError(f"n_tasks must be an int >= 2, got {n_tasks!r}")


def min_detectable_effect(
    n_tasks: int,
    *,
    sd_diff: float | None = None,
    discordance: float | None = None,
    alpha: float = DEFAULT_STATS.alpha,
    power: float = DEFAULT_STATS.power,
) -> MDE:
    """Minimum detectable effect of a two-sided paired test at level ``alpha`` with ``power``.

    With ``sd_diff`` (per-task differences of scores averaged over R runs, any scale): the paired
    z-test, ``effect = (z_{1-alpha/2} + z_power) * sd_diff / sqrt(n)``, assuming tasks are
    independent and ``sd_diff`` is the same with and without an effect.

    With ``discordance`` psi (binary scores, one run each): McNemar's test, whose statistic
    ``(wins - losses) / sqrt(wins + losses)`` has variance ``psi`` under no effect and
    ``psi - effect^2`` under an effect (Connor 1987). Solving
    ``sqrt(n) * effect = z_{1-alpha/2} * sqrt(psi) + z_power * sqrt(psi - effect^2)`` gives
    ``effect = sqrt(psi) * (z_a sqrt(n) + z_b sqrt(n + z_b^2 - z_a^2)) / (n + z_b^2)``.
    """
    _check_n(n_tasks)
    z_a, z_b = _z(alpha, power)
    if (sd_diff is None) == (discordance is None):
        raise ValueError("give exactly one of sd_diff and discordance")
    if sd_diff is not None:
        if not math.isfinite(sd_diff) or sd_diff < 0:
            raise ValueError(f"sd_diff must be a finite number >= 0, got {sd_diff!r}")
        effect = (z_a + z_b) * sd_diff / math.sqrt(n_tasks)
        return MDE(effect, n_tasks, alpha, power, float(sd_diff), math.nan,
                   f"paired z-test: (z_{1 - alpha / 2:g} + z_{power:g}) * sd_diff / sqrt(n)")
    if not 0.0 < discordance <= 1.0:
        raise ValueError(f"discordance must lie in (0, 1], got {discordance!r}")
    n = n_tasks
    effect = math.sqrt(discordance) * (z_a * math.sqrt(n) + z_b * math.sqrt(n + z_b**2 - z_a**2)) / (n + z_b**2) \
        if n + z_b**2 > z_a**2 else math.inf
    method = f"McNemar, normal approximation (Connor 1987), discordance {discordance:g}"
    if effect > discordance:  # the net difference can never exceed the share of discordant tasks
        return MDE(math.nan, n, alpha, power, math.nan, float(discordance), method + ": no effect reaches the power")
    return MDE(effect, n, alpha, power, math.nan, float(discordance), method)


def max_discordance(n_tasks: int, effect: float, *, alpha: float = DEFAULT_STATS.alpha,
                    power: float = DEFAULT_STATS.power) -> float:
    """The largest discordance at which a true difference ``effect`` (binary scores, one run each)
    is still detected with ``power``: the inverse of :func:`min_detectable_effect`'s McNemar form.

    Returns NaN when even the smallest possible discordance (``|effect|``: every discordant task
    moves the same way) is not enough, and 1.0 when any discordance is.
    """
    _check_n(n_tasks)
    z_a, z_b = _z(alpha, power)
    delta = abs(effect)
    if not 0.0 < delta <= 1.0:
        raise ValueError(f"effect must be a nonzero difference of proportions, got {effect!r}")

    def slack(psi: float) -> float:  # increasing in psi; its root is the answer
        return z_a * math.sqrt(psi) + z_b * math.sqrt(max(psi - delta**2, 0.0)) - math.sqrt(n_tasks) * delta

    if slack(delta) > 0:
        return math.nan
    if slack(1.0) <= 0:
        return 1.0
    from scipy import optimize

    return float(optimize.brentq(slack, delta, 1.0, xtol=1e-12))
