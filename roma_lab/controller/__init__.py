"""The ROMA recursive controller: atomize -> plan -> execute -> aggregate, on a task tree.

``Roma`` runs the loop under a ``RomaSettings``; the ``roma_lab.trace.Run`` it returns carries the
settings it ran with. Long outputs can pass by reference through a ``roma_lab.tools.ArtifactStore``;
executors can call tools of ``roma_lab.tools.McpServer`` s; ``Roma.repair`` re-runs only what a run did
not complete. Default roles are DSPy modules (imported lazily: ``import roma_lab.controller`` does not
import DSPy); any callable with the same keyword contract can replace one, e.g. ``ScriptedRoles``.
The trace vocabulary is ``roma_lab.trace``'s and the tools are ``roma_lab.tools``': neither is ROMA's.
"""

from roma_lab.trace import TASK_TYPES, RomaSettings

from .._lazy import lazy_exports
from ._plan import PlanCheck, Subtask, validate_plan
from ._repair import RepairPlan, plan_repair
from ._roma import Roma, RoleError
from ._router_atomizer import RouterAtomizer
from ._scripted import CallLogEntry, ScriptedOutput, ScriptedRoles, fixed_latency_roles, tree_plans

# DSPy role modules, loaded on first access (PEP 562) because importing DSPy takes seconds.
_ROLE_NAMES = ("Aggregator", "Atomizer", "CodeExecutionError", "CodeExecutor", "Planner", "PlannedSubtask",
               "SearchExecutor", "ThinkExecutor", "ToolExecutor", "Verifier", "WriteExecutor", "default_executors")

__getattr__ = lazy_exports(__name__, "._roles", _ROLE_NAMES)


__all__ = [
    "TASK_TYPES",
    "CallLogEntry",
    "PlanCheck",
    "RepairPlan",
    "RoleError",
    "Roma",
    "RomaSettings",
    "RouterAtomizer",
    "ScriptedOutput",
    "ScriptedRoles",
    "Subtask",
    "fixed_latency_roles",
    "plan_repair",
    "tree_plans",
    "validate_plan",
    *_ROLE_NAMES,
]
