"""The one trace vocabulary: what a run of any system records, and its serializer.

A :class:`Run` is a flat tuple of :class:`Node` s (parent links give the tree); every model call is a
:class:`RoleCall` (its requests :class:`LMExchange` s), every tool call a :class:`ToolCall`. ROMA writes
one node per subtask; a single call is a one-node run (:func:`single_call_run`); the tool-using agent
records a :class:`Trajectory` (its rollouts and steps), shown as a run of the same vocabulary
(``Trajectory.as_run``). Every saved trace names its kind; :func:`load_trace` reads any of them and
:func:`trace_path` says where a runner saves one. ``usage()`` totals a trace's model calls by one rule,
``facts()`` gives what a table needs beyond a row. ``jsonable`` is the one serializer of
recorded values; ``RomaSettings`` is the record of the bounds a run ran under, saved in its file.
``replayed_schedule`` and ``schedule_bounds`` read a run's timeline back. Nothing here runs a model
or a tool: ``roma_lab.controller`` and ``roma_lab.agents`` write these records, ``roma_lab.tools``
holds what their tools call, ``roma_lab.widgets`` draws them.
"""

from ._artifact_ref import SHA256_HEX, ArtifactRef
from ._evidence import MIN_SUPPORT, NO_EVIDENCE, answer_support, without_evidence
from ._load import TRACE_KINDS, Trace, load_trace, read_trajectories, saved_trace_text, trace_path
from ._replay import ReplayedCall, ReplayedNode, ReplayedSchedule, replayed_schedule
from ._schedule import ScheduleBounds, schedule_bounds
from ._settings import MODEL_KEYS, TASK_TYPES, RomaSettings
from ._single import SINGLE_CALL_ROLE, single_call_run
from ._trajectory import (ROLLOUT_STATUSES, TRAJECTORY_KIND, PlanRevision, RecordedGrade, Rollout, Selection, Step,
                          Trajectory, TrajectoryFormatError, read_trajectory)
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
    RomaRunError,
    RomaTimeoutError,
    Run,
    RunStatus,
    ToolCall,
    ToolStatus,
    Usage,
    run_status,
)
from ._values import clip, context_chars, jsonable, reference, show

__all__ = [
    "MODEL_KEYS",
    "NODE_STATUSES",
    "ROLLOUT_STATUSES",
    "SINGLE_CALL_ROLE",
    "TRACE_KINDS",
    "TRAJECTORY_KIND",
    "PlanRevision",
    "RecordedGrade",
    "Rollout",
    "Selection",
    "Step",
    "Trace",
    "Trajectory",
    "TrajectoryFormatError",
    "Usage",
    "load_trace",
    "read_trajectories",
    "read_trajectory",
    "saved_trace_text",
    "single_call_run",
    "trace_path",
    "MIN_SUPPORT",
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
    "RomaRunError",
    "RomaTimeoutError",
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
    "answer_support",
    "without_evidence",
]
