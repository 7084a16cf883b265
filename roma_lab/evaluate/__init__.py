"""Systems on tasks, side by side: the one way roma_lab runs systems on tasks.

``tasks_from`` reads tasks from a list of dicts, a DataFrame, a CSV / JSONL / Parquet file, a
registered benchmark (``"benchmark:seal0"``) or the generated world (``"world:dev"``); systems are
``single_call(lm)``, ``roma(lm, **settings)``, ``agent(AgentConfig(...), lm)`` or any callable;
``evaluate(systems, tasks, grader, runs=R, out=DIR)`` runs them (resumable, concurrent up to each
model's bound, traces saved) and returns an :class:`Evaluation` whose ``summary()`` and
``paired(a, b)`` are the results vocabulary's tables (task-bootstrap CIs, sign tests, MDE), whose
``facts()`` reads what tables need from the traces, and whose ``view`` / ``side_by_side`` open the
traces. Every paper table of ``roma_lab.papers`` is a view of one. ``python -m roma_lab.evaluate``
does the same from the shell. ``budget_usd`` caps the dollars an ``out`` folder's rows may cost.
See design/evaluate.md.
"""

from ._budget import BUDGET_ENV, BudgetReport, BudgetUnknownCostError, budget_usd_from_env, check_budget
from ._evaluate import evaluate
from ._evaluation import NOT_RUN, Evaluation
from ._log import LOG_FILE, ROW_COLUMNS, LogFileError, OldLayoutError
from ._record import EvaluationMismatchError
from ._schedule import SystemStalledError
from ._systems import (SYSTEM_NAMES, AgentSystem, FunctionSystem, RomaSystem, SingleCall, System, agent, as_system,
                       function, named_systems, roma, single_call)
from ._tasks import (MAX_FIELD_CHARS, MAX_TASK_FILE_BYTES, SHORT_ANSWER, TaskFileError, TaskGraders, TaskSet, agent_task_set,
                     benchmark_tasks, export_world_tasks, tasks_from, world_task_set)

__all__ = ["BUDGET_ENV", "LOG_FILE", "MAX_FIELD_CHARS", "MAX_TASK_FILE_BYTES", "NOT_RUN", "ROW_COLUMNS", "SHORT_ANSWER", "SYSTEM_NAMES",
           "AgentSystem", "BudgetReport", "BudgetUnknownCostError", "Evaluation", "EvaluationMismatchError",
           "FunctionSystem", "LogFileError", "OldLayoutError", "RomaSystem", "SingleCall", "System",
           "SystemStalledError", "TaskFileError", "TaskGraders", "TaskSet", "agent", "agent_task_set", "as_system", "benchmark_tasks",
           "budget_usd_from_env", "check_budget", "evaluate", "export_world_tasks", "function", "named_systems",
           "roma", "single_call", "tasks_from", "world_task_set"]
