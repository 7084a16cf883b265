"""The generated world as an agent benchmark: search over its documents, its ledger files, the
jailed Python tool, GAIA's quasi-exact grader; and the floors that show what it cannot be solved by.

Tools return evidence only (passages, a file's CSV text, what a script prints), never an answer
candidate; the prompt states the answer's format. Graded by ``bench.GaiaGrader`` (OAgents grades
GAIA with its quasi-exact match); ``grader="exact"`` names the exact-match variant.

:func:`floor_answers` gives the answers of agents that must score near zero on a benchmark able to
tell agent designs apart, each a fixed script over the same tools: do nothing; closed-book priors
(the commonest train answer of the task's kind, or of its question template: keyword rules);
and a fixed tool order (search with the question, read every file named) that copies the first,
last or commonest span of the answer's kind from the observations. ``oracle`` is the scripted
reader (``roma_lab.world.solve``), which answers from observations alone. See design/world_benchmark.md.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from roma_lab.bench import ExactGrader, GaiaGrader, Item
from roma_lab.world import (
    DEFAULT_WORLD_SEED,
    LEVELS,
    RELATION_SYNONYMS,
    WORLD_BENCHMARK,
    WORLD_SPLITS,
    WorldTask,
    generate_world,
    solve,
    world_tasks_of,
)

from ._env import AgentTask, Tool, ToolContext, ToolError
from ._qa import _PYTHON, _SEARCH, READ_PAGE, BM25Source, WebSource, _QAEnvironment

__all__ = ["FLOORS", "WORLD_BENCHMARK", "WORLD_GRADERS", "WORLD_TOOLS", "ExactGrader", "closed_book", "floor_answers",
           "floors_df", "floors_table", "world_level", "world_tasks"]

_READ_FILE = Tool("read_file", "read one of the collection's files (e.g. a ledger named in a document) as CSV text",
                  ("name",), idempotent=True)
WORLD_TOOLS = (_SEARCH, _READ_FILE, _PYTHON)


#: The world's graders by name; the first is the default.
WORLD_GRADERS: Mapping[str, Callable[[], object]] = {"gaia": GaiaGrader, "exact": ExactGrader}


@dataclass(slots=True)
class _WorldEnvironment:
    search: _QAEnvironment
    files: Mapping[str, str]
    tools: tuple[Tool, ...] = WORLD_TOOLS

    def call(self, name: str, arguments: Mapping[str, str]) -> str:
        if name == "read_file":
            file = arguments["name"].strip().strip("'\"")
            if file not in self.files:
                raise ToolError(f"no file named {file!r}; file names are given in the documents")
            return self.files[file]
        return self.search.call(name, arguments)


@functools.cache
def _sources(seed: int, n_sources: int, coverage: float) -> tuple[BM25Source, ...]:
    """One source over every document, or ``n_sources`` sources each holding each document with
    probability ``coverage`` (seeded by the document and the source, so the first k sources
    together hold a document with probability 1 - (1 - coverage)^k), like search engines with
    overlapping indexes."""
    documents = generate_world(seed).documents
    if n_sources == 1 and coverage == 1.0:
        return (BM25Source("world", _IdRetriever(documents)),)
    sources = []
    for i in range(n_sources):
        rng = np.random.default_rng([seed, 2, i])
        held = {d: t for (d, t), u in zip(documents.items(), rng.random(len(documents))) if u < coverage}
        sources.append(BM25Source(f"source{i + 1}", _IdRetriever(held)))
    return tuple(sources)


class _IdRetriever:
    """BM25 over the world's documents, keeping their ids (``doc_id`` in each passage)."""

    def __init__(self, documents: Mapping[str, str]) -> None:
        from roma_lab.tools import BM25Retriever, Passage

        self._ids = list(documents)
        self._index = BM25Retriever(list(documents.values()))
        self._passage = Passage

    def search(self, query: str, k: int = 5):
        return [self._passage(self._ids[int(p.doc_id)], p.text, p.score) for p in self._index.search(query, k=k)]


