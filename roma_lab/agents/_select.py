"""Choosing among best-of-N rollouts: majority vote (pure), and the rules applied to model verdicts.

Vote (``roma_lab.stats.vote``, the project's one plurality vote): answers are keyed by the task's
grader (``roma_lab.bench.answer_key``: exact text for an exact grader), never by a lossier key, so
answers the grader tells apart never pool their votes; empty answers and "unable to determine" do not vote. The
most frequent answer wins; a tie goes to the tied answer given first (lowest rollout index), and
the chosen rollout is the first one that gave it. Scores: the highest score wins, ties to the
lowest index. A list-wise pick outside the range falls back to rollout 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from operator import itemgetter

from roma_lab.bench import exact_key
from roma_lab.stats import vote

from roma_lab.trace import Selection

__all__ = ["is_non_answer", "pick_best_score", "vote_selection"]


def is_non_answer(answer: str | None) -> bool:
    """Empty or "unable to determine": the answers the paper's protocol allows re-answering."""
    return answer is None or not answer.strip() or "unable to determine" in answer.lower()


def vote_selection(answers: Sequence[str | None], key: Callable[[object], str] = exact_key) -> Selection:
    """Majority vote over the rollouts' answers: ``roma_lab.stats.vote`` over the answers that vote,
    keyed by ``key`` (the grader's ``bench.answer_key``), with the tie-break stated in the module
    docstring. ``votes`` holds each key's count, in order of first appearance."""
    keys = tuple(None if is_non_answer(answer) else key(answer) for answer in answers)
    ballots = [(i, k) for i, k in enumerate(keys) if k is not None]
    if not ballots:
        return Selection(method="vote", chosen=0, votes={}, ballots=keys, tie=False,
                         note="no rollout answered; kept rollout 0")
    result = vote(ballots, key=itemgetter(1))
    return Selection(method="vote", chosen=result.answer[0], votes=dict(Counter(k for _, k in ballots)),
                     ballots=keys, tie=result.tied)


def pick_best_score(scores: Sequence[float | None]) -> tuple[int, bool]:
    """(index of the highest score, whether it was tied); None scores never win; all None -> (0, False)."""
    valid = [(s, i) for i, s in enumerate(scores) if s is not None]
    if not valid:
        return 0, False
    best = max(s for s, _ in valid)
    winners = [i for s, i in valid if s == best]
    return winners[0], len(winners) > 1
