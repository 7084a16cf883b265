"""Semantic features for the router (issue 12): sentence embeddings instead of, or beside, n-grams.

Three variants share the paper's heads, training, calibration and threshold rule: `lexical` (the
paper's n-grams: the study's own router), `semantic` (the prompt's sentence embedding, times a
scale) and `lexical+semantic` (both blocks side by side). Every variant is fitted on train; its
temperatures, tau and embedding scale are chosen on dev; the encoder is chosen on dev too, among the
candidates given (`ENCODERS`), by the semantic variant's dev figures. No test, challenge or
hand-written natural prompt is read for any choice (tests/test_router_leakage.py).
Choice rule, fixed before the first measurement (design/router_semantic.md): the highest dev
exact-route match, then dev action F1, then the lower mean dev Brier score, then the smaller scale
(for encoders: the first candidate listed).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import sparse

from ._benchmark import FAMILIES, labels_matrix
from ._encoder import GGUFPooled, MiniLM, encode_cached
from ._model import Featurizer, OperationModel, check_prompt, route_quality
from ._ops import route_cost

VARIANTS: tuple[str, ...] = ("lexical", "semantic", "lexical+semantic")
#: Embedding-block scales tried on dev: an embedding has norm 1, a train prompt ~230 active n-grams.
SCALE_GRID: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0)
#: Encoder candidates by name: MiniLM (numpy forward pass) and a GGUF model's mean-pooled embeddings.
ENCODERS: Mapping[str, object] = {"minilm": MiniLM(), "smollm2-135m": GGUFPooled("smollm2-135m")}

#: The hand-written natural prompts (data/router_natural_prompts/): pinned, so an edit is refused.
NATURAL_PROMPTS_SHA256 = "0dc32900e6fb76c05cf6dd7cfb7719daf46cfcc5ad7ea60891b96199a2fbdebd"
NATURAL_PROMPTS = Path(__file__).resolve().parents[2] / "data" / "router_natural_prompts" / "prompts.csv"


@dataclass(frozen=True, slots=True)
class CachedEncoder:
    """An encoder whose vectors are computed once: in memory for the process, on disk per batch of texts."""

    encoder: object
    directory: Path | None = None
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def identity(self) -> str:
        return self.encoder.identity

    @property
    def dim(self) -> int:
        return self.encoder.dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of prompts, got one str")
        texts = [check_prompt(t) for t in texts]
        missing = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if missing:
            self.memo.update(zip(missing, encode_cached(self.encoder, missing, self.directory)))
        return np.stack([self.memo[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)


def encoder_named(name: str, directory: Path | None = None) -> CachedEncoder:
    if name not in ENCODERS:
        raise ValueError(f"unknown encoder {name!r}; expected one of {sorted(ENCODERS)}")
    return CachedEncoder(ENCODERS[name], directory)


@dataclass(frozen=True, slots=True)
class EmbeddingFeaturizer:
    """The prompt's sentence embedding (unit norm) times `scale`, as dense features."""

    encoder: CachedEncoder
    scale: float = 1.0

    @property
    def n_features(self) -> int:
        return self.encoder.dim

    def transform(self, texts: Sequence[str]) -> np.ndarray:
        return self.scale * self.encoder.encode(texts).astype(np.float64)

    def prepare(self, texts: Sequence[str]) -> None:
        self.encoder.encode(texts)


@dataclass(frozen=True, slots=True)
class CombinedFeaturizer:
    """The paper's binary n-grams and the scaled embedding side by side."""

    lexical: Featurizer
    semantic: EmbeddingFeaturizer

    @property
    def n_features(self) -> int:
        return self.lexical.n_features + self.semantic.n_features

    def transform(self, texts: Sequence[str]) -> sparse.csr_matrix:
        return sparse.hstack([self.lexical.transform(texts), sparse.csr_matrix(self.semantic.transform(texts))],
                             format="csr")

    def prepare(self, texts: Sequence[str]) -> None:
        self.semantic.prepare(texts)


