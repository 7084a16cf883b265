"""Grades, the judge protocol, and the string-match fallback grader."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from types import MappingProxyType
from typing import Any, Protocol

from roma_lab.bench._data import Item
from roma_lab.lm import model_label

STRING_MATCH = "string-match, not the official judge"


class GradingError(Exception):
    """Base class of the errors a grader records instead of raising."""


class JudgeReplyError(GradingError):
    """The judge replied, but not in the form the benchmark's parser accepts (reply kept in ``raw``)."""

    def __init__(self, message: str, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


class PredictionTypeError(GradingError, TypeError):
    """The system's output is not the kind of prediction this grader needs."""


@dataclass(frozen=True, slots=True)
class Grade:
    """One graded prediction.

    ``score`` is NaN exactly when ``error`` is set; ``label`` is the benchmark's verdict
    (e.g. CORRECT / INCORRECT / NOT_ATTEMPTED) or None when the benchmark has only a score.
    ``details`` holds sub-scores (AbGen aspects, HotpotQA F1, EQ-Bench per-criterion means...).
    """

    label: str | None
    score: float
    grader: str
    raw: str = ""
    error: str | None = None
    details: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))
        if (self.error is None) == math.isnan(self.score):
            raise ValueError("a Grade has a NaN score exactly when it has an error")


def failed_grade(grader: str, exc: BaseException, raw: str = "") -> Grade:
    """The Grade recorded when grading raised: typed message, NaN score, no label."""
    return Grade(label=None, score=math.nan, grader=grader, raw=raw, error=f"{type(exc).__name__}: {exc}")


class Judge(Protocol):
    """A judge model: given a grading prompt (and optional system message), return its reply text."""

    def __call__(self, prompt: str, system: str | None = None) -> str: ...


class Grader(Protocol):
    """``grader(item, prediction) -> Grade``; never raises for a bad prediction or judge reply."""

    name: str

    def __call__(self, item: Item, prediction: Any) -> Grade: ...


def judge_name(judge: Judge) -> str:
    """A short name for a judge, recorded in every grade it produces."""
    return str(getattr(judge, "name", None) or getattr(judge, "__name__", None) or type(judge).__name__)


@cache
def _judge_signature():
    import dspy

    class JudgeReply(dspy.Signature):
        """You are the grader described in `prompt` (with `system` as your system message, when given).
        Follow its instructions and reply exactly in the format it asks for."""

        system: str = dspy.InputField(desc="the grader's system message; empty when there is none")
        prompt: str = dspy.InputField(desc="the benchmark's official grading prompt, verbatim")
        reply: str = dspy.OutputField(desc="your complete reply, in the format the prompt asks for")

    return JudgeReply


@dataclass(frozen=True, slots=True)
class DSPyJudge:
    """A judge backed by a ``dspy.LM`` through one DSPy signature (``dspy.Predict``).

    The official prompt text goes verbatim into the ``prompt`` field; DSPy's adapter adds its own
    field framing around it (see design/grading.md).
    """

    lm: Any  # dspy.LM or dspy.utils.DummyLM; typed loosely so dspy stays an on-demand import

    @property
    def name(self) -> str:
        return model_label(self.lm)

    def __call__(self, prompt: str, system: str | None = None) -> str:
        import dspy

        with dspy.context(lm=self.lm):
            return dspy.Predict(_judge_signature())(system=system or "", prompt=prompt).reply


_ARTICLES = {"a", "an", "the"}


def _canonical_number(token: str) -> str:
    if not re.fullmatch(r"\d+(\.\d+)?", token):
        return token  # words such as "nan" or "inf" are not numbers here
    # "1000.0" and "1000" are one number; normalize() alone would print 1E+3, so format fixed-point.
    return format(Decimal(token).normalize(), "f")


def normalize_answer(text: object) -> str:
    """Normalise an answer for string matching.

    Unicode NFKC + casefold; thousands separators dropped ("1,000" -> "1000"); dotted acronyms
    joined ("U.S.A." -> "usa"); punctuation to spaces except a decimal point between digits; articles a/an/the dropped; numbers written
    canonically ("1000.00" -> "1000"); whitespace collapsed.
    """
    s = unicodedata.normalize("NFKC", str(text)).casefold()
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)
    s = re.sub(r"\b(?:[^\W\d_]\.){2,}", lambda m: m.group(0).replace(".", ""), s)  # "u.s.a." -> "usa"
    s = re.sub(r"(?<=\d)\.(?=\d)", "\0", s)  # protect decimal points from the punctuation pass
    s = re.sub(r"[^\w\s\0]|_", " ", s).replace("\0", ".")
    tokens = [_canonical_number(t) for t in s.split() if t not in _ARTICLES]
    return " ".join(tokens)


def exact_key(answer: object) -> str:
    """An exact grader's answer key: the text with surrounding whitespace trimmed (``"8,383.57"``,
    ``"8383.57"`` and ``"-44.2%"``, ``"44.2%"`` stay apart, as the grader keeps them)."""
    return str(answer).strip()


def answer_key(grader: Any) -> Callable[[object], str]:
    """The key under which ``grader`` grades two answers alike, for votes (best-of-N, maj@R): its own
    ``answer_key`` when it has one, else ``exact_key``. A vote is never taken on a key lossier than
    the grader's: a merged ballot would let an answer the grader rejects win on another's votes
    (``normalize_answer`` drops signs and separators; a judge may tell apart any two texts)."""
    return getattr(grader, "answer_key", exact_key)


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


@dataclass(frozen=True, slots=True)
class StringMatchGrader:
    """Deterministic fallback when no judge model is available.

    CORRECT when the normalised gold answer appears as a whole-token run in the normalised
    prediction, NOT_ATTEMPTED for an empty prediction, else INCORRECT. Every grade says it is
    ``"string-match, not the official judge"``.
    """

    name: str = STRING_MATCH

    def __call__(self, item: Item, prediction: Any) -> Grade:
        return guarded(self.name, lambda: self._grade(item, prediction))

    @staticmethod
    def answer_key(answer: object) -> str:
        """Answers with one normalised text get one grade here (``bench.answer_key``)."""
        return normalize_answer(answer)

    def _grade(self, item: Item, prediction: Any) -> Grade:
        gold = normalize_answer(item.answer).split()
        pred = normalize_answer(prediction_text(prediction)).split()
        if not gold:
            raise GradingError(f"item {item.item_id} has an empty gold answer; string match cannot grade it")
        if not pred:
            label = "NOT_ATTEMPTED"
        else:
            label = "CORRECT" if _contains(pred, gold) else "INCORRECT"
        return Grade(label=label, score=float(label == "CORRECT"), grader=self.name)


def prediction_text(prediction: Any) -> str:
    """A system's answer as text: a str, or an object with a str ``.output``."""
    if isinstance(prediction, str):
        return prediction
    output = getattr(prediction, "output", None)
    if isinstance(output, str):
        return output
    raise PredictionTypeError(
        f"expected a str or an object with a str .output, got {type(prediction).__name__}"
    )


def guarded(grader: str, grade: Callable[[], Grade]) -> Grade:
    """Run a grading step; any exception becomes a Grade with ``error`` set (never a crash)."""
    try:
        return grade()
    except Exception as exc:  # noqa: BLE001 - recorded on the row, see Grade.error
        return failed_grade(grader, exc, raw=getattr(exc, "raw", ""))
