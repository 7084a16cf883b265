"""The statistics settings every table and study uses, in one frozen value passed down to each of them.

``DEFAULT_STATS`` is the only place the defaults live: the primitives (``bootstrap_ci``,
``min_detectable_effect`` ...) take their keyword defaults from it, and the paper studies and
tables take a ``stats=`` keyword and record ``stats.as_dict()`` with what they write.
"""

import dataclasses
from dataclasses import dataclass

#: The paired CI methods ``paired_ci`` accepts: the t-interval on the per-task differences, or a
#: task bootstrap (``bootstrap_ci``'s methods).
PAIRED_CI_METHODS = ("t", "percentile", "basic", "BCa")


@dataclass(frozen=True, slots=True)
class StatsSettings:
    """Bootstrap resamples, bootstrap seed, CI level, test level ``alpha``, the ``power`` of a
    minimum detectable effect, and the method of every paired CI (``paired_ci``: ``"t"``, the
    t-interval on per-task differences, or a task bootstrap, ``"percentile"``, ``"basic"`` or
    ``"BCa"``; design/calibration.md measured the choice)."""

    n_resamples: int = 2000
    seed: int = 0
    level: float = 0.95
    alpha: float = 0.05
    power: float = 0.8
    paired_ci: str = "t"

    def __post_init__(self):
        if self.paired_ci not in PAIRED_CI_METHODS:
            raise ValueError(f"paired_ci must be one of {list(PAIRED_CI_METHODS)}, got {self.paired_ci!r}")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


#: The defaults: pass ``stats=StatsSettings(n_resamples=...)`` to change one.
DEFAULT_STATS = StatsSettings()
