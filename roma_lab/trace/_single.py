"""A single model call as a trace: a one-node run whose root holds the one call.

So every system a runner compares saves the same kind of trace: its usage is counted by the run's one
rule (``Run.usage``), and the viewer shows its prompt and completion as it shows a ROMA node's.
"""

from __future__ import annotations

from ._types import LMExchange, Node, RoleCall, Run

__all__ = ["SINGLE_CALL_ROLE", "single_call_run"]

#: The role of a single call's one model call (its ``calls_df`` component).
SINGLE_CALL_ROLE = "single_call"


def single_call_run(*, question: str, output: str, input_tokens: int | None, output_tokens: int | None,
                    cost: float | None, model: str | None, latency_s: float = 0.0,
                    exchanges: tuple[LMExchange, ...] = ()) -> Run:
    """The one-node run of one call that answered ``question`` with ``output`` (tokens and cost None:
    unknown, never 0)."""
    call = RoleCall(role=SINGLE_CALL_ROLE, inputs={}, outputs={"answer": output}, context_chars=len(question),
                    input_tokens=input_tokens, output_tokens=output_tokens, cost=cost, latency_s=latency_s,
                    started_s=0.0, model=model, queued_s=0.0, exchanges=exchanges)
    root = Node(id="root", parent_id=None, depth=0, goal=question, task_type="think", status="completed",
                output=output, is_atomic=True, calls=(call,), created_s=0.0, started_s=0.0, ended_s=latency_s)
    return Run(goal=question, status="completed", output=output, nodes=(root,), wall_s=latency_s)
