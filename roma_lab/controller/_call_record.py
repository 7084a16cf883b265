"""What the trace records of one role call: its outputs read under the role's output contract, and
what a timed-out call is recorded with, at its time limit (usage unknown) and, if it ends while the
run goes on, later (what it consumed). Pure: no loop, no thread, no I/O; ``_roma.py``'s ``_call``
runs the call and puts these records on its node. See design/scheduling.md (Failures, Usage
accounting).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from roma_lab.tools import ToolLog
from roma_lab.trace import LMExchange, RoleCall, context_chars, jsonable, show

from ._loop import Outcome, describe

# Output contract per role: field -> required type (None: any value).
_CONTRACT: dict[str, dict[str, type | None]] = {
    "atomizer": {"is_atomic": bool, "task_type": None},
    "planner": {"subtasks": None},
    "executor": {"output": str},
    "aggregator": {"output": str},
    "verifier": {"verdict": bool, "feedback": None},
}
_OPTIONAL_OUTPUTS = ("reasoning", "code", "passages")  # shown in the tree when a role exposes them


@dataclass(frozen=True, slots=True)
class CallHead:
    """What a call's record says however it ended: the role, what it was shown, when it asked for a
    slot and got one (seconds since the run started), how long it held it, the model it was given
    and the log its tool calls went to."""

    role: str
    inputs: Mapping[str, Any]
    queued_s: float
    started_s: float
    latency_s: float
    model: str | None
    tools: ToolLog

    def record(self, **ending: Any) -> RoleCall:
        """The call's record with ``ending`` (outputs, usage, error...) and the tool calls made so far."""
        return RoleCall(role=self.role, inputs=jsonable({k: v for k, v in self.inputs.items() if k != "goal"}),
                        context_chars=context_chars(self.inputs), latency_s=self.latency_s,
                        started_s=self.started_s, queued_s=self.queued_s, tools=tuple(self.tools.calls), **ending)


def read_outputs(role: str, outcome: Outcome) -> tuple[dict, str | None]:
    """The call's outputs under the role's contract, or the error that fails its node."""
    if outcome.error is not None:
        return {}, describe(outcome.error)
    result = outcome.result
    try:
        outputs = {}
        for name, kind in _CONTRACT[role.split(":")[0]].items():
            if not hasattr(result, name):
                return {}, f"output has no field {name!r} (got {type(result).__name__})"
            value = getattr(result, name)
            if kind is not None and not isinstance(value, kind):
                return {}, f"{name} must be a {kind.__name__}, got {show(value)} ({type(value).__name__})"
            outputs[name] = jsonable(value)
        outputs.update({k: jsonable(getattr(result, k)) for k in _OPTIONAL_OUTPUTS if hasattr(result, k)})
    except Exception as err:  # an output object that breaks when read
        return {}, f"output could not be read: {describe(err)}"
    return outputs, None


def ended_call(head: CallHead, outcome: Outcome) -> RoleCall:
    """The record of a call that ended in time: its outputs (or why it failed) and what it consumed,
    read whether the role returned or raised."""
    from roma_lab.lm import call_usage

    outputs, error = read_outputs(head.role, outcome)
    usage = call_usage(outcome.usage, outcome.history)
    return head.record(outputs=outputs, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                       cost=usage.cost, model=usage.model or head.model, error=error,
                       exchanges=LMExchange.from_history(outcome.history))


def timed_out(timeout_s: float) -> str:
    """Why a call that outlived its time limit failed its node."""
    return f"timed out after {timeout_s:g} s"


def timed_out_call(head: CallHead, timeout_s: float) -> RoleCall:
    """The record of a call at its time limit: nothing returned, usage unknown (never 0)."""
    return head.record(outputs={}, input_tokens=None, output_tokens=None, cost=None, model=head.model,
                       error=f"{timed_out(timeout_s)}; usage unknown (still running)")


def late_call(call: RoleCall, head: CallHead, outcome: Outcome, timeout_s: float, took_s: float) -> RoleCall:
    """``call`` (a timed-out record) once the call ended after all, ``took_s`` after it started: what
    it consumed and the tool calls it made; its outputs stay unread (its node has failed)."""
    from roma_lab.lm import call_usage

    usage = call_usage(outcome.usage, outcome.history)
    return replace(call, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=usage.cost,
                   model=usage.model or call.model, exchanges=LMExchange.from_history(outcome.history),
                   tools=tuple(head.tools.calls),
                   error=f"{timed_out(timeout_s)}; ended {took_s:.3g} s after it started")
