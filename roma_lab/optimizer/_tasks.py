"""The three Table 7 benchmarks as DSPy programs with GEPA feedback metrics, and their data splits.

- AIME 2025: chain of thought with MathArena's instruction; graded by exact integer match.
- HotpotQA: closed-book (questions and answers only, no distractor paragraphs), answer EM.
- PAPILLON: privacy-conscious delegation as in the DSPy tutorial: a local model writes a redacted
  request, an "external" model answers it, the local model writes the final response; scored
  (quality + (1 - leakage)) / 2 by the tutorial's judges.

A :class:`Task` grades a prediction with the benchmark's own grader (``roma_lab.bench``) and turns
the grade into the ``dspy.Prediction(score, feedback)`` GEPA reflects on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dspy
import numpy as np

import roma_lab.lm
from roma_lab.bench import AIMEGrader, DSPyJudge, Grade, HotpotQAGrader, Item, PapillonGrader
from roma_lab.bench import load_aime2025, load_hotpotqa, load_papillon, sample
from roma_lab.optimizer._config import _check_size

BENCHMARKS = ("aime2025", "hotpotqa", "papillon")

# MathArena's AIME instruction (matharena configs: "instruction" of aime_2025_*).
MATHARENA_AIME = ("Please reason step by step, and put your final answer within \\boxed{}. "
                  "The answer is an integer between 0 and 999 inclusive.")

SETTINGS = {
    "aime2025": "AIME 2025 I+II; chain of thought, MathArena instruction; integer exact match",
    "hotpotqa": "HotpotQA dev, closed-book: questions only, no distractor paragraphs; answer exact match",
    "papillon": "PUPA_New (PAPILLON), DSPy-tutorial pipeline; (quality + (1 - leakage)) / 2 by the tutorial judges",
}


# ---- programs -------------------------------------------------------------------------------


class SolveAIME(dspy.Signature):
    __doc__ = f"Solve the competition math `problem`. {MATHARENA_AIME} Give that boxed integer as the `answer`."

    problem: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="the final answer within \\boxed{}, an integer 0-999")


class AIMESolver(dspy.Module):
    def __init__(self):
        super().__init__()
        self.solve = dspy.ChainOfThought(SolveAIME)

    def forward(self, problem: str) -> dspy.Prediction:
        return self.solve(problem=problem)


class AnswerClosedBook(dspy.Signature):
    """Answer the multi-hop `question` from your own knowledge (no documents are given).
    Give the `answer` as a short span: a name, a date, a number, or yes/no."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="a short answer span, no explanation")


class ClosedBookQA(dspy.Module):
    def __init__(self):
        super().__init__()
        self.respond = dspy.Predict(AnswerClosedBook)

    def forward(self, question: str) -> dspy.Prediction:
        return self.respond(question=question)


# PAPILLON signatures: the DSPy tutorial's texts (dspy.ai/tutorials/papillon).
class CraftRedactedRequest(dspy.Signature):
    """Given a private `user_query`, create a privacy-preserving request for a powerful external LLM.
    The LLM may assist without learning private information about the user.
    Return it as `llm_request`."""

    user_query: str = dspy.InputField()
    llm_request: str = dspy.OutputField()


class RespondToQuery(dspy.Signature):
    """Respond to a user query.
    For inspiration, we found a potentially related request to a powerful external LLM and its response."""

    related_llm_request: str = dspy.InputField()
    related_llm_response: str = dspy.InputField(desc="information from a powerful LLM responding to a related request")
    user_query: str = dspy.InputField(desc="the user's request you need to fulfill")
    response: str = dspy.OutputField(desc="your final response to the user's request")


class ExternalLLM(dspy.Signature):
    """You are a helpful assistant. Fulfil the request."""

    request: str = dspy.InputField()
    response: str = dspy.OutputField()


