"""The ROMA recursive controller: atomize -> plan -> execute -> aggregate, on a task tree.

``Roma`` runs the loop under a ``RomaSettings``; ``Run`` is the trace it returns (JSON round trip,
per-role usage table) and carries the settings it ran with. Long outputs can pass by reference
through an ``ArtifactStore``; executors can call tools of ``McpServer`` s; ``Roma.repair`` re-runs
only what a run did not complete.
Default roles are DSPy modules (imported lazily: ``import roma_lab.controller`` does not import
DSPy); any callable with the same keyword contract can replace one, e.g. ``ScriptedRoles``.
"""

from .._lazy import lazy_exports
from ._artifacts import (
    ArtifactCorruptedError,
    ArtifactError,
    ArtifactMissingError,
    ArtifactRef,
    ArtifactStore,
    UntrustedStoreError,
)
from ._plan import PlanCheck, Subtask, validate_plan
from ._repair import RepairPlan, plan_repair
from ._replay import ReplayedCall, ReplayedNode, ReplayedSchedule, replayed_schedule
from ._retrieval import BM25Retriever, EmptyCorpusError, Passage
from ._roma import Roma, RoleError
from ._router_atomizer import RouterAtomizer
from ._sandbox import ISOLATION_MODES, SandboxResult, SandboxUnavailableError, check_sandbox, run_python
from ._schedule import ScheduleBounds, schedule_bounds
from ._settings import TASK_TYPES, RomaSettings
from ._scripted import CallLogEntry, ScriptedOutput, ScriptedRoles, fixed_latency_roles, tree_plans
from ._tools import (
    McpServer,
    McpServerError,
    ToolCallError,
    ToolFailedError,
    ToolResultError,
    ToolServerGoneError,
    ToolTimeoutError,
    read_artifact,
    run_tools,
)
from ._values import jsonable
from ._types import (
    NODE_STATUSES,
    OUTPUT_STATUSES,
    RUN_STATUSES,
    TOOL_STATUSES,
    CallInFlight,
    InvalidRunError,
    LMExchange,
    Node,
    NodeEvent,
    RepairRecord,
    RoleCall,
    Run,
    ToolCall,
    run_status,
)

# DSPy role modules, loaded on first access (PEP 562) because importing DSPy takes seconds.
_ROLE_NAMES = ("Aggregator", "Atomizer", "CodeExecutionError", "CodeExecutor", "JSONRole", "Planner", "PlannedSubtask",
               "SearchExecutor", "ThinkExecutor", "ToolExecutor", "Verifier", "WriteExecutor", "default_executors")

__getattr__ = lazy_exports(__name__, "._roles", _ROLE_NAMES)


__all__ = [
    "ISOLATION_MODES",
    "NODE_STATUSES",
    "OUTPUT_STATUSES",
    "RUN_STATUSES",
    "TASK_TYPES",
    "TOOL_STATUSES",
    "ArtifactCorruptedError",
    "ArtifactError",
    "ArtifactMissingError",
    "ArtifactRef",
    "ArtifactStore",
    "BM25Retriever",
    "CallInFlight",
    "CallLogEntry",
    "EmptyCorpusError",
    "InvalidRunError",
    "LMExchange",
    "McpServer",
    "McpServerError",
    "Node",
    "NodeEvent",
    "Passage",
    "PlanCheck",
    "RepairPlan",
    "RepairRecord",
    "ReplayedCall",
    "ReplayedNode",
    "ReplayedSchedule",
    "RoleCall",
    "RoleError",
    "Roma",
    "RouterAtomizer",
    "RomaSettings",
    "Run",
    "SandboxResult",
    "SandboxUnavailableError",
    "ScheduleBounds",
    "ScriptedOutput",
    "ScriptedRoles",
    "Subtask",
    "ToolCall",
    "ToolCallError",
    "ToolFailedError",
    "ToolResultError",
    "ToolServerGoneError",
    "ToolTimeoutError",
    "UntrustedStoreError",
    "check_sandbox",
    "fixed_latency_roles",
    "plan_repair",
    "read_artifact",
    "replayed_schedule",
    "run_python",
    "run_status",
    "jsonable",
    "run_tools",
    "schedule_bounds",
    "tree_plans",
    "validate_plan",
    *_ROLE_NAMES,
]
