"""Simulated paired studies with a planted difference: the model the calibration study draws from.

A task i has a difficulty b_i ~ N(0, task_sd) on the logit scale, shared by every condition (so
outcomes are correlated within a task, as in real evaluations). The baseline solves it with
probability expit(mu + b_i), a condition with planted effect delta with probability
expit(mu + b_i + s): mu sets the baseline's mean success over tasks to ``base_rate`` and s makes
the mean success over tasks exactly ``base_rate + delta`` (both solved by Gauss-Hermite
quadrature). Each of R runs is an independent Bernoulli draw given the task (the run noise). The
true difference, the estimand a paired CI must cover, is delta: a population of tasks, of which a
study sees n. ``roma_lab.results.calibrate_statistics`` runs these studies through the tables' own
comparison code; design/calibration.md has the results.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

_NODES = 96  # Gauss-Hermite nodes: the expectations below are exact to ~1e-12 for task_sd <= 3


@dataclass(frozen=True, slots=True)
class PairedDesign:
    """A simulated paired comparison: the baseline's mean success, the task heterogeneity (sd of
    difficulty on the logit scale), the planted difference of mean success and the runs per task."""

    base_rate: float = 0.5
    task_sd: float = 1.5
    effect: float = 0.0
    runs: int = 1

    def __post_init__(self):
        if not 0.0 < self.base_rate < 1.0:
            raise ValueError(f"base_rate must lie strictly between 0 and 1, got {self.base_rate!r}")
        if not 0.0 <= self.task_sd <= 3.0:
            raise ValueError(f"task_sd must lie in [0, 3], got {self.task_sd!r}")
        if not 0.0 < self.base_rate + self.effect < 1.0:
            raise ValueError("base_rate + effect must lie strictly between 0 and 1, "
                             f"got {self.base_rate + self.effect!r}")
        if isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 1:
            raise ValueError(f"runs must be an int >= 1, got {self.runs!r}")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class DesignTruth:
    """What a :class:`PairedDesign` implies, computed exactly: the logit offsets, the discordance of
    one run each (share of tasks on which the two conditions' single 0/1 outcomes differ) and the sd
    of the per-task difference of means over the design's runs."""

    mu: float
    shift: float
    discordance: float
    sd_diff: float


def design_truth(design: PairedDesign) -> DesignTruth:
    """The exact quantities of ``design`` (quadrature over the task difficulty)."""
    mu = _solve(lambda m: _mean(m, design.task_sd) - design.base_rate)
    shift = 0.0 if design.effect == 0 else _solve(
        lambda s: _mean(mu + s, design.task_sd) - design.base_rate - design.effect)
    x, w = _quadrature(design.task_sd)
    p_b, p_a = _expit(mu + x), _expit(mu + x + shift)
    discordance = float(np.sum(w * (p_a * (1 - p_b) + p_b * (1 - p_a))))
    # Var(mean_A - mean_B) = Var_task(p_A - p_B) + E_task[p_A(1 - p_A) + p_B(1 - p_B)] / R
    between = float(np.sum(w * (p_a - p_b) ** 2)) - design.effect**2
    within = float(np.sum(w * (p_a * (1 - p_a) + p_b * (1 - p_b))))
    return DesignTruth(mu=mu, shift=shift, discordance=discordance,
                       sd_diff=math.sqrt(max(between, 0.0) + within / design.runs))


def simulate_scores(design: PairedDesign, n_tasks: int, n_studies: int, rng: np.random.Generator, *,
                    n_conditions: int = 2) -> np.ndarray:
    """0/1 scores of shape ``(n_studies, n_conditions, n_tasks, runs)``: condition 0 is the
    baseline, every other condition carries the planted effect (all on the same tasks of a study)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator (never the global NumPy RNG)")
    if n_tasks < 2 or n_studies < 1 or n_conditions < 2:
        raise ValueError(f"need n_tasks >= 2, n_studies >= 1, n_conditions >= 2; got {n_tasks}, {n_studies}, "
                         f"{n_conditions}")
    truth = design_truth(design)
    difficulty = rng.normal(0.0, design.task_sd, size=(n_studies, 1, n_tasks, 1))
    offsets = np.where(np.arange(n_conditions) == 0, 0.0, truth.shift).reshape(1, n_conditions, 1, 1)
    p = _expit(truth.mu + difficulty + offsets)
    return (rng.random((n_studies, n_conditions, n_tasks, design.runs)) < p).astype(float)


def _expit(x):
    from scipy import special

    return special.expit(x)


@functools.cache
def _nodes() -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.hermite_e.hermegauss(_NODES)
    return x, w / w.sum()


def _quadrature(task_sd: float) -> tuple[np.ndarray, np.ndarray]:
    x, w = _nodes()
    return task_sd * x, w


def _mean(logit: float, task_sd: float) -> float:
    x, w = _quadrature(task_sd)
    return float(np.sum(w * _expit(logit + x)))


def _solve(gap) -> float:
    from scipy import optimize

    return float(optimize.brentq(gap, -40.0, 40.0, xtol=1e-13))
