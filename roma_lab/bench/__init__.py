"""Benchmark data and the benchmarks' own graders, with summaries of graded rows in a benchmark's metrics.

Every benchmark is one frozen spec in the registry ``BENCHMARKS`` (loader, grader, task wording,
metric and unit, and for the paper's tables the artefact and what differs from the paper's set-up).
Loaders read the copied files under data/benchmarks/ (override with ``$ROMA_LAB_DATA``); graders
follow each benchmark's published protocol with its official prompt text, and fall back to a
labelled string match when no judge model is given (design/grading.md); ``grader_named`` picks a
grader for a researcher's own tasks by name ("exact", "quasi-exact", "numeric", "contains", "judge")
or wraps a comparison function; ``roma_lab.evaluate`` runs systems on the items and grades them,
and ``summarize_results`` / ``compare_systems`` turn its rows into the results vocabulary with a
benchmark's own metrics. ROMA paper Tables 1-6 are built on these in
``roma_lab.papers.roma`` (design/roma_tables.md). The generated world of the agent benchmark is its own
room, ``roma_lab.world``; the runner is ``roma_lab.evaluate``.
"""

from roma_lab.bench._data import (
    DATA_ENV,
    PRIVATE_BENCHMARKS,
    DataIntegrityError,
    DataNotFoundError,
    Item,
    data_root,
    load_abgen,
    load_aime2025,
    load_browsecomp,
    load_eqbench_longform,
    load_frames,
    load_hotpotqa,
    load_longform_spec,
    load_papillon,
    load_seal0,
    load_simpleqa,
    sample,
)
from roma_lab.bench._grade import (STRING_MATCH, DSPyJudge, Grade, Grader, Judge, StringMatchGrader, answer_key,
                                   exact_key, guarded, normalize_answer, prediction_text)
from roma_lab.bench._graders import (
    GRADER_NAMES,
    AIMEGrader,
    BrowseCompGrader,
    CallableGrader,
    ContainsGrader,
    ExactGrader,
    FramesGrader,
    GaiaGrader,
    HotpotQAGrader,
    NumericGrader,
    SimpleQAGrader,
    gaia_quasi_exact,
    grader_named,
)
from roma_lab.bench._rubrics import AbGenGrader, EQBenchLongformGrader, LongformStory, PapillonGrader
from roma_lab.bench._registry import (BENCHMARKS, LONGFORM_TASK, QUESTION, BenchmarkSpec, GraderSpec, benchmark_spec,
                                      grader_for)
from roma_lab.bench._scripted import ScriptedJudge
from roma_lab.bench._summary import compare_systems, scores_df, summarize_results

__all__ = [
    "answer_key",
    "exact_key",
    "gaia_quasi_exact",
    "grader_named",
    "guarded",
    "normalize_answer",
    "prediction_text",
    "AIMEGrader",
    "AbGenGrader",
    "BENCHMARKS",
    "LONGFORM_TASK",
    "QUESTION",
    "BenchmarkSpec",
    "BrowseCompGrader",
    "CallableGrader",
    "ContainsGrader",
    "DATA_ENV",
    "DSPyJudge",
    "DataIntegrityError",
    "DataNotFoundError",
    "EQBenchLongformGrader",
    "ExactGrader",
    "FramesGrader",
    "GaiaGrader",
    "Grade",
    "Grader",
    "GRADER_NAMES",
    "GraderSpec",
    "HotpotQAGrader",
    "Item",
    "Judge",
    "LongformStory",
    "NumericGrader",
    "PapillonGrader",
    "STRING_MATCH",
    "ScriptedJudge",
    "SimpleQAGrader",
    "StringMatchGrader",
    "PRIVATE_BENCHMARKS",
    "benchmark_spec",
    "compare_systems",
    "data_root",
    "grader_for",
    "load_abgen",
    "load_aime2025",
    "load_browsecomp",
    "load_eqbench_longform",
    "load_frames",
    "load_hotpotqa",
    "load_longform_spec",
    "load_papillon",
    "load_seal0",
    "load_simpleqa",
    "sample",
    "scores_df",
    "summarize_results",
]
