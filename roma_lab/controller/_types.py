"""The record of a ROMA run: frozen dataclasses in memory, pydantic only for the JSON file.

A :class:`Run` is a flat tuple of :class:`Node` s (parent links give the tree) and every node keeps
the :class:`RoleCall` s made for it, so usage sums over the tree count each model call exactly once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    import pandas as pd

TASK_TYPES: tuple[str, ...] = ("search", "think", "write", "code")
ROLES: tuple[str, ...] = ("atomizer", "planner", "executor", "aggregator", "verifier")

RunStatus = Literal["completed", "partial", "failed"]
NodeStatus = Literal["pending", "running", "completed", "failed", "skipped"]


@dataclass(frozen=True, slots=True)
class RoleCall:
    """One call of one role for one node.

    ``role`` is ``atomizer``, ``planner``, ``executor:<task_type>``, ``aggregator`` or ``verifier``.
    Tokens and cost are what the LM reported for this call (``None`` cost = the provider gave no
    price); ``context_chars`` is the size of everything the role was shown.
    """

    role: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    context_chars: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    latency_s: float
    started_s: float  # seconds since the run started, for Gantt views
    model: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """One task in the execution tree. ``depends_on`` holds ids of earlier siblings."""

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


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """Sent to the live observer whenever a node changes (``kind`` = the node's new status)."""

    kind: NodeStatus
    node: Node


@dataclass(frozen=True, slots=True)
class Run:
    """A finished run. ``status`` is ``completed`` only if every node completed."""

    goal: str
    status: RunStatus
    output: str | None
    nodes: tuple[Node, ...]
    wall_s: float
    settings: dict[str, Any] = field(default_factory=dict)

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
        """One row per role call (tidy): node, depth, role, tokens, cost, latency, context size."""
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
                "error": c.error,
            }
            for n in self.nodes
            for c in n.calls
        ]
        columns = ["node_id", "depth", "task_type", "role", "component", "model", "input_tokens",
                   "output_tokens", "cost", "latency_s", "started_s", "context_chars", "error"]
        return pd.DataFrame(rows, columns=columns).astype({"cost": float})  # None -> NaN: price unknown

    def usage_df(self) -> pd.DataFrame:
        """Per-component usage in the layout of the ROMA paper's Table 5, plus a Total row.

        Cost stays NaN when no call of a component reported a price (unknown is not zero).
        """
        import pandas as pd

        calls = self.calls_df()
        grouped = calls.groupby("component", sort=False)
        table = pd.DataFrame({
            "calls": grouped.size(),
            "cost": grouped["cost"].sum(min_count=1),
            "input_tokens": grouped["input_tokens"].sum(),
            "output_tokens": grouped["output_tokens"].sum(),
            "latency_s": grouped["latency_s"].sum(),
        }).reindex([r for r in ROLES if r in set(calls["component"])])
        table.loc["total"] = [table["calls"].sum(), table["cost"].sum(min_count=1),
                              table["input_tokens"].sum(), table["output_tokens"].sum(),
                              table["latency_s"].sum()]
        table.index.name = "component"
        return table.reset_index().astype({"calls": int, "input_tokens": int, "output_tokens": int})

    def to_json(self) -> str:
        return _RunModel.model_validate(asdict(self)).model_dump_json(indent=1)

    @classmethod
    def from_json(cls, text: str | bytes) -> Run:
        m = _RunModel.model_validate_json(text)
        nodes = tuple(
            Node(**{**n.model_dump(exclude={"calls"}), "calls": tuple(RoleCall(**c.model_dump()) for c in n.calls)})
            for n in m.nodes
        )
        return cls(**{**m.model_dump(exclude={"nodes"}), "nodes": nodes})


# --- JSON boundary (what is written and read back) ---

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _RoleCallModel(_Strict):
    role: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    context_chars: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    latency_s: float
    started_s: float
    model: str | None
    error: str | None


class _NodeModel(_Strict):
    id: str
    parent_id: str | None
    depth: int
    goal: str
    task_type: str
    status: NodeStatus
    output: str | None
    depends_on: tuple[str, ...]
    error: str | None
    warnings: tuple[str, ...]
    forced_atomic: bool
    is_atomic: bool | None
    calls: tuple[_RoleCallModel, ...]


class _RunModel(_Strict):
    goal: str
    status: RunStatus
    output: str | None
    nodes: tuple[_NodeModel, ...]
    wall_s: float
    settings: dict[str, Any]
