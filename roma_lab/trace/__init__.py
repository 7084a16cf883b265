"""The one trace vocabulary: what a run of any system records, and its serializer.

A :class:`Run` is a flat tuple of :class:`Node` s (parent links give the tree); every model call is a
:class:`RoleCall` (its requests :class:`LMExchange` s), every tool call a :class:`ToolCall`. ROMA writes
one node per subtask; the tool-using agent's trajectory is shown as a run of the same vocabulary
(``Trajectory.as_run``); a single call is a one-node run. ``jsonable`` is the one serializer of
recorded values; ``RomaSettings`` is the record of the bounds a run ran under, saved in its file.
``replayed_schedule`` and ``schedule_bounds`` read a run's timeline back. Nothing here runs a model
or a tool: ``roma_lab.controller`` and ``roma_lab.agents`` write these records, ``roma_lab.tools``
holds what their tools call, ``roma_lab.widgets`` draws them.
"""

from ._artifact_ref import SHA256_HEX, ArtifactRef
from ._evidence import NO_EVIDENCE, without_evidence
from ._replay import ReplayedCall, ReplayedNode, ReplayedSchedule, replayed_schedule
from ._schedule import ScheduleBounds, schedule_bounds
from ._settings import MODEL_KEYS, TASK_TYPES, RomaSettings
from ._types import (
    NO_OUTPUT_STATUSES,
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
    RunStatus,
    ToolCall,
    ToolStatus,
    run_status,
)
from ._values import clip, context_chars, jsonable, reference, show

__all__ = [
    "MODEL_KEYS",
    "NODE_STATUSES",
    "NO_EVIDENCE",
    "NO_OUTPUT_STATUSES",
    "OUTPUT_STATUSES",
    "RUN_STATUSES",
    "SHA256_HEX",
    "TASK_TYPES",
    "TOOL_STATUSES",
    "ArtifactRef",
    "CallInFlight",
    "InvalidRunError",
    "LMExchange",
    "Node",
    "NodeEvent",
    "RepairRecord",
    "ReplayedCall",
    "ReplayedNode",
    "ReplayedSchedule",
    "RoleCall",
    "RomaSettings",
    "Run",
    "RunStatus",
    "ScheduleBounds",
    "ToolCall",
    "ToolStatus",
    "clip",
    "context_chars",
    "jsonable",
    "reference",
    "replayed_schedule",
    "run_status",
    "schedule_bounds",
    "show",
    "without_evidence",
]
