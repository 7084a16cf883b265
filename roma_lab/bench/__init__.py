"""Benchmark data, the benchmarks' own graders, and resumable graded runs.

Loaders read the copied files under data/benchmarks/ (override with ``$ROMA_LAB_DATA``); graders
follow each benchmark's published protocol with its official prompt text, and fall back to a
labelled string match when no judge model is given; ``run_benchmark`` evaluates any
``question -> answer`` callable and appends one row per item so interrupted runs resume.
See design/grading.md for the choices made where the official code is ambiguous.
``run_roma_table`` and ``measure_component_cost`` build ROMA paper Tables 1-6 on top of these
(design/roma_tables.md); ``lm="scripted"`` gives a labelled deterministic test double.
"""

from roma_lab.bench._data import (
    DATA_ENV,
    DataIntegrityError,
    DataNotFoundError,
    Item,
    LongformSpec,
    data_root,
    items_df,
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
from roma_lab.bench._grade import (
    STRING_MATCH,
    DSPyJudge,
    Grade,
    Grader,
    GradingError,
    Judge,
    JudgeReplyError,
    PredictionTypeError,
    StringMatchGrader,
    normalize_answer,
)
from roma_lab.bench._graders import (
    ABGEN_ASPECTS,
    AbGenGrader,
    AIMEGrader,
    BrowseCompGrader,
    EQBenchLongformGrader,
    FramesGrader,
    HotpotQAGrader,
    LongformStory,
    PapillonGrader,
    SimpleQAGrader,
    extract_abgen_score,
    extract_aime_answer,
    grader_for,
    parse_frames_decision,
    parse_rubric_scores,
    parse_simpleqa_letter,
    rubric_average,
    squad_normalize,
)
from roma_lab.bench._roma_tables import (
    CLOSED_BOOK,
    PAPER_TABLES,
    SYSTEMS,
    BaseSystem,
    RomaRunError,
    RomaSystem,
    RunConfig,
    RunConfigMismatchError,
    component_cost_df,
    load_item_run,
    longform_task,
    measure_component_cost,
    model_label,
    paper_reported_roma_df,
    resolve_judge,
    resolve_model,
    run_roma_table,
    saved_item_ids,
)
from roma_lab.bench._run import COLUMNS, RunFileError, SystemStalledError, read_results_df, run_benchmark
from roma_lab.bench._scripted import SCRIPTED, SCRIPTED_LABEL, ScriptedEngine, ScriptedJudge, scripted_lm
from roma_lab.bench._summary import compare_df, summarize_df


def __getattr__(name: str):
    # The item picker needs ipywidgets; load it on first use so `import roma_lab.bench` stays light.
    if name == "ItemRunPicker":
        from roma_lab.bench._item_view import ItemRunPicker

        return ItemRunPicker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BaseSystem",
    "CLOSED_BOOK",
    "ItemRunPicker",
    "PAPER_TABLES",
    "RomaRunError",
    "RomaSystem",
    "RunConfig",
    "RunConfigMismatchError",
    "SCRIPTED",
    "SCRIPTED_LABEL",
    "SYSTEMS",
    "ScriptedEngine",
    "ScriptedJudge",
    "component_cost_df",
    "load_item_run",
    "longform_task",
    "measure_component_cost",
    "model_label",
    "paper_reported_roma_df",
    "resolve_judge",
    "resolve_model",
    "run_roma_table",
    "saved_item_ids",
    "scripted_lm",
    "ABGEN_ASPECTS",
    "AIMEGrader",
    "AbGenGrader",
    "BrowseCompGrader",
    "COLUMNS",
    "DATA_ENV",
    "DSPyJudge",
    "DataIntegrityError",
    "DataNotFoundError",
    "EQBenchLongformGrader",
    "FramesGrader",
    "Grade",
    "Grader",
    "GradingError",
    "HotpotQAGrader",
    "Item",
    "Judge",
    "JudgeReplyError",
    "LongformSpec",
    "LongformStory",
    "PapillonGrader",
    "PredictionTypeError",
    "RunFileError",
    "STRING_MATCH",
    "SimpleQAGrader",
    "StringMatchGrader",
    "compare_df",
    "data_root",
    "extract_abgen_score",
    "extract_aime_answer",
    "grader_for",
    "items_df",
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
    "normalize_answer",
    "parse_frames_decision",
    "parse_rubric_scores",
    "parse_simpleqa_letter",
    "read_results_df",
    "rubric_average",
    "run_benchmark",
    "SystemStalledError",
    "sample",
    "squad_normalize",
    "summarize_df",
]
