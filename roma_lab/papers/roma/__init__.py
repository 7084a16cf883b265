"""ROMA paper: the code that exists only to reproduce its tables and figures.

- Notebooks 01, 02 and 09 (``_studies.py``): the quickstart run (``run_quickstart``), the tree's
  structure and schedules (``measure_structure``, ``compare_schedules``, ``measure_references``)
  and repair of failed subtrees (``measure_repair``).
- Tables 1-4 and 6 (``_benchmark_tables.py``: ``run_roma_table``) and Table 5
  (``_component_cost.py``: ``measure_component_cost``), on ``roma_lab.bench`` (design/roma_tables.md).
- The atomizer on multi-part goals (``_atomizer.py``: the fixed goals and their score;
  ``_atomizer_study.py``: ``atomizer_study``, before / GEPA+ on train / after on held-out,
  design/atomizer.md), notebook 32.
- Tables 7 and 8 (``_gepa_tables.py``: ``table7_gepa``, ``table8_convergence``, ``plot_convergence``),
  on ``roma_lab.optimizer`` (design/gepa_tables.md), and what notebooks 30-31 cost before they run
  (``_gepa_projection.py``: ``project_gepa_tables`` counts every model call and projects the cold
  time at ``ProjectionSpeeds``); loaded on first access (PEP 562) because they import DSPy, which
  takes seconds.

Every table function returns a :class:`RomaTables` (the tables by file stem, the folder and the
statistics settings); ``run_quickstart`` and ``compare_schedules`` return runs, for the viewers.

The paper's own figures are data beside the code: ``paper_reported_roma.csv`` (Tables 1-6) and
``paper_reported_gepa.csv`` (Tables 7-8).
"""

from roma_lab._lazy import lazy_exports_from
from roma_lab.papers.roma._atomizer import (ATOMIZER_SPLITS, AtomizerGoal, atomizer_goals, atomizer_summary,
                                           plot_atomizer, score_atomizer)
from roma_lab.papers.roma._benchmark_tables import paper_reported_roma_df, run_roma_table
from roma_lab.papers.roma._component_cost import measure_component_cost
from roma_lab.papers.roma._run_config import RunConfigMismatchError
from roma_lab.papers.roma._studies import (
    QUICKSTART_GOALS,
    QUICKSTART_PLAN_ROOT,
    QUICKSTART_RULE,
    QuickstartGoal,
    compare_schedules,
    measure_references,
    measure_repair,
    measure_structure,
    plot_references,
    plot_repair,
    plot_structure,
    quickstart_checks,
    quickstart_corpus,
    quickstart_notes,
    quickstart_rule,
    quickstart_usage_df,
    run_quickstart,
)
from roma_lab.trace import RomaRunError, RomaTimeoutError
from roma_lab.papers.roma._tables import RomaTables

_GEPA_NAMES = ("plot_convergence", "table7_gepa", "table8_convergence")
_GEPA_PROJECTION_NAMES = ("GEPA_DESIGN_SPEEDS", "GepaProjection", "ProjectionSpeeds", "PromptTokenizer",
                          "gepa_notebook_parameters", "measured_projection_speeds", "project_gepa_tables")
_ATOMIZER_STUDY_NAMES = ("atomizer_metric", "atomizer_study", "search_halves")
__getattr__ = lazy_exports_from(__name__, {"._gepa_tables": _GEPA_NAMES, "._gepa_projection": _GEPA_PROJECTION_NAMES,
                                           "._atomizer_study": _ATOMIZER_STUDY_NAMES})


__all__ = [
    "ATOMIZER_SPLITS",
    "AtomizerGoal",
    "atomizer_goals",
    "atomizer_summary",
    "plot_atomizer",
    "score_atomizer",
    "QUICKSTART_GOALS",
    "QUICKSTART_PLAN_ROOT",
    "QUICKSTART_RULE",
    "QuickstartGoal",
    "RomaRunError",
    "RomaTables",
    "RomaTimeoutError",
    "RunConfigMismatchError",
    "compare_schedules",
    "measure_component_cost",
    "measure_references",
    "measure_repair",
    "measure_structure",
    "paper_reported_roma_df",
    "plot_references",
    "plot_repair",
    "plot_structure",
    "quickstart_checks",
    "quickstart_corpus",
    "quickstart_notes",
    "quickstart_rule",
    "quickstart_usage_df",
    "run_quickstart",
    "run_roma_table",
    *_GEPA_NAMES,
    *_GEPA_PROJECTION_NAMES,
    *_ATOMIZER_STUDY_NAMES,
]
