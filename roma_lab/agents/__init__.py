"""OAgents' design choices as one switchable, tested tool-using agent, an offline tool benchmark,
and the paper's own numbers as data with their consistency audit (notebook 20).

``AgentConfig`` holds every choice of the OAgents study (planning, memory, test-time scaling,
search, re-answering, per-role models); ``Agent(config).run(task)`` returns a ``Trajectory``;
``run_agent`` runs a configuration over tasks x R runs with resumable, tidy rows. Tasks come from
``suite_tasks`` (the 504-task meta-routing suite, its operations as tools, graded exactly) or
``qa_tasks`` (benchmark items from ``roma_lab.bench`` with their graders). See design/agents.md.
"""

from ._agent import STATIC_WORKFLOW, Agent, rollout_seed
from ._config import MEMORY, PLANNING, QUERY_OPTIMIZATION, ROLES, SELECTION, TTS, AgentConfig, PlanTips, config_hash
from ._env import AgentTask, Environment, Tool, ToolContext, ToolError, ToolUnavailable, describe_tools
from ._paper import (
    CLAIMS,
    GAIA_SIZES,
    PAPER_REPORTED,
    PARTS,
    PaperAudit,
    RankClaim,
    audit_paper_numbers,
    paper_reported_df,
    plot_paper_comparisons,
)
from ._qa import BM25Source, Source, expand_query, qa_tasks, search_passages
from ._run import ROW_COLUMNS, read_trajectories, run_agent, run_label, trajectory_rows_df
from ._select import VoteResult, is_non_answer, pick_best_score, vote
from ._studies import (ADVANCED, SAVED_STUDIES, STUDY_SPLIT, compare_backbones, compare_memory, compare_planning,
                       compare_saved_runs, compare_search, compare_tts, evaluate_browsecomp, measure_protocol)
from ._searchbench import SEARCH_BENCHMARK, SEARCH_FAMILIES, search_tasks, task_facts
from ._study import ALL, Condition, StudyTables, comparisons_df, run_study, sample_suite_tasks, suite_level
from ._tips import SplitLeakError, mine_tips
from ._toolbench import SUITE_BENCHMARK, SUITE_TOOLS, SuiteGrader, suite_tasks
from ._types import (ROLLOUT_STATUSES, ModelCall, PlanRevision, RecordedGrade, Rollout, Selection, Step, ToolCall,
                     Trajectory)

__all__ = [
    "ADVANCED", "ALL", "SAVED_STUDIES", "STUDY_SPLIT", "Condition", "StudyTables", "compare_backbones",
    "compare_memory", "compare_planning", "compare_saved_runs", "compare_search", "compare_tts", "evaluate_browsecomp",
    "SEARCH_BENCHMARK", "SEARCH_FAMILIES", "search_tasks", "task_facts", "comparisons_df", "measure_protocol", "run_study", "sample_suite_tasks",
    "suite_level",
    "CLAIMS", "GAIA_SIZES", "MEMORY", "PAPER_REPORTED", "PARTS", "PLANNING", "QUERY_OPTIMIZATION", "ROLES",
    "ROLLOUT_STATUSES", "ROW_COLUMNS", "SELECTION", "STATIC_WORKFLOW", "SUITE_BENCHMARK", "SUITE_TOOLS", "TTS",
    "Agent", "AgentConfig", "AgentTask", "BM25Source", "Environment", "ModelCall", "PaperAudit", "PlanRevision",
    "PlanTips", "RankClaim", "RecordedGrade", "Rollout", "Selection", "Source", "SplitLeakError", "Step",
    "SuiteGrader", "Tool", "ToolCall", "ToolContext", "ToolError", "ToolUnavailable", "Trajectory", "VoteResult",
    "audit_paper_numbers", "config_hash", "describe_tools", "expand_query", "is_non_answer", "mine_tips",
    "paper_reported_df", "pick_best_score", "plot_paper_comparisons", "qa_tasks", "read_trajectories",
    "rollout_seed", "run_agent", "run_label", "search_passages", "suite_tasks", "trajectory_rows_df", "vote",
]
