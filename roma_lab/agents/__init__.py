"""OAgents' design choices as one switchable, tested tool-using agent, and its offline tool benchmarks.

``AgentConfig`` holds every choice of the OAgents study (planning, memory, test-time scaling,
search, re-answering, per-role models); ``Agent(config).run(task)`` returns a ``roma_lab.trace.Trajectory``,
whose calls are the controller's ``RoleCall`` / ``ToolCall`` and which ``as_run()`` gives as a ROMA
``Run``; ``roma_lab.evaluate`` runs a configuration over tasks x R runs (``evaluate.agent(config)``),
with resumable, tidy rows. Tasks come from
``suite_tasks`` (the 504-task meta-routing suite, its operations as tools, graded exactly) or
``qa_tasks`` (benchmark items from ``roma_lab.bench`` with their graders) or ``world_tasks`` (the
generated world: search, ledger files and Python, GAIA's quasi-exact grader, with ``floors_df``
showing what fixed scripts score on it). The OAgents paper's
studies and its numbers' audit (notebooks 20-29) are ``roma_lab.papers.oagents``. See design/agents.md.
"""

from ._agent import STATIC_WORKFLOW, Agent, sampling_seed
from ._config import (MEMORY, PLANNING, QUERY_OPTIMIZATION, ROLES, SELECTION, TTS, AgentConfig, PlanTips, config_hash,
                      run_label)
from ._env import AgentTask, Environment, Tool, ToolContext, ToolError, ToolUnavailable, describe_tools
from ._qa import READ_PAGE, BM25Source, Source, WebSource, expand_query, qa_tasks, search_passages
from ._select import is_non_answer, pick_best_score
from ._tips import SplitLeakError, check_tips, mine_tips
from ._toolbench import SUITE_BENCHMARK, SUITE_TOOLS, SuiteGrader, sample_suite_tasks, suite_tasks
from ._worldbench import (FLOORS, WORLD_GRADERS, WORLD_TOOLS, ExactGrader, closed_book, floor_answers, floors_df,
                          floors_table, world_level, world_tasks)

__all__ = [
    "MEMORY", "PLANNING", "QUERY_OPTIMIZATION", "READ_PAGE", "ROLES",
    "SELECTION", "STATIC_WORKFLOW", "SUITE_BENCHMARK", "SUITE_TOOLS", "TTS",
    "Agent", "AgentConfig", "AgentTask", "BM25Source", "Environment",
    "PlanTips", "Source", "SplitLeakError", "WebSource",
    "SuiteGrader", "Tool", "ToolContext", "ToolError", "ToolUnavailable",
    "check_tips", "config_hash", "describe_tools", "expand_query", "is_non_answer", "mine_tips", "pick_best_score",
    "qa_tasks", "run_label", "sampling_seed", "sample_suite_tasks", "search_passages",
    "suite_tasks", "FLOORS", "WORLD_GRADERS", "WORLD_TOOLS", "ExactGrader", "closed_book", "floor_answers",
    "floors_df", "floors_table", "world_level", "world_tasks",
]
