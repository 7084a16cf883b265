"""The record of a ROMA run: frozen dataclasses in memory, pydantic only for the JSON file.

A :class:`Run` is a flat tuple of :class:`Node` s (parent links give the tree) and every node keeps
the :class:`RoleCall` s made for it, so usage sums over the tree count each model call exactly once.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from types import UnionType
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from ._artifact_ref import SHA256_HEX, ArtifactRef
from ._settings import RomaSettings
from ._values import MAX_VALUE_DEPTH, jsonable

if TYPE_CHECKING:
    import pandas as pd

#: The ``kind`` a saved run names first: every saved trace names its kind (an agent's is "trajectory", a
#: single call's "single_call"), so a reader never tells traces apart by their keys.
RUN_KIND = "run"

ROLES: tuple[str, ...] = ("atomizer", "planner", "executor", "aggregator", "verifier")

RunStatus = Literal["completed", "partial", "failed", "timed_out", "interrupted"]
# ``ok``: the tool returned. ``error``: it ran and reported (or raised) an error. ``timed_out``: no answer
# within ``tool_timeout_s``. ``disconnected``: its MCP server was gone. ``malformed``: the answer broke
# the protocol (e.g. structured content that does not match the tool's declared output schema).
ToolStatus = Literal["ok", "error", "timed_out", "disconnected", "malformed"]
TOOL_STATUSES: tuple[str, ...] = get_args(ToolStatus)
NodeStatus = Literal["pending", "running", "completed", "degraded", "unverified", "failed", "skipped", "cancelled"]
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
NODE_STATUSES: tuple[str, ...] = get_args(NodeStatus)
# A node that ended with one of these has an output: its dependents run and its parent aggregates it.
# ``degraded``: the planner gave no usable plan twice, so the goal was executed directly.
# ``unverified``: the verifier rejected both attempts; the last one is kept.
OUTPUT_STATUSES: tuple[str, ...] = ("completed", "degraded", "unverified")
# Ended without an output; ``error`` says why. ``cancelled``: the run stopped (deadline or interrupt).
NO_OUTPUT_STATUSES: tuple[str, ...] = ("failed", "skipped", "cancelled")
STOPPED_RUN_STATUSES: tuple[str, ...] = ("timed_out", "interrupted")


class InvalidRunError(ValueError):
    """A run (built in memory or read from JSON) breaks an invariant of the trace format."""


class RomaRunError(RuntimeError):
    """A run's root task failed: its answer is this error (a system error row; the trace is kept)."""


class RomaTimeoutError(TimeoutError):
    """A run reached its deadline without an answer (``timed_out``; the trace is kept). A TimeoutError,
    so that a runner's stall guard counts it: a model that stopped answering stops the run after a few
    tasks instead of spending every task's deadline."""


def run_status(nodes: tuple[Node, ...]) -> RunStatus:
    """The status of a run that was not stopped: ``failed`` if the root has no output, ``completed``
    if every node completed, else ``partial`` (some node failed, was skipped, degraded or unverified)."""
    if nodes[0].status not in OUTPUT_STATUSES:
        return "failed"
    return "completed" if all(n.status == "completed" for n in nodes) else "partial"


