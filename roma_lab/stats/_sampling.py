"""Estimators over repeated attempts per task: unbiased pass@k and the plurality (majority) vote."""

from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np


def pass_at_k(n, c, k: int) -> float | np.ndarray:
    """Unbiased pass@k: the chance that k of n attempts, c of them correct, include a correct one.

    Computes ``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021) as the product
    ``1 - prod_{j<k} (1 - c / (n - j))``, which stays in [0, 1] without huge binomials.
    ``n`` and ``c`` may be integer arrays (one entry per task, broadcast together); ``k`` is one
    integer. Returns a float for scalar input, otherwise an array of the broadcast shape.
    Requires ``0 <= c <= n`` and ``1 <= k <= n`` everywhere (``ValueError`` otherwise).
    """
    n_arr, c_arr = np.broadcast_arrays(np.asarray(n), np.asarray(c))
    if n_arr.size == 0:
        raise ValueError("n and c are empty")
    for name, arr in (("n", n_arr), ("c", c_arr)):
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{name} must be integer(s), got dtype {arr.dtype}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int, got {k!r}")
    if np.any(c_arr < 0) or np.any(c_arr > n_arr):
        raise ValueError("need 0 <= c <= n for every entry")
    if k < 1 or np.any(k > n_arr):
        raise ValueError(f"need 1 <= k <= n for every entry, got k={k}, min n={n_arr.min()}")

    j = np.arange(k)
    # When n - c < k one factor is exactly 1 - c/c = 0, so pass@k is exactly 1 with no special case.
    factors = 1.0 - c_arr[..., None] / (n_arr[..., None] - j)
    result = 1.0 - factors.prod(axis=-1)
    return float(result) if result.ndim == 0 else result


@dataclass(frozen=True, slots=True)
class Vote:
    """The outcome of a plurality vote: the winning answer, its votes, and whether it was tied."""

    answer: Any
    votes: int
    tied: bool


def vote(answers: Iterable[Any], *, key: Callable[[Any], Hashable] | None = None) -> Vote:
    """Plurality vote over ``answers``, compared after the optional normalisation ``key``.

    Tie rule (deterministic): among the answers with the most votes, the one that occurs first
    wins, and the returned answer is that first original answer (not its key). Pass answers in a
    fixed order (e.g. by run index) and the result never depends on anything else. ``tied`` says
    whether another answer had as many votes. ``None`` counts as an ordinary answer; filter
    abstentions beforehand if they should not vote. Empty input raises ``ValueError``.
    """
    answers = list(answers)
    if not answers:
        raise ValueError("a vote needs at least one answer")
    keys = answers if key is None else [key(answer) for answer in answers]
    counts = Counter(keys)
    top = max(counts.values())
    # Scanning the answers in order breaks ties by first occurrence.
    winner = next(answer for answer, k in zip(answers, keys) if counts[k] == top)
    return Vote(answer=winner, votes=top, tied=sum(1 for c in counts.values() if c == top) > 1)


def majority_vote(answers: Iterable[Any], *, key: Callable[[Any], Hashable] | None = None) -> Any:
    """Most frequent answer; ties go to the answer that occurs first (see :func:`vote`)."""
    return vote(answers, key=key).answer
