"""GEPA+ configuration: one frozen value, validated when built."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# A model is named by a string (resolved with ``roma_lab.lm.resolve_lm``) or given as a dspy LM object.
LMLike = Any


def _is_lm_like(x: object) -> bool:
    return (isinstance(x, str) and bool(x)) or (hasattr(x, "copy") and hasattr(x, "model"))


def _check_count(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"{name} must be a non-negative int or None (unlimited), got {value!r}")


@dataclass(frozen=True, slots=True)
class GepaPlusConfig:
    """Settings of the GEPA+ proposer (ROMA paper §2.2, Appendix G).

    Each round (one GEPA iteration), for each component to update, GEPA+ drafts ``k`` instructions
    with the ``proposers`` list of (model, temperature) pairs (draft i uses pair i mod len), scores
    each with J = alpha*Judge + beta*Verifier - gamma*ContractViolations - delta*|Delta|, and merges
    the top ``n`` with ``merger`` into one instruction. alpha = 0 turns the judge off, beta = 0
    the verifier. Budgets are per round (``max_*``) and per run (``max_total_*``); None means
    unlimited. A verifier run is one instruction evaluated on the round's reflective minibatch.
    """

    proposers: tuple[tuple[LMLike, float], ...]
    k: int = 4
    n: int = 2
    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 1.0
    delta: float = 0.1
    judge: LMLike | None = None
    merger: LMLike | None = None
    reject_violations: bool = True
    max_parallel: int = 4
    max_judge_calls: int | None = None
    max_verifier_runs: int | None = None
    max_merge_calls: int | None = None
    max_total_judge_calls: int | None = None
    max_total_verifier_runs: int | None = None
    max_total_merge_calls: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k (drafts per round) must be an int >= 1, got {self.k!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n (drafts merged) must be an int >= 1, got {self.n!r}")
        if self.n > self.k:
            raise ValueError(f"n (drafts merged) must be <= k (drafts per round); got n={self.n}, k={self.k}")
        for name in ("alpha", "beta", "gamma", "delta"):
            w = getattr(self, name)
            if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {w!r}")
        if not isinstance(self.proposers, tuple) or not self.proposers:
            raise ValueError("proposers must be a non-empty tuple of (model, temperature) pairs")
        for pair in self.proposers:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise ValueError(f"each proposer must be a (model, temperature) pair, got {pair!r}")
            lm, temperature = pair
            if not _is_lm_like(lm):
                raise TypeError(f"proposer model must be a model name or a dspy LM, got {type(lm).__name__}")
            if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
                raise ValueError(f"proposer temperature must be a number in [0, 2], got {temperature!r}")
        for role in ("judge", "merger"):
            lm = getattr(self, role)
            if lm is not None and not _is_lm_like(lm):
                raise TypeError(f"{role} must be a model name, a dspy LM or None, got {type(lm).__name__}")
        if self.alpha > 0 and self.judge is None:
            raise ValueError("alpha > 0 weights a judge score, so a judge model is required (or set alpha=0)")
        if self.n > 1 and self.merger is None:
            raise ValueError("n > 1 merges drafts, so a merger model is required (or set n=1)")
        if isinstance(self.max_parallel, bool) or not isinstance(self.max_parallel, int) or self.max_parallel < 1:
            raise ValueError(f"max_parallel must be an int >= 1, got {self.max_parallel!r}")
        for name in (
            "max_judge_calls", "max_verifier_runs", "max_merge_calls",
            "max_total_judge_calls", "max_total_verifier_runs", "max_total_merge_calls",
        ):
            _check_count(name, getattr(self, name))