def _agent_task(task: WorldTask, seed: int, grader: str, n_sources: int, coverage: float, web: Any) -> AgentTask:
    world = generate_world(seed)
    item = Item(benchmark=WORLD_BENCHMARK, item_id=task.task_id, question=task.question, answer=task.answer,
                metadata={"level": task.level, "template": task.template, "answer_kind": task.answer_kind,
                          "world_seed": seed, "plan": dict(task.plan), "n_sources": n_sources})
    if web is None:
        sources, tools = _sources(seed, n_sources, coverage), (_SEARCH, _PYTHON)
    else:  # the world's documents on the web (e.g. roma_lab.web's offline web): search, then read a page
        sources, tools = (WebSource("web", web),), (_SEARCH, READ_PAGE, _PYTHON)

    def environment(context: ToolContext) -> _WorldEnvironment:
        return _WorldEnvironment(_QAEnvironment(tools, sources, context, RELATION_SYNONYMS), world.files,
                                 (*tools[:-1], _READ_FILE, tools[-1]))

    return AgentTask(item=item, split=task.split, stratum=task.level, environment=environment,
                     grader=WORLD_GRADERS[grader]())


def world_tasks(split: str = "dev", n: int | None = None, *, seed: int = 0, world_seed: int = DEFAULT_WORLD_SEED,
                levels: Sequence[str] = LEVELS, grader: str = "gaia", n_sources: int = 1,
                coverage: float = 1.0, web: Any = None) -> list[AgentTask]:
    """``n`` tasks of one split of the generated world (``None``: all), spread over ``levels``
    (``stats.stratified_sample`` with ``seed``; a larger n extends a smaller one; more than the split
    holds is a ``SampleSizeError`` naming how many it holds). Stratum = level. Search runs over one
    source holding every document, or over ``n_sources`` partial copies at ``coverage`` (the
    agent's ``search_sources`` picks the first k), or, with ``web`` (a ``roma_lab.web.Web`` serving
    the world's documents, such as ``serve_offline_web``), over the web, with a ``read_page`` tool."""
    from roma_lab.stats import stratified_sample

    if split not in WORLD_SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {WORLD_SPLITS}")
    unknown = sorted(set(levels) - set(LEVELS))
    if unknown:
        raise ValueError(f"unknown levels {unknown}; expected some of {LEVELS}")
    if grader not in WORLD_GRADERS:
        raise ValueError(f"unknown grader {grader!r}; expected one of {sorted(WORLD_GRADERS)}")
    if n_sources < 1 or not 0 < coverage <= 1:
        raise ValueError(f"n_sources must be >= 1 and coverage in (0, 1], got {n_sources} and {coverage}")
    if web is not None and (n_sources, coverage) != (1, 1.0):
        raise ValueError("partial search sources are copies of the world's documents; the web is one source")
    tasks = [_agent_task(t, world_seed, grader, n_sources, float(coverage), web)
             for t in world_tasks_of(generate_world(world_seed))
             if t.split == split and t.level in levels]
    return stratified_sample(tasks, n, seed=seed, stratum=lambda t: t.stratum, shuffle_strata=True,
                             what=f"generated-world tasks of the {split} split")


class _NoTools:
    tools: tuple[Tool, ...] = ()

    def call(self, name: str, arguments: Mapping[str, str]) -> str:
        raise ToolError("this task is closed-book: no tool is offered")


def closed_book(tasks: Sequence[AgentTask]) -> list[AgentTask]:
    """The same tasks with no tools (the benchmark ``generated-world-closed-book``, so their runs and
    cache entries never mix with the tool runs): what a model answers from what it knows. The world
    is fictional, so a model that scores here has guessed or copied the question."""
    from dataclasses import replace

    return [replace(t, item=replace(t.item, benchmark=f"{WORLD_BENCHMARK}-closed-book"),
                    environment=lambda context: _NoTools()) for t in tasks]


def world_level(task: AgentTask) -> str:
    """The level of a generated-world task (L1 one lookup, L2 hops, L3 hops and a computation)."""
    return str(task.item.metadata["level"])


# --- floors ------------------------------------------------------------------------------------

_SPANS = {
    "year": re.compile(r"\b(1[89]\d\d|20\d\d)\b"),
    "person": re.compile(r"\b([A-Z][a-z]+ [A-Z][a-z]+)\b"),
    "town": re.compile(r"\b([A-Z][a-z]+(?:by|ford|holm|stad|wick|mere|vale|port))\b"),
    "integer": re.compile(r"(?<![\d.-])(\d[\d,]*)(?![\d.])"),
    "decimal": re.compile(r"(-?\d+\.\d)\b"),
    "quarter": re.compile(r"\b(20\d\d,Q[1-4])\b"),
}
_FILE = re.compile(r"ledger-\d{4}\.csv")


