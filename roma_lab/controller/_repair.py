"""Which nodes a repair re-executes (ROMA paper §6, "selective re-execution of failed subtrees").

A node's output *changes* in a repair when the node is to be redone (failed, skipped, cancelled,
and optionally degraded or unverified), when one of its subtasks changes (its aggregation is
redone), or when a sibling it depends on changes (its input is different). Walking down from the
root, a node that does not change is **reused** with its whole subtree; one whose input changed,
or that must be redone and never planned, is solved **fresh** (its old subtree is dropped); one
that changes only because of its subtasks keeps its **plan** (no atomizer or planner call) and
is re-aggregated over its reused and re-executed subtasks. The artifact store the run names is
used only when the caller names it too (:func:`repair_stores`). See design/repair.md.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from os import PathLike
from typing import Literal

from roma_lab.tools import ArtifactStore, UntrustedStoreError
from roma_lab.trace import NO_OUTPUT_STATUSES, Node, Run

from ._plan import Subtask

Action = Literal["reuse", "fresh", "kept_plan"]
# Statuses a repair may also redo on request; nodes without an output are always redone.
OPTIONAL_REDO: tuple[str, ...] = ("degraded", "unverified")


@dataclass(frozen=True, slots=True)
class RepairPlan:
    """What a repair does with each node it reaches from the root (nodes below a reused or fresh
    node are not listed: they are copied with it, or replaced by its new subtree)."""

    source: Run
    redone: tuple[str, ...]  # statuses re-executed
    actions: dict[str, Action]

    def action(self, node_id: str) -> Action:
        """A listed node's action; any other node is new in this run (under a fresh node): fresh."""
        return self.actions.get(node_id, "fresh")

    def kept_plan(self, node_id: str) -> tuple[list[str], tuple[Subtask, ...]]:
        """The ids and subtasks of a kept plan, as the source run planned them."""
        children = self.source.children(node_id)
        index = {c.id: i for i, c in enumerate(children)}
        subtasks = tuple(Subtask(c.goal, c.task_type, tuple(index[d] for d in c.depends_on)) for c in children)
        return [c.id for c in children], subtasks

    def reused_subtree(self, node_id: str) -> list[Node]:
        """The source node and all its descendants, parents first."""
        out = [self.source.node(node_id)]
        for n in out:  # grows while it is read: a breadth-first walk
            out.extend(self.source.children(n.id))
        return out


def plan_repair(run: Run, also: Collection[str] = ()) -> RepairPlan:
    """The repair of ``run``: nodes without an output are redone, and the statuses in ``also``
    (``degraded``, ``unverified``) too; see the module docstring for what else is re-executed."""
    if not isinstance(run, Run):
        raise TypeError(f"repair needs a Run, got {type(run).__name__}")
    unknown = sorted(set(also) - set(OPTIONAL_REDO))
    if unknown:
        raise ValueError(f"also may name {list(OPTIONAL_REDO)}, got {unknown}")
    redo = {*NO_OUTPUT_STATUSES, *also}
    children: dict[str, list[Node]] = {}
    dependents: dict[str, list[str]] = {}
    for n in run.nodes:
        if n.parent_id is not None:
            children.setdefault(n.parent_id, []).append(n)
        for d in n.depends_on:
            dependents.setdefault(d, []).append(n.id)
    by_id = {n.id: n for n in run.nodes}
    # A node changes when one it reaches through subtasks or dependencies is redone: walked backwards
    # from the redone nodes, without recursion (a crafted run file may nest nodes thousands deep).
    changed = {n.id for n in run.nodes if n.status in redo}
    todo = list(changed)
    while todo:
        n = by_id[todo.pop()]
        for up in dependents.get(n.id, []) + ([n.parent_id] if n.parent_id is not None else []):
            if up not in changed:
                changed.add(up)
                todo.append(up)

    actions: dict[str, Action] = {}
    todo = [run.root]
    while todo:  # from the root down, parents first, siblings in order
        n = todo.pop()
        if n.id not in changed:
            actions[n.id] = "reuse"
        elif any(d in changed for d in n.depends_on) or n.id not in children:
            actions[n.id] = "fresh"  # its input changed, or it must be redone and never planned
        else:
            actions[n.id] = "kept_plan"
            todo.extend(reversed(children[n.id]))
    return RepairPlan(run, tuple(sorted(redo)), actions)


def repair_stores(run: Run, own: ArtifactStore | None, source: ArtifactStore | str | PathLike[str] | None,
                  ) -> tuple[ArtifactStore | None, ArtifactStore | None]:
    """The store a repair of ``run`` writes to (the repairing Roma's ``own``, else ``source``) and the
    store ``run``'s artifacts are read from. The store a run file names is opened only when the
    caller names it too, as ``own`` or ``source``: a run file can name any URL, and opening it would
    send the run there (:class:`UntrustedStoreError`, before any I/O)."""
    if source is not None and not isinstance(source, ArtifactStore):
        source = ArtifactStore(source)
    url = run.artifact_store
    if url is None:
        if source is not None:
            raise ValueError(f"source_store={source.url!r} is given but the run to repair names no artifact store")
        return own, None
    if source is not None and not source.is_at(url):
        raise ValueError(f"source_store={source.url!r} is not the store the run to repair names ({url!r})")
    named = source if source is not None else own if own is not None and own.is_at(url) else None
    if named is None:
        raise UntrustedStoreError(
            f"the run to repair names artifact store {url!r}, which the caller did not name: a store named only "
            f"by a run file is never opened (a run file can name any URL). Name it to use it: "
            f"Roma(artifacts={url!r}).repair(run) repairs into it; Roma(artifacts=<another store>)"
            f".repair(run, source_store={url!r}) copies the artifacts it reuses from it")
    return own if own is not None else named, named
