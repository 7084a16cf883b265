"""The run log: one tidy row per draft, merge, acceptance and validation score, plus call counters.

``RunLog`` is also a gepa callback (duck-typed: gepa calls whichever ``on_*`` methods exist), so
the search itself tells it the round number, the reflective minibatch, acceptances, proposals and
the metric-call count, for GEPA and GEPA+ alike.

Metric calls are counted in two parts and reported as their sum: ``gepa_metric_calls`` (GEPA's own
count, which its budget caps) and ``verifier_metric_calls`` (GEPA+'s verifier re-running the metric
on the round's minibatch, outside that budget). ``total_metric_calls`` = both is the primary figure.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from roma_lab.optimizer._contracts import Contract, edit_size

if TYPE_CHECKING:
    import pandas as pd

NAN = float("nan")


@dataclass(frozen=True, slots=True)
class Record:
    """One event of an optimisation run. Fields that do not apply to an event stay NaN/None/''.

    events: ``draft`` (a proposed instruction with its scores and contract verdict), ``merge``
    (the merger's output for the round), ``accepted``/``rejected`` (GEPA's minibatch acceptance
    of the round's child), ``crossover`` (GEPA's own merge of two candidates), ``skipped``
    (round without a proposal, with the reason), ``valset`` (a candidate's full validation score).
    ``selected`` marks the draft or merge whose text was handed to GEPA.
    """

    event: str
    round: int
    component: str = ""
    draft_id: int | None = None
    proposer_model: str = ""
    temperature: float = NAN
    instruction: str = ""
    judge: float = NAN
    verifier: float = NAN
    violations: int | None = None
    violation_detail: str = ""
    delta: float = NAN
    J: float = NAN
    merged: bool = False
    selected: bool = False
    accepted: bool | None = None
    candidate_idx: int | None = None
    val_score: float = NAN
    best_val_score: float = NAN
    gepa_metric_calls_so_far: int | None = None
    verifier_metric_calls_so_far: int = 0
    note: str = ""


@dataclass(slots=True)
class RunLog:
    """Mutable ledger of one run (records, current round, call counters). Not shared across runs."""

    method: str
    contracts: Mapping[str, Contract]
    baseline_proposer: tuple[str, float] | None = None  # (model, temperature) of plain GEPA's reflection LM
    records: list[Record] = field(default_factory=list)
    round: int = 0
    minibatch: list[Any] | None = None
    judge_calls: int = 0
    verifier_runs: int = 0
    verifier_metric_calls: int = 0
    merge_calls: int = 0
    proposal_rounds: set[int] = field(default_factory=set)  # rounds whose proposer was asked
    proposed_rounds: set[int] = field(default_factory=set)  # rounds that handed GEPA an instruction
    failed_rounds: set[int] = field(default_factory=set)  # rounds whose proposer raised
    first_proposal_error: str = ""
    _state: Any = field(default=None, init=False)
    _parent: dict[str, str] = field(default_factory=dict, init=False)
    _best: float = field(default=-math.inf, init=False)
    _crossover_rounds: set[int] = field(default_factory=set, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def add(self, record: Record) -> None:
        with self._lock:
            self.records.append(record)

    def _calls(self) -> int | None:
        return None if self._state is None else self._state.total_num_evals

    def proposal_failed(self, error: str) -> None:
        """The proposer of the current round raised (GEPA then skips the round and goes on)."""
        with self._lock:
            self.failed_rounds.add(self.round)
            self.first_proposal_error = self.first_proposal_error or error

    def outcome(self) -> tuple[str, str]:
        """(status, detail) of the search: ``completed`` when at least one round handed GEPA an
        instruction; ``proposals_failed`` when every round's proposer raised (every draft call
        failed), so the result is the starting program; ``no_proposal`` when no instruction reached
        GEPA for another reason (no eligible draft, or no round reached the proposer)."""
        asked, made = len(self.proposal_rounds), len(self.proposed_rounds)
        failed = len(self.failed_rounds - self.proposed_rounds)
        detail = (f"{asked} proposal round(s): {made} handed GEPA an instruction, {failed} failed"
                  + (f" (first error: {self.first_proposal_error})" if failed else "")
                  + f", {asked - made - failed} had no eligible draft")
        if made:
            return "completed", detail
        if asked == 0:
            return "no_proposal", "no round reached the proposer (every minibatch already scored perfectly, " \
                                  "or the budget ran out first); the result is the starting program"
        status = "proposals_failed" if failed == asked else "no_proposal"
        return status, detail + "; the result is the starting program"

    # ---- gepa callback hooks -------------------------------------------------------------
    def on_iteration_start(self, event: Mapping[str, Any]) -> None:
        self._state = event["state"]

    def on_evaluation_start(self, event: Mapping[str, Any]) -> None:
        # The parent's traced minibatch evaluation precedes every reflective proposal; its inputs
        # are the examples the GEPA+ verifier re-runs drafts on.
        if event["candidate_idx"] is not None and event["capture_traces"]:
            self.round = event["iteration"]
            self.minibatch = list(event["inputs"])

    def on_evaluation_skipped(self, event: Mapping[str, Any]) -> None:
        self.add(Record("skipped", event["iteration"], candidate_idx=event["candidate_idx"], note=event["reason"]))

    def on_proposal_start(self, event: Mapping[str, Any]) -> None:
        self._parent = dict(event["parent_candidate"])
        self.round = event["iteration"]
        self.proposal_rounds.add(event["iteration"])

    def on_proposal_end(self, event: Mapping[str, Any]) -> None:
        self.proposed_rounds.add(event["iteration"])
        # GEPA+ records its own drafts; plain GEPA's single reflection output is recorded here.
        if self.baseline_proposer is None:
            return
        model, temperature = self.baseline_proposer
        for name, text in event["new_instructions"].items():
            contract = self.contracts.get(name)  # dspy.Flex code components have no instruction contract
            verdict = contract.violations(text) if contract is not None else ()
            self.add(Record(
                "draft", event["iteration"], name, draft_id=0, proposer_model=model, temperature=temperature,
                instruction=text, violations=len(verdict), violation_detail="; ".join(verdict),
                delta=edit_size(self._parent.get(name, ""), text), selected=True,
            ))

    def on_candidate_accepted(self, event: Mapping[str, Any]) -> None:
        crossover = event["iteration"] in self._crossover_rounds
        self.add(Record(
            "accepted", event["iteration"], accepted=True, candidate_idx=event["new_candidate_idx"],
            gepa_metric_calls_so_far=self._calls(), verifier_metric_calls_so_far=self.verifier_metric_calls,
            note="crossover" if crossover else "",
        ))

    def on_candidate_rejected(self, event: Mapping[str, Any]) -> None:
        self.add(Record("rejected", event["iteration"], accepted=False, gepa_metric_calls_so_far=self._calls(),
                        verifier_metric_calls_so_far=self.verifier_metric_calls, note=event["reason"]))

    def on_merge_accepted(self, event: Mapping[str, Any]) -> None:
        self._crossover_rounds.add(event["iteration"])
        self.add(Record("crossover", event["iteration"], accepted=True, candidate_idx=event["new_candidate_idx"],
                        note=f"parents {list(event['parent_ids'])}"))

    def on_merge_rejected(self, event: Mapping[str, Any]) -> None:
        self.add(Record("crossover", event["iteration"], accepted=False, note=event["reason"]))

    def on_valset_evaluated(self, event: Mapping[str, Any]) -> None:
        score = float(event["average_score"])
        self._best = max(self._best, score)
        # The seed is scored before the first iteration, when its valset size is the whole count.
        calls = event["num_examples_evaluated"] if event["iteration"] == 0 else self._calls()
        self.add(Record(
            "valset", event["iteration"], candidate_idx=event["candidate_idx"], val_score=score,
            best_val_score=self._best, gepa_metric_calls_so_far=calls,
            verifier_metric_calls_so_far=self.verifier_metric_calls,
        ))


def records_df(records: Sequence[Record]) -> pd.DataFrame:
    """Records as a tidy DataFrame; selected drafts/merges inherit their round's acceptance."""
    import pandas as pd

    df = pd.DataFrame([asdict(r) for r in records], columns=list(Record.__dataclass_fields__))
    verdict = {r.round: r.accepted for r in records if r.event in ("accepted", "rejected")}
    chosen = df["selected"].astype(bool)
    df["accepted"] = df["accepted"].astype(object)
    df.loc[chosen, "accepted"] = df.loc[chosen, "round"].map(verdict)
    return df


