"""Offline BM25 retrieval over a local corpus: the default backend of the ROMA `search` executor."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from roma_lab.results import read_jsonl

__all__ = ["BM25Retriever", "EmptyCorpusError", "Passage"]

_TEXT_SUFFIXES = (".txt", ".md")


class EmptyCorpusError(ValueError):
    """The corpus has no document with any indexable word."""


@dataclass(frozen=True, slots=True)
class Passage:
    doc_id: str
    text: str
    score: float


class BM25Retriever:
    """BM25 (bm25s) over a corpus given as strings, a folder of .txt/.md files, or a .jsonl file.

    Document ids: the position for a sequence of strings; the path relative to the folder for a
    folder; the ``id_field`` value (or the line number) for a .jsonl file.
    """

    def __init__(self, corpus: Sequence[str] | str | Path, *, text_field: str = "text", id_field: str = "id"):
        import bm25s
        from bm25s.tokenization import Tokenizer

        self._ids, self._texts = _load_corpus(corpus, text_field, id_field)
        if not self._texts:
            raise EmptyCorpusError(f"the corpus {_describe(corpus)} has no documents")
        self._tokenizer = Tokenizer(stopwords="en")
        tokens = self._tokenizer.tokenize(self._texts, update_vocab=True, return_as="ids", show_progress=False)
        # bm25s maps a document without words to the empty token, id 0.
        if not any(any(doc) for doc in tokens):
            raise EmptyCorpusError(f"the corpus {_describe(corpus)} has no indexable words (only stopwords or blanks)")
        self._index = bm25s.BM25()
        self._index.index(tokens, show_progress=False)

    def __len__(self) -> int:
        return len(self._texts)

    def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` passages with a positive BM25 score, best first (ties: corpus order)."""
        import numpy as np

        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        (query_ids,) = self._tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)
        # Unknown words map to the empty token, id 0, which scores zero everywhere.
        if not any(query_ids):
            return []
        scores = self._index.get_scores(query_ids)
        order = np.argsort(-scores, kind="stable")[:k]
        return [Passage(self._ids[i], self._texts[i], float(scores[i])) for i in order if scores[i] > 0]


def _describe(corpus) -> str:
    return repr(str(corpus)) if isinstance(corpus, (str, Path)) else f"of {len(corpus)} strings"


def _load_corpus(corpus, text_field: str, id_field: str) -> tuple[list[str], list[str]]:
    # A lone string is a path, never a one-document corpus: that mistake would index a file name.
    if isinstance(corpus, (str, Path)):
        return _load_path(Path(corpus), text_field, id_field)
    texts = list(corpus)
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"corpus documents must be str; document {bad[0]} is {type(texts[bad[0]]).__name__}")
    return [str(i) for i in range(len(texts))], texts


def _load_path(path: Path, text_field: str, id_field: str) -> tuple[list[str], list[str]]:
    if not path.exists():
        raise FileNotFoundError(
            f"corpus path {path} does not exist (pass a list of strings for in-memory documents)"
        )
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _TEXT_SUFFIXES)
        return [p.relative_to(path).as_posix() for p in files], [p.read_text(encoding="utf-8") for p in files]
    if path.suffix != ".jsonl":
        raise ValueError(f"corpus file {path} must be a .jsonl file (or pass a folder of .txt/.md files)")
    ids, texts = [], []
    for line_no, record in read_jsonl(path):  # a line that is not a JSON object: JsonlLineError, a ValueError
        if not isinstance(record.get(text_field), str):
            raise ValueError(f"{path}:{line_no}: expected an object with a string field {text_field!r}")
        ids.append(str(record.get(id_field, line_no)))
        texts.append(record[text_field])
    return ids, texts