class Papillon(dspy.Module):
    """The tutorial's PAPILLON pipeline. The external model is not an optimised predictor: it is
    called through a signature built per call, so GEPA sees only the two local modules.

    ``external_lm``: a model name for the external ("remote") model; None uses the current LM,
    which is what an offline run does (the same local model plays both parts).
    """

    def __init__(self, external_lm: str | None = None):
        super().__init__()
        self.craft_redacted_request = dspy.ChainOfThought(CraftRedactedRequest)
        self.respond_to_query = dspy.Predict(RespondToQuery)
        self.external_lm = external_lm  # a name, not an LM object, so program copies stay cheap

    def forward(self, user_query: str) -> dspy.Prediction:
        llm_request = self.craft_redacted_request(user_query=user_query).llm_request
        external = roma_lab.lm.resolve_lm(self.external_lm) if self.external_lm else dspy.settings.lm
        with dspy.context(lm=external):
            llm_response = dspy.Predict(ExternalLLM)(request=llm_request).response
        response = self.respond_to_query(
            related_llm_request=llm_request, related_llm_response=llm_response, user_query=user_query
        ).response
        return dspy.Prediction(llm_request=llm_request, llm_response=llm_response, response=response)


# ---- grading and feedback ---------------------------------------------------------------------


def item_of(benchmark: str, gold: dspy.Example) -> Item:
    """The benchmark item an example was made from (:func:`example_of` read back)."""
    question = {"aime2025": "problem", "hotpotqa": "question", "papillon": "user_query"}[benchmark]
    metadata = {"pii_units": tuple(gold.pii_units)} if benchmark == "papillon" else {}
    return Item(benchmark, str(gold.item_id), gold[question], gold.answer, metadata)


def _aime_feedback(gold: dspy.Example, pred: Any, grade: Grade) -> str:
    if grade.score == 1.0:
        return f"Correct: the answer is {gold.answer}."
    got = f"the integer {grade.raw}" if grade.raw else "no integer"
    return (f"Incorrect: the correct answer is {gold.answer}, but the response gave {got}. "
            "The final answer must be one integer between 0 and 999, written as \\boxed{N}.")


def _hotpotqa_feedback(gold: dspy.Example, pred: Any, grade: Grade) -> str:
    f1 = grade.details.get("f1", 0.0)
    if grade.score == 1.0:
        return f"Correct: the answer {gold.answer!r} matches exactly."
    return (f"Incorrect: the expected answer is {gold.answer!r}, the response was {getattr(pred, 'answer', '')!r} "
            f"(token F1 {f1:.2f}). Answers must be the short span itself: no sentence, no explanation.")


def _papillon_feedback(gold: dspy.Example, pred: Any, grade: Grade) -> str:
    quality, leakage = grade.details["quality"], grade.details["leakage"]
    pii = list(gold.pii_units)
    parts = [
        "Quality: the final response was judged at least as good as the reference response."
        if quality == 1.0 else
        "Quality: the final response was judged worse than the reference response; it must fulfil the user's "
        "request as completely as the reference does.",
    ]
    if pii:
        leaked = int(grade.details["num_pii_leaked"])
        parts.append(
            f"Privacy: {leaked} of {len(pii)} private pieces ({', '.join(map(repr, pii))}) appeared in the request "
            "sent to the external LLM." + (" The request must not contain them." if leaked else "")
        )
    parts.append(f"Score {grade.score:.2f} = (quality {quality:.0f} + (1 - leakage {leakage:.2f})) / 2.")
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Task:
    """One Table 7 benchmark: a fresh unoptimised program, a grader and a feedback writer.

    ``metric`` is the GEPA feedback metric; ``grade`` gives the benchmark's ``Grade`` (NaN score
    when the grader itself failed). ``judge_lm`` / ``external_lm`` are kept as given so a run's
    settings can be written down.
    """

    benchmark: str
    setting: str
    make_program: Callable[[], dspy.Module]
    grader: Callable[[Item, Any], Grade]
    feedback: Callable[[dspy.Example, Any, Grade], str]
    judge_lm: Any = None
    external_lm: str | None = None

    def grade(self, gold: dspy.Example, pred: Any) -> Grade:
        if self.benchmark != "papillon":
            pred = getattr(pred, "answer", pred)  # the AIME and HotpotQA graders read the answer text
        return self.grader(item_of(self.benchmark, gold), pred)

    def metric(self, gold, pred, trace=None, pred_name=None, pred_trace=None) -> dspy.Prediction:
        grade = self.grade(gold, pred)
        if grade.error is not None:
            # GEPA needs a number: a failed grading scores 0 for the search, and says so.
            return dspy.Prediction(score=0.0, feedback=f"The grader failed on this example ({grade.error}); "
                                                       "scored 0 for the search.")
        return dspy.Prediction(score=grade.score, feedback=self.feedback(gold, pred, grade))