def _every_source(task: AgentTask) -> ToolContext:
    return ToolContext(search_sources=int(task.item.metadata["n_sources"]), search_k=3, rewrite_query=None,
                       expand_query=False)


def _observations(task: AgentTask) -> str:
    """A fixed tool order: search with the question, then read every file the results name."""
    env = task.environment(_every_source(task))
    text = env.call("search", {"query": task.item.question})
    for name in dict.fromkeys(_FILE.findall(text)):
        text += "\n" + env.call("read_file", {"name": name})
    return text


def _spans(task: AgentTask, text: str) -> list[str]:
    kind = str(task.item.metadata["answer_kind"])
    spans = _SPANS[kind].findall(text)
    return [s.replace(",", " ") if kind == "quarter" else s.replace(",", "") for s in spans]


def world_task_of(task: AgentTask) -> WorldTask:
    """The generated-world task an agent task was made from (its plan is what ``solve`` follows)."""
    meta = task.item.metadata
    return WorldTask(task.item.item_id, str(meta["level"]), str(meta["template"]), task.split, task.item.question,
                     str(task.item.answer), str(meta["answer_kind"]), meta["plan"])


def _oracle(task: AgentTask) -> str:
    env = task.environment(_every_source(task))
    try:
        return solve(world_task_of(task), env.call)
    except LookupError:  # partial sources can miss a hop's document: the ceiling is below 100% there
        return ""


def _commonest(values: Sequence[str]) -> str:
    return Counter(values).most_common(1)[0][0] if values else ""


#: The floors, in the order they are reported; "oracle" is the ceiling.
FLOORS = ("do_nothing", "closed_book_kind", "keyword_template", "copy_first", "copy_last", "copy_commonest", "oracle")


def floor_answers(tasks: Sequence[AgentTask], train: Sequence[AgentTask]) -> dict[str, list[str]]:
    """Each floor's answer to each of ``tasks``, by floor name (``FLOORS``). The closed-book priors
    are learned from ``train``'s gold answers (the split tips are mined from)."""
    by_kind = Counter((t.item.metadata["answer_kind"], str(t.item.answer)) for t in train)
    by_template = Counter((t.item.metadata["template"], str(t.item.answer)) for t in train)

    def prior(counter: Counter, key: object) -> str:
        return _commonest([a for (k, a), c in counter.items() for _ in range(c) if k == key])

    answers: dict[str, list[str]] = {name: [] for name in FLOORS}
    for task in tasks:
        spans = _spans(task, _observations(task))
        answers["do_nothing"].append("")
        answers["closed_book_kind"].append(prior(by_kind, task.item.metadata["answer_kind"]))
        answers["keyword_template"].append(prior(by_template, task.item.metadata["template"]))
        answers["copy_first"].append(spans[0] if spans else "")
        answers["copy_last"].append(spans[-1] if spans else "")
        answers["copy_commonest"].append(_commonest(spans))
        answers["oracle"].append(_oracle(task))
    return answers


def floors_df(tasks: Sequence[AgentTask], train: Sequence[AgentTask]):
    """One row per floor x task: level, answer, score (by each task's own grader)."""
    import pandas as pd

    answers = floor_answers(tasks, train)
    rows = [{"floor": name, "task_id": t.item.item_id, "level": world_level(t), "answer": a,
             "score": t.grader(t.item, a).score}
            for name, column in answers.items() for t, a in zip(tasks, column)]
    return pd.DataFrame(rows)



def floors_table(floors):
    """``floors_df`` as one row per floor: the mean score per level and over all tasks, and n."""
    table = floors.pivot_table(index="floor", columns="level", values="score", aggfunc="mean")
    table["all"] = floors.groupby("floor")["score"].mean()
    table["n"] = floors.groupby("floor")["score"].size()
    # floors measured elsewhere (a model's closed-book run) stand before the ceiling
    order = ([f for f in FLOORS[:-1] if f in table.index] + sorted(set(table.index) - set(FLOORS))
             + [f for f in FLOORS[-1:] if f in table.index])
    return table.reindex(order).rename_axis(columns=None)
