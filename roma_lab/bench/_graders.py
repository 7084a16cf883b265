"""Benchmark graders, each following its benchmark's own protocol (see design/grading.md)."""

from __future__ import annotations

import inspect
import math
import re
import reprlib
import string
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from roma_lab.bench._data import Item, read_data_text
from roma_lab.bench._grade import (
    Grade,
    GradingError,
    Judge,
    JudgeReplyError,
    exact_key,
    guarded,
    judge_name,
    prediction_text,
)


def _fill(template: str, values: Mapping[str, str], pattern: str) -> str:
    # One pass over the template: text substituted in is never searched for placeholders again.
    return re.sub(pattern, lambda m: values.get(m.group(1), m.group(0)), template)


# --- SimpleQA / SEAL-0 -------------------------------------------------------------------------

_SIMPLEQA_LABELS = {"A": "CORRECT", "B": "INCORRECT", "C": "NOT_ATTEMPTED"}
_TEMPLATES = {"simpleqa": "graders/simpleqa/grader_template.txt", "sealqa": "graders/sealqa/grader_template.txt"}


def parse_simpleqa_letter(reply: str) -> str:
    """First capital A, B or C anywhere in the reply, as simple-evals reads it.

    simple-evals would default to C when there is none; we raise instead (see design/grading.md).
    """
    match = re.search(r"(A|B|C)", reply)
    if match is None:
        raise JudgeReplyError("no A/B/C letter in the judge reply", reply)
    return match.group(0)


class _Guarded:
    """A grader's public call: the benchmark-specific ``_grade`` never raises past it (see ``guarded``)."""

    __slots__ = ()

    def __call__(self, item: Item, prediction: Any) -> Grade:
        return guarded(self.name, lambda: self._grade(item, prediction))


@dataclass(frozen=True, slots=True)
class SimpleQAGrader(_Guarded):
    """Three-way CORRECT / INCORRECT / NOT_ATTEMPTED judge with the official template text.

    ``template="simpleqa"`` is simple-evals' GRADER_TEMPLATE; ``"sealqa"`` the SealQA variant.
    """

    judge: Judge
    template: str = "simpleqa"

    def __post_init__(self) -> None:
        if self.template not in _TEMPLATES:
            raise ValueError(f"template must be one of {sorted(_TEMPLATES)}, got {self.template!r}")

    @property
    def name(self) -> str:
        return f"{self.template}-official-template(judge={judge_name(self.judge)})"

    @property
    def prompt_template(self) -> str:
        """The template text the judge is sent, before ``{question}``, ``{target}`` and
        ``{predicted_answer}`` are filled in (print it to see what the judge is asked)."""
        return read_data_text(_TEMPLATES[self.template])

    def _grade(self, item: Item, prediction: Any) -> Grade:
        prompt = self.prompt_template.format(
            question=item.question, target=item.answer, predicted_answer=prediction_text(prediction)
        )
        reply = self.judge(prompt)
        label = _SIMPLEQA_LABELS[parse_simpleqa_letter(reply)]
        return Grade(label=label, score=float(label == "CORRECT"), grader=self.name, raw=reply)


# --- FRAMES ------------------------------------------------------------------------------------


def parse_frames_decision(reply: str) -> bool:
    """TRUE/FALSE from the last line starting with ``Decision:``.

    More forgiving than optillm (quotes, asterisks and case are ignored) and strict where optillm
    silently defaults to FALSE: a reply with no readable decision raises.
    """
    decisions = re.findall(r"^[\s*#]*Decision\s*:\s*(.*)$", reply, flags=re.MULTILINE | re.IGNORECASE)
    if not decisions:
        raise JudgeReplyError("no 'Decision:' line in the judge reply", reply)
    verdict = decisions[-1].strip().strip("\"'*`. ").upper()
    if verdict not in ("TRUE", "FALSE"):
        raise JudgeReplyError(f"decision {decisions[-1].strip()!r} is neither TRUE nor FALSE", reply)
    return verdict == "TRUE"


