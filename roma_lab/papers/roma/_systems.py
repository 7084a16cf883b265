"""The two systems of the ROMA tables (ROMA and a single call of its model), the task wording they get,
and the judge they are graded by (models themselves come from ``roma_lab.lm.resolve_lm``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from roma_lab.bench import QUESTION, DSPyJudge, ScriptedJudge
from roma_lab.evaluate import RomaSystem, SingleCall
from roma_lab.lm import SCRIPTED, resolve_lm

SYSTEMS = ("roma", "single")
CLOSED_BOOK = "closed-book (offline, no search backend)"
SINGLE_CALL = "closed-book (single call)"


def resolve_judge(judge_lm: Any, model: Any = None, model_name: Any = None):
    """None or "" -> no judge (string-match fallback); "scripted" -> :class:`ScriptedJudge`; a model
    name or LM -> :class:`DSPyJudge`. A judge named like the task model reuses that model object."""
    if judge_lm is None or judge_lm == "":
        return None
    if judge_lm == SCRIPTED:
        return ScriptedJudge()
    if isinstance(judge_lm, str):
        return DSPyJudge(model if judge_lm == model_name and model is not None else resolve_lm(judge_lm))
    if hasattr(judge_lm, "forward") or hasattr(judge_lm, "model"):  # a dspy LM object
        return DSPyJudge(judge_lm)
    return judge_lm  # already a Judge callable


@dataclass(frozen=True, slots=True)
class TaskWording:
    """What the systems are asked for one item: ``template`` (a benchmark spec's ``task``) filled with
    the question as ``{prompt}`` and the long-form sizes."""

    template: str = QUESTION
    n_chapters: int = 3
    chapter_words: int = 150

    def __post_init__(self) -> None:
        if self.n_chapters < 1 or self.chapter_words < 1:
            raise ValueError(f"need n_chapters >= 1 and chapter_words >= 1, got {self.n_chapters}, "
                             f"{self.chapter_words}")

    def __call__(self, question: str) -> str:
        return self.template.format(prompt=question, n_chapters=self.n_chapters, chapter_words=self.chapter_words)


def check_run(n_items: int | None, max_depth: int, max_concurrency: int, systems: Sequence[str]) -> None:
    """A ValueError for a sample size, depth, concurrency or system list no run can have."""
    if n_items is not None and (not isinstance(n_items, int) or n_items < 1):
        raise ValueError(f"n_items must be a positive integer or None (all items), got {n_items!r}")
    if max_depth < 0 or max_concurrency < 1:
        raise ValueError(f"need max_depth >= 0 and max_concurrency >= 1, got {max_depth}, {max_concurrency}")
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown or not systems or len(set(systems)) != len(systems):
        raise ValueError(f"systems must be distinct names from {SYSTEMS}, got {list(systems)!r}")


def system_setting(system: str, search_backend: str, web: str = "") -> str:
    """How a system met the questions: closed-book, or ROMA searching a BM25 corpus or the web."""
    if system == "single":
        return SINGLE_CALL
    if web:
        return f"search: the web ({web}; a search, then its first hits read)"
    return f"search: BM25 over {search_backend}" if search_backend else CLOSED_BOOK


def make_system(name: str, model: Any, task: Callable[[str], str], *, max_depth: int, max_concurrency: int,
                run_timeout_s: float | None = None) -> SingleCall | RomaSystem:
    """The system ``name`` (one of :data:`SYSTEMS`) on ``model``, asked ``task(question)``; ROMA searches
    the task set's corpus and stops a run at ``run_timeout_s`` (a ``timed_out`` run, its trace kept)."""
    if name == "single":
        return SingleCall(model, name, task)
    return RomaSystem(model, name, settings={"max_depth": max_depth, "max_concurrency": max_concurrency,
                                             "run_timeout_s": run_timeout_s}, task=task)
