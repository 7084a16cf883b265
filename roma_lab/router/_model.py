"""Raw-text operation model: binary n-gram features, one calibrated logistic head per operation.

Paper §4: binary word unigrams + bigrams + character 3–5-grams with minimum document frequency 2;
class-balanced weighted BCE with l2 (lambda = .002), 500 full-batch gradient steps at learning rate
.35/sqrt(1 + e/50); per-head temperature chosen on dev by Brier score from a fixed grid; threshold
tau chosen on dev labels (exact-route accuracy, then action F1, then lower cost); greedy addition by
(p - tau)/c(o) under M support operations and budget B, placed in canonical order.
All five heads train together as one (features x 5) weight matrix over a sparse design matrix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np
from scipy import sparse
from scipy.special import expit

from ._ops import BUDGET, COSTS, MAX_SUPPORT_OPS, SUPPORT_OPS, route_cost

TEMPERATURE_GRID: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
TAU_GRID: tuple[float, ...] = tuple(round(0.30 + 0.05 * i, 2) for i in range(9))   # .30 ... .70
_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")   # C0/C1 controls except tab, newlines
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")


def check_prompt(text) -> str:
    """A prompt the router can read, or a clear error: not a str is a TypeError; control characters,
    or no letter or digit at all (empty, whitespace, emoji, punctuation), a ValueError."""
    if not isinstance(text, str):
        hint = " (decode bytes to str first)" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"a prompt must be str, got {type(text).__name__}{hint}")
    control = _CONTROL.search(text)
    if control:
        raise ValueError(f"prompt contains control character U+{ord(control.group()):04X} at {control.start()}")
    if not _LETTER_OR_DIGIT.search(text):
        raise ValueError(f"prompt has no letter or digit to route on: {text[:40]!r}")
    return text


def _grams(text: str, *, chars: bool) -> set[str]:
    """Binary n-gram keys. Words are keyed with a leading newline and bigrams with a leading tab:
    normalised text has neither, so they can never collide with a raw character n-gram."""
    text = " ".join(text.lower().split())
    words = _WORD.findall(text)
    grams = {"\n" + w for w in words}
    grams.update(["\t" + a + " " + b for a, b in zip(words, words[1:])])
    if chars:
        padded = " " + text + " "
        for n in (3, 4, 5):
            grams.update([padded[i:i + n] for i in range(len(padded) - n + 1)])
    return grams


@dataclass(frozen=True, slots=True)
class Featurizer:
    """Binary n-gram vocabulary fitted on training prompts (min document frequency applies)."""

    vocabulary: Mapping[str, int]
    chars: bool = True

    @classmethod
    def fit(cls, texts: Sequence[str], *, chars: bool = True, min_df: int = 2) -> "Featurizer":
        df: dict[str, int] = {}
        for text in texts:
            for g in _grams(text, chars=chars):
                df[g] = df.get(g, 0) + 1
        kept = sorted(g for g, n in df.items() if n >= min_df)
        return cls({g: i for i, g in enumerate(kept)}, chars)

    @property
    def n_features(self) -> int:
        return len(self.vocabulary)

    def indices(self, text: str) -> np.ndarray:
        check_prompt(text)
        vocab = self.vocabulary
        # sorted so that sums over features run in one order in every process (set order is hash-seeded)
        return np.sort(np.fromiter((vocab[g] for g in _grams(text, chars=self.chars) if g in vocab), dtype=np.int64))

    def transform(self, texts: Sequence[str]) -> sparse.csr_matrix:
        if isinstance(texts, str):
            raise TypeError("transform takes a sequence of prompts, got one str")
        rows = [self.indices(t) for t in texts]
        indptr = np.cumsum([0] + [len(r) for r in rows])
        cols = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        return sparse.csr_matrix((np.ones(len(cols)), cols, indptr), shape=(len(texts), self.n_features))


@dataclass(frozen=True, slots=True)
class TrainingConfig:
    l2: float = 0.002
    steps: int = 500
    lr0: float = 0.35
    chars: bool = True
    min_df: int = 2

    def __post_init__(self):
        if self.l2 < 0 or self.steps < 1 or self.lr0 <= 0 or self.min_df < 1:
            raise ValueError(f"need l2 >= 0, steps >= 1, lr0 > 0 and min_df >= 1, got {self}")


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return expit(z)


def train_heads(X: sparse.csr_matrix, Y: np.ndarray, config: TrainingConfig) -> tuple[np.ndarray, np.ndarray]:
    """Full-batch gradient descent on class-balanced weighted BCE + l2, all heads at once."""
    n, _ = X.shape
    pos = Y.sum(axis=0)
    if np.any(pos == 0) or np.any(pos == n):
        raise ValueError("every operation head needs both positive and negative training tasks")
    # positives and negatives each carry half of the total weight, per head
    weights = np.where(Y == 1, n / (2 * pos), n / (2 * (n - pos)))
    # Features that fire on exactly the same tasks get identical gradients from the zero start, so
    # their weights stay equal forever: train one weight per distinct column, counted `mult` times.
    # This is exact, not an approximation, and shrinks templated n-grams by an order of magnitude.
    bits = np.packbits(X.T.toarray().astype(bool), axis=1)      # one byte string per feature column
    keys = np.ascontiguousarray(bits).view(np.dtype((np.void, bits.shape[1]))).ravel()
    _, first, inverse, mult = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    Xu = X[:, first].toarray()                                  # (n, distinct columns), dense
    Xm, XuT = Xu * mult, np.ascontiguousarray(Xu.T)             # logits see every copy; gradients one
    U = np.zeros((Xu.shape[1], Y.shape[1]))
    b = np.zeros(Y.shape[1])
    for epoch in range(config.steps):
        lr = config.lr0 / np.sqrt(1 + epoch / 50)
        residual = weights * (_sigmoid(Xm @ U + b) - Y) / n
        U -= lr * (XuT @ residual + config.l2 * U)
        b -= lr * residual.sum(axis=0)
    return U[inverse.ravel()], b


def choose_temperatures(logits: np.ndarray, Y: np.ndarray, grid=TEMPERATURE_GRID) -> np.ndarray:
    """Per-head temperature minimising the Brier score (ties -> the first grid value)."""
    briers = np.stack([((_sigmoid(logits / t) - Y) ** 2).mean(axis=0) for t in grid])   # (grid, heads)
    return np.asarray(grid)[briers.argmin(axis=0)]


def greedy_route(probs: np.ndarray, tau: float, *, budget: float | None = BUDGET,
                 max_ops: int | None = MAX_SUPPORT_OPS) -> tuple[str, ...]:
    """Operations with p >= tau ranked by (p - tau)/c(o), added while M and B allow; canonical order."""
    check_tau(tau)
    candidates = [(float((p - tau) / COSTS[o]), i) for i, (o, p) in enumerate(zip(SUPPORT_OPS, probs)) if p >= tau]
    chosen: list[str] = []
    for _, i in sorted(candidates, key=lambda c: (-c[0], c[1])):
        op = SUPPORT_OPS[i]
        if max_ops is not None and len(chosen) >= max_ops:
            break
        if budget is not None and route_cost(tuple(chosen) + (op,)) > budget + 1e-9:
            continue   # a cheaper candidate may still fit
        chosen.append(op)
    return tuple(o for o in SUPPORT_OPS if o in chosen)


def check_tau(tau: float) -> None:
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"threshold tau must lie in [0, 1], got {tau}")


def routes_at(probs: np.ndarray, tau: float, *, budget: float | None = BUDGET,
              max_ops: int | None = MAX_SUPPORT_OPS) -> list[tuple[str, ...]]:
    return [greedy_route(p, tau, budget=budget, max_ops=max_ops) for p in probs]


def route_matrix(routes) -> np.ndarray:
    """(n, 5) boolean membership of each canonical operation in each route (tuple or string)."""
    return np.array([[op in r for op in SUPPORT_OPS] for r in routes], dtype=bool)


def route_quality(routes: Sequence[tuple[str, ...]], labels: np.ndarray) -> dict[str, float]:
    """Exact-route match and micro precision/recall/F1 of support operations against labels."""
    pred, gold = route_matrix(routes), np.asarray(labels).astype(bool)
    tp, fp, fn = (pred & gold).sum(), (pred & ~gold).sum(), (~pred & gold).sum()
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"exact_route": float((pred == gold).all(axis=1).mean()), "precision": float(precision),
            "recall": float(recall), "f1": float(f1)}


@dataclass(frozen=True, slots=True)
class OperationModel:
    """Fitted router: featurizer, weights, calibration and route constraints."""

    featurizer: Featurizer
    weights: np.ndarray             # (n_features, 5)
    bias: np.ndarray                # (5,)
    temperatures: np.ndarray        # (5,)
    tau: float = 0.5
    budget: float | None = BUDGET
    max_ops: int | None = MAX_SUPPORT_OPS

    @classmethod
    def fit(cls, texts: Sequence[str], labels: np.ndarray, config: TrainingConfig = TrainingConfig()) -> "OperationModel":
        featurizer = Featurizer.fit(texts, chars=config.chars, min_df=config.min_df)
        W, b = train_heads(featurizer.transform(texts), np.asarray(labels, dtype=np.float64), config)
        return cls(featurizer, W, b, np.ones(len(SUPPORT_OPS)))

    def logits(self, texts: Sequence[str]) -> np.ndarray:
        return self.featurizer.transform(texts) @ self.weights + self.bias

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """(n, 5) calibrated probabilities in canonical operation order.

        A prompt with no n-gram in the training vocabulary (`known_features` 0) carries no evidence
        for any operation: its probabilities are 0, so it is routed direct, rather than the heads'
        biases, which class balancing puts near .5 (a 3-operation route for any unreadable text)."""
        X = self.featurizer.transform(texts)
        probs = _sigmoid((X @ self.weights + self.bias) / self.temperatures)
        probs[X.getnnz(axis=1) == 0] = 0.0
        return probs

    def probability(self, text: str) -> np.ndarray:
        """One prompt, without building a sparse matrix (the per-task routing path); as `probabilities`."""
        idx = self.featurizer.indices(text)
        if not len(idx):
            return np.zeros(len(SUPPORT_OPS))
        return _sigmoid((self.weights[idx].sum(axis=0) + self.bias) / self.temperatures)

    def known_features(self, text: str) -> int:
        """How many of the prompt's n-grams the model was trained on (0: routed direct, see above)."""
        return len(self.featurizer.indices(text))

    def calibrate(self, texts: Sequence[str], labels: np.ndarray, grid=TEMPERATURE_GRID) -> "OperationModel":
        return replace(self, temperatures=choose_temperatures(self.logits(texts), np.asarray(labels), grid))

    def route(self, text: str) -> tuple[str, ...]:
        return greedy_route(self.probability(text), self.tau, budget=self.budget, max_ops=self.max_ops)

    def with_threshold(self, tau: float) -> "OperationModel":
        check_tau(tau)
        return replace(self, tau=float(tau))

    def select_threshold(self, texts: Sequence[str], labels: np.ndarray, grid=TAU_GRID) -> tuple["OperationModel", list[dict]]:
        """Pick tau on dev labels: exact-route accuracy, then action F1, then lower mean cost."""
        probs = self.probabilities(texts)
        rows = []
        for tau in grid:
            routes = routes_at(probs, tau, budget=self.budget, max_ops=self.max_ops)
            rows.append({"tau": tau, **route_quality(routes, labels),
                         "mean_cost": float(np.mean([route_cost(r) for r in routes]))})
        best = max(rows, key=lambda r: (r["exact_route"], r["f1"], -r["mean_cost"], -r["tau"]))
        return self.with_threshold(best["tau"]), rows
