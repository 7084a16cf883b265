"""BM25 retriever over strings, folders and .jsonl files."""

import json

import pytest

from roma_lab.tools._retrieval import BM25Retriever, EmptyCorpusError, Passage
from roma_lab.results._files import JsonlLineError

DOCS = [
    "The cat sat on the mat.",
    "Dogs chase cats in the park.",
    "Python is a programming language created by Guido van Rossum.",
    "Paris is the capital of France.",
]


def test_best_passage_first():
    hits = BM25Retriever(DOCS).search("capital of France", k=2)
    assert hits[0] == Passage(doc_id="3", text=DOCS[3], score=hits[0].score)
    assert hits[0].score > 0
    assert all(h.score > 0 for h in hits)


def test_scores_descend_and_k_bounds_results():
    retriever = BM25Retriever(DOCS + ["cat cat cat on a cat mat"])
    hits = retriever.search("cat mat", k=10)
    assert [h.doc_id for h in hits][:2] == ["4", "0"]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(retriever.search("cat mat", k=1)) == 1


def test_unknown_or_stopword_query_returns_nothing():
    retriever = BM25Retriever(DOCS)
    assert retriever.search("zebra quantum") == []
    assert retriever.search("the of is") == []


def test_folder_corpus_uses_relative_paths(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("Rust is a systems programming language.")
    (tmp_path / "sub" / "b.md").write_text("# Jupyter\nNotebooks mix code and prose.")
    (tmp_path / "ignored.csv").write_text("notebooks,notebooks")
    retriever = BM25Retriever(tmp_path)
    assert len(retriever) == 2
    assert retriever.search("notebooks")[0].doc_id == "sub/b.md"


def test_jsonl_corpus_with_and_without_ids(tmp_path):
    path = tmp_path / "corpus.jsonl"
    rows = [{"id": "doc-a", "text": "Apples are red fruit."}, {"text": "Bananas are yellow fruit."}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    retriever = BM25Retriever(str(path))
    assert retriever.search("apples")[0].doc_id == "doc-a"
    assert retriever.search("bananas")[0].doc_id == "2"  # line number when no id


@pytest.mark.parametrize("corpus", [[], ["", "   "], ["the and of"]])
def test_empty_corpus_is_a_clear_error(corpus):
    with pytest.raises(EmptyCorpusError):
        BM25Retriever(corpus)


def test_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(EmptyCorpusError, match="no documents"):
        BM25Retriever(tmp_path)


def test_bad_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="list of strings"):
        BM25Retriever("no such corpus.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"body": "no text"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        BM25Retriever(bad)
    bad.write_text('{"text": "ok"}\n{"text": \n')  # the shared JSONL reader names the line
    with pytest.raises(JsonlLineError, match=r"bad\.jsonl: line 2 is not JSON"):
        BM25Retriever(bad)
    with pytest.raises(TypeError):
        BM25Retriever(["fine", 3])
    with pytest.raises(ValueError):
        BM25Retriever(DOCS).search("cat", k=0)