@dataclass(frozen=True, slots=True)
class FramesGrader(_Guarded):
    """FRAMES auto-rater: the paper's prompt (appendix figure), verdict TRUE/FALSE."""

    judge: Judge

    @property
    def name(self) -> str:
        return f"frames-paper-autorater(judge={judge_name(self.judge)})"

    def _grade(self, item: Item, prediction: Any) -> Grade:
        values = {"question": item.question, "LLM_response": prediction_text(prediction),
                  "ground_truth_answer": str(item.answer)}
        prompt = _fill(read_data_text("graders/frames/autorater_user.paper.txt"), values, r"«(\w+)»")
        reply = self.judge(prompt, system=read_data_text("graders/frames/autorater_system.txt"))
        correct = parse_frames_decision(reply)
        return Grade(label="TRUE" if correct else "FALSE", score=float(correct), grader=self.name, raw=reply)


# --- BrowseComp --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrowseCompGrader(_Guarded):
    """BrowseComp judge (from HLE); reads the captured yes/no of ``correct:`` (simple-evals PR #93)."""

    judge: Judge

    @property
    def name(self) -> str:
        return f"browsecomp-official-template(judge={judge_name(self.judge)})"

    def _grade(self, item: Item, prediction: Any) -> Grade:
        prompt = read_data_text("graders/browsecomp/grader_template.txt").format(
            question=item.question, response=prediction_text(prediction), correct_answer=item.answer
        )
        reply = self.judge(prompt)
        match = re.search(r"correct: (yes|no)", reply)
        if match is None:
            raise JudgeReplyError("no 'correct: yes|no' in the judge reply", reply)
        correct = match.group(1) == "yes"
        return Grade(label="CORRECT" if correct else "INCORRECT", score=float(correct), grader=self.name, raw=reply)


# --- HotpotQA ----------------------------------------------------------------------------------


def squad_normalize(text: str) -> str:
    """hotpot_evaluate_v1 / SQuAD v1.1 normalisation: lower, drop punctuation, articles, spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def hotpot_f1(prediction: str, gold: str) -> tuple[float, float, float]:
    """(f1, precision, recall) with HotpotQA's yes/no/noanswer rule."""
    pred, ref = squad_normalize(prediction), squad_normalize(gold)
    special = ("yes", "no", "noanswer")
    if (pred in special or ref in special) and pred != ref:
        return 0.0, 0.0, 0.0
    common = Counter(pred.split()) & Counter(ref.split())
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0, 0.0, 0.0
    precision, recall = overlap / len(pred.split()), overlap / len(ref.split())
    return 2 * precision * recall / (precision + recall), precision, recall


@dataclass(frozen=True, slots=True)
class HotpotQAGrader(_Guarded):
    """Answer exact match (score) and token F1 (details), as hotpot_evaluate_v1 computes them."""

    name: str = "hotpotqa-official-em-f1"

    def _grade(self, item: Item, prediction: Any) -> Grade:
        text = prediction_text(prediction)
        em = float(squad_normalize(text) == squad_normalize(str(item.answer)))
        f1, precision, recall = hotpot_f1(text, str(item.answer))
        return Grade(label="CORRECT" if em else "INCORRECT", score=em, grader=self.name,
                     details={"em": em, "f1": f1, "precision": precision, "recall": recall})


# --- AIME --------------------------------------------------------------------------------------


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j]
    return None  # unbalanced braces: fall back to the last integer


def extract_aime_answer(text: str) -> int | None:
    """Integer in the last ``\\boxed{}``, else the last integer in the text, else None."""
    boxed = _last_boxed(text)
    source = boxed if boxed is not None else text
    numbers = re.findall(r"-?\d+", source.replace(",", ""))
    return int(numbers[-1]) if numbers else None


@dataclass(frozen=True, slots=True)
class AIMEGrader(_Guarded):
    """Exact integer equality; a prediction with no integer is INCORRECT (the benchmark's rule)."""

    name: str = "aime-integer-exact-match"

    def _grade(self, item: Item, prediction: Any) -> Grade:
        answer = extract_aime_answer(prediction_text(prediction))
        correct = answer is not None and answer == int(item.answer)
        return Grade(label="CORRECT" if correct else "INCORRECT", score=float(correct), grader=self.name,
                     raw="" if answer is None else str(answer))


# --- GAIA quasi-exact match -----------------------------------------------------------------------
# The leaderboard's question_scorer, written from its rules (graders/gaia/NOTES.md: the Space states no
# licence, so its code is described there, not copied): the gold answer's form picks the comparison.

