"""Routing policies: the learned router and the paper's seven comparison policies.

A policy is a frozen, callable spec: `policy(task) -> tuple of support operations`. Its fields
are its parameters, so a run can be re-created from what is recorded. Only the static and oracle
policies read task metadata (workload, labels); every other policy reads the prompt text alone.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ._model import OperationModel, check_prompt, greedy_route
from ._ops import SUPPORT_OPS, canonical

#: One route per workload: each solves every family of its workload except retrieval outages.
STATIC_ROUTES: Mapping[str, tuple[str, ...]] = {
    "data_analysis": ("D", "T", "C"),
    "research": ("D", "T", "V"),
    "document_processing": ("D", "T", "C", "V"),
}

#: Cue phrases per operation, as a rule writer who sees only the training prompts would pick them:
#: every phrase occurs in some train prompt (a test checks it), none comes from dev, test or challenge.
KEYWORD_RULES: Mapping[str, tuple[str, ...]] = {
    "G": ("offline", "specialist"),
    "D": ("in which city", "located", "format"),
    "T": ("table", "record", "retrieve", "laboratory", "sources", "document store", "invoice", "contract"),
    "C": ("compute", "sum", "summed", "total", "average", "mean", "median", "percentage", "count", "normalise"),
    "V": ("verify", "verifying", "confirm", "latest", "conflict"),
}


@dataclass(frozen=True, slots=True)
class Direct:
    name: str = "direct"

    def __call__(self, task) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True, slots=True)
class Random:
    """Zero to three operations, a deterministic function of the task id and seed."""

    seed: int = 0
    name: str = "random"

    def __call__(self, task) -> tuple[str, ...]:
        digest = hashlib.sha256(f"{self.seed}:{task.task_id}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        m = int(rng.integers(0, 4))
        return canonical(SUPPORT_OPS[i] for i in rng.choice(len(SUPPORT_OPS), size=m, replace=False))


@dataclass(frozen=True, slots=True)
class Keyword:
    """An operation is chosen when one of its cue phrases occurs as whole words in the prompt."""

    rules: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(KEYWORD_RULES))
    name: str = "keyword"

    def __call__(self, task) -> tuple[str, ...]:
        text = check_prompt(task.prompt).lower()
        hits = {op for op, phrases in self.rules.items()
                if re.search(r"\b(?:" + "|".join(map(re.escape, phrases)) + r")\b", text)}
        if "G" in hits:   # the rules' one interaction: an outage cue means delegate instead of retrieving
            hits.discard("T")
        return canonical(hits)


@dataclass(frozen=True, slots=True)
class StaticWorkload:
    routes: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(STATIC_ROUTES))
    name: str = "static"

    def __call__(self, task) -> tuple[str, ...]:
        return self.routes[task.workload]


@dataclass(frozen=True, slots=True)
class FixedAgent:
    name: str = "fixed_agent"

    def __call__(self, task) -> tuple[str, ...]:
        return SUPPORT_OPS


@dataclass(frozen=True, slots=True)
class Learned:
    """The calibrated compositional router (greedy under M and B)."""

    model: OperationModel
    name: str = "learned"

    def __call__(self, task) -> tuple[str, ...]:
        return self.model.route(task.prompt)

    def prepare(self, tasks) -> None:
        self.model.prepare([t.prompt for t in tasks])


@dataclass(frozen=True, slots=True)
class OneShot:
    """Same calibrated model, at most its single highest-probability operation."""

    model: OperationModel
    name: str = "one_shot"

    def prepare(self, tasks) -> None:
        self.model.prepare([t.prompt for t in tasks])

    def __call__(self, task) -> tuple[str, ...]:
        probs = self.model.probability(task.prompt)
        best = int(np.argmax(probs))
        return (SUPPORT_OPS[best],) if probs[best] >= self.model.tau else ()


@dataclass(frozen=True, slots=True)
class Oracle:
    name: str = "oracle"

    def __call__(self, task) -> tuple[str, ...]:
        return task.labels


def mean_entropy(probs: np.ndarray) -> float:
    """Mean binary entropy (bits) of the operation probabilities: 0 when every head is certain."""
    p = np.clip(probs, 1e-12, 1 - 1e-12)
    return float(np.mean(-(p * np.log2(p) + (1 - p) * np.log2(1 - p))))


@dataclass(frozen=True, slots=True)
class Hybrid:
    """Learned router that backs off to the static workload route when its probabilities are unsure.

    Unsure (paper §7): some calibrated probability lies within `margin` of tau ("near threshold"),
    or the probabilities are diffuse, i.e. their mean binary entropy exceeds `max_entropy` bits.
    Both are chosen on dev only (`select_hybrid_gate`); margin 0 and no entropy gate never back off.
    """

    model: OperationModel
    margin: float = 0.0
    max_entropy: float | None = None
    static: StaticWorkload = field(default_factory=StaticWorkload)
    name: str = "hybrid"

    def __post_init__(self):
        if not 0 <= self.margin <= 1 or not (self.max_entropy is None or 0 <= self.max_entropy <= 1):
            raise ValueError(f"margin must lie in [0, 1] and max_entropy in [0, 1] bits or be None, "
                             f"got {self.margin}, {self.max_entropy}")

    def prepare(self, tasks) -> None:
        self.model.prepare([t.prompt for t in tasks])

    def backs_off(self, probs: np.ndarray) -> bool:
        near = bool(np.any(np.abs(probs - self.model.tau) < self.margin))
        return near or (self.max_entropy is not None and mean_entropy(probs) > self.max_entropy)

    def __call__(self, task) -> tuple[str, ...]:
        probs = self.model.probability(task.prompt)
        if self.backs_off(probs):
            return self.static(task)
        return greedy_route(probs, self.model.tau, budget=self.model.budget, max_ops=self.model.max_ops)


def baseline_policies(model: OperationModel, *, seed: int = 0) -> tuple:
    """The paper's comparison set, in its table order, with the learned router first."""
    return (Learned(model), Direct(), Random(seed), Keyword(), StaticWorkload(), FixedAgent(),
            OneShot(model), Oracle())
