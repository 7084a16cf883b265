"""Stratified sampling: ``n`` items spread as evenly as possible over strata (families), seeded.

One rule for every family-stratified draw (the router's training-size subsets, the agent studies'
task samples): each stratum's items are shuffled by a seeded ``numpy.random.Generator``, then the
strata are visited round-robin, one item each per round, until ``n`` are drawn (``None``: all;
more than there are: :class:`SampleSizeError`, never a silent cap).
Every stratum stays represented as long as ``n`` allows. Two orders are options, so the figures
recorded with either draw stay the same:

- ``shuffle_strata=False``: strata visited in the order their first item appears;
  ``True``: the sorted strata visited in a seeded shuffled order.
- ``from_end=False``: each shuffled stratum is read from its front; ``True``: from its end.

The items come back in draw order (a larger ``n`` extends a smaller one with the same seed).
"""

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


class SampleSizeError(ValueError):
    """A draw asked for more items than there are (or fewer than one). Never capped silently: a table
    asked for 200 tasks must not quietly stand on 108. ``maximum`` is how many there are."""

    def __init__(self, n: int, maximum: int, what: str = "items"):
        self.n, self.maximum = n, maximum
        super().__init__(f"asked for {n} {what}, but there are {maximum}: ask for 1..{maximum} (or None for all)")


def check_sample_size(n: int | None, maximum: int, what: str = "items") -> None:
    """Raise :class:`SampleSizeError` unless ``n`` is None or in 1..``maximum``."""
    if n is not None and not 1 <= n <= maximum:
        raise SampleSizeError(n, maximum, what)


def stratified_sample(items: Sequence[T], n: int | None, *, seed: int, stratum: Callable[[T], Hashable],
                      shuffle_strata: bool = False, from_end: bool = False, what: str = "items") -> list[T]:
    """``n`` of ``items`` (``None``: all of them) spread over ``stratum(item)``; more than there
    are is a :class:`SampleSizeError` naming the maximum (and ``what`` was asked for)."""
    check_sample_size(n, len(items), what)
    rng = np.random.default_rng(seed)
    members: dict[Hashable, list[T]] = {}
    for item in items:
        members.setdefault(stratum(item), []).append(item)
    strata = sorted(members) if shuffle_strata else list(members)
    queues = {s: [members[s][i] for i in rng.permutation(len(members[s]))] for s in strata}
    if from_end:
        queues = {s: q[::-1] for s, q in queues.items()}
    order = [strata[i] for i in rng.permutation(len(strata))] if shuffle_strata else strata
    picked: list[T] = []
    while any(queues.values()) and (n is None or len(picked) < n):
        for s in order:
            if queues[s] and (n is None or len(picked) < n):
                picked.append(queues[s].pop(0))
    return picked
