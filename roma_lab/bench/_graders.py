"""Benchmark graders, each following its benchmark's own protocol (see design/grading.md)."""

from __future__ import annotations

import inspect
import math
import re
import reprlib
import statistics
import string
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from roma_lab.bench._data import Item, LongformSpec, load_longform_spec, read_data_text
from roma_lab.bench._grade import (
    Grade,
    GradingError,
    Judge,
    JudgeReplyError,
    PredictionTypeError,
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


# --- EQ-Bench long-form ------------------------------------------------------------------------

_IGNORED_METRICS = {"overall assessment", "summary", "reasoning", "critique", "feedback", "notes"}


def parse_rubric_scores(reply: str) -> dict[str, float]:
    """``Metric name: score`` lines, as EQ-Bench's longform parser reads them, clamped to 0-20.

    When the reply has a ``[Scores]`` section only that section is read; keys keep the judge's
    spelling (match case-insensitively).
    """
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    if "[Scores]" in reply or "--- Scores ---" in reply:
        kept, on = [], False
        for line in lines:
            if "[Scores]" in line or "--- Scores ---" in line:
                on = True
            elif on and ("---" in line or "[End Scores]" in line):
                on = False
            elif on:
                kept.append(line)
        lines = kept
    scores: dict[str, float] = {}
    for line in lines:
        match = re.match(r"^\s*([^:]+?)\s*:\s*\[?(-?\d+(?:\.\d+)?)\]?", line) or re.search(
            r"([^:]+?)\s*:\s*\[?(-?\d+(?:\.\d+)?)\]?", line
        )
        if match and match.group(1).strip().lower() not in _IGNORED_METRICS:
            scores[match.group(1).strip()] = min(20.0, max(0.0, float(match.group(2))))
    return scores


def rubric_average(
    scores: Mapping[str, float], criteria: tuple[str, ...], negative: tuple[str, ...],
    weights: Mapping[str, float],
) -> float:
    """Weighted 0-20 mean of one judgment: negatives inverted (20-x), then forced poetry ^1.7.

    Every criterion must be present; extra keys the judge wrote are ignored.
    """
    by_name = {k.lower().strip(): v for k, v in scores.items()}
    missing = [c for c in criteria if c.lower() not in by_name]
    if missing:
        raise GradingError(f"judge gave no score for {missing}")
    negatives = {c.lower() for c in negative}
    total = weight_sum = 0.0
    for criterion in criteria:
        key = criterion.lower()
        value = 20.0 - by_name[key] if key in negatives else by_name[key]
        if key == "forced poetry or metaphor":
            value = (value / 20.0) ** 1.7 * 20.0  # EQ-Bench core/scoring.py transform
        weight = weights.get(key, 1.0)
        total += value * weight
        weight_sum += weight
    return total / weight_sum


@dataclass(frozen=True, slots=True)
class LongformStory:
    """A long-form answer: the chapters, plus the plan and character profiles the chapter judge reads."""

    chapters: tuple[str, ...]
    plan: str = ""
    character_profiles: str = ""

    def full_text(self) -> str:
        # The layout EQ-Bench shows its final judge.
        return "\n\n---\n\n".join(f"# Chapter {i}\n\n{c}" for i, c in enumerate(self.chapters, 1))


@dataclass(frozen=True, slots=True)
class EQBenchLongformGrader:
    """EQ-Bench long-form rubric score, 0-100.

    A ``LongformStory`` with plan and profiles gets one judge call per chapter plus one for the
    whole piece, combined as EQ-Bench does (chapters weighted by their count, the final piece by 1);
    a plain string gets only the final-piece judgment, and its grader name says so.
    """

    judge: Judge
    spec: LongformSpec | None = None  # None: the copied official files

    @property
    def name(self) -> str:
        return f"eqbench-longform-rubric(judge={judge_name(self.judge)})"

    def __call__(self, item: Item, prediction: Any) -> Grade:
        is_story = isinstance(prediction, LongformStory) and bool(prediction.plan and prediction.character_profiles)
        name = self.name if is_story else self.name.replace("rubric(", "rubric-final-piece-only(")
        return guarded(name, lambda: self._grade(item, prediction, name, is_story))

    def _judge(self, template: str, values: dict[str, str], spec: LongformSpec, final: bool) -> tuple[float, dict, str]:
        criteria = spec.final_criteria if final else spec.chapter_criteria
        negative = spec.negative_final_criteria if final else spec.negative_chapter_criteria
        values = {**values, "creative_writing_criteria": "\n".join(f"- {c}" for c in criteria),
                  "lower_is_better_criteria": ", ".join(negative) or "None"}
        reply = self.judge(_fill(template, values, r"\{(\w+)\}"))
        scores = parse_rubric_scores(reply)
        try:
            return rubric_average(scores, criteria, negative, spec.criteria_weights), scores, reply
        except GradingError as exc:
            raise JudgeReplyError(str(exc), reply) from exc

    def _grade(self, item: Item, prediction: Any, name: str, is_story: bool) -> Grade:
        spec = self.spec or load_longform_spec()
        if is_story:
            story_text = prediction.full_text()
        elif isinstance(prediction, LongformStory):
            raise PredictionTypeError("a LongformStory needs plan and character_profiles for the chapter judge")
        else:
            story_text = prediction_text(prediction)
        replies, chapter_means = [], []
        details: dict[str, float] = {}
        if is_story:
            for number, chapter in enumerate(prediction.chapters, 1):
                mean, _, reply = self._judge(spec.chapter_judge_prompt, {
                    "writing_prompt": item.question, "final_plan": prediction.plan,
                    "character_profiles": prediction.character_profiles,
                    "chapter_text": chapter, "chapter_number": str(number)}, spec, final=False)
                chapter_means.append(mean)
                replies.append(reply)
            details["chapter_mean_0_20"] = statistics.mean(chapter_means)
        final_mean, final_scores, reply = self._judge(
            spec.final_judge_prompt, {"writing_prompt": item.question, "full_story": story_text}, spec, final=True)
        replies.append(reply)
        details.update({f"final:{k}": v for k, v in final_scores.items()})
        details["final_0_20"] = final_mean
        n = len(chapter_means)
        combined = (sum(chapter_means) + final_mean) / (n + 1)  # chapter average weighted by n
        return Grade(label=None, score=combined * 5.0, grader=name,
                     raw="\n\n=====\n\n".join(replies), details=details)


# --- AbGen -------------------------------------------------------------------------------------

ABGEN_ASPECTS = ("importance", "faithfulness", "soundness", "overall")


def extract_abgen_score(reply: str) -> int:
    """AbGen's score_extraction rule: the agreed digit after "Therefore, the score is", else a lone
    1-5 in the last sentence. Where AbGen stores 0 we raise."""
    found = set(re.findall(r"therefore,?\s*the\s+score\s+is[^0-9]*([1-5])", reply, re.IGNORECASE | re.DOTALL))
    if len(found) == 1:
        return int(found.pop())
    segments = [s.strip() for s in re.split(r"[.!?]|\n+", reply)]
    last = next((s for s in reversed(segments) if re.search(r"[A-Za-z0-9]", s)), None)
    digits = re.findall(r"\b([1-5])\b", last or "")
    if len(digits) != 1:
        raise JudgeReplyError("no unambiguous 1-5 score in the judge reply", reply)
    return int(digits[0])


@dataclass(frozen=True, slots=True)
class AbGenGrader(_Guarded):
    """AbGen 1-5 Likert judge, one call per aspect; score = overall, details = all four.

    ``upstream_method_bug=True`` (default) keeps AbGen's bug where the judge sees the literal text
    ``example['method']`` instead of the method section, as every published AbGen score did.
    """

    judge: Judge
    upstream_method_bug: bool = True

    @property
    def name(self) -> str:
        variant = "method-bug-as-published" if self.upstream_method_bug else "method-text"
        return f"abgen-likert({variant}, judge={judge_name(self.judge)})"

    def user_prompt(self, item: Item, response: str) -> str:
        meta = item.metadata
        method = read_data_text("graders/abgen/user_fragment_method.txt")
        if not self.upstream_method_bug:
            method = method.replace("example['method']", str(meta["method"]))
        values = {
            "research_background": read_data_text("graders/abgen/user_fragment_research_background.txt").replace(
                "{example['research_background']}", str(meta["research_background"])),
            "method": method,
            "main_experiment": _fill(read_data_text("graders/abgen/user_fragment_main_experiment.txt"), {
                "experiment_setup": str(meta["main_experiment_setup"]),
                "results": str(meta["main_experiment_results"])}, r"\{example\['main_experiment'\]\['(\w+)'\]\}"),
            "response": response,
            "ablation_module": str(meta["module_name"]),
            "references": str(item.answer),
        }
        return _fill(read_data_text("graders/abgen/user_prompt.txt"), values, r"\{(\w+)\}")

    def _grade(self, item: Item, prediction: Any) -> Grade:
        from string import Template

        prompt = self.user_prompt(item, prediction_text(prediction))
        scores, replies = {}, []
        for aspect in ABGEN_ASPECTS:
            system = Template(read_data_text(f"graders/abgen/{aspect}_system.txt")).substitute(
                module=item.metadata["module_name"])
            reply = self.judge(prompt, system=system)
            replies.append(reply)
            scores[aspect] = float(extract_abgen_score(reply))
        return Grade(label=None, score=scores["overall"], grader=self.name,
                     raw="\n\n=====\n\n".join(replies), details=scores)


# --- PAPILLON ----------------------------------------------------------------------------------


def _papillon_signatures():
    import dspy

    class JudgeQuality(dspy.Signature):
        user_query: str = dspy.InputField(desc="The user's request to be fulfilled.")
        response_A: str = dspy.InputField()
        response_B: str = dspy.InputField()
        judgment: bool = dspy.OutputField()

    class JudgeLeakage(dspy.Signature):
        pii: list[str] = dspy.InputField()
        prompt: str = dspy.InputField()
        num_pii_leaked: int = dspy.OutputField()

    quality = JudgeQuality.with_instructions(read_data_text("graders/papillon/tutorial_JudgeQuality.instructions.txt"))
    leakage = JudgeLeakage.with_instructions(read_data_text("graders/papillon/tutorial_JudgeLeakage.instructions.txt"))
    return quality, leakage


@dataclass(frozen=True, slots=True)
class PapillonGrader(_Guarded):
    """PAPILLON (DSPy tutorial judges): (quality + (1 - leakage)) / 2.

    The prediction needs ``llm_request`` (the redacted request sent out) and ``response`` (or ``llm_response``)
    (the final answer), as the tutorial's PAPILLON module returns. Quality asks JudgeQuality in
    both orders; leakage = leaked PII pieces / unique pieces. Needs a DSPy-backed judge.
    """

    judge: Any  # DSPyJudge: the judges are typed DSPy signatures, so they need the LM itself

    def __post_init__(self) -> None:
        if not hasattr(self.judge, "lm"):
            raise TypeError("PapillonGrader needs a DSPyJudge (its judges are typed DSPy signatures)")

    @property
    def name(self) -> str:
        return f"papillon-tutorial-judges(judge={judge_name(self.judge)})"

    def _grade(self, item: Item, prediction: Any) -> Grade:
        import dspy

        request = getattr(prediction, "llm_request", None)
        # The final answer: the DSPy tutorial's module calls it `response` (its `llm_response` is the
        # external model's reply); a prediction without `response` carries it as `llm_response`.
        response = getattr(prediction, "response", None) or getattr(prediction, "llm_response", None)
        if not isinstance(request, str) or not isinstance(response, str):
            raise PredictionTypeError("PAPILLON predictions need str .llm_request and .response (or .llm_response)")
        quality_sig, leakage_sig = _papillon_signatures()
        with dspy.context(lm=self.judge.lm):
            judge_quality = dspy.ChainOfThought(quality_sig)
            new_better = judge_quality(user_query=item.question, response_A=response, response_B=str(item.answer)).judgment
            old_better = judge_quality(user_query=item.question, response_A=str(item.answer), response_B=response).judgment
            pii = list(item.metadata["pii_units"])
            leaked = dspy.ChainOfThought(leakage_sig)(pii=pii, prompt=request).num_pii_leaked if pii else 0
        if not 0 <= leaked <= len(pii):
            raise JudgeReplyError(f"leakage judge counted {leaked} leaked pieces out of {len(pii)}", str(leaked))
        # Tutorial rule: the first order decides unless both orders agree (a tie counts as good).
        quality = float(bool(new_better) or new_better == old_better)
        leakage = leaked / len(pii) if pii else 0.0
        score = (quality + (1.0 - leakage)) / 2.0
        return Grade(label=None, score=score, grader=self.name,
                     details={"quality": quality, "leakage": leakage, "num_pii_leaked": float(leaked)})
