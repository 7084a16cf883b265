"""The graders of the long-form and privacy benchmarks, each read by a judge model with its benchmark's
own rubric or prompts: EQ-Bench long-form writing, AbGen ablation designs, PAPILLON (see design/grading.md)."""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from roma_lab.bench._data import Item, LongformSpec, load_longform_spec, read_data_text
from roma_lab.bench._grade import (Grade, GradingError, Judge, JudgeReplyError, PredictionTypeError, guarded, judge_name,
                                   prediction_text)
from roma_lab.bench._graders import _fill, _Guarded

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
