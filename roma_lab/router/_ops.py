"""Operations D, T, C, G, V, A as deterministic components over an explicit task state.

The executor never looks at a task's operation labels: every operation reads and writes the
artifacts in `_State`, so a missing or misordered prerequisite changes the answer that reaches the
evaluator. Family-specific behaviour lives in `_suite.FAMILIES` (one handler per operation a family
reacts to); an operation a family has no handler for is a no-op that still costs its price.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

#: Support operations in canonical order, then the answer action.
SUPPORT_OPS: tuple[str, ...] = ("D", "T", "C", "G", "V")
ANSWER = "A"
OP_NAMES: Mapping[str, str] = {
    "D": "decompose",
    "T": "retrieve/tool",
    "C": "code",
    "G": "delegate",
    "V": "verify",
    "A": "answer",
}
#: Preregistered normalised costs (paper §4).
COSTS: Mapping[str, float] = {"D": 0.45, "T": 1.00, "C": 1.15, "G": 1.40, "V": 0.65, "A": 0.30}
BUDGET = 4.5
MAX_SUPPORT_OPS = 3

SUCCESS = "success"
INCORRECT = "incorrect_answer"
NO_ANSWER = "no_answer"
UNAVAILABLE = "unavailable_component"
OUTCOMES: tuple[str, ...] = (SUCCESS, INCORRECT, NO_ANSWER, UNAVAILABLE)


def canonical(ops) -> tuple[str, ...]:
    """Support operations in canonical order D,T,C,G,V; unknown names are an error."""
    ops = set(ops)
    unknown = ops - set(SUPPORT_OPS)
    if unknown:
        raise ValueError(f"unknown operation(s) {sorted(unknown)}; expected a subset of {SUPPORT_OPS}")
    return tuple(o for o in SUPPORT_OPS if o in ops)


def route_cost(support: tuple[str, ...]) -> float:
    """Cost of a route: its support operations plus the final answer action."""
    return round(sum(COSTS[o] for o in support) + COSTS[ANSWER], 10)


def is_feasible(support: tuple[str, ...], *, budget: float = BUDGET, max_ops: int = MAX_SUPPORT_OPS) -> bool:
    return len(support) <= max_ops and route_cost(support) <= budget + 1e-9


@dataclass
class _State:
    """Mutable working state of one execution; only the executor and handlers touch it."""

    prompt: str
    subgoals: Any = None      # written by D
    evidence: Any = None      # written by T (or G)
    computed: Any = None      # written by C
    candidate: str | None = None


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


Handler = Callable[[_State, Mapping[str, Any]], str]

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
    from ._suite import FAMILIES  # the family table imports this module

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
        status = SUCCESS if evaluate(task, answer) else INCORRECT
    trace.append(TraceStep(ANSWER, "emitted candidate" if state.candidate is not None
                           else ("direct-answer parser" if answer is not None else "nothing to emit"), answer))
    return Outcome(support, answer, status, round(cost, 10), tuple(trace))


def evaluate(task, answer: str | None) -> bool:
    """Exact evaluator: the emitted string must equal the task's answer (whitespace-trimmed)."""
    return answer is not None and answer.strip() == task.answer
