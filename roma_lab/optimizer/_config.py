"""Configuration as frozen values, validated when built: the GEPA+ proposer's settings
(:class:`GepaPlusConfig`) and the settings of every search of a Table 7 / 8 run (:class:`SearchSettings`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from roma_lab.lm import model_label

# A model is named by a string (resolved with ``roma_lab.lm.resolve_lm``) or given as a dspy LM object.
LMLike = Any


def _is_lm_like(x: object) -> bool:
    return (isinstance(x, str) and bool(x)) or (hasattr(x, "copy") and hasattr(x, "model"))


def _check_size(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


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
        _check_size("k (drafts per round)", self.k, 1)
        _check_size("n (drafts merged)", self.n, 1)
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
        _check_size("max_parallel", self.max_parallel, 1)
        for name in (
            "max_judge_calls", "max_verifier_runs", "max_merge_calls",
            "max_total_judge_calls", "max_total_verifier_runs", "max_total_merge_calls",
        ):
            _check_count(name, getattr(self, name))


def _name(lm: LMLike | None) -> str:
    """How a model is written down (``model_label``: its name, or an LM's model string)."""
    return "" if lm is None else model_label(lm)


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """Everything the GEPA and GEPA+ searches of one Table 7 / Table 8 run share.

    The ROMA paper's ``table7_gepa`` / ``table8_convergence`` build it once from their keywords and
    write it on every row of their runs tables. Models are names (resolved with ``roma_lab.lm``) or dspy LM objects: ``lm``
    runs the programs; proposer i is (``reflection_lms[i]``, ``reflection_temperatures[i]``) and
    plain GEPA uses the first; ``judge_lm`` is GEPA+'s judge and PAPILLON's judges; ``merger_lm``
    (None: the first reflection model) merges GEPA+'s top ``n`` of ``k`` drafts; ``external_lm`` is
    PAPILLON's external model (None: the task model). ``max_tokens`` caps the task and judge models
    only: a cut-off instruction would be a broken proposal. ``seed`` fixes the data split; repeat r
    searches with seed ``seed + r``. ``max_metric_calls`` caps GEPA's own metric calls per search.
    """

    lm: LMLike = "local"
    reflection_lms: tuple[LMLike, ...] = ("local",)
    reflection_temperatures: tuple[float, ...] = (1.0,)
    judge_lm: LMLike = "local"
    merger_lm: LMLike | None = None
    external_lm: str | None = None
    max_tokens: int | None = None
    n_train: int = 4
    n_val: int = 3
    repeats: int = 1
    max_metric_calls: int = 16
    k: int = 3
    n: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        # notebooks pass lists; a frozen value holds tuples
        object.__setattr__(self, "reflection_lms", tuple(self.reflection_lms))
        object.__setattr__(self, "reflection_temperatures", tuple(self.reflection_temperatures))
        if not self.reflection_lms or len(self.reflection_lms) != len(self.reflection_temperatures):
            raise ValueError(f"reflection_lms and reflection_temperatures must be non-empty and of equal length, got "
                             f"{len(self.reflection_lms)} model(s) and {len(self.reflection_temperatures)} temperature(s)")
        for name in ("n_train", "n_val", "repeats", "max_metric_calls"):
            _check_size(name, getattr(self, name), 1)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an int, got {self.seed!r}")
        if self.max_tokens is not None:
            _check_size("max_tokens (or None)", self.max_tokens, 1)
        self.gepa_plus_config(self.judge_lm)  # k, n, temperatures and models checked now, not mid-run

    @property
    def merger(self) -> LMLike:
        return self.merger_lm if self.merger_lm is not None else self.reflection_lms[0]

    def gepa_plus_config(self, judge: LMLike) -> GepaPlusConfig:
        """The GEPA+ proposer's settings, with ``judge`` (the judge model as resolved for the run)."""
        return GepaPlusConfig(
            proposers=tuple(zip(self.reflection_lms, self.reflection_temperatures, strict=True)), k=self.k, n=self.n,
            judge=judge, merger=self.merger,
        )

    def as_row(self) -> dict[str, Any]:
        """The settings as columns of a table row: models by name (the merger as used), several values
        joined by "; "."""
        return {f.name: getattr(self, f.name) for f in fields(self)} | {
            "lm": _name(self.lm), "judge_lm": _name(self.judge_lm), "external_lm": _name(self.external_lm),
            "merger_lm": _name(self.merger),
            "reflection_lms": "; ".join(_name(lm) for lm in self.reflection_lms),
            "reflection_temperatures": "; ".join(f"{t:g}" for t in self.reflection_temperatures),
        }

    def describe(self) -> str:
        """One line for the ``setting`` of every measured row set beside the paper's."""
        proposers = ", ".join(f"{_name(m)} at T={t:g}" for m, t in zip(self.reflection_lms,
                                                                         self.reflection_temperatures, strict=True))
        return (f"model {_name(self.lm)}, judge {_name(self.judge_lm)}, proposers {proposers}, merger "
                f"{_name(self.merger)}; k={self.k}, n={self.n}; n_train {self.n_train}, "
                f"n_val {self.n_val}; {self.repeats} repeat(s) from seed {self.seed}; budget {self.max_metric_calls} "
                "GEPA metric calls per search")