@dataclass(frozen=True, slots=True)
class LMExchange:
    """One request a role call sent to its model: the messages as sent and the completions that came
    back. ``cached``: served from a completion cache, so no model ran and the call's latency is a
    lookup time. ``recorded_latency_s``: how long generating the completion took when it was
    recorded, as roma_lab's completion cache stores it, and ``recorded_at`` when (Unix seconds; each
    None: a live request, or an entry or cache that recorded no time)."""

    messages: tuple[dict[str, Any], ...]
    completions: tuple[Any, ...]  # text, or a provider's structured output
    cached: bool
    recorded_latency_s: float | None = None
    recorded_at: float | None = None

    @classmethod
    def from_history(cls, history: Sequence[Mapping[str, Any]]) -> tuple[LMExchange, ...]:
        """The model requests of one call, from its LM's history entries: the messages as sent (or a
        bare prompt) and their completions. One reader for the controller's role calls and the agent's."""
        from roma_lab.lm import served_from_cache

        exchanges = []
        for h in history:
            messages = h.get("messages") or ([{"role": "user", "content": h["prompt"]}] if h.get("prompt") else [])
            cached = served_from_cache(h)
            marks = getattr(h.get("response"), "provider_data", None)  # lm/_cache.py's mark
            recorded, at = (_number(marks.get(k)) if cached and isinstance(marks, Mapping) else None
                            for k in ("latency_s", "recorded_at"))
            exchanges.append(cls(messages=tuple(jsonable(list(messages))),
                                 completions=tuple(jsonable(list(h.get("outputs") or []))),
                                 cached=cached, recorded_latency_s=recorded, recorded_at=at))
        return tuple(exchanges)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call a role made: a built-in tool (``server`` None) or one of an MCP server's.
    ``result_chars`` is the size of the result as text (``None`` when there is no result: every
    status but ``ok``); ``error`` says what went wrong (``None`` exactly when ``ok``). Times are in
    seconds; ``started_s`` on the run's clock. A result longer than ``max_tool_result_chars`` was cut:
    ``shown_chars`` is what the model was shown instead (``None``: the whole result) and
    ``artifact`` the id of the artifact holding the whole text (``None``: the run had no store).
    ``cost``: what the call was billed in USD (a web search's price; 0 for a tool that bills nothing;
    ``None``: unknown, never 0). ``replayed``: served from a recording (the recorded web), no request
    made."""

    name: str
    server: str | None
    arguments: dict[str, Any]
    status: ToolStatus
    result_chars: int | None
    latency_s: float
    started_s: float
    error: str | None = None
    shown_chars: int | None = None
    artifact: str | None = None
    cost: float | None = 0.0
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class RoleCall:
    """One call of one role for one node.

    ``role`` is ``atomizer``, ``planner``, ``executor:<task_type>``, ``aggregator`` or ``verifier``.
    ``inputs`` are the role's keyword arguments except ``goal``, which is always the node's goal
    (kept once, on the node). Tokens and cost are what the LM reported for this call, a failed call
    included; ``None`` means unknown (a timed-out call whose thread had not finished when the run
    ended; a provider that gave no price). ``context_chars`` is the size of everything the role was
    shown, goal included. ``queued_s`` is when the call asked for one of ``max_concurrency`` slots
    and ``started_s`` when it got one (both in seconds since the run started; ``queued_s`` is
    ``None`` in files written before it was recorded). ``exchanges`` are the model requests the call
    made, full prompts and completions (empty for a role without a recorded model, and for a call
    that timed out). ``tools`` are the tool calls the role made during the call, in order.
    """

    role: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    context_chars: int
    input_tokens: int | None
    output_tokens: int | None
    cost: float | None
    latency_s: float
    started_s: float  # seconds since the run started, for Gantt views
    model: str | None = None
    error: str | None = None
    queued_s: float | None = None
    exchanges: tuple[LMExchange, ...] = ()
    tools: tuple[ToolCall, ...] = ()

    @property
    def cached(self) -> bool | None:
        """True when every model request of this call was served from a cache, False when any ran the
        model, None when the call recorded no model request."""
        return all(e.cached for e in self.exchanges) if self.exchanges else None


@dataclass(frozen=True, slots=True)
class CallInFlight:
    """The role call a running node is in: waiting for a concurrency slot (``started_s`` None) or
    holding one. Live state only: a finished run has none."""

    role: str
    queued_s: float
    started_s: float | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """One task in the execution tree. ``depends_on`` holds ids of earlier siblings. ``error`` says
    why a node has no output (failed, skipped, cancelled) or why its output is degraded/unverified.

    Times are seconds since the run started: ``created_s`` when its parent planned it (the root: 0),
    ``started_s`` when its dependencies had ended and it began (``None``: it never began),
    ``ended_s`` when it reached its final status (all ``None`` in files written before they were
    recorded). ``in_flight`` is the role call it is in while it runs (see :class:`CallInFlight`).

    ``artifact``: the node's full output is in the run's artifact store under this reference and
    ``output`` holds its bounded summary (what dependents and the parent were shown). ``reused``:
    a repair took this node, with its output, from the run it repaired; it made no call in this
    run (its calls are in that run) and its times are not recorded (``None``)."""

    id: str
    parent_id: str | None
    depth: int
    goal: str
    task_type: str
    status: NodeStatus = "pending"
    output: str | None = None
    depends_on: tuple[str, ...] = ()
    error: str | None = None
    warnings: tuple[str, ...] = ()
    forced_atomic: bool = False
    is_atomic: bool | None = None
    calls: tuple[RoleCall, ...] = ()
    created_s: float | None = None
    started_s: float | None = None
    ended_s: float | None = None
    in_flight: CallInFlight | None = None
    artifact: ArtifactRef | None = None
    reused: bool = False


@dataclass(frozen=True, slots=True)
class RepairRecord:
    """What a repaired run was repaired from: the SHA-256 of that run's JSON text (``to_json``; it is
    also the key under which the repair kept a copy in its artifact store, when it had one), its
    status, and the statuses that were re-executed. Which nodes were reused is on the nodes."""

    source_sha256: str
    source_status: RunStatus
    redone: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """Sent to the live observer whenever a node changes (``kind`` = the node's new status)."""

    kind: NodeStatus
    node: Node


@dataclass(frozen=True, slots=True)
class Usage:
    """What a trace's model calls consumed in all (``Run.usage``): a sum with an unknown term is unknown
    (None), never 0, and a trace without a model call has an unknown cost. ``replayed_calls``: calls
    served from a completion cache (no model ran)."""

    model_calls: int
    input_tokens: int | None
    output_tokens: int | None
    cost: float | None
    replayed_calls: int


def _known_sum(values: list[Any]) -> Any:
    return None if any(v is None for v in values) else sum(values)


@dataclass(frozen=True, slots=True)
class Run:
    """A finished run; construction checks the trace's invariants (:class:`InvalidRunError`).

    ``status``: ``completed`` only if every node completed; ``partial`` if the root has an output but
    some node failed, was skipped, degraded or unverified; ``failed`` if the root has no output;
    ``timed_out`` / ``interrupted`` if the run was stopped (its unfinished nodes are ``cancelled``).
    ``settings``: what the run ran with, including the model each role called (``None``: not
    recorded, as for a run built by hand). ``artifact_store``: the URL of the store holding its
    nodes' artifacts (``None``: it stored none). ``repair``: set on a run made by ``Roma.repair``.
    """

    goal: str
    status: RunStatus
    output: str | None
    nodes: tuple[Node, ...]
    wall_s: float
    settings: RomaSettings | None = None
    artifact_store: str | None = None
    repair: RepairRecord | None = None

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise InvalidRunError("invalid run: " + "; ".join(problems))

    @property
    def root(self) -> Node:
        return self.nodes[0]

    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"no node {node_id!r} in this run")

    def children(self, node_id: str) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.parent_id == node_id)

    def calls_df(self) -> pd.DataFrame:
        """One row per role call (tidy): node, depth, role, tokens, cost (the model's; ``tool_cost``: what
        its tool calls were billed), latency, context size, how
        many tool calls it made and how many of those failed, and whether it was replayed from a
        completion cache (``cached``: no model ran). Unknown tokens are <NA> and unknown cost NaN."""
        import pandas as pd

        rows = [
            {
                "node_id": n.id,
                "depth": n.depth,
                "task_type": n.task_type,
                "role": c.role,
                "component": c.role.split(":")[0],
                "model": c.model,
                "input_tokens": c.input_tokens,
                "output_tokens": c.output_tokens,
                "cost": c.cost,
                "latency_s": c.latency_s,
                "started_s": c.started_s,
                "context_chars": c.context_chars,
                "tool_calls": len(c.tools),
                "tool_errors": sum(t.status != "ok" for t in c.tools),
                "tool_cost": _known_sum([t.cost for t in c.tools]),
                "cached": c.cached is True,
                "error": c.error,
            }
            for n in self.nodes
            for c in n.calls
        ]
        columns = ["node_id", "depth", "task_type", "role", "component", "model", "input_tokens",
                   "output_tokens", "cost", "latency_s", "started_s", "context_chars", "tool_calls", "tool_errors",
                   "tool_cost", "cached", "error"]
        return pd.DataFrame(rows, columns=columns).astype(
            {"cost": float, "tool_cost": float, "input_tokens": "Int64", "output_tokens": "Int64"})

    def usage_df(self) -> pd.DataFrame:
        """Per-component usage in the layout of the ROMA paper's Table 5, plus a Total row, with the
        tool calls the component's role calls made (and how many failed).

        A sum with any unknown term is unknown: cost NaN, tokens <NA> (unknown is not zero).
        """
        import pandas as pd

        calls = self.calls_df()
        present = list(dict.fromkeys(calls["component"]))  # in order of first call
        # ROMA's roles in their order, then any other component (an agent trajectory's roles, Trajectory.as_run)
        order = [r for r in ROLES if r in present] + [c for c in present if c not in ROLES]
        groups = [(c, calls[calls["component"] == c]) for c in order] + [("total", calls)]
        table = pd.DataFrame([{
            "component": component,
            "calls": len(part),
            # what the model calls cost and what their tool calls were billed (a web search's price)
            "cost": (part["cost"] + part["tool_cost"]).sum(skipna=False) if len(part) else math.nan,
            "input_tokens": part["input_tokens"].sum(skipna=False),
            "output_tokens": part["output_tokens"].sum(skipna=False),
            "latency_s": part["latency_s"].sum(),
            "tool_calls": part["tool_calls"].sum(),
            "tool_errors": part["tool_errors"].sum(),
            "replayed_calls": part["cached"].sum(),  # served from the completion cache: a replay, not a run
        } for component, part in groups])
        return table.astype({"calls": int, "cost": float, "input_tokens": "Int64", "output_tokens": "Int64",
                             "tool_calls": int, "tool_errors": int, "replayed_calls": int})

    def final_answer(self) -> str:
        """The run's answer, or the typed error a runner records for it (:class:`RomaTimeoutError` for a
        run stopped at its deadline, :class:`RomaRunError` for one whose root has no output)."""
        if self.status == "timed_out" and self.output is None:
            raise RomaTimeoutError(f"ROMA run timed_out: {self.root.error}")
        if self.status == "failed" or self.output is None:
            raise RomaRunError(f"ROMA run {self.status}: {self.root.error}")
        return self.output

    def usage(self) -> Usage:
        """The total of :meth:`usage_df`, without building a table (a runner reads it once per row): the
        model calls' cost and what their tool calls were billed (a web search's price)."""
        calls = [c for n in self.nodes for c in n.calls]
        costs = [c.cost for c in calls] + [t.cost for c in calls for t in c.tools]
        return Usage(model_calls=len(calls), input_tokens=_known_sum([c.input_tokens for c in calls]),
                     output_tokens=_known_sum([c.output_tokens for c in calls]),
                     cost=float(_known_sum(costs)) if calls and None not in costs else None,
                     replayed_calls=sum(c.cached is True for c in calls))

    def facts(self) -> dict[str, Any]:
        """What a table may need of this run beyond its row (the run's status, size and time)."""
        return {"run_status": self.status, "nodes": len(self.nodes), "max_depth": max(n.depth for n in self.nodes),
                "root_atomic": self.root.is_atomic, "wall_s": self.wall_s}

    def tools_df(self) -> pd.DataFrame:
        """One row per tool call (tidy): the node and role that made it, the tool, its server (empty
        for a built-in tool), its arguments as JSON, status, result size, latency and error."""
        import pandas as pd

        rows = [
            {"node_id": n.id, "role": c.role, "tool": t.name, "server": t.server,
             "arguments": json.dumps(t.arguments, ensure_ascii=False, sort_keys=True), "status": t.status,
             "result_chars": t.result_chars, "latency_s": t.latency_s, "started_s": t.started_s, "error": t.error}
            for n in self.nodes for c in n.calls for t in c.tools
        ]
        columns = ["node_id", "role", "tool", "server", "arguments", "status", "result_chars", "latency_s",
                   "started_s", "error"]
        return pd.DataFrame(rows, columns=columns).astype({"result_chars": "Int64"})

    def to_json(self) -> str:
        """The run as JSON text that any run can be saved as: the goal is stored once (on the root),
        non-finite floats are refused by the invariants, and lone surrogates are written as escapes."""
        data = _RunModel.model_validate({
            "kind": RUN_KIND, "status": self.status, "output": self.output, "nodes": [_node_record(n) for n in self.nodes],
            "wall_s": self.wall_s, "settings": {} if self.settings is None else self.settings.record(),
            "artifact_store": self.artifact_store, "repair": None if self.repair is None else asdict(self.repair),
        }).model_dump(mode="json", exclude={"goal"})
        data = {"kind": data.pop("kind"), **data}  # first, so a reader tells the trace's kind at a glance
        text = json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False)
        # json.dumps keeps a lone surrogate (e.g. from a model's broken UTF-16) as a raw code point,
        # which UTF-8 cannot encode; its JSON escape reads back to the same string.
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)

    @classmethod
    def from_json(cls, text: str | bytes) -> Run:
        """Read :meth:`to_json` text back, or a saved trace file (the task id it records is the file's,
        ``roma_lab.trace.saved_trace_text``, not the run's); any malformed or inconsistent trace is an
        :class:`InvalidRunError` (never a run that breaks the invariants)."""
        try:
            data = json.loads(text)
            if isinstance(data, dict):
                data.pop("task_id", None)
            m = _RunModel.model_validate(data)
            # {}: a run built by hand, saved without settings
            settings = RomaSettings.from_record(m.settings) if m.settings else None
        except (ValueError, ValidationError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise InvalidRunError(f"not a ROMA run trace: {err}") from err
        except RecursionError:  # json's reader stops near 1,000 levels; a run file nests about 110
            raise InvalidRunError(f"not a ROMA run trace: it nests deeper than a run file does (a recorded value "
                                  f"holds at most {MAX_VALUE_DEPTH} levels)") from None
        nodes = tuple(
            Node(**{**n.model_dump(exclude={"calls", "artifact"}), "calls": tuple(
                RoleCall(**{**c.model_dump(exclude={"exchanges", "tools"}),
                            "exchanges": tuple(LMExchange(**e.model_dump()) for e in c.exchanges),
                            "tools": tuple(ToolCall(**t.model_dump()) for t in c.tools)})
                for c in n.calls), "artifact": None if n.artifact is None else ArtifactRef(**n.artifact.model_dump())})
            for n in m.nodes
        )
        if not nodes:
            raise InvalidRunError("invalid run: a run has at least its root node")
        if m.goal is not None and m.goal != nodes[0].goal:  # files written before the goal was stored once
            raise InvalidRunError("invalid run: its goal differs from the root node's goal")
        repair = None if m.repair is None else RepairRecord(**m.repair.model_dump())
        return cls(**{**m.model_dump(exclude={"kind", "nodes", "goal", "settings", "repair"}), "goal": nodes[0].goal,
                      "nodes": nodes, "settings": settings, "repair": repair})


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _node_record(node: Node) -> dict[str, Any]:
    record = asdict(node)
    del record["in_flight"]  # live state; a valid finished run has none
    return record


def _number(x: object) -> float | None:
    """``x`` as a float when it is a real number (not a bool), else None."""
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _finite(x: float | None, low: float = 0.0) -> bool:
    return x is None or (math.isfinite(x) and x >= low)


def _problems(run: Run) -> list[str]:
    """Every broken invariant of ``run`` (empty list = valid)."""
    if not run.nodes:
        return ["a run has at least its root node"]
    problems = []
    if not isinstance(run.settings, RomaSettings | None):
        problems.append(f"settings must be a RomaSettings or None, got {type(run.settings).__name__}")
    root = run.root
    by_id = {n.id: n for n in run.nodes}
    repeated = sorted(i for i, k in Counter(n.id for n in run.nodes).items() if k > 1)
    if repeated:
        problems.append(f"repeated node ids {repeated}")
    if root.parent_id is not None or root.depth != 0:
        problems.append("the first node must be the root (no parent, depth 0)")
    if run.goal != root.goal or run.output != root.output:
        problems.append("the run's goal and output must be the root's")
    if not math.isfinite(run.wall_s) or run.wall_s < 0:
        problems.append(f"wall_s must be a finite number >= 0, got {run.wall_s!r}")
    if run.status not in RUN_STATUSES:
        problems.append(f"unknown run status {run.status!r}")
    earlier: dict[str | None, set[str]] = {}  # the siblings met so far: a plan depends only on earlier ones
    for n in run.nodes:
        parent = by_id.get(n.parent_id) if n.parent_id is not None else None
        if n is not root and (parent is None or n.depth != parent.depth + 1):
            problems.append(f"node {n.id}: parent {n.parent_id!r} is not in the run one level up")
        strangers = set(n.depends_on) - earlier.setdefault(n.parent_id, set())
        if strangers:
            problems.append(f"node {n.id}: depends on {sorted(strangers)}, which are not its siblings planned "
                            "before it")
        earlier[n.parent_id].add(n.id)
        if n.status in OUTPUT_STATUSES and not isinstance(n.output, str):
            problems.append(f"node {n.id} is {n.status} without an output")
        elif n.status not in OUTPUT_STATUSES and n.output is not None:
            problems.append(f"node {n.id} is {n.status} but has an output")
        if n.status in (*NO_OUTPUT_STATUSES, "degraded", "unverified") and not n.error:
            problems.append(f"node {n.id} is {n.status} without saying why (error)")
        if n.status not in NODE_STATUSES or n.status in ("pending", "running"):
            problems.append(f"node {n.id} has status {n.status!r}: a finished run has no pending or running node")
        if n.in_flight is not None:
            problems.append(f"node {n.id} is still in a {n.in_flight.role} call: a finished run has none")
        times = [t for t in (n.created_s, n.started_s, n.ended_s) if t is not None]
        if not all(_finite(t, -math.inf) for t in times) or times != sorted(times):
            problems.append(f"node {n.id}: created_s <= started_s <= ended_s must be finite and in order")
        for c in n.calls:
            if not (_finite(c.latency_s) and _finite(c.started_s, -math.inf) and _finite(c.cost)
                    and _finite(c.queued_s, -math.inf)
                    and all(t is None or t >= 0 for t in (c.input_tokens, c.output_tokens)) and c.context_chars >= 0):
                problems.append(f"node {n.id}: call {c.role} has a negative or non-finite number")
            if not all(_finite(e.recorded_latency_s) and _finite(e.recorded_at) for e in c.exchanges):
                problems.append(f"node {n.id}: call {c.role} has a negative or non-finite recorded latency or time")
            if c.queued_s is not None and c.queued_s > c.started_s:
                problems.append(f"node {n.id}: call {c.role} started before it was queued")
            problems.extend(_tool_problems(n, c))
            problems.extend(_depth_problems(n.id, c))
        if n.artifact is not None:
            if n.status not in OUTPUT_STATUSES:
                problems.append(f"node {n.id} is {n.status} but has an artifact")
            if not (isinstance(n.artifact.sha256, str) and SHA256_HEX.match(n.artifact.sha256)) or n.artifact.size < 0:
                problems.append(f"node {n.id}: artifact needs a SHA-256 (64 hex digits) and a size >= 0")
            if n is root:
                problems.append("the root's output is the run's answer: it is never an artifact")
            if run.artifact_store is None:
                problems.append(f"node {n.id} has an artifact but the run names no artifact store")
        if n.reused:
            if run.repair is None:
                problems.append(f"node {n.id} is reused but the run is not a repair")
            if n.calls:
                problems.append(f"node {n.id} is reused but has calls (they belong to the repaired run)")
            if n.status == "cancelled":
                problems.append(f"node {n.id} is reused though cancelled (a repair re-executes cancelled nodes)")
        if parent is not None and parent.reused and not n.reused:
            problems.append(f"node {n.id} was not reused but its parent {parent.id} was (a subtree is reused whole)")
    if run.repair is not None and not (isinstance(run.repair.source_sha256, str)
                                       and SHA256_HEX.match(run.repair.source_sha256)):
        problems.append("repair.source_sha256 must be 64 hex digits")
    cancelled = any(n.status == "cancelled" for n in run.nodes)
    if run.status in STOPPED_RUN_STATUSES and not cancelled:
        problems.append(f"a {run.status} run has no cancelled node")
    elif run.status not in STOPPED_RUN_STATUSES and not problems and run.status != run_status(run.nodes):
        problems.append(f"status {run.status!r} does not match its nodes (expected {run_status(run.nodes)!r})")
    if cancelled and run.status not in STOPPED_RUN_STATUSES:
        problems.append(f"a {run.status} run has cancelled nodes (only stopped runs have)")
    return problems


_LEAVES = (str, int, float, bool, type(None))


def _nesting(value: Any, limit: int = MAX_VALUE_DEPTH) -> int:
    """How many levels of dicts, lists and tuples ``value`` nests, counted up to ``limit + 1`` only:
    iterative, so a value of any depth (or a cycle) is measured without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        v, level = stack.pop()
        if isinstance(v, _LEAVES) or not isinstance(v, Mapping | list | tuple):
            continue
        level += 1
        if level > limit:
            return level
        deepest = max(deepest, level)
        stack.extend((c, level) for c in (v.values() if isinstance(v, Mapping) else v) if not isinstance(c, _LEAVES))
    return deepest


def _depth_problems(node_id: str, call: RoleCall) -> list[str]:
    """The recorded values of one role call that nest deeper than ``MAX_VALUE_DEPTH``."""
    values = [("inputs", call.inputs), *((f"output {k!r}", v) for k, v in call.outputs.items()),
              *((f"arguments of tool call {t.name}", t.arguments) for t in call.tools),
              *((f"{part} of exchange {i}", getattr(e, part)) for i, e in enumerate(call.exchanges)
                for part in ("messages", "completions"))]
    return [f"node {node_id}: call {call.role} records {where} nested deeper than {MAX_VALUE_DEPTH} levels"
            for where, v in values if _nesting(v) > MAX_VALUE_DEPTH]


def _tool_problems(node: Node, call: RoleCall) -> list[str]:
    """Every broken invariant of the tool calls of one role call."""
    problems = []
    for t in call.tools:
        where = f"node {node.id}: tool call {t.name}"
        if t.status not in TOOL_STATUSES:
            problems.append(f"{where} has unknown status {t.status!r}")
        if (t.status == "ok") != (t.error is None) or (t.status == "ok") != (t.result_chars is not None):
            problems.append(f"{where} must have a result size and no error exactly when ok")
        if not (_finite(t.latency_s) and _finite(t.started_s, -math.inf) and (t.result_chars or 0) >= 0
                and _finite(t.cost)):
            problems.append(f"{where} has a negative or non-finite number")
    return problems


# --- JSON boundary (what is written and read back) ---
# Each boundary model is made from its dataclass (same field names, types and order), so a field
# added to a record is written and read back with no second list to keep in step. In a file every
# field is required, except those added after files were first written (``later``): a file without
# one reads as the dataclass's default. A field added to a record is therefore required in files
# until it is listed in ``later`` (tests/fixtures/runs/ holds files written by older code).

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _file_type(annotation: Any, nested: Mapping[type, type[BaseModel]]) -> Any:
    """``annotation`` with each record dataclass in it replaced by that record's boundary model
    (``tuple[RoleCall, ...]`` -> ``tuple[_RoleCallModel, ...]``), so nested records are as strict."""
    if annotation in nested:
        return nested[annotation]
    args = get_args(annotation)
    swapped = tuple(_file_type(a, nested) for a in args)
    if swapped == args:
        return annotation
    origin = get_origin(annotation)
    return Union[swapped] if origin in (Union, UnionType) else origin[swapped]


def _file_model(cls: type, nested: Mapping[type, type[BaseModel]], *, later: tuple[str, ...] = (),
                skip: tuple[str, ...] = (), **replaced: tuple[Any, Any]) -> type[BaseModel]:
    """The boundary model of dataclass ``cls``: every field but ``skip``, required unless in ``later``,
    records in it read by their models in ``nested``; ``replaced`` gives a field another (type, default)."""
    hints = get_type_hints(cls)
    spec: dict[str, tuple[Any, Any]] = {}
    for f in fields(cls):
        if f.name in skip:
            continue
        if f.name in later and f.default is MISSING:
            raise TypeError(f"{cls.__name__}.{f.name} is read from older files without it, so it needs a default")
        spec[f.name] = replaced.get(f.name, (_file_type(hints[f.name], nested), f.default if f.name in later else ...))
    spec.update((name, field) for name, field in replaced.items() if name not in spec)  # in the file only
    return create_model(f"_{cls.__name__}Model", __base__=_Strict, __module__=__name__, **spec)


_LMExchangeModel = _file_model(LMExchange, {}, later=("recorded_latency_s", "recorded_at"))
_ToolCallModel = _file_model(ToolCall, {}, later=("shown_chars", "artifact", "cost", "replayed"))
_ArtifactRefModel = _file_model(ArtifactRef, {})
_RepairRecordModel = _file_model(RepairRecord, {})
_RoleCallModel = _file_model(RoleCall, {LMExchange: _LMExchangeModel, ToolCall: _ToolCallModel},
                             later=("queued_s", "exchanges", "tools"))
# in_flight is live state: a finished run has none, so files never hold it
_NodeModel = _file_model(Node, {RoleCall: _RoleCallModel, ArtifactRef: _ArtifactRefModel}, skip=("in_flight",),
                         later=("created_s", "started_s", "ended_s", "artifact", "reused"))
_RunModel = _file_model(
    Run, {Node: _NodeModel, RepairRecord: _RepairRecordModel}, later=("artifact_store", "repair"),
    goal=(str | None, None),  # written once, on the root node; accepted here from older files
    settings=(dict[str, Any], ...),  # RomaSettings.record(); read back by RomaSettings.from_record
    kind=(Literal["run"] | None, None),  # RUN_KIND; None: a file written before traces named their kind
)
