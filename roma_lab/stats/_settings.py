"""The statistics settings every table and study uses, in one frozen value (STYLE.md item 10).

``DEFAULT_STATS`` is the only place the defaults live: the primitives (``bootstrap_ci``,
``min_detectable_effect`` ...) take their keyword defaults from it, and the paper studies and
tables take a ``stats=`` keyword and record ``stats.as_dict()`` with what they write.
"""

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StatsSettings:
    """Bootstrap resamples, bootstrap seed, CI level, test level ``alpha`` and the ``power`` of a
    minimum detectable effect."""

    n_resamples: int = 2000
    seed: int = 0
    level: float = 0.95
    alpha: float = 0.05
    power: float = 0.8

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


#: The defaults: pass ``stats=StatsSettings(n_resamples=...)`` to change one.
DEFAULT_STATS = StatsSettings()
