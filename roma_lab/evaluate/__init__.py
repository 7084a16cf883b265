"""Your own tasks, any system, side by side: one evaluation API for a researcher's own questions.

``tasks_from`` reads tasks from a list of dicts, a DataFrame, a CSV / JSONL / Parquet file, a
registered benchmark (``"benchmark:seal0"``) or the generated world (``"world:dev"``); systems are
``single_call(lm)``, ``roma(lm, **settings)``, ``agent(AgentConfig(...), lm)`` or any callable;
``evaluate(systems, tasks, grader, runs=R, out=DIR)`` runs them (resumable, concurrent up to each
model's bound, traces saved) and returns an :class:`Evaluation` whose ``summary()`` and
``paired(a, b)`` are the results vocabulary's tables (task-bootstrap CIs, sign tests, MDE) and whose
``view`` / ``side_by_side`` open the traces. ``python -m roma_lab.evaluate`` does the same from the
shell. ``budget_usd`` caps the dollars an ``out`` folder's rows may cost. See design/evaluate.md.
"""

from ._budget import BUDGET_ENV, BudgetReport, BudgetUnknownCostError, budget_usd_from_env, check_budget
from ._evaluate import NOT_RUN, ROW_COLUMNS, Evaluation, EvaluationMismatchError, evaluate
from ._systems import (SYSTEM_NAMES, AgentSystem, FunctionSystem, RomaRunError, RomaSystem, RomaTimeoutError,
                       SingleCall, SingleCallAnswer, System, agent, as_system, function, named_systems, roma,
                       roma_output, single_call)
from ._tasks import (MAX_FIELD_CHARS, MAX_TASK_FILE_BYTES, TaskFileError, TaskSet, benchmark_tasks, export_world_tasks,
                     tasks_from, world_task_set)

__all__ = ["BUDGET_ENV", "NOT_RUN", "BudgetReport", "BudgetUnknownCostError", "budget_usd_from_env", "check_budget", "MAX_FIELD_CHARS", "MAX_TASK_FILE_BYTES", "ROW_COLUMNS", "SYSTEM_NAMES", "named_systems", "AgentSystem", "Evaluation", "EvaluationMismatchError", "FunctionSystem", "RomaRunError",
           "RomaSystem", "RomaTimeoutError", "SingleCall", "SingleCallAnswer", "System", "TaskFileError", "TaskSet",
           "agent", "as_system", "benchmark_tasks", "evaluate", "export_world_tasks", "function", "roma", "roma_output", "single_call", "tasks_from",
           "world_task_set"]
