"""Benchmark data, the benchmarks' own graders, resumable graded runs, and ROMA paper Tables 1-6.

Every benchmark is one frozen spec in the registry ``BENCHMARKS`` (loader, grader, task wording,
metric and unit, and for the paper's tables the artefact and what differs from the paper's set-up).
Loaders read the copied files under data/benchmarks/ (override with ``$ROMA_LAB_DATA``); graders
follow each benchmark's published protocol with its official prompt text, and fall back to a
labelled string match when no judge model is given (design/grading.md); ``run_benchmark`` evaluates
any ``question -> answer`` callable and appends one row per item so interrupted runs resume.
``run_roma_table`` and ``measure_component_cost`` build ROMA paper Tables 1-6 on top of these, in the
results vocabulary (design/roma_tables.md); ``lm="scripted"`` gives a labelled deterministic test
double. The item picker for their execution trees is ``roma_lab.widgets.ItemRunPicker``.
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
from roma_lab.bench._grade import (STRING_MATCH, DSPyJudge, Grade, Grader, Judge, StringMatchGrader, guarded,
                                   normalize_answer, prediction_text)
from roma_lab.bench._graders import (
    AbGenGrader,
    AIMEGrader,
    BrowseCompGrader,
    EQBenchLongformGrader,
    FramesGrader,
    HotpotQAGrader,
    LongformStory,
    PapillonGrader,
    SimpleQAGrader,
)
from roma_lab.bench._registry import BENCHMARKS, BenchmarkSpec, GraderSpec, grader_for
from roma_lab.bench._roma_tables import paper_reported_roma_df, run_roma_table
from roma_lab.bench._run import PrivateItemsError, RunFileError, SystemStalledError, read_results_df, run_benchmark
from roma_lab.bench._run_files import RunConfigMismatchError, load_item_run, saved_item_ids
from roma_lab.bench._systems import RomaRunError, RomaTimeoutError
from roma_lab.bench._table5 import measure_component_cost

__all__ = [
    "guarded",
    "normalize_answer",
    "prediction_text",
    "AIMEGrader",
    "AbGenGrader",
    "BENCHMARKS",
    "BenchmarkSpec",
    "BrowseCompGrader",
    "DATA_ENV",
    "DSPyJudge",
    "DataIntegrityError",
    "DataNotFoundError",
    "EQBenchLongformGrader",
    "FramesGrader",
    "Grade",
    "Grader",
    "GraderSpec",
    "HotpotQAGrader",
    "Item",
    "Judge",
    "LongformStory",
    "PapillonGrader",
    "RomaRunError",
    "RomaTimeoutError",
    "RunConfigMismatchError",
    "RunFileError",
    "STRING_MATCH",
    "SimpleQAGrader",
    "StringMatchGrader",
    "SystemStalledError",
    "PrivateItemsError",
    "PRIVATE_BENCHMARKS",
    "data_root",
    "grader_for",
    "load_abgen",
    "load_aime2025",
    "load_browsecomp",
    "load_eqbench_longform",
    "load_frames",
    "load_hotpotqa",
    "load_item_run",
    "load_longform_spec",
    "load_papillon",
    "load_seal0",
    "load_simpleqa",
    "measure_component_cost",
    "paper_reported_roma_df",
    "read_results_df",
    "run_benchmark",
    "run_roma_table",
    "sample",
    "saved_item_ids",
]
