"""Raw-text operation model: binary n-gram features, one calibrated logistic head per operation.

Paper §4: binary word unigrams + bigrams + character 3–5-grams with minimum document frequency 2;
class-balanced weighted BCE with l2 (lambda = .002), 500 full-batch gradient steps at learning rate
.35/sqrt(1 + e/50); per-head temperature chosen on dev by Brier score from a fixed grid; threshold
tau chosen on dev labels (exact-route accuracy, then action F1, then lower cost); greedy addition by
(p - tau)/c(o) under M support operations and budget B, placed in canonical order.
All five heads train together as one (features x 5) weight matrix. The features are pluggable: the
paper's binary n-grams (`Featurizer`), or sentence embeddings and both together (`_semantic`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import accumulate, chain
from typing import Mapping, Sequence

import numpy as np
from scipy import sparse
from scipy.special import expit

from ._ops import ANSWER, BUDGET, COSTS, MAX_SUPPORT_OPS, SUPPORT_OPS, route_cost

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


_SLICES = {n: [slice(i, i + n) for i in range(4096)] for n in (3, 4, 5)}


def _grams(text: str, *, chars: bool) -> set[str]:
    """Binary n-gram keys. Words are keyed with a leading newline and bigrams with a leading tab:
    normalised text has neither, so they can never collide with a raw character n-gram."""
    text = " ".join(text.lower().split())
    words = _WORD.findall(text)
    grams = {"\n" + w for w in words}
    grams.update(["\t" + a + " " + b for a, b in zip(words, words[1:])])
    if chars:
        padded = " " + text + " "
        cut = padded.__getitem__
        for n in (3, 4, 5):
            count = len(padded) - n + 1
            # precomputed slices: the slicing loop runs in C (the per-task routing path is this loop)
            grams.update(map(cut, _SLICES[n][:count] if count <= 4096 else [slice(i, i + n) for i in range(count)]))
    return grams


def _word_grams(text: str) -> set[str]:
    """The word and bigram keys of `_grams` for normalised text."""
    words = _WORD.findall(text)
    grams = {"\n" + w for w in words}
    grams.update(["\t" + a + " " + b for a, b in zip(words, words[1:])])
    return grams


def _pack(gram: str) -> int:
    """An ASCII character n-gram (n <= 5) as one integer, its length in the top bits: no collisions."""
    return int.from_bytes(gram.encode(), "big") | len(gram) << 40


_TABLES: dict[int, tuple] = {}


def _char_table(vocabulary: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted packed keys of the vocabulary's ASCII character n-grams and their feature ids (cached
    per vocabulary object: a fitted vocabulary is never changed)."""
    cached = _TABLES.get(id(vocabulary))
    if cached is None or cached[0] is not vocabulary:
        chars = [(_pack(g), i) for g, i in vocabulary.items() if g[0] not in "\n\t" and g.isascii()]
        keys = np.array([k for k, _ in chars], dtype=np.int64)
        ids = np.array([i for _, i in chars], dtype=np.int64)
        order = np.argsort(keys)
        cached = _TABLES[id(vocabulary)] = (vocabulary, keys[order], ids[order])
    return cached[1], cached[2]


