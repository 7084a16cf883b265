"""Run a route on a task: each support operation through the task family's handler, then the
answer action, graded by the task's exact evaluator.

The executor never looks at a task's operation labels. An operation a family has no handler for
is a no-op that still costs its price; an unavailable operation stops the run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from ._benchmark import FAMILIES
from ._ops import ANSWER, COSTS, OP_NAMES, SUPPORT_OPS, Handler, _State

SUCCESS = "success"
INCORRECT = "incorrect_answer"
NO_ANSWER = "no_answer"
UNAVAILABLE = "unavailable_component"
OUTCOMES: tuple[str, ...] = (SUCCESS, INCORRECT, NO_ANSWER, UNAVAILABLE)


@dataclass(frozen=True, slots=True)
class TraceStep:
    op: str
    effect: str               # what the operation did, readable in the route inspector
    candidate: str | None     # candidate answer after the step


@dataclass(frozen=True, slots=True)
class Outcome:
    route: tuple[str, ...]    # support operations executed (canonical order is the policy's job)
    answer: str | None
    status: str               # one of OUTCOMES
    cost: float
    trace: tuple[TraceStep, ...] = field(default_factory=tuple)

    @property
    def success(self) -> bool:
        return self.status == SUCCESS


_QUOTED = re.compile(r'"([^"]+)"')


def direct_answer(prompt: str) -> str | None:
    """Direct-answer parser for literal tasks: the first double-quoted span of the prompt."""
    match = _QUOTED.search(prompt)
    return match.group(1) if match else None


def execute(task, support) -> Outcome:
    """Run `support` then answer on `task`; grade with the task's exact evaluator.

    `task` needs `.prompt`, `.family`, `.payload` and `.answer`. The order given is the order
    executed: callers that want canonical order pass `canonical(...)`.
    """
    support = tuple(support)
    handlers: Mapping[str, Handler] = FAMILIES[task.family].handlers
    unavailable = set(task.payload.get("unavailable", ()))
    state = _State(prompt=task.prompt)
    trace: list[TraceStep] = []
    cost = 0.0
    for op in support:
        if op not in SUPPORT_OPS:
            raise ValueError(f"unknown operation {op!r}; expected one of {SUPPORT_OPS}")
        cost += COSTS[op]
        if op in unavailable:
            trace.append(TraceStep(op, f"{OP_NAMES[op]} unavailable: execution stopped", state.candidate))
            return Outcome(support, None, UNAVAILABLE, round(cost, 10), tuple(trace))
        handler = handlers.get(op)
        effect = handler(state, task.payload) if handler else "no effect on this task"
        trace.append(TraceStep(op, effect, state.candidate))
    cost += COSTS[ANSWER]
    answer = state.candidate if state.candidate is not None else direct_answer(task.prompt)
    if answer is None:
        status = NO_ANSWER
    else:
        status = SUCCESS if is_correct(task, answer) else INCORRECT
    trace.append(TraceStep(ANSWER, "emitted candidate" if state.candidate is not None
                           else ("direct-answer parser" if answer is not None else "nothing to emit"), answer))
    return Outcome(support, answer, status, round(cost, 10), tuple(trace))


def is_correct(task, answer: str | None) -> bool:
    """Exact evaluator: the emitted string must equal the task's answer (whitespace-trimmed)."""
    return answer is not None and answer.strip() == task.answer
