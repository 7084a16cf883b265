"""The same agent on the real QA data: benchmark items as agent tasks, offline search, a Python tool.

Kept thin: the benchmark's own loader and grader (``roma_lab.bench``), BM25 over a local corpus
through the controller's retriever, the controller's sandbox for code. Search is multi-source (any
object with ``name`` and ``search(query, k)`` is a source) with the paper's query optimisation:
REFLECT (a model rewrite, supplied by the agent) then EXPAND (synonym variants).
With no corpus the task is closed-book: the agent has no search tool and answers from the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from roma_lab.bench import PRIVATE_BENCHMARKS, Item, grader_for
from roma_lab.tools import BM25Retriever, Passage, run_python

from ._env import AgentTask, Tool, ToolContext, ToolError

__all__ = ["READ_PAGE", "BM25Source", "Source", "WebSource", "expand_query", "qa_tasks", "search_passages"]

_RRF_K = 60  # reciprocal-rank-fusion constant of Cormack et al. (2009)
_PASSAGE_CHARS = 600
_SEARCH = Tool("search", "search the document collection; returns the best matching passages", ("query",),
               idempotent=True)
_PYTHON = Tool("python", "run a short Python script (standard library only) and return what it prints", ("code",))
#: Reading a web page a search gave (a search source over the web offers it).
READ_PAGE = Tool("read_page", "read a web page (an address a search result gave) as text", ("url",), idempotent=True)


class Source(Protocol):
    name: str

    def search(self, query: str, k: int) -> list[Passage]: ...


@dataclass(frozen=True, slots=True)
class BM25Source:
    """A BM25 index (``roma_lab.tools.BM25Retriever``) over one local corpus, as a search source."""

    name: str
    retriever: BM25Retriever

    @classmethod
    def over(cls, name: str, corpus) -> BM25Source:
        """A source over ``corpus``: strings, a folder of .txt/.md files, or a .jsonl file."""
        return cls(name, BM25Retriever(corpus))

    def search(self, query: str, k: int) -> list[Passage]:
        return self.retriever.search(query, k=k)


@dataclass(frozen=True, slots=True)
class WebSource:
    """The web (a ``roma_lab.web.Web``) as a search source: each hit its title, address and snippet
    (``read_page`` reads one whole). Every search and read is metered by the web room: a step's tool
    call carries its price and whether the recorded web served it."""

    name: str
    web: Any  # roma_lab.web.Web

    def search(self, query: str, k: int) -> list[Passage]:
        """The hits (a failed search raises its ``roma_lab.web.WebError``: the agent's tool error)."""
        return [Passage(hit.url, f"{hit.title} ({hit.url})\n{hit.snippet}", 1.0 / (rank + 1))
                for rank, hit in enumerate(self.web.search(query, k))]

    def read(self, url: str) -> str:
        return self.web.read(url).text


def expand_query(query: str, synonyms: Mapping[str, Sequence[str]] | None = None) -> tuple[str, ...]:
    """EXPAND: the query and one variant per synonym of each term found in ``synonyms`` (e.g.
    {"covid-19": ["sars-cov-2"]}; a benchmark supplies its own thesaurus), deduplicated. No
    word-form variant: a stemmed query ("locat", "runn test") matches nothing in an index of whole
    words, and a stemmer would have to stem the index too, which changes every search."""
    variants = [query]
    lowered = query.lower()
    for term, alternatives in (synonyms or {}).items():
        if term.lower() in lowered:
            pattern = re.compile(re.escape(term), re.IGNORECASE)
            variants.extend(pattern.sub(alt, query) for alt in alternatives)
    return tuple(dict.fromkeys(v for v in variants if v.strip()))


def search_passages(sources: Sequence[Source], queries: Sequence[str], k: int) -> list[tuple[str, Passage]]:
    """The top ``k`` passages of every (source, query) pair, fused by reciprocal rank; a passage found
    several times (same text) counts once with the summed fusion score. Ties keep first-seen order.
    Returns up to ``k`` passages per source: a cut at ``k`` in all would let passages that several
    overlapping sources share crowd out the one only a single source has (so more sources give more
    results, as more search engines do)."""
    fused: dict[str, list[Any]] = {}
    for source in sources:
        for query in queries:
            for rank, passage in enumerate(source.search(query, k)):
                entry = fused.setdefault(passage.text, [0.0, source.name, passage])
                entry[0] += 1.0 / (_RRF_K + rank + 1)
    ranked = sorted(fused.values(), key=lambda e: -e[0])  # sorted() is stable: ties keep first-seen order
    return [(name, passage) for _, name, passage in ranked[: k * len(sources)]]


@dataclass(slots=True)
class _QAEnvironment:
    tools: tuple[Tool, ...]
    sources: tuple[Source, ...]
    context: ToolContext
    synonyms: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def call(self, name: str, arguments: Mapping[str, str]) -> str:
        if name == READ_PAGE.name:
            return self._read(arguments["url"])
        if name == "python":
            result = run_python(arguments["code"], timeout_s=10.0, memory_mb=512)
            if result.error is not None:
                raise ToolError(f"{result.error}\n{result.stderr[-500:]}".strip())
            return result.stdout.strip() or "(the script printed nothing)"
        return self._search(arguments["query"])

    def _read(self, url: str) -> str:
        from roma_lab.web import WebError

        readers = [s for s in self.sources[: self.context.search_sources] if hasattr(s, "read")]
        if not readers:
            raise ToolError("no source here reads pages")
        try:
            return readers[0].read(url.strip().strip("'\""))
        except WebError as exc:  # a refused, failed or unreadable page is a failing tool, seen by the agent
            raise ToolError(str(exc)) from exc

    def _search(self, query: str) -> str:
        queries = (query,)
        if self.context.rewrite_query is not None:
            queries = (self.context.rewrite_query(query),)
        if self.context.expand_query:
            queries = tuple(dict.fromkeys(v for q in queries for v in expand_query(q, self.synonyms)))
        try:
            hits = search_passages(self.sources[: self.context.search_sources], queries, self.context.search_k)
        except Exception as exc:  # a broken source is a failing tool, seen by the agent
            raise ToolError(f"search failed: {type(exc).__name__}: {exc}") from exc
        if not hits:
            return f"No passage matched (queries tried: {'; '.join(queries)})."
        blocks = [f"[{name}/{p.doc_id}] {p.text[:_PASSAGE_CHARS]}" for name, p in hits]
        return f"Queries: {'; '.join(queries)}\n" + "\n".join(blocks)


def qa_tasks(items: Sequence[Item], *, sources: Sequence[Source] = (), python: bool = False, judge=None,
             synonyms: Mapping[str, Sequence[str]] | None = None,
             stratum: Callable[[Item], str] = lambda item: item.benchmark, grader=None) -> list[AgentTask]:
    """Benchmark items as agent tasks graded by the benchmark's own grader (``grader_for``; without
    ``judge``, judge-graded benchmarks use the labelled string-match fallback), or by ``grader`` when
    given (items of a researcher's own task set, which no registry knows).

    ``sources``: search sources (empty = closed-book; a ``WebSource`` adds the ``read_page`` tool);
    ``python``: offer the sandboxed Python tool
    (for AIME); ``stratum``: the breakdown key (e.g. a GAIA-like level or the BrowseComp topic).
    BrowseComp items are marked private: their text is redacted from saved trajectories.
    """
    reads = any(hasattr(source, "read") for source in sources)
    tools = ((_SEARCH,) if sources else ()) + ((READ_PAGE,) if reads else ()) + ((_PYTHON,) if python else ())
    sources, synonyms = tuple(sources), dict(synonyms or {})

    def environment(context: ToolContext) -> _QAEnvironment:
        return _QAEnvironment(tools, sources, context, synonyms)

    tasks = []
    for item in items:
        tasks.append(AgentTask(item=item, split="eval", stratum=stratum(item), environment=environment,
                               grader=grader or grader_for(item.benchmark, judge), private=item.benchmark in PRIVATE_BENCHMARKS))
    return tasks
