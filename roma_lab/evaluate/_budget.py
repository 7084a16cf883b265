"""A dollar cap on an evaluation's ``out`` folder (design/evaluate.md, "Dollar budgets").

The rule: a task starts only while the dollars the folder's rows record (every earlier run of the
folder included) plus an estimate of the tasks in flight (each at its system's mean cost per row so
far) stay under the cap. The first refusal stops the evaluation for good: tasks in flight finish and
keep their rows, no other task starts. Until one of a system's rows has a cost, its tasks run one at
a time, so no more than one task is ever spent at a price not yet seen. A cost that is unknown (None)
is never taken for 0: it stops the run with :class:`BudgetUnknownCostError`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from roma_lab._environment import ENV

__all__ = ["BUDGET_ENV", "BudgetReport", "BudgetUnknownCostError", "budget_usd_from_env", "check_budget"]

#: The dollar cap ``evaluate`` keeps when it is given none (``python -m roma_lab.experiments run
#: --budget-usd`` sets it for every notebook kernel it starts).
BUDGET_ENV = ENV.budget_usd


class BudgetUnknownCostError(RuntimeError):
    """A row's cost is unknown (a model with no price, a system that reports no usage) while a dollar
    cap is set: the cap cannot be kept blind, so the evaluation stops (finished rows kept)."""


def check_budget(value: float, what: str = "budget_usd") -> float:
    """``value`` as a cap in dollars: a positive, finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive number of dollars, got {value!r}")
    return float(value)


def budget_usd_from_env() -> float | None:
    """The cap named by $ROMA_LAB_BUDGET_USD (None: not set or empty)."""
    value = ENV.number(BUDGET_ENV, "dollars")
    return None if value is None else check_budget(value, f"${BUDGET_ENV}")


@dataclass(frozen=True, slots=True)
class BudgetReport:
    """What a capped evaluation spent: ``spent_usd`` is the sum of the folder's rows' costs (earlier
    runs included); ``stopped``: a task was kept back at the cap; ``n_not_run``: the (system, task,
    run) cells with no row, listed in the rows as ``not_run_budget``; ``source``: where the cap came from."""

    cap_usd: float
    spent_usd: float
    stopped: bool
    n_not_run: int
    source: str

    def as_json(self) -> dict[str, object]:
        return {"cap_usd": self.cap_usd, "spent_usd": self.spent_usd, "stopped": self.stopped,
                "n_not_run": self.n_not_run, "source": self.source}


class Spending:
    """The ledger of one capped evaluation: what the folder's rows cost per system, and the tasks in
    flight. ``gate(label)`` is asked (in a worker thread) before each task starts; ``finished`` is told
    each row's cost (in the calling thread) once the row is on disk."""

    def __init__(self, cap_usd: float, costs: Iterable[tuple[str, float]]):
        self.cap_usd = cap_usd
        self._lock = threading.Lock()
        self._sum: dict[str, float] = {}
        self._rows: dict[str, int] = {}
        self._in_flight: dict[str, int] = {}
        self.stopped = False
        self.unknown = False
        for label, cost in costs:
            self._add(label, cost)

    def _add(self, label: str, cost: float) -> None:
        self._sum[label] = self._sum.get(label, 0.0) + cost
        self._rows[label] = self._rows.get(label, 0) + 1

    @property
    def spent_usd(self) -> float:
        return sum(self._sum.values())

    def known(self, label: str) -> bool:
        """Whether one of ``label``'s rows has a cost yet (its cost per task can be estimated)."""
        return self._rows.get(label, 0) > 0

    def gate(self, label: str, *, limit: int | None = None) -> Callable[[], bool]:
        """The start check of ``label``'s tasks; with ``limit``, at most that many start through it
        (the refusals past the limit do not stop the evaluation)."""
        started = 0

        def may_start() -> bool:
            nonlocal started
            with self._lock:
                if self.stopped or self.unknown or (limit is not None and started >= limit):
                    return False
                in_flight = sum(n * self._sum[s] / self._rows[s]  # each at its system's mean cost per row
                                for s, n in self._in_flight.items() if self._rows.get(s))
                if self.spent_usd + in_flight >= self.cap_usd:
                    self.stopped = True
                    return False
                started += 1
                self._in_flight[label] = self._in_flight.get(label, 0) + 1
                return True

        return may_start

    def finished(self, label: str, cost: float | None, what: str) -> None:
        """A row of ``label`` is on disk and cost ``cost`` (None: unknown, which stops the evaluation)."""
        with self._lock:
            self._in_flight[label] -= 1
            if cost is None:
                self.unknown = True
            else:
                self._add(label, cost)
        if cost is None:
            raise BudgetUnknownCostError(
                f"{what}: its cost is unknown (a model without a price, or a system that reports no usage), "
                f"so a cap of ${self.cap_usd:g} cannot be kept; the run stopped with its finished rows kept. "
                "Rerun without a dollar cap to spend without one")