def make_task(benchmark: str, *, judge_lm: Any = None, external_lm: str | None = None) -> Task:
    """The Task for ``benchmark``. PAPILLON needs ``judge_lm`` (a model name or dspy LM) for its
    quality and leakage judges; ``external_lm`` names PAPILLON's external model (None: same LM)."""
    if benchmark == "aime2025":
        return Task(benchmark, SETTINGS[benchmark], AIMESolver, AIMEGrader(), _aime_feedback)
    if benchmark == "hotpotqa":
        return Task(benchmark, SETTINGS[benchmark], ClosedBookQA, HotpotQAGrader(), _hotpotqa_feedback)
    if benchmark == "papillon":
        if judge_lm is None:
            raise ValueError("PAPILLON is scored by judge models: pass judge_lm (a model name or a dspy LM)")
        return Task(benchmark, SETTINGS[benchmark], lambda: Papillon(external_lm),
                    PapillonGrader(DSPyJudge(roma_lab.lm.resolve_lm(judge_lm))), _papillon_feedback, judge_lm, external_lm)
    raise ValueError(f"unknown benchmark {benchmark!r}; choose from {BENCHMARKS}")


# ---- data ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Splits:
    train: tuple[dspy.Example, ...]
    val: tuple[dspy.Example, ...]
    test: tuple[dspy.Example, ...]


def example_of(item: Item) -> dspy.Example:
    """The DSPy example of a benchmark item, its inputs marked (the program's keyword arguments)."""
    if item.benchmark == "aime2025":
        return dspy.Example(item_id=item.item_id, problem=item.question, answer=item.answer).with_inputs("problem")
    if item.benchmark == "hotpotqa":
        return dspy.Example(item_id=item.item_id, question=item.question, answer=item.answer).with_inputs("question")
    return dspy.Example(item_id=item.item_id, user_query=item.question, answer=item.answer,
                        pii_units=list(item.metadata["pii_units"])).with_inputs("user_query")


def task_splits(benchmark: str, *, n_train: int, n_val: int, n_test: int, seed: int) -> Splits:
    """Disjoint seeded train / validation / test samples.

    PAPILLON uses its own train, dev and test splits. AIME 2025 has 30 problems and no training
    split of its own (the GEPA paper trained on AIME 2022-24), so all three samples come from the
    30 problems, disjoint; HotpotQA samples its dev set the same way.
    """
    for name, value, minimum in (("n_train", n_train, 1), ("n_val", n_val, 1), ("n_test", n_test, 2)):
        _check_size(name, value, minimum)
    if benchmark == "papillon":
        parts = [sample(load_papillon(split), n, seed) for split, n in
                 (("train", n_train), ("dev", n_val), ("test", n_test))]
        return Splits(*(tuple(example_of(it) for it in part) for part in parts))
    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}; choose from {BENCHMARKS}")
    items = load_aime2025() if benchmark == "aime2025" else load_hotpotqa()
    total = n_train + n_val + n_test
    if total > len(items):
        raise ValueError(f"{benchmark} has {len(items)} items; n_train + n_val + n_test = {total} is too many")
    order = np.random.default_rng(seed).permutation(len(items))[:total]
    picked = [example_of(items[i]) for i in order]
    return Splits(tuple(picked[:n_train]), tuple(picked[n_train:n_train + n_val]), tuple(picked[n_train + n_val:]))
