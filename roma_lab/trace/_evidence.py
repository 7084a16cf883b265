"""Which answers rest on no evidence: read from the trace, never stored beside it.

A search executor records the passages it showed the model. A node searched for evidence and has
none when (design/evidence.md):

- its search found nothing (the passages say so: :data:`NO_EVIDENCE`); or
- its passages do not support its answer: a number the answer states is in none of them, or fewer than
  half of the answer's own content words are (:func:`answer_support`). BM25 returns any passage that
  shares a word with the goal, so "some passage came back" is no evidence that it holds the answer.

So has a node that used the result of such a node (a dependency), and a node that aggregated one (a
parent), up to the root. Their status stays what the run recorded (``completed``): the flag is beside
it, so a view never shows such an answer as plainly complete. A status never claims more than the
trace shows.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from ._types import OUTPUT_STATUSES, Node

__all__ = ["MIN_SUPPORT", "NO_EVIDENCE", "answer_support", "without_evidence"]

#: How a search executor's passages begin when it had none to show the model: no passage matched the
#: goal, or no corpus was configured (it answers from the model's memory, and says so).
NO_EVIDENCE = ("(no passage matched the goal)", "(no corpus configured")


#: The least share of an answer's own content words its passages must hold for it to count as supported.
MIN_SUPPORT = 0.5

# Words that carry no claim: function words, and the phrases models wrap an answer in.
_FILLER = frozenset("""
a an the and or but nor of in on at to for from by with about as into onto over under than then that this
these those it its is are was were be been being has have had do does did not no yes so such there here
which who whom whose what when where why how i we you he she they them his her their our your my me us
can could would should will shall may might must also only just very more most some any each all both
based according passage passages provided context information given source sources answer answers
mentioned states stated says said shown show shows text document documents found find named called
known approximately around about roughly year years
""".split())
_THOUSANDS = re.compile(r"(?<=\d)[,\u202f\u00a0 _](?=\d{3}(?!\d))")


def _words(text: str) -> list[str]:
    """Lower-case words and numbers of ``text``, accents dropped and thousands separators removed
    ("253,729" and "253729" are one number; "Süleymaniye" and "Suleymaniye" one name)."""
    plain = unicodedata.normalize("NFKD", _THOUSANDS.sub("", text))
    plain = "".join(c for c in plain if not unicodedata.combining(c)).lower()
    return re.findall(r"[a-z0-9]+", plain)


def _passages(node: Node) -> list[str]:
    """The passages ``node``'s search showed the model (a search executor's recorded ``passages``)."""
    found: list[str] = []
    for call in node.calls:
        passages: Any = call.outputs.get("passages") if isinstance(call.outputs, Mapping) else None
        if isinstance(passages, Sequence) and not isinstance(passages, str):
            found += [p for p in passages if isinstance(p, str)]
    return found


def _empty_search(node: Node) -> bool:
    passages = _passages(node)
    return bool(passages) and all(p.startswith(NO_EVIDENCE) for p in passages)


def _support(answer: str, goal: str, passages: Sequence[str]) -> tuple[float | None, str | None]:
    """(share of the answer's content words its passages hold, a number of the answer none holds).
    Content words: the answer's words that are neither filler nor words of the goal (restating the
    question is no evidence). None when the answer has no word of its own to check."""
    held = {w for p in passages if not p.startswith(NO_EVIDENCE) for w in _words(p)}
    asked = set(_words(goal))
    own = [w for w in dict.fromkeys(_words(answer)) if w not in _FILLER and w not in asked]
    if not own:
        return None, None
    missing = next((w for w in own if any(c.isdigit() for c in w) and w not in held), None)
    return sum(w in held for w in own) / len(own), missing


def answer_support(nodes: Sequence[Node], node_id: str) -> float | None:
    """The share of ``node_id``'s answer's content words that the passages read by it and every node
    below it hold (see :func:`_support`); None when no passage was read there or the answer has no
    word of its own."""
    children: dict[str | None, list[Node]] = {}
    for n in nodes:
        children.setdefault(n.parent_id, []).append(n)
    node = next(n for n in nodes if n.id == node_id)
    passages, todo = [], [node]
    while todo:
        current = todo.pop()
        passages += _passages(current)
        todo += children.get(current.id, [])
    if not passages or not node.output:
        return None
    return _support(node.output, node.goal, passages)[0]


def _unsupported(node: Node) -> str | None:
    """Why ``node``'s own search is no evidence for its answer, or None."""
    if _empty_search(node):
        return "its search found no passage"
    passages = _passages(node)
    if not passages or not node.output:
        return None
    share, missing = _support(node.output, node.goal, passages)
    if missing is not None:
        return f"its answer states {missing}, which none of its passages holds"
    if share is not None and share < MIN_SUPPORT:
        return f"its passages hold {share:.0%} of its answer's own words"
    return None


def without_evidence(nodes: Sequence[Node]) -> dict[str, str]:
    """Node id -> why it has no evidence, for every node with an output that rests on a search that
    found nothing or whose passages do not support its answer: its own, a dependency's, or (for a
    parent) a subtask's."""
    by_id = {n.id: n for n in nodes}
    children: dict[str, list[str]] = {}
    for n in nodes:
        children.setdefault(n.parent_id, []).append(n.id)
    flagged = {n.id: why for n in nodes if n.status in OUTPUT_STATUSES and (why := _unsupported(n)) is not None}
    changed = True
    while changed:  # dependencies and parents, until nothing more is flagged (a tree: this ends)
        changed = False
        for n in nodes:
            if n.id in flagged or n.status not in OUTPUT_STATUSES:
                continue
            used = [d for d in n.depends_on if d in flagged]
            below = [c for c in children.get(n.id, ()) if c in flagged]
            if used or below:
                flagged[n.id] = (f"it used the result of {used[0]}, which has no evidence" if used
                                 else f"it aggregates {below[0]}, which has no evidence")
                changed = True
    return {i: flagged[i] for i in by_id if i in flagged}
