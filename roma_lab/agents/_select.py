"""Choosing among best-of-N rollouts: majority vote (pure), and the rules applied to model verdicts.

Vote (``roma_lab.stats.vote``, the project's one plurality vote): answers are normalised
(``roma_lab.bench.normalize_answer``); empty answers and "unable to determine" do not vote. The
most frequent answer wins; a tie goes to the tied answer given first (lowest rollout index), and
the chosen rollout is the first one that gave it. Scores: the highest score wins, ties to the
lowest index. A list-wise pick outside the range falls back to rollout 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from operator import itemgetter

from roma_lab.bench import normalize_answer
from roma_lab.stats import vote

from ._types import Selection

__all__ = ["is_non_answer", "pick_best_score", "vote_selection"]


def is_non_answer(answer: str | None) -> bool:
    """Empty or "unable to determine": the answers the paper's protocol allows re-answering."""
    return answer is None or not answer.strip() or "unable to determine" in answer.lower()


def vote_selection(answers: Sequence[str | None]) -> Selection:
    """Majority vote over the rollouts' answers: ``roma_lab.stats.vote`` over the answers that vote,
    keyed by their normalised text, with the tie-break stated in the module docstring. ``votes``
    holds each normalised answer's count, in order of first appearance."""
    ballots = [(i, normalize_answer(answer)) for i, answer in enumerate(answers) if not is_non_answer(answer)]
    if not ballots:
        return Selection(method="vote", chosen=0, votes={}, tie=False, note="no rollout answered; kept rollout 0")
    result = vote(ballots, key=itemgetter(1))
    return Selection(method="vote", chosen=result.answer[0], votes=dict(Counter(key for _, key in ballots)),
                     tie=result.tied)


def pick_best_score(scores: Sequence[float | None]) -> tuple[int, bool]:
    """(index of the highest score, whether it was tied); None scores never win; all None -> (0, False)."""
    valid = [(s, i) for i, s in enumerate(scores) if s is not None]
    if not valid:
        return 0, False
    best = max(s for s, _ in valid)
    winners = [i for s, i in valid if s == best]
    return winners[0], len(winners) > 1