def _char_hits(texts: Sequence[str], keys: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, feature id) of every character 3-5-gram of the padded ASCII `texts` found in the table."""
    padded = [" " + t + " " for t in texts]
    buf = np.frombuffer("\0".join(padded).encode(), dtype=np.uint8).astype(np.int64)
    starts = np.cumsum([0] + [len(p) + 1 for p in padded[:-1]])
    rows, found = [], []
    for n in (3, 4, 5):
        m = len(buf) - n + 1
        if m <= 0:
            continue
        key = np.zeros(m, dtype=np.int64)
        crosses = np.zeros(m, dtype=bool)
        for j in range(n):
            key = key << 8 | buf[j:j + m]
            crosses |= buf[j:j + m] == 0                 # a window across two prompts
        key |= n << 40
        at = np.minimum(np.searchsorted(keys, key), len(keys) - 1) if len(keys) else np.zeros(m, dtype=np.int64)
        hit = ~crosses & (keys[at] == key) if len(keys) else np.zeros(m, dtype=bool)
        rows.append(np.searchsorted(starts, np.nonzero(hit)[0], side="right") - 1)
        found.append(ids[at[hit]])
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(rows), np.concatenate(found)


@dataclass(frozen=True, slots=True)
class Featurizer:
    """Binary n-gram vocabulary fitted on training prompts (min document frequency applies)."""

    vocabulary: Mapping[str, int]
    chars: bool = True

    @classmethod
    def fit(cls, texts: Sequence[str], *, chars: bool = True, min_df: int = 2) -> "Featurizer":
        return cls.from_grams([_grams(check_prompt(t), chars=chars) for t in texts], chars=chars, min_df=min_df)

    @classmethod
    def from_grams(cls, grams: Sequence[set[str]], *, chars: bool, min_df: int) -> "Featurizer":
        df: dict[str, int] = {}
        for gs in grams:
            for g in gs:
                df[g] = df.get(g, 0) + 1
        kept = sorted(g for g, n in df.items() if n >= min_df)
        return cls({g: i for i, g in enumerate(kept)}, chars)

    @property
    def n_features(self) -> int:
        return len(self.vocabulary)

    def indices(self, text: str) -> np.ndarray:
        # sorted so that sums over features run in one order in every process (set order is hash-seeded)
        return np.sort(np.array(self._found(_grams(check_prompt(text), chars=self.chars)), dtype=np.int64))

    def _found(self, grams: set[str]) -> list[int]:
        return [i for i in map(self.vocabulary.get, grams) if i is not None]

    def transform(self, texts: Sequence[str]) -> sparse.csr_matrix:
        """Binary design matrix of a batch. Character n-grams of ASCII prompts are matched in numpy
        (each n-gram packed into one integer, looked up in the sorted vocabulary); words, bigrams and
        non-ASCII prompts take the per-prompt path. The same features either way (a test checks)."""
        if isinstance(texts, str):
            raise TypeError("transform takes a sequence of prompts, got one str")
        texts = [" ".join(check_prompt(t).lower().split()) for t in texts]
        fast = [i for i, t in enumerate(texts) if self.chars and t.isascii()]
        slow = set(range(len(texts))) - set(fast)
        rows = [self._found(_grams(t, chars=self.chars) if i in slow else _word_grams(t)) for i, t in enumerate(texts)]
        row_ids = np.repeat(np.arange(len(texts)), [len(r) for r in rows])
        cols = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=len(row_ids))
        if fast:
            r, c = _char_hits([texts[i] for i in fast], *_char_table(self.vocabulary))
            row_ids, cols = np.concatenate([row_ids, np.asarray(fast)[r]]), np.concatenate([cols, c])
        cell = np.unique(row_ids * max(self.n_features, 1) + cols)     # binary: each feature once per prompt
        indptr = np.searchsorted(cell // max(self.n_features, 1), np.arange(len(texts) + 1))
        return sparse.csr_matrix((np.ones(len(cell)), cell % max(self.n_features, 1), indptr),
                                 shape=(len(texts), self.n_features))

    def matrix(self, rows: Sequence[Sequence[int]]) -> sparse.csr_matrix:
        """Binary design matrix from per-prompt feature indices (built in one pass, columns sorted
        per row in C: the same summation order as `indices`)."""
        indptr = np.fromiter(accumulate(map(len, rows), initial=0), dtype=np.int64, count=len(rows) + 1)
        cols = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(indptr[-1]))
        X = sparse.csr_matrix((np.ones(len(cols)), cols, indptr), shape=(len(rows), self.n_features))
        X.sort_indices()
        return X

    def prepare(self, texts: Sequence[str]) -> None:
        """Nothing to precompute for n-grams (embedding featurizers encode a batch here)."""


@dataclass(frozen=True, slots=True)
class TrainingConfig:
    l2: float = 0.002
    steps: int = 500
    lr0: float = 0.35
    chars: bool = True
    min_df: int = 2
    #: every head's target becomes (1 - e) y + e / 2 (issue 45); the class balance still counts hard labels
    label_smoothing: float = 0.0

    def __post_init__(self):
        if self.l2 < 0 or self.steps < 1 or self.lr0 <= 0 or self.min_df < 1 or not 0 <= self.label_smoothing < 1:
            raise ValueError(f"need l2 >= 0, steps >= 1, lr0 > 0, min_df >= 1 and label_smoothing in [0, 1), "
                             f"got {self}")


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return expit(z)


def train_heads(X, Y: np.ndarray, config: TrainingConfig) -> tuple[np.ndarray, np.ndarray]:
    """Full-batch gradient descent on class-balanced weighted BCE + l2, all heads at once.

    Run in its dual form: from the zero start every update, X.T @ residual + l2 * W, lies in the span
    of the training rows, so W = X.T @ A for an (n, heads) matrix A, and the logits are K @ A with
    K = X @ X.T. Each of the 500 steps then costs an (n x n) product instead of (n x features):
    exact, not an approximation (a test checks it against the textbook update), and the same for
    sparse n-grams, dense embeddings or both."""
    n = X.shape[0]
    pos = Y.sum(axis=0)
    if np.any(pos == 0) or np.any(pos == n):
        raise ValueError("every operation head needs both positive and negative training tasks")
    # positives and negatives each carry half of the total weight, per head
    weights = np.where(Y == 1, n / (2 * pos), n / (2 * (n - pos))) / n
    targets = Y * (1 - config.label_smoothing) + config.label_smoothing / 2
    K = X @ X.T
    K = np.ascontiguousarray(K.toarray() if sparse.issparse(K) else K, dtype=np.float64)
    A = np.zeros(Y.shape)
    b = np.zeros(Y.shape[1])
    decay = 1 - config.l2 * config.lr0 / np.sqrt(1 + np.arange(config.steps) / 50)
    for epoch in range(config.steps):
        lr = config.lr0 / np.sqrt(1 + epoch / 50)
        residual = weights * (_sigmoid(K @ A + b) - targets)
        A *= decay[epoch]
        A -= lr * residual
        b -= lr * residual.sum(axis=0)
    return np.asarray(X.T @ A), b


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


_COST = np.array([COSTS[o] for o in SUPPORT_OPS])
#: route of every membership bitmask (bit i: SUPPORT_OPS[i]), in canonical order
_PATTERNS = tuple(tuple(o for i, o in enumerate(SUPPORT_OPS) if m >> i & 1) for m in range(1 << len(SUPPORT_OPS)))


def routes_at(probs: np.ndarray, tau: float, *, budget: float | None = BUDGET,
              max_ops: int | None = MAX_SUPPORT_OPS) -> list[tuple[str, ...]]:
    """`greedy_route` of every row at once: the same ranking and skips, one vectorised pass per rank
    (a test checks it route for route against `greedy_route`)."""
    check_tau(tau)
    probs = np.asarray(probs, dtype=np.float64).reshape(-1, len(SUPPORT_OPS))
    score = np.where(probs >= tau, (probs - tau) / _COST, -np.inf)
    order = np.argsort(-score, axis=1, kind="stable")        # ties: the lower canonical index first
    rows = np.arange(len(probs))
    mask = np.zeros(len(probs), dtype=np.int64)
    count = np.zeros(len(probs), dtype=np.int64)
    cost = np.full(len(probs), COSTS[ANSWER])
    for rank in range(len(SUPPORT_OPS)):
        op = order[:, rank]
        add = np.isfinite(score[rows, op])
        if max_ops is not None:
            add &= count < max_ops
        if budget is not None:
            add &= cost + _COST[op] <= budget + 1e-9
        mask |= np.where(add, 1 << op, 0)
        count += add
        cost += np.where(add, _COST[op], 0.0)
    return [_PATTERNS[m] for m in mask]


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

    featurizer: Featurizer          # or an embedding / combined featurizer (`_semantic`)
    weights: np.ndarray             # (n_features, 5)
    bias: np.ndarray                # (5,)
    temperatures: np.ndarray        # (5,)
    tau: float = 0.5
    budget: float | None = BUDGET
    max_ops: int | None = MAX_SUPPORT_OPS

    @classmethod
    def fit(cls, texts: Sequence[str], labels: np.ndarray, config: TrainingConfig = TrainingConfig(),
            featurizer=None) -> "OperationModel":
        """Fit the heads on `texts`; without a `featurizer`, the paper's n-grams fitted on `texts`."""
        if featurizer is None:
            grams = [_grams(check_prompt(t), chars=config.chars) for t in texts]
            featurizer = Featurizer.from_grams(grams, chars=config.chars, min_df=config.min_df)
            X = featurizer.matrix([featurizer._found(g) for g in grams])
        else:
            X = featurizer.transform(texts)
        W, b = train_heads(X, np.asarray(labels, dtype=np.float64), config)
        return cls(featurizer, W, b, np.ones(len(SUPPORT_OPS)))

    def logits(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.featurizer.transform(texts) @ self.weights) + self.bias

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """(n, 5) calibrated probabilities in canonical operation order.

        A prompt with no active feature (an n-gram router: no n-gram of the training vocabulary,
        `known_features` 0) carries no evidence for any operation: its probabilities are 0, so it is
        routed direct, rather than the heads' biases, which class balancing puts near .5 (a
        3-operation route for any unreadable text). An embedding is never all zero."""
        X = self.featurizer.transform(texts)
        probs = _sigmoid((np.asarray(X @ self.weights) + self.bias) / self.temperatures)
        probs[_active(X) == 0] = 0.0
        return probs

    def probability(self, text: str) -> np.ndarray:
        """One prompt (the per-task routing path); n-grams without building a sparse matrix."""
        if not isinstance(self.featurizer, Featurizer):
            return self.probabilities([text])[0]
        idx = self.featurizer.indices(text)
        if not len(idx):
            return np.zeros(len(SUPPORT_OPS))
        return _sigmoid((self.weights[idx].sum(axis=0) + self.bias) / self.temperatures)

    def known_features(self, text: str) -> int:
        """How many of the prompt's features are active (0: routed direct, see above)."""
        return int(_active(self.featurizer.transform([text]))[0])

    def prepare(self, texts: Sequence[str]) -> None:
        """Let the featurizer precompute what it needs for `texts` (embeddings are encoded in one batch)."""
        self.featurizer.prepare(texts)

    def calibrate(self, texts: Sequence[str], labels: np.ndarray, grid=TEMPERATURE_GRID) -> "OperationModel":
        return replace(self, temperatures=choose_temperatures(self.logits(texts), np.asarray(labels), grid))

    def route(self, text: str) -> tuple[str, ...]:
        return greedy_route(self.probability(text), self.tau, budget=self.budget, max_ops=self.max_ops)

    def routes(self, texts: Sequence[str]) -> list[tuple[str, ...]]:
        """Batch routing: one feature matrix, one product, one vectorised greedy pass."""
        return routes_at(self.probabilities(texts), self.tau, budget=self.budget, max_ops=self.max_ops)

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


def _active(X) -> np.ndarray:
    """Active (non-zero) features per row of a sparse or dense design matrix."""
    return X.getnnz(axis=1) if sparse.issparse(X) else np.count_nonzero(X, axis=1)