_GAIA_CLEAN = str.maketrans("", "", "$%,")
_GAIA_PUNCT = str.maketrans("", "", string.punctuation)
_GAIA_SEPARATORS = re.compile(r"[,;]")


def _as_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _gaia_value(text: str) -> float | None:
    """An answer read as a number: ``$``, ``%`` and ``,`` deleted, then Python's float; None when
    anything else is left (units, words)."""
    return _as_float(text.translate(_GAIA_CLEAN))


def _gaia_number(text: str) -> float:
    """``_gaia_value``, with no number read as +inf, which equals no gold number (GAIA's rule)."""
    value = _gaia_value(text)
    return math.inf if value is None else value


def _gaia_text(text: str, *, punctuation: bool) -> str:
    """Every whitespace character removed, lower-cased, and (``punctuation=False``) ASCII punctuation deleted."""
    squeezed = re.sub(r"\s", "", text).lower()
    return squeezed if punctuation else squeezed.translate(_GAIA_PUNCT)


def gaia_quasi_exact(answer: str, gold: str) -> bool:
    """GAIA's quasi-exact match. A gold that Python's float parses is compared as a number
    (``_gaia_number``, exact equality: "$17", "17%", "17.0" are 17). Otherwise a gold holding a comma
    or semicolon is a list: both split at every comma and semicolon, the same length, each element
    as a number where the gold's is one, else as text keeping punctuation. Otherwise both are text
    without whitespace, case or ASCII punctuation ("Turku." is "turku"). Its quirks are kept: a gold
    "34,122" is the list ["34", "122"], so "34122" misses it; a gold "-44.2%" is text, so "44.2" hits it."""
    if _as_float(gold) is not None:
        return _gaia_number(answer) == float(gold)
    if _GAIA_SEPARATORS.search(gold):
        golds, answers = _GAIA_SEPARATORS.split(gold), _GAIA_SEPARATORS.split(answer)
        return len(golds) == len(answers) and all(
            _gaia_number(a) == float(g) if _as_float(g) is not None
            else _gaia_text(a, punctuation=True) == _gaia_text(g, punctuation=True)
            for a, g in zip(answers, golds))
    return _gaia_text(answer, punctuation=False) == _gaia_text(gold, punctuation=False)


@dataclass(frozen=True, slots=True)
class GaiaGrader(_Guarded):
    """GAIA's quasi-exact match (``gaia_quasi_exact``), as OAgents grades GAIA: CORRECT or INCORRECT."""

    name: str = "gaia-quasi-exact-match"

    def _grade(self, item: Item, prediction: Any) -> Grade:
        correct = gaia_quasi_exact(prediction_text(prediction), str(item.answer))
        return Grade(label="CORRECT" if correct else "INCORRECT", score=float(correct), grader=self.name)

    @staticmethod
    def answer_key(answer: object) -> str:
        """Answers with one key get one grade against every gold (``bench.answer_key``): the key holds
        each reading the comparison may take (as a number, as list elements, as text), so two answers
        that one branch tells apart keep apart, whichever form the gold has."""
        text = str(answer)
        elements = tuple((_gaia_number(e), _gaia_text(e, punctuation=True)) for e in _GAIA_SEPARATORS.split(text))
        return repr((_gaia_number(text), elements, _gaia_text(text, punctuation=False)))


# --- Graders by name (a researcher's own tasks) -------------------------------------------------


def _verdict(correct: bool, grader: str, raw: str = "") -> Grade:
    return Grade(label="CORRECT" if correct else "INCORRECT", score=float(correct), grader=grader, raw=raw)


@dataclass(frozen=True, slots=True)
class ExactGrader(_Guarded):
    """Exact string match after trimming whitespace (``exact_key``): "34122" is not "34,122"."""

    name: str = "exact-match"

    def _grade(self, item: Item, prediction: Any) -> Grade:
        return _verdict(exact_key(prediction_text(prediction)) == exact_key(item.answer), self.name)

    @staticmethod
    def answer_key(answer: object) -> str:
        return exact_key(answer)


#: A numeric answer (or gold) longer than this, in characters, is no number anyone means: it is
#: never parsed (Python refuses to turn an int of more than 4,300 digits into text).
MAX_NUMBER_CHARS = 1000


