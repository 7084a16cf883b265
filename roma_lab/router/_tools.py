"""The suite's operations as tools an agent calls one at a time (the agent view of the benchmark).

`execute` runs a whole route at once; an agent instead decides after each observation what to call
next. `OperationSession` keeps one task's working state between calls and runs the same family
handlers `execute` runs, so a session that calls a task's minimum route reaches the same candidate
`execute` would. Each call returns text a model can read: what the operation did and the artifact
it wrote (rows, records, invoice lines, a computed value), never the hidden state as a dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._benchmark import FAMILIES, _fmt
from ._execute import INCORRECT, NO_ANSWER, SUCCESS, UNAVAILABLE, is_correct
from ._ops import SUPPORT_OPS, _State

__all__ = ["TOOLS", "OperationObservation", "OperationSession", "OperationTool", "tool_outcome"]


@dataclass(frozen=True, slots=True)
class OperationTool:
    op: str                   # the support operation the tool runs
    name: str
    description: str          # in words that hold for every family (no family-specific hints)


#: Each support operation as a tool, in canonical order.
TOOLS: tuple[OperationTool, ...] = (
    OperationTool("D", "decompose", "break the task into explicit requirements (filters, hops, formats) that later "
                  "tools honour"),
    OperationTool("T", "retrieve", "fetch the records, documents or table rows the task refers to from the data stores"),
    OperationTool("C", "compute", "compute a value (statistic, count, sum, conversion) from the prompt or from "
                  "fetched data"),
    OperationTool("G", "delegate", "ask a specialist desk to answer the task directly"),
    OperationTool("V", "verify", "check the current candidate answer against the fetched evidence and correct it"),
)
#: Tool name of each support operation.
TOOL_NAMES: dict[str, str] = {t.op: t.name for t in TOOLS}

_ARTIFACTS = ("subgoals", "evidence", "computed")
_LABELS = {"subgoals": "Requirements", "evidence": "Fetched", "computed": "Computed"}


@dataclass(frozen=True, slots=True)
class OperationObservation:
    op: str
    text: str                 # what the agent reads
    candidate: str | None     # the session's candidate answer after the call
    unavailable: bool         # the component is out of service: the suite stops the run here


def _is_rows(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, dict) for v in value)


def _render(value: Any) -> str:
    """Readable text for an artifact: rows one per line, mappings as `key: value`."""
    if isinstance(value, float):
        return _fmt(value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_render(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        if _is_rows(value):
            return "\n".join("- " + ", ".join(f"{k}={_render(x)}" for k, x in v.items()) for v in value)
        return ", ".join(_render(v) for v in value)
    return str(value)


class OperationSession:
    """One task's working state, advanced one operation at a time (one session per attempt).

    After an unavailable operation the session is stopped: the suite's executor stops the run
    there, so every later call raises.
    """

    def __init__(self, task) -> None:
        self.task = task
        self._state = _State(prompt=task.prompt)
        self._handlers = FAMILIES[task.family].handlers
        self._unavailable = set(task.payload.get("unavailable", ()))
        self.calls: list[str] = []
        self.stopped = False

    @property
    def candidate(self) -> str | None:
        return self._state.candidate

    def call(self, op: str) -> OperationObservation:
        if op not in SUPPORT_OPS:
            raise ValueError(f"unknown operation {op!r}; expected one of {SUPPORT_OPS}")
        if self.stopped:
            raise RuntimeError("this session stopped at an unavailable component; start a new one")
        self.calls.append(op)
        name = TOOL_NAMES[op]
        if op in self._unavailable:
            self.stopped = True
            return OperationObservation(op, f"{name} is unavailable: the component is out of service.",
                                        self._state.candidate, unavailable=True)
        before = {a: getattr(self._state, a) for a in _ARTIFACTS}
        handler = self._handlers.get(op)
        effect = handler(self._state, self.task.payload) if handler else "no effect on this task"
        lines = [f"{name}: {effect}."]
        for artifact in _ARTIFACTS:
            value = getattr(self._state, artifact)
            if value is not None and value != before[artifact]:
                sep = "\n" if _is_rows(value) else " "  # rows go one per line under their label
                lines.append(f"{_LABELS[artifact]}:{sep}{_render(value)}")
        candidate = self._state.candidate
        lines.append(f"Current answer candidate: {candidate}" if candidate is not None
                     else "No answer candidate yet.")
        return OperationObservation(op, "\n".join(lines), candidate, unavailable=False)



def tool_outcome(task, answer: str | None, *, stopped: bool) -> str:
    """The suite's status for an agent's final answer: a run stopped at an unavailable component is
    `unavailable_component` whatever it answered (as in `execute`); otherwise the exact evaluator."""
    if stopped:
        return UNAVAILABLE
    if answer is None or not answer.strip():
        return NO_ANSWER
    return SUCCESS if is_correct(task, answer) else INCORRECT
