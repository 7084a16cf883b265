"""The settings of a ROMA run: one frozen object and the only place Roma's defaults are written.

``Roma`` and ``RomaProgram`` build it from their keyword arguments (or take one whole); every
``Run`` carries the settings it ran with, plus the model each role called. A bad value fails here,
where it is set. The JSON record keeps the shape run files had before this type existed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict

TASK_TYPES: tuple[str, ...] = ("search", "think", "write", "code")  # one executor per task type
# Keys of ``models``: the role keys a run resolves a model for.
MODEL_KEYS: tuple[str, ...] = ("atomizer", "planner", "aggregator", "verifier", *(f"executor:{t}" for t in TASK_TYPES))


@dataclass(frozen=True, slots=True)
class RomaSettings:
    """Bounds of a ROMA run, whether it verifies, and (on a finished run) the models it called.

    Args:
        max_depth: nodes at this depth are executed without asking the atomizer.
        max_concurrency: role calls in flight at once, over the whole tree.
        max_subtasks: longer plans are truncated (with a warning).
        call_timeout_s: a role call taking longer fails its node.
        run_timeout_s: whole-run deadline (``None``: none); the run then returns ``timed_out``.
        max_result_chars: each dependency result shown in a context is cut to this many
            characters, with a note saying how much was cut (``None``: never cut, as the first
            controller version did).
        ancestor_goals: a node's context names at most this many ancestor goals (nearest first) ...
        goal_chars: ... and every goal it names (ancestor or dependency) is cut to this length.
        verify: run the verifier role after every executor and aggregator.
        artifact_chars: a node output longer than this is written to the run's artifact store and
            reaches its dependents and parent as a reference plus a summary (``None``: outputs are
            always passed whole, as before artifacts existed). The root's output, the run's answer,
            is always kept whole. Needs an artifact store (``Roma(artifacts=...)``).
        summary_chars: the summary of an artifact output is its first this many characters.
        tool_timeout_s: a tool call (built-in or MCP) taking longer fails with a typed
            ``ToolTimeoutError``.
        mcp_start_timeout_s: an MCP server that has not started and listed its tools within this
            fails the run's root (a Python server on a busy machine takes seconds to import).
        max_tool_result_chars: a tool result (MCP or built-in) longer than this is cut, as a long
            dependency result is, before the model sees it; with an artifact store its whole text
            is kept there and named (``None``: never cut, as before this bound existed).
        plan_root: the root plans without asking the atomizer, whatever the goal (a multi-part goal
            a small model's atomizer calls atomic still shows the recursion); needs ``max_depth >= 1``.
        models: role key -> the model name that role called. Written by the run (``Run.settings``);
            a ``Roma`` chooses models with ``lm`` and ``role_lms``, so its own settings leave it empty.
    """

    max_depth: int = 2
    max_concurrency: int = 4
    max_subtasks: int = 8
    call_timeout_s: float = 600.0
    run_timeout_s: float | None = None
    max_result_chars: int | None = 2000  # the local engine's cap on one JSON string
    ancestor_goals: int = 3
    goal_chars: int = 200
    verify: bool = False
    artifact_chars: int | None = None
    summary_chars: int = 200
    tool_timeout_s: float = 30.0
    mcp_start_timeout_s: float = 60.0
    max_tool_result_chars: int | None = 2000  # as max_result_chars: what one observation may add to a prompt
    plan_root: bool = False
    models: Mapping[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ValueError("invalid ROMA settings: " + "; ".join(problems))
        # timeouts are floats whichever number was given; models cannot change behind a run's back
        for name in ("call_timeout_s", "run_timeout_s", "tool_timeout_s", "mcp_start_timeout_s"):
            value = getattr(self, name)
            object.__setattr__(self, name, None if value is None else float(value))
        object.__setattr__(self, "models", MappingProxyType(dict(self.models)))

    def __deepcopy__(self, memo: dict) -> RomaSettings:
        return self  # immutable (and a mappingproxy cannot be deep-copied): GEPA copies programs

    @classmethod
    def from_keywords(cls, settings: RomaSettings | None, keywords: Mapping[str, Any]) -> RomaSettings:
        """``settings`` (default: the defaults) with ``keywords`` applied, for choosing a run's
        bounds: how ``Roma(...)`` and ``RomaProgram(...)`` read their arguments."""
        if settings is None:
            settings = cls()
        elif not isinstance(settings, cls):
            raise TypeError(f"settings must be a RomaSettings, got {type(settings).__name__}")
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(keywords) - set(names))
        if unknown:
            raise TypeError(f"unknown settings {unknown}; valid: {[n for n in names if n != 'models']}")
        settings = replace(settings, **keywords)
        if settings.models:
            raise ValueError("settings.models records the models a run called; choose models with lm= and "
                             "role_lms= (to reuse a run's bounds: dataclasses.replace(run.settings, models={}))")
        return settings

    # --- JSON record: the shape run files have always had ---

    def record(self) -> dict[str, Any]:
        """The settings as written in a run file."""
        return {
            "max_depth": self.max_depth,
            "max_concurrency": self.max_concurrency,
            "max_subtasks": self.max_subtasks,
            "call_timeout_s": self.call_timeout_s,
            "run_timeout_s": self.run_timeout_s,
            "context": {"ancestor_goals": self.ancestor_goals, "goal_chars": self.goal_chars,
                        "result_chars": self.max_result_chars},
            "verifier": self.verify,
            "artifacts": {"min_chars": self.artifact_chars, "summary_chars": self.summary_chars},
            # result_chars only when set: a file without it (older, or never cutting) reads as None
            "tools": {"call_timeout_s": self.tool_timeout_s, "mcp_start_timeout_s": self.mcp_start_timeout_s,
                      **({} if self.max_tool_result_chars is None else {"result_chars": self.max_tool_result_chars})},
            "models": dict(self.models),
            # only when set: a file without it (older, or never forcing) reads as False
            **({"plan_root": True} if self.plan_root else {}),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> RomaSettings:
        """Read :meth:`record` back (``ValueError`` if it is not one). Records of the first
        controller version (7b3b201) have neither ``run_timeout_s`` nor ``context``: those runs
        had no deadline and did not cut dependency results. Records written before artifacts and
        tools (f08eb8c and earlier) have neither ``artifacts`` nor ``tools``: those runs
        passed every output whole and called no tool. Records without ``tools.result_chars``
        were written before tool results were cut: their tool results were never cut."""
        if "run_timeout_s" not in record and "context" not in record:
            record = {**record, **_FIRST_VERSION}
        if "artifacts" not in record and "tools" not in record:
            record = {**record, **_BEFORE_ARTIFACTS}
        r = _Record.model_validate(record)
        return cls(max_depth=r.max_depth, max_concurrency=r.max_concurrency, max_subtasks=r.max_subtasks,
                   call_timeout_s=r.call_timeout_s, run_timeout_s=r.run_timeout_s,
                   max_result_chars=r.context.result_chars, ancestor_goals=r.context.ancestor_goals,
                   goal_chars=r.context.goal_chars, verify=r.verifier, artifact_chars=r.artifacts.min_chars,
                   summary_chars=r.artifacts.summary_chars, tool_timeout_s=r.tools.call_timeout_s,
                   mcp_start_timeout_s=r.tools.mcp_start_timeout_s, max_tool_result_chars=r.tools.result_chars,
                   plan_root=r.plan_root, models=r.models)


_FIRST_VERSION = {"run_timeout_s": None, "context": {"ancestor_goals": 3, "goal_chars": 200, "result_chars": None}}
_BEFORE_ARTIFACTS = {"artifacts": {"min_chars": None, "summary_chars": 200},
                     "tools": {"call_timeout_s": 30.0, "mcp_start_timeout_s": 60.0}}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _problems(s: RomaSettings) -> list[str]:
    """Every bad value of ``s`` (empty list = valid)."""
    problems = []
    optional_ints = ("max_result_chars", "artifact_chars", "max_tool_result_chars")
    for name, low in (("max_depth", 0), ("max_concurrency", 1), ("max_subtasks", 1), ("ancestor_goals", 0),
                      ("goal_chars", 1), ("max_result_chars", 1), ("artifact_chars", 0), ("summary_chars", 1),
                      ("max_tool_result_chars", 1)):
        value = getattr(s, name)
        if name in optional_ints and value is None:
            continue
        if not _is_int(value) or value < low:
            optional = " or None" if name in optional_ints else ""
            problems.append(f"{name} must be an integer >= {low}{optional}, got {value!r}")
    for name, optional in (("call_timeout_s", False), ("run_timeout_s", True), ("tool_timeout_s", False),
                           ("mcp_start_timeout_s", False)):
        value = getattr(s, name)
        if not (value is None and optional or isinstance(value, (int, float)) and not isinstance(value, bool)
                and 0 < value < math.inf):
            problems.append(f"{name} must be a finite number > 0{' or None' if optional else ''}, got {value!r}")
    if not isinstance(s.verify, bool):
        problems.append(f"verify must be True or False, got {s.verify!r}")
    if not isinstance(s.plan_root, bool):
        problems.append(f"plan_root must be True or False, got {s.plan_root!r}")
    elif s.plan_root and _is_int(s.max_depth) and s.max_depth < 1:
        problems.append("plan_root needs max_depth >= 1: at depth 0 the root is executed, not planned")
    if not isinstance(s.models, Mapping):
        problems.append(f"models must map role keys to model names, got {type(s.models).__name__}")
    else:
        bad_keys = sorted(str(k) for k in s.models if k not in MODEL_KEYS)
        if bad_keys:
            problems.append(f"unknown models keys {bad_keys}; valid: {list(MODEL_KEYS)}")
        bad_names = sorted(str(k) for k, v in s.models.items() if v is not None and not isinstance(v, str))
        if bad_names:
            problems.append(f"models of {bad_names} must be names (str) or None")
    return problems


# --- JSON boundary ---

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _ContextRecord(_Strict):
    ancestor_goals: int
    goal_chars: int
    result_chars: int | None


class _ArtifactsRecord(_Strict):
    min_chars: int | None
    summary_chars: int


class _ToolsRecord(_Strict):
    call_timeout_s: float
    mcp_start_timeout_s: float
    result_chars: int | None = None  # files written before tool results were cut: never cut


class _Record(_Strict):
    max_depth: int
    max_concurrency: int
    max_subtasks: int
    call_timeout_s: float
    run_timeout_s: float | None
    context: _ContextRecord
    verifier: bool
    artifacts: _ArtifactsRecord
    tools: _ToolsRecord
    models: dict[str, str | None]
    plan_root: bool = False