def _too_long(value: object) -> int:
    """``value``'s length in characters when it is longer than ``MAX_NUMBER_CHARS``, else 0. An int
    that long is never turned into text: its length is counted from its bits."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * MAX_NUMBER_CHARS:
        digits = int(value.bit_length() * math.log10(2)) + 1  # exact, or one too many:
        digits -= abs(value) < 10 ** (digits - 1)
        return digits + (value < 0)
    chars = len(value if isinstance(value, str) else str(value))
    return chars if chars > MAX_NUMBER_CHARS else 0


def _finite_number(text: str) -> float | None:
    # "inf" and "nan" parse as floats, but no tolerance can place a number near them.
    value = _gaia_value(text)
    return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class NumericGrader(_Guarded):
    """CORRECT when the prediction's number is within ``tolerance`` of the gold's: ``|p - g| <= tol``,
    or ``<= tol * |g|`` when ``relative`` (so a gold 0 then needs exactly 0).

    Numbers are read as GAIA reads them (``$``, ``%`` and ``,`` deleted, then Python's float), so
    "1,322.77" is 1322.77 and "17 km" is no number. A gold that is no number is a grader error; a
    prediction that is none is INCORRECT, one longer than ``MAX_NUMBER_CHARS`` too (saying so in
    ``raw``, its length in ``details``).
    """

    tolerance: float = 0.0
    relative: bool = False

    def __post_init__(self) -> None:
        tolerance = self.tolerance
        if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 <= tolerance < math.inf:
            raise ValueError(f"tolerance must be a finite number >= 0, got {self.tolerance!r}")
        object.__setattr__(self, "tolerance", float(self.tolerance))  # so the name reads 0.0, never 0

    @property
    def name(self) -> str:
        return f"numeric(tol={self.tolerance!r}{', relative' if self.relative else ''})"

    def _grade(self, item: Item, prediction: Any) -> Grade:
        if gold_chars := _too_long(item.answer):
            raise GradingError(f"gold answer of item {item.item_id} has {gold_chars:,} characters, more than the "
                               f"{MAX_NUMBER_CHARS:,} a number may have")
        gold = _finite_number(str(item.answer))
        if gold is None:
            raise GradingError(f"gold answer {str(item.answer)!r} of item {item.item_id} is not a number")
        # a huge int is caught before anything turns it into text; how other values become text is prediction_text's
        chars = _too_long(prediction) if isinstance(prediction, int) else 0
        text = "" if chars else prediction_text(prediction)
        if chars := chars or _too_long(text):
            return Grade(label="INCORRECT", score=0.0, grader=self.name, details={"answer_chars": float(chars)},
                         raw=f"answer of {chars:,} characters, more than the {MAX_NUMBER_CHARS:,} a number may have: "
                             "not read as a number")
        value = _finite_number(text)
        if value is None:
            return _verdict(False, self.name)
        bound = self.tolerance * abs(gold) if self.relative else self.tolerance
        return _verdict(abs(value - gold) <= bound, self.name, raw=repr(value))

    @staticmethod
    def answer_key(answer: object) -> str:
        """The number itself (never rounded: two answers within tolerance of each other can still
        fall either side of a gold), else the trimmed text; the repr of a number always reads back as
        one, so the two kinds of key never meet."""
        value = _finite_number(str(answer))
        return exact_key(answer) if value is None else repr(value)


@dataclass(frozen=True, slots=True)
class ContainsGrader(_Guarded):
    """CORRECT when the gold text occurs in the prediction, both with whitespace collapsed and
    (unless ``case_sensitive``) case-folded. A substring test, not whole words: gold "4" is in "42"."""

    case_sensitive: bool = False

    @property
    def name(self) -> str:
        return "contains(case-sensitive)" if self.case_sensitive else "contains"

    def _grade(self, item: Item, prediction: Any) -> Grade:
        gold = self.answer_key(item.answer)
        if not gold:
            raise GradingError(f"item {item.item_id} has an empty gold answer; every prediction would contain it")
        return _verdict(gold in self.answer_key(prediction_text(prediction)), self.name)

    def answer_key(self, answer: object) -> str:
        """The text the comparison sees: whitespace collapsed, case-folded unless ``case_sensitive``."""
        text = " ".join(str(answer).split())
        return text if self.case_sensitive else text.casefold()


def _returns_grade(fn: Callable[..., Any]) -> bool:
    try:
        annotation = inspect.signature(fn).return_annotation
    except (TypeError, ValueError):  # some builtins have no signature
        return False
    # A string when the defining module has `from __future__ import annotations`.
    return annotation is Grade or (isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "Grade")


def _type_name(value: object) -> str:
    # numpy 2 calls its bool "bool"; the module keeps it apart from Python's
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


@dataclass(frozen=True, slots=True)
class CallableGrader(_Guarded):
    """Any comparison as a grader: ``fn(prediction_text, gold_text)`` returning a bool (CORRECT /
    INCORRECT) or a float in [0, 1] (the score, no label).

    A ``fn(item, prediction)`` annotated ``-> Grade`` is called with the item and the prediction
    instead; any Grade ``fn`` returns is passed through as it is. Another return, or an exception, is
    the row's grader error. ``name`` defaults to ``callable:<fn.__qualname__>``.
    """

    fn: Callable[..., Any]
    name: str | None = None
    takes_item: bool = field(init=False)  # fn(item, prediction) -> Grade, read from its annotation

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"CallableGrader needs a callable, got {_type_name(self.fn)}")
        if self.name is None:
            qualname = getattr(self.fn, "__qualname__", type(self.fn).__qualname__)
            object.__setattr__(self, "name", f"callable:{qualname}")
        object.__setattr__(self, "takes_item", _returns_grade(self.fn))

    def _grade(self, item: Item, prediction: Any) -> Grade:
        result = (self.fn(item, prediction) if self.takes_item
                  else self.fn(prediction_text(prediction), str(item.answer)))
        if isinstance(result, Grade):
            return result
        if isinstance(result, bool):
            return _verdict(result, self.name)
        if isinstance(result, float) and 0.0 <= result <= 1.0:
            return Grade(label=None, score=float(result), grader=self.name)
        raise GradingError(f"{self.name} returned {_type_name(result)} {reprlib.repr(result)}; "
                           "expected a bool, a float in [0, 1] or a Grade")

    @staticmethod
    def answer_key(answer: object) -> str:
        """The prediction text as it is: an unknown function may tell any two texts apart."""
        return str(answer)


#: The names ``grader_named`` takes ("gaia" is another name for "quasi-exact").
GRADER_NAMES = ("exact", "quasi-exact", "gaia", "numeric", "contains", "judge")


def grader_named(name: str | Callable[..., Any], *, judge: Judge | None = None, tolerance: float = 0.0,
                 relative: bool = False) -> Any:
    """A grader picked by name (``GRADER_NAMES``): "exact" ``ExactGrader``, "quasi-exact" / "gaia"
    ``GaiaGrader``, "numeric" ``NumericGrader(tolerance, relative)``, "contains" ``ContainsGrader``,
    "judge" ``SimpleQAGrader(judge)`` (simple-evals' template). A grader (callable with a ``name``)
    is returned as it is; another callable becomes a ``CallableGrader``.

    An option the chosen grader does not take is a ValueError, so it is never silently ignored.
    """
    key = name if isinstance(name, str) else None
    if key is not None and key not in GRADER_NAMES:
        raise ValueError(f"unknown grader {name!r}; known names: {', '.join(GRADER_NAMES)} (or pass a callable)")
    if key != "numeric" and (tolerance != 0.0 or relative):
        raise ValueError(f"tolerance and relative are options of 'numeric' only, not of {name!r}")
    if key != "judge" and judge is not None:
        raise ValueError(f"a judge model is an option of 'judge' only, not of {name!r}")
    if key is None:
        if isinstance(name, type) or not callable(name):
            raise TypeError(f"expected a grader name, a grader or a function, got {name!r}")
        return name if hasattr(name, "name") else CallableGrader(name)
    if key == "judge":
        if judge is None:
            raise ValueError("the 'judge' grader needs a judge model: pass judge=... (e.g. bench.DSPyJudge(lm))")
        return SimpleQAGrader(judge, template="simpleqa")
    if key == "numeric":
        return NumericGrader(tolerance, relative)
    return {"exact": ExactGrader, "quasi-exact": GaiaGrader, "gaia": GaiaGrader, "contains": ContainsGrader}[key]()
