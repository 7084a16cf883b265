"""The run log: one tidy row per draft, merge, acceptance and validation score, plus call counters.

``RunLog`` is also a gepa callback (duck-typed: gepa calls whichever ``on_*`` methods exist), so
the search itself tells it the round number, the reflective minibatch, acceptances and the
metric-call count, for GEPA and GEPA+ alike.
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
    metric_calls_so_far: int | None = None
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

    def on_proposal_end(self, event: Mapping[str, Any]) -> None:
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
            metric_calls_so_far=self._calls(), note="crossover" if crossover else "",
        ))

    def on_candidate_rejected(self, event: Mapping[str, Any]) -> None:
        self.add(Record("rejected", event["iteration"], accepted=False, metric_calls_so_far=self._calls(),
                        note=event["reason"]))

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
            best_val_score=self._best, metric_calls_so_far=calls,
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


def convergence_df(records: Sequence[Record]) -> pd.DataFrame:
    """Best validation score against metric calls (one row per full validation), for Table 8.

    ``verifier_metric_calls`` are GEPA+'s extra minibatch runs, which GEPA's budget does not count;
    they are reported so the two methods can also be compared on total cost.
    """
    import pandas as pd

    rows = [
        {
            "metric_calls": r.metric_calls_so_far,
            "verifier_metric_calls": r.verifier_metric_calls_so_far,
            "candidate_idx": r.candidate_idx,
            "val_score": r.val_score,
            "best_val_score": r.best_val_score,
        }
        for r in records
        if r.event == "valset"
    ]
    return pd.DataFrame(rows, columns=["metric_calls", "verifier_metric_calls", "candidate_idx", "val_score",
                                       "best_val_score"])


def calls_to_converge(convergence: pd.DataFrame, *, tolerance: float = 0.0) -> int:
    """Metric calls spent when the best validation score first came within ``tolerance`` of its final value."""
    if convergence.empty:
        raise ValueError("convergence table is empty: the run evaluated no candidate on the validation set")
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    final = convergence["best_val_score"].iloc[-1]
    reached = convergence[convergence["best_val_score"] >= final - tolerance]
    return int(reached["metric_calls"].iloc[0])