CONVERGENCE_COLUMNS = ["total_metric_calls", "gepa_metric_calls", "verifier_metric_calls", "candidate_idx",
                       "val_score", "best_val_score"]


def convergence_df(records: Sequence[Record]) -> pd.DataFrame:
    """Best validation score against metric calls (one row per full validation), for Table 8.

    ``total_metric_calls`` counts every metric run so far: GEPA's own (``gepa_metric_calls``, what
    its budget caps) plus GEPA+'s verifier runs on drafts (``verifier_metric_calls``, 0 for GEPA).
    """
    import pandas as pd

    rows = [
        {
            "total_metric_calls": r.gepa_metric_calls_so_far + r.verifier_metric_calls_so_far,
            "gepa_metric_calls": r.gepa_metric_calls_so_far,
            "verifier_metric_calls": r.verifier_metric_calls_so_far,
            "candidate_idx": r.candidate_idx,
            "val_score": r.val_score,
            "best_val_score": r.best_val_score,
        }
        for r in records
        if r.event == "valset"
    ]
    return pd.DataFrame(rows, columns=CONVERGENCE_COLUMNS)


def calls_to_converge(convergence: pd.DataFrame, *, tolerance: float = 0.0, calls: str = "total_metric_calls") -> int:
    """Metric calls spent when the best validation score first came within ``tolerance`` of its final value.

    ``calls`` names the count: ``total_metric_calls`` (default: every metric run, GEPA+'s verifier
    included) or ``gepa_metric_calls`` (GEPA's budget count only).
    """
    if convergence.empty:
        raise ValueError("convergence table is empty: the run evaluated no candidate on the validation set")
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    final = convergence["best_val_score"].iloc[-1]
    reached = convergence[convergence["best_val_score"] >= final - tolerance]
    return int(reached[calls].iloc[0])