def _dev_figures(model: OperationModel, dev) -> dict:
    texts, labels = [t.prompt for t in dev], labels_matrix(dev)
    probs = model.probabilities(texts)
    routes = model.routes(texts)
    quality = route_quality(routes, labels)
    return {"dev_exact_route": quality["exact_route"], "dev_f1": quality["f1"],
            "dev_brier": float(((probs - labels) ** 2).mean()), "tau": model.tau,
            "dev_mean_cost": float(np.mean([route_cost(r) for r in routes]))}


def _best(rows: list[dict]) -> dict:
    """The module's choice rule over dev rows (see the module docstring)."""
    return max(rows, key=lambda r: (r["dev_exact_route"], r["dev_f1"], -r["dev_brier"], -r["order"]))


def fit_variant(study, variant: str, encoder: CachedEncoder | None, *, scales: Sequence[float] = SCALE_GRID,
                train: tuple[Sequence[str], np.ndarray] | None = None) -> tuple[OperationModel, list[dict]]:
    """Fit `variant` on the study's train split (or on `train`, (texts, labels), e.g. train plus its
    paraphrases), calibrate and threshold on dev, and choose the embedding scale on dev; returns the
    chosen model and one dev row per scale (`selected` marks it)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    dev = study.split("dev")
    if train is None:
        texts, labels = [t.prompt for t in study.split("train")], labels_matrix(study.split("train"))
    else:
        texts, labels = list(train[0]), np.asarray(train[1], dtype=np.float64)
    if variant == "lexical":
        candidates = [(float("nan"), None)]
    else:
        if encoder is None:
            raise ValueError(f"variant {variant!r} needs an encoder")
        lexical = Featurizer.fit(texts, chars=study.training.chars, min_df=study.training.min_df)
        candidates = [(s, EmbeddingFeaturizer(encoder, s) if variant == "semantic"
                       else CombinedFeaturizer(lexical, EmbeddingFeaturizer(encoder, s))) for s in scales]
    rows, models = [], []
    for order, (scale, featurizer) in enumerate(candidates):
        start = time.perf_counter()
        model = OperationModel.fit(texts, labels, study.training, featurizer=featurizer)
        seconds = time.perf_counter() - start
        dev_texts, dev_labels = [t.prompt for t in dev], labels_matrix(dev)
        model = model.calibrate(dev_texts, dev_labels)
        model, _ = model.select_threshold(dev_texts, dev_labels)
        models.append(model)
        rows.append({"variant": variant, "encoder": encoder.identity if featurizer is not None else "",
                     "scale": scale, "order": order, "n_features": model.featurizer.n_features,
                     "train_seconds": seconds, **_dev_figures(model, dev)})
    best = _best(rows)
    for r in rows:
        r["selected"] = r is best
    return models[best["order"]], rows


@dataclass(frozen=True)
class SemanticStudy:
    """The lexical study plus its semantic variants, each fitted and chosen on train and dev only."""

    study: object                        # the RouterStudy (suite, lexical router, training config)
    encoder: str                         # the chosen encoder's name in ENCODERS
    models: Mapping[str, OperationModel]  # variant -> fitted router
    selection: pd.DataFrame              # dev rows: every encoder x variant x scale tried
    encode_seconds: float                # encoding train and dev prompts (0 when cached)

    @staticmethod
    def fit_one(study, variant: str, encoder: str, *, train: tuple[Sequence[str], np.ndarray] | None = None,
                scales: Sequence[float] = SCALE_GRID, directory: Path | None = None) -> tuple[OperationModel, list[dict]]:
        """`fit_variant` with the encoder named `encoder`, for one variant only (no encoder choice): the
        train (or `train`) and dev prompts are encoded in one batch first, as `build` does, so the
        vectors, and with them the fitted router, are the ones `build` would fit."""
        cached = encoder_named(encoder, directory)
        texts = [t.prompt for t in study.split("train")] if train is None else list(train[0])
        cached.encode(texts + [t.prompt for t in study.split("dev")])
        return fit_variant(study, variant, cached, scales=scales, train=train)

    @classmethod
    def build(cls, study, *, encoders: Sequence[str] = ("minilm",), scales: Sequence[float] = SCALE_GRID,
              directory: Path | None = None, train: tuple[Sequence[str], np.ndarray] | None = None) -> "SemanticStudy":
        """Every variant fitted on the study's train split, or on `train` ((texts, labels)) when given:
        then `models["lexical"]` is still the study's own router; the other two learn from `train`."""
        if not encoders:
            raise ValueError("need at least one encoder candidate")
        rows: list[dict] = []
        fits: dict[str, tuple[OperationModel, CachedEncoder]] = {}
        start = time.perf_counter()
        train_texts = [t.prompt for t in study.split("train")] if train is None else list(train[0])
        for name in encoders:
            encoder = encoder_named(name, directory)
            encoder.encode(train_texts + [t.prompt for t in study.split("dev")])
            model, dev_rows = fit_variant(study, "semantic", encoder, scales=scales, train=train)
            rows += [r | {"encoder_name": name} for r in dev_rows]
            fits[name] = (model, encoder)
        encode_seconds = time.perf_counter() - start
        best = _best([r | {"order": i} for i, name in enumerate(encoders)
                      for r in rows if r["encoder_name"] == name and r["selected"]])
        chosen = best["encoder_name"]
        for r in rows:
            r["encoder_selected"] = r["encoder_name"] == chosen
        model, encoder = fits[chosen]
        combined, combined_rows = fit_variant(study, "lexical+semantic", encoder, scales=scales, train=train)
        _, lexical_rows = fit_variant(study, "lexical", None)
        rows += [r | {"encoder_name": chosen, "encoder_selected": True} for r in combined_rows]
        rows += [r | {"encoder_name": "", "encoder_selected": True} for r in lexical_rows]
        models = {"lexical": study.model, "semantic": model, "lexical+semantic": combined}
        return cls(study, chosen, models, pd.DataFrame(rows).drop(columns="order"), encode_seconds)


