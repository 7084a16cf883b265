"""The GEPA+ proposer: k parallel drafts -> judge, verifier, contract check -> rank by J -> merge top n.

It implements dspy.GEPA's ``instruction_proposer`` protocol, so the rest of the search (Pareto
pool, minibatches, acceptance, crossover merges, metric budget) is GEPA's, unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import dspy
from dspy.adapters.json_adapter import JSONAdapter
from dspy.teleprompt.gepa.instruction_proposal import InstructionProposer

import roma_lab.lm
from roma_lab._concurrent import concurrent_map
from roma_lab.optimizer._config import GepaPlusConfig
from roma_lab.optimizer._contracts import Contract, dedupe_sentences, edit_size
from roma_lab.optimizer._records import NAN, Record, RunLog
from roma_lab.optimizer._signatures import JudgeInstructionEdit, MergeInstructionEdits

_logger = logging.getLogger(__name__)


class ProposalError(RuntimeError):
    """Every draft of a round failed; the first failure is chained as the cause."""


def build_program(student: dspy.Module, candidate: Mapping[str, str]) -> dspy.Module:
    """A copy of ``student`` with the candidate's instructions (as dspy's GEPA adapter builds it)."""
    program = student.deepcopy()
    for name, predictor in program.named_predictors():
        if name in candidate:
            predictor.signature = predictor.signature.with_instructions(candidate[name])
    return program


@dataclass(slots=True)
class _Draft:
    draft_id: int
    model: str
    temperature: float
    text: str = ""
    error: str = ""
    violations: tuple[str, ...] = ()
    delta: float = NAN
    judge: float = NAN
    verifier: float = NAN
    J: float = NAN
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _RoundSpend:
    judge: int = 0
    verifier: int = 0
    merge: int = 0


class BaselineProposer(InstructionProposer):
    """Plain GEPA's proposer: DSPy's default ``InstructionProposer()`` (the same requests), which also
    writes a failed reflection call into the run log before GEPA skips the round, so a search whose
    every proposal failed ends with a visible status instead of silently returning its seed."""

    def __init__(self, log: RunLog):
        super().__init__()
        self.log = log

    def __call__(self, candidate, reflective_dataset, components_to_update) -> dict[str, str]:
        try:
            return super().__call__(candidate, reflective_dataset, components_to_update)
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
            model, temperature = self.log.baseline_proposer or ("", NAN)
            for name in components_to_update:
                self.log.add(Record("draft", self.log.round, name, draft_id=0, proposer_model=model,
                                    temperature=temperature, note=error))
            self.log.proposal_failed(error)
            raise


# Subclassing the built-in proposer is deliberate: dspy's GEPA adapter checks
# isinstance(proposer, InstructionProposer) to decide how to render the reflective dataset, and
# GEPA+ must see exactly the data plain GEPA's proposer sees.
class GepaPlusProposer(InstructionProposer):
    """GEPA+'s instruction proposer (a dspy.GEPA ``instruction_proposer``).

    Drafts come from DSPy's own GEPA proposal prompt (plus the component's contract, when it has
    one), one call per (model, temperature) pair, so GEPA+ with k=1 asks exactly what GEPA asks.
    """

    def __init__(
        self,
        config: GepaPlusConfig,
        *,
        student: dspy.Module,
        metric: Callable[..., Any],
        contracts: Mapping[str, Contract],
        log: RunLog,
        failure_score: float = 0.0,
        seed: int = 0,
    ):
        super().__init__()
        self.config = config
        self.seed = seed
        self._round = 0  # proposal rounds so far: with the seed, it names every draft's sampling stream
        self.student = student
        self.metric = metric
        self.contracts = dict(contracts)
        self.log = log
        self.failure_score = failure_score
        resolve = roma_lab.lm.resolve_lm
        self._proposers = [(resolve(lm), float(t)) for lm, t in config.proposers]
        self._judge_lm = resolve(config.judge) if config.judge is not None else None
        self._merger_lm = resolve(config.merger) if config.merger is not None else None
        self._drafters = {
            name: InstructionProposer(additional_instructions=c.describe() or None) for name, c in self.contracts.items()
        }
        self._judge = dspy.Predict(JudgeInstructionEdit)
        self._merge = dspy.Predict(MergeInstructionEdits)

    def __call__(
        self,
        candidate: dict[str, str],
        reflective_dataset: Mapping[str, Sequence[Mapping[str, Any]]],
        components_to_update: list[str],
    ) -> dict[str, str]:
        spend = _RoundSpend()
        self._round += 1
        out: dict[str, str] = {}
        for name in components_to_update:
            if name in candidate and name in reflective_dataset:
                text = self._propose(name, candidate, list(reflective_dataset[name]), spend)
                if text is not None:
                    out[name] = text
        return out

    # ---- budgets -----------------------------------------------------------------------------
    def _limits(self, kind: str) -> tuple[int | None, int | None, int]:
        """(per-round limit, per-run limit, used so far in the run) for judge, verifier or merge."""
        cfg, log = self.config, self.log
        return {
            "judge": (cfg.max_judge_calls, cfg.max_total_judge_calls, log.judge_calls),
            "verifier": (cfg.max_verifier_runs, cfg.max_total_verifier_runs, log.verifier_runs),
            "merge": (cfg.max_merge_calls, cfg.max_total_merge_calls, log.merge_calls),
        }[kind]

    def _affordable(self, kind: str, need: int, spend: _RoundSpend) -> bool:
        per_round, per_run, used = self._limits(kind)
        in_round = getattr(spend, kind) + need
        return (per_round is None or in_round <= per_round) and (per_run is None or used + need <= per_run)

    def _charge(self, kind: str, count: int, spend: _RoundSpend) -> None:
        setattr(spend, kind, getattr(spend, kind) + count)
        counter = "verifier_runs" if kind == "verifier" else f"{kind}_calls"
        setattr(self.log, counter, getattr(self.log, counter) + count)

    # ---- one component -----------------------------------------------------------------------
    def _propose(self, name: str, candidate: dict[str, str], examples: list[Any], spend: _RoundSpend) -> str | None:
        cfg, contract, current = self.config, self.contracts[name], candidate[name]
        drafts = concurrent_map(lambda i: self._draft(i, name, current, examples), range(cfg.k), workers=cfg.max_parallel)
        if all(d.error for d in drafts):
            self._record(name, drafts)
            self.log.proposal_failed(drafts[0].error)
            raise ProposalError(f"all {cfg.k} drafts for {name!r} failed; first error: {drafts[0].error}")

        seen: dict[str, int] = {}
        eligible: list[_Draft] = []
        for d in drafts:
            if d.error:
                continue
            d.violations = contract.violations(d.text)
            d.delta = edit_size(current, d.text)
            if d.text.strip() == current.strip():
                d.notes.append("no change")
            elif d.text in seen:
                d.notes.append(f"duplicate of draft {seen[d.text]}")
            elif d.violations and cfg.reject_violations:
                d.notes.append("rejected: contract violation")
            else:
                seen[d.text] = d.draft_id
                eligible.append(d)

        use_judge, use_verifier = self._score(name, candidate, examples, eligible, spend)
        for d in eligible:
            d.J = self._j(d, use_judge, use_verifier)
        ranked = sorted(eligible, key=lambda d: (-d.J, d.draft_id))
        if not ranked:
            self._record(name, drafts)
            self.log.add(Record("skipped", self.log.round, name, note="no eligible draft"))
            return None

        best, top = ranked[0], ranked[: cfg.n]
        if len(top) < 2:
            self._record(name, drafts, chosen=best.draft_id)
            return best.text
        merged, use_merge = self._merge_top(name, candidate, examples, top, best, use_judge, use_verifier, spend)
        use_merge = use_merge and merged.text != best.text
        self._record(name, drafts, chosen=None if use_merge else best.draft_id)
        self._record_merge(name, merged, selected=use_merge)
        return merged.text if use_merge else best.text

    def _draft(self, i: int, name: str, current: str, examples: list[Any]) -> _Draft:
        base, temperature = self._proposers[i % len(self._proposers)]
        # Each draft gets its own sampling stream, fixed by (search seed, round, draft): otherwise two
        # drafts from one (model, temperature) pair, or the same draft in another repeat, are one cache
        # entry. In-process models sample with `seed` (part of their cache key); remote ones get DSPy's
        # `rollout_id`, which keys its cache without reaching providers that reject `seed`.
        stream = (self.seed * 1_000_003 + self._round) * 1_009 + i
        key = "seed" if roma_lab.lm.in_process(str(base.model)) else "rollout_id"
        lm = base.copy(temperature=temperature, **{key: stream})
        draft = _Draft(i, roma_lab.lm.model_label(base), temperature)
        try:
            with dspy.context(lm=lm):
                draft.text = self._drafters[name]({name: current}, {name: examples}, [name])[name].strip()
        except Exception as e:  # noqa: BLE001 - one failed draft is recorded; the others still compete
            draft.error = f"{type(e).__name__}: {e}"
        return draft

    def _score(self, name, candidate, examples, eligible, spend) -> tuple[bool, bool]:
        """Judge and verify every eligible draft, or none: a score that only some drafts got
        would not rank them fairly, so a round that cannot afford all of them skips that score."""
        cfg = self.config
        use_judge = cfg.alpha > 0 and bool(eligible) and self._affordable("judge", len(eligible), spend)
        use_verifier = (
            cfg.beta > 0 and bool(eligible) and self.log.minibatch is not None
            and self._affordable("verifier", len(eligible), spend)
        )
        for flag, weight, label in ((use_judge, cfg.alpha, "judge"), (use_verifier, cfg.beta, "verifier")):
            if weight > 0 and eligible and not flag:
                reason = "no minibatch" if label == "verifier" and self.log.minibatch is None else "budget"
                for d in eligible:
                    d.notes.append(f"{label} skipped: {reason}")
        if use_judge:
            self._charge("judge", len(eligible), spend)
        if use_verifier:
            self._charge("verifier", len(eligible), spend)

        def score(d: _Draft) -> None:
            if use_judge:
                d.judge = self._judge_score(name, candidate[name], d.text, examples, d)
            if use_verifier:
                d.verifier = self._verify(name, candidate, d.text)

        concurrent_map(score, eligible, workers=cfg.max_parallel)
        return use_judge, use_verifier

    def _j(self, d: _Draft, use_judge: bool, use_verifier: bool) -> float:
        cfg = self.config
        return (
            (cfg.alpha * d.judge if use_judge else 0.0)
            + (cfg.beta * d.verifier if use_verifier else 0.0)
            - cfg.gamma * len(d.violations)
            - cfg.delta * d.delta
        )

    def _judge_score(self, name: str, current: str, proposed: str, examples: list[Any], d: _Draft) -> float:
        try:
            with dspy.context(lm=self._judge_lm, adapter=JSONAdapter()):
                score = float(self._judge(
                    component=name, contract=self.contracts[name].describe(), current_instruction=current,
                    proposed_instruction=proposed, examples_with_feedback=[dict(e) for e in examples],
                ).score)
        except Exception as e:  # noqa: BLE001 - a judge that cannot answer scores 0, and the row says why
            d.notes.append(f"judge failed ({type(e).__name__}: {e}); scored 0")
            return 0.0
        if not 0.0 <= score <= 1.0:
            d.notes.append(f"judge score {score} outside [0, 1]; clipped")
            score = min(max(score, 0.0), 1.0)
        return score

    def _verify(self, name: str, candidate: Mapping[str, str], text: str) -> float:
        """Mean metric of the program with this instruction on the round's reflective minibatch."""
        examples = self.log.minibatch or []
        program = build_program(self.student, {**candidate, name: text})
        # Not dspy.Evaluate: it clears tqdm's process-wide set of bars, so two drafts verified at once
        # could raise KeyError in one of them; gepa then re-ran the whole round and the failed
        # attempt's metric calls were counted too (a rare, timing-dependent record).
        scores = [float(getattr(s, "score", s)) for s in (self._metric_on(program, ex) for ex in examples)]
        with self.log._lock:
            self.log.verifier_metric_calls += len(examples)
        return sum(scores) / len(scores) if scores else 0.0

    def _metric_on(self, program: dspy.Module, example: Any) -> Any:
        """The metric on one example, or ``failure_score`` if the program or metric raises (as dspy.Evaluate)."""
        try:
            return self.metric(example, program(**example.inputs()))
        except Exception as e:  # noqa: BLE001 - one failed example scores failure_score, the rest still count
            _logger.warning("verifier: example failed (%s: %s); scored %s", type(e).__name__, e, self.failure_score)
            return self.failure_score

    def _merge_top(self, name, candidate, examples, top, best, use_judge, use_verifier, spend) -> tuple[_Draft, bool]:
        """Merge the top drafts; returns the merge and whether to use it (if not, its notes say why)."""
        merged = _Draft(-1, str(getattr(self._merger_lm, "model", "")), NAN)
        needs = [("merge", 1), ("judge", int(use_judge)), ("verifier", int(use_verifier))]
        if not all(self._affordable(kind, n, spend) for kind, n in needs):
            merged.notes.append("merge skipped: budget; using best draft")
            return merged, False
        for kind, n in needs:
            self._charge(kind, n, spend)
        current = candidate[name]
        try:
            with dspy.context(lm=self._merger_lm, adapter=JSONAdapter()):
                raw = self._merge(
                    component=name, contract=self.contracts[name].describe(), current_instruction=current,
                    ranked_proposals=[d.text for d in top],
                ).merged_instruction
        except Exception as e:  # noqa: BLE001 - a failed merge falls back to the best draft, recorded
            merged.error = f"{type(e).__name__}: {e}"
            merged.notes.append("merge failed; using best draft")
            return merged, False
        merged.text = dedupe_sentences(raw)
        merged.violations = self.contracts[name].violations(merged.text)
        merged.delta = edit_size(current, merged.text)
        if merged.violations:
            merged.notes.append("merge breaks the contract; using best draft")
            return merged, False
        if merged.text.strip() == current.strip():
            merged.notes.append("merge made no change; using best draft")
            return merged, False
        if use_judge:
            merged.judge = self._judge_score(name, current, merged.text, examples, merged)
        if use_verifier:
            merged.verifier = self._verify(name, candidate, merged.text)
        merged.J = self._j(merged, use_judge, use_verifier)
        if merged.J < best.J:
            merged.notes.append(f"merge J {merged.J:.3f} < best draft J {best.J:.3f}; using best draft")
            return merged, False
        return merged, True

    # ---- records -----------------------------------------------------------------------------
    def _row(self, name: str, d: _Draft, **kw: Any) -> Record:
        return Record(
            "draft", self.log.round, name, draft_id=d.draft_id, proposer_model=d.model, temperature=d.temperature,
            instruction=d.text, judge=d.judge, verifier=d.verifier,
            violations=None if d.error else len(d.violations), violation_detail="; ".join(d.violations),
            delta=d.delta, J=d.J, note="; ".join(filter(None, [d.error, *d.notes])), **kw,
        )

    def _record(self, name: str, drafts: list[_Draft], chosen: int | None = None) -> None:
        for d in drafts:
            self.log.add(self._row(name, d, selected=d.draft_id == chosen))

    def _record_merge(self, name: str, merged: _Draft, selected: bool) -> None:
        self.log.add(replace(self._row(name, merged, selected=selected), event="merge", draft_id=None, merged=True))
