"""Choosing among best-of-N rollouts: majority vote (pure), and the rules applied to model verdicts.

Vote: answers are normalised (``roma_lab.bench.normalize_answer``); empty answers and "unable to
determine" do not vote. The most frequent answer wins; a tie goes to the tied answer given first
(lowest rollout index), and the chosen rollout is the first one that gave it. Scores: the highest
score wins, ties to the lowest index. A list-wise pick outside the range falls back to rollout 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from roma_lab.bench import normalize_answer

__all__ = ["VoteResult", "is_non_answer", "pick_best_score", "vote"]


def is_non_answer(answer: str | None) -> bool:
    """Empty or "unable to determine": the answers the paper's protocol allows re-answering."""
    return answer is None or not answer.strip() or "unable to determine" in answer.lower()


@dataclass(frozen=True, slots=True)
class VoteResult:
    chosen: int
    votes: dict[str, int]  # normalised answer -> count, in order of first appearance
    tie: bool


def vote(answers: Sequence[str | None]) -> VoteResult:
    """Majority vote over normalised answers with the tie-break stated in the module docstring."""
    votes: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, answer in enumerate(answers):
        if is_non_answer(answer):
            continue
        key = normalize_answer(answer)
        votes[key] = votes.get(key, 0) + 1
        first.setdefault(key, i)
    if not votes:
        return VoteResult(chosen=0, votes={}, tie=False)
    top = max(votes.values())
    leaders = [key for key, count in votes.items() if count == top]  # in order of first appearance
    return VoteResult(chosen=first[leaders[0]], votes=votes, tie=len(leaders) > 1)


def pick_best_score(scores: Sequence[float | None]) -> tuple[int, bool]:
    """(index of the highest score, whether it was tied); None scores never win; all None -> (0, False)."""
    valid = [(s, i) for i, s in enumerate(scores) if s is not None]
    if not valid:
        return 0, False
    best = max(s for s, _ in valid)
    winners = [i for s, i in valid if s == best]
    return winners[0], len(winners) > 1
