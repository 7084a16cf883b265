"""The benchmark registry: one frozen spec per benchmark, holding everything the tables look up by name.

A spec says how to load the items, how to grade them (the benchmark's own grader, or the labelled
string-match fallback without a judge), how the task is worded, what one item scores and in which
unit, and, for the ROMA paper's tables, which artefact it reproduces, the paper's names for our two
systems and what always differs from the paper's set-up. Code that needs a per-benchmark fact reads
it from the spec (inspect_ai's registered tasks and scorers); nothing branches on a benchmark's name.
Adding a benchmark is one entry in :data:`BENCHMARKS`. See design/roma_tables.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any

from roma_lab.bench._data import (
    _ABGEN_HELP,
    Item,
    load_abgen,
    load_aime2025,
    load_browsecomp,
    load_eqbench_longform,
    load_frames,
    load_hotpotqa,
    load_papillon,
    load_seal0,
    load_simpleqa,
)
from roma_lab.bench._grade import Grader, Judge, StringMatchGrader
from roma_lab.bench._graders import AIMEGrader, BrowseCompGrader, FramesGrader, HotpotQAGrader, SimpleQAGrader
from roma_lab.bench._rubrics import ABGEN_ASPECTS, AbGenGrader, EQBenchLongformGrader, PapillonGrader

#: The wording of a question-answering task: the question itself.
QUESTION = "{prompt}"
#: The compact long-form task (design/roma_tables.md); the judge still sees the original prompt.
LONGFORM_TASK = (
    "Write a short story in {n_chapters} chapters of about {chapter_words} words each for this writing prompt:\n\n"
    "{prompt}\n\nEach chapter builds on the ones before it. Return the whole story, each chapter headed "
    "'Chapter N'."
)


@dataclass(frozen=True, slots=True)
class GraderSpec:
    """How a benchmark is graded; calling it with a judge (or None) builds the grader.

    ``grader`` is the benchmark's own grader class, built as ``grader(judge, **options)`` when
    ``judged`` (else ``grader(**options)``, and the judge is not used). Without a judge a judged
    benchmark gets :class:`StringMatchGrader` (labelled "string-match, not the official judge") when
    ``string_match`` allows it, and a ValueError otherwise (rubric benchmarks have no string equivalent).
    """

    grader: type
    options: Mapping[str, Any] = field(default_factory=dict)
    judged: bool = True
    string_match: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    def __call__(self, judge: Judge | None = None, **options: Any) -> Grader:
        options = {**self.options, **options}
        if not self.judged:
            return self.grader(**options)
        if judge is not None:
            return self.grader(judge, **options)
        if self.string_match:
            return StringMatchGrader()
        raise ValueError(f"{self.grader.__name__} is graded by a judge model only (no string-match equivalent); "
                         "pass judge=...")


@dataclass(frozen=True, slots=True)
class BenchmarkSpec:
    """Everything the code looks up about one benchmark.

    ``load`` returns the items; a benchmark not available offline (AbGen) has ``user_file``, the
    help text on the file the user must supply, and its ``load`` takes that file's path. ``task``
    words a question for the systems; its fields are ``{prompt}``, ``{n_chapters}`` and
    ``{chapter_words}``. One item scores ``metric`` (the grade's
    score, in ``unit``); ``details`` are sub-scores a grade carries that are summarised as metrics
    too; ``three_way`` adds simple-evals' metrics when every label is CORRECT / INCORRECT /
    NOT_ATTEMPTED. For a ROMA paper table: ``artefact`` names it in paper_reported_roma.csv,
    ``paper_names`` maps our systems to the paper's rows they stand beside, ``note`` says what always
    differs from the paper's set-up, and ``unmeasured`` why the paper's figures cannot be measured
    here at all ("" when they can).
    """

    name: str
    load: Callable[..., list[Item]]
    grader: GraderSpec
    task: str = QUESTION
    metric: str = "accuracy"
    unit: str = "fraction"
    details: tuple[str, ...] = ()
    three_way: bool = False
    user_file: str = ""
    artefact: str = ""
    paper_names: Mapping[str, str] = field(default_factory=dict)
    note: str = ""
    unmeasured: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "paper_names", MappingProxyType(dict(self.paper_names)))


def _qa(name: str, load: Callable[[], list[Item]], grader: GraderSpec, artefact: str = "", **kwargs: Any):
    # The paper's Tables 1-3 run ROMA and its base model GLM-4.6, both with search.
    names = {"roma": "ROMA (GLM-4.6)", "single": "GLM-4.6"} if artefact else {}
    return BenchmarkSpec(name, load, grader, three_way=True, artefact=artefact, paper_names=names, **kwargs)


_SIMPLEQA = GraderSpec(SimpleQAGrader, {"template": "simpleqa"}, string_match=True)

#: Every benchmark by name.
BENCHMARKS: Mapping[str, BenchmarkSpec] = MappingProxyType({spec.name: spec for spec in (
    _qa("seal0", load_seal0, GraderSpec(SimpleQAGrader, {"template": "sealqa"}, string_match=True), "table1",
        note="we load the 2026 revision of SEAL-0; the paper (2025) scored an older revision"),
    _qa("frames", load_frames, GraderSpec(FramesGrader, string_match=True), "table2"),
    _qa("simpleqa", load_simpleqa, _SIMPLEQA, "table3"),
    _qa("simpleqa_verified", partial(load_simpleqa, verified=True), _SIMPLEQA, "table3",
        note="the paper reports SimpleQA (4,326), not SimpleQA Verified"),
    _qa("browsecomp", load_browsecomp, GraderSpec(BrowseCompGrader, string_match=True)),
    BenchmarkSpec("eqbench_longform", load_eqbench_longform, GraderSpec(EQBenchLongformGrader), task=LONGFORM_TASK,
                  metric="score", unit="score", artefact="table4",
                  paper_names={"roma": "ROMA default prompts (DeepSeek-V3)"},
                  note="compact protocol (one task per prompt, few short chapters), judged as a final piece only; "
                       "the paper used 8 x 1000-word chapter turns and Claude Sonnet 4 as judge"),
    BenchmarkSpec("abgen", load_abgen, GraderSpec(AbGenGrader), metric="overall", unit="score",
                  details=ABGEN_ASPECTS, user_file=f"To run Table 6, set ABGEN_PATH to the file. {_ABGEN_HELP}",
                  artefact="table6", paper_names={"roma": "ROMA"},
                  unmeasured="the paper states only ranks (its Table 6 body is not in the seed text), and a rank "
                             "among its 20 settings needs all 20 settings' scores; this lab scores ROMA and a single "
                             "call of its model only (their 1-5 means go to abgen_summary when AbGen data is supplied)"),
    BenchmarkSpec("hotpotqa", load_hotpotqa, GraderSpec(HotpotQAGrader, judged=False)),
    BenchmarkSpec("aime2025", load_aime2025, GraderSpec(AIMEGrader, judged=False)),
    BenchmarkSpec("papillon", load_papillon, GraderSpec(PapillonGrader), metric="score", unit="score"),
)})


def benchmark_spec(name: str) -> BenchmarkSpec:
    """The registered spec of ``name`` (a ValueError names the known benchmarks)."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise ValueError(f"unknown benchmark {name!r}; known: {sorted(BENCHMARKS)}") from None


def grader_for(benchmark: str, judge: Judge | None = None, **options: Any) -> Grader:
    """The benchmark's own grader, or the string-match fallback when ``judge`` is None.

    Rubric benchmarks (eqbench_longform, abgen, papillon) have no string-match equivalent and
    raise ValueError without a judge. ``options`` go to the grader (e.g. ``upstream_method_bug``).
    """
    return benchmark_spec(benchmark).grader(judge, **options)
