"""Interface contracts for instructions, edit size, and sentence-level deduplication.

Pure text functions: no model calls, no dspy import, so they are cheap to test on their own.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Contract:
    """What an instruction for one component must keep, whatever the edit.

    ``required_terms`` are words or phrases the instruction must still mention (output fields a
    planner must ask for, its task types, its dependency rule; input fields an aggregator must
    consume). ``forbidden_terms`` must not appear. Matching is case-insensitive and on word
    boundaries, so ``"goal"`` does not match ``"goalkeeper"``.
    """

    component: str
    required_terms: tuple[str, ...] = ()
    forbidden_terms: tuple[str, ...] = ()
    max_chars: int | None = None

    def __post_init__(self) -> None:
        if not self.component:
            raise ValueError("Contract.component must be a non-empty predictor name")
        for term in (*self.required_terms, *self.forbidden_terms):
            if not isinstance(term, str) or not term.strip():
                raise ValueError(f"contract terms must be non-empty strings, got {term!r}")
        if self.max_chars is not None and self.max_chars < 1:
            raise ValueError(f"Contract.max_chars must be >= 1 or None, got {self.max_chars}")

    def violations(self, instruction: str) -> tuple[str, ...]:
        """One human-readable line per broken clause; empty when the instruction complies."""
        found: list[str] = []
        if not instruction.strip():
            found.append("instruction is empty")
        found += [f"missing required term {t!r}" for t in self.required_terms if not _mentions(instruction, t)]
        found += [f"contains forbidden term {t!r}" for t in self.forbidden_terms if _mentions(instruction, t)]
        if self.max_chars is not None and len(instruction) > self.max_chars:
            found.append(f"longer than {self.max_chars} characters ({len(instruction)})")
        return tuple(found)

    def describe(self) -> str:
        """The contract as a sentence for proposer, judge and merger prompts ('' when empty)."""
        parts = []
        if self.required_terms:
            parts.append("The instruction must keep mentioning: " + ", ".join(self.required_terms) + ".")
        if self.forbidden_terms:
            parts.append("It must not mention: " + ", ".join(self.forbidden_terms) + ".")
        if self.max_chars is not None:
            parts.append(f"It must be at most {self.max_chars} characters long.")
        return " ".join(parts)


def _mentions(text: str, term: str) -> bool:
    # \b only works next to word characters; terms like "->" or "`x`" fall back to substring match.
    left = r"\b" if term[0].isalnum() or term[0] == "_" else ""
    right = r"\b" if term[-1].isalnum() or term[-1] == "_" else ""
    return re.search(left + re.escape(term) + right, text, flags=re.IGNORECASE) is not None


def default_contract(component: str, instruction: str, field_names: tuple[str, ...]) -> Contract:
    """Require every signature field the seed instruction already names.

    GEPA edits instruction text only, so the signature itself cannot change; what an edit can
    break is the instruction's own reference to a field (e.g. dropping "return `subtasks`").
    """
    return Contract(component, required_terms=tuple(f for f in field_names if _mentions(instruction, f)))


def contracts_for(
    seed: Mapping[str, tuple[str, tuple[str, ...]]],
    overrides: Mapping[str, Contract] | None = None,
) -> dict[str, Contract]:
    """Default contracts for every component, replaced by ``overrides`` where given.

    ``seed`` maps component name -> (seed instruction, signature field names).
    """
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(seed))
    if unknown:
        raise ValueError(f"contracts name unknown components {unknown}; the program's predictors are {sorted(seed)}")
    for name, contract in overrides.items():
        if not isinstance(contract, Contract):
            raise TypeError(f"contracts[{name!r}] must be a Contract, got {type(contract).__name__}")
        if contract.component != name:
            raise ValueError(f"contracts[{name!r}] has component={contract.component!r}; they must match")
    return {name: overrides.get(name) or default_contract(name, text, fields) for name, (text, fields) in seed.items()}


def edit_size(old: str, new: str) -> float:
    """Normalised word-level edit size in [0, 1]: 0 for no change, 1 for a full rewrite."""
    a, b = old.split(), new.split()
    if not a and not b:
        return 0.0
    return 1.0 - difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def atomize(instruction: str) -> list[str]:
    """Split an instruction into atomic edits: sentences, with each line split separately."""
    return [s.strip() for line in instruction.splitlines() for s in _SENTENCE_END.split(line) if s.strip()]


def _norm(sentence: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", sentence.lower()).split())


def dedupe_sentences(instruction: str) -> str:
    """Drop sentences that repeat an earlier one (ignoring case, punctuation and spacing).

    Line structure (bullets, blank lines between paragraphs) is kept; a line left empty by the
    removal disappears, and runs of blank lines collapse to one.
    """
    seen: set[str] = set()
    lines: list[str] = []
    for line in instruction.strip().splitlines():
        if not line.strip():
            if lines and lines[-1]:
                lines.append("")
            continue
        indent = line[: len(line) - len(line.lstrip())]
        kept = []
        for sentence in _SENTENCE_END.split(line.strip()):
            key = _norm(sentence)
            if key and key in seen:
                continue
            seen.add(key)
            kept.append(sentence)
        if kept:
            lines.append(indent + " ".join(kept))
    return "\n".join(lines).strip()
