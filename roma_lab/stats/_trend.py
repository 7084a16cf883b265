"""Whether success falls with difficulty: ordered levels, one-sided Fisher's exact test of the
easiest against the hardest (design/world_benchmark.md, "Difficulty by level").

The rule is fixed before a model is scored: success rates are non-increasing from the first level
to the last, and the first level's rate exceeds the last's by Fisher's exact test, one-sided, at
``alpha``. A smaller gap is "not shown at this n", never "absent": with five tasks a level, 4/5
against 0/5 is p = .024 and 3/5 against 0/5 is p = .083.
"""

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from roma_lab.stats._settings import DEFAULT_STATS


@dataclass(frozen=True, slots=True)
class LevelTrend:
    """Counts per level (in the order given, easiest first), the test of first against last, and
    the verdict: ``falls`` is True when the rates never rise and ``p_value`` < ``alpha``."""

    levels: tuple[str, ...]
    successes: tuple[int, ...]
    n: tuple[int, ...]
    monotone: bool
    p_value: float
    alpha: float
    falls: bool

    @property
    def rates(self) -> tuple[float, ...]:
        return tuple(s / n for s, n in zip(self.successes, self.n, strict=True))

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def level_trend(outcomes: Mapping[str, Sequence[float]], *, alpha: float = DEFAULT_STATS.alpha) -> LevelTrend:
    """The trend of 0/1 task outcomes over ordered levels (``outcomes``: level -> one outcome per
    task, easiest level first). Each task counts once, so a task's outcome must be 0 or 1 (pass@1
    at R = 1); means of several runs are refused, since Fisher's test counts tasks, not runs."""
    from scipy import stats

    if len(outcomes) < 2:
        raise ValueError(f"a trend needs at least two levels, got {list(outcomes)}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    successes, sizes = [], []
    for level, values in outcomes.items():
        scores = np.asarray(values, dtype=float)
        if scores.size == 0:
            raise ValueError(f"level {level!r} has no task")
        if not np.isin(scores, (0.0, 1.0)).all():
            raise ValueError(f"level {level!r}: outcomes must be 0 or 1 per task (one run each), got "
                             f"{sorted(set(scores.tolist()) - {0.0, 1.0})[:3]}")
        successes.append(int(scores.sum()))
        sizes.append(int(scores.size))
    rates = [s / n for s, n in zip(successes, sizes, strict=True)]
    monotone = all(a >= b for a, b in zip(rates, rates[1:]))
    table = [[successes[0], sizes[0] - successes[0]], [successes[-1], sizes[-1] - successes[-1]]]
    p_value = float(stats.fisher_exact(table, alternative="greater").pvalue)
    return LevelTrend(levels=tuple(outcomes), successes=tuple(successes), n=tuple(sizes), monotone=monotone,
                      p_value=p_value, alpha=alpha, falls=monotone and p_value < alpha)