# --------------------------------------------------------------------------- natural prompts
def natural_prompts(path: str | Path | None = None, *, sha256: str = NATURAL_PROMPTS_SHA256) -> pd.DataFrame:
    """The hand-written natural prompts (or another hand-written set in their format, pinned by its own
    `sha256`) with their family's minimum route; a file whose SHA-256 is not the pinned one is refused
    (they are evaluation or selection sets, never edited after a look at a score)."""
    path = Path(path or NATURAL_PROMPTS)
    if not path.is_file():
        raise FileNotFoundError(f"hand-written prompts not found at {path}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise ValueError(f"{path} has SHA-256 {digest}, not the pinned {sha256}: hand-written prompts are never "
                         f"edited ({path.parent / 'README.md'})")
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    unknown = sorted(set(table["family"]) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown families in {path}: {unknown}")
    table["labels"] = ["".join(FAMILIES[f].route) for f in table["family"]]
    return table


def route_natural(models: Mapping[str, OperationModel], prompts: pd.DataFrame) -> pd.DataFrame:
    """Tidy scores, one row per prompt x variant: the route, whether it covers every operation of the
    family's minimum route (`coverage`), whether it is exactly that route, and its cost."""
    rows = []
    texts = list(prompts["prompt"])
    for name, model in models.items():
        model.prepare(texts)
        for r, route in zip(prompts.itertuples(index=False), model.routes(texts)):
            rows.append({"subset": "natural", "condition": name, "task_id": r.prompt_id, "family": r.family,
                         "labels": r.labels, "route": "".join(route),
                         "coverage": all(op in route for op in r.labels),
                         "exact_route": "".join(route) == r.labels, "cost": route_cost(route)})
    return pd.DataFrame(rows)
