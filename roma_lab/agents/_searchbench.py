"""An offline search benchmark for the search-agent tables (3-5): the meta-routing suite's research
facts written as passages, k search sources as seeded partial copies of the corpus, BM25 search.

No web search is possible here. The facts behind the suite's research tasks (which laboratory
first made a compound, where a laboratory is, which records name its director and when) become
one-sentence passages. A task's corpus is its own facts plus the facts of every task that shares
no compound or laboratory with it (the suite reuses some laboratories with other cities or
directors; keeping those out keeps each corpus consistent). Each of ``n_sources`` sources holds
each passage with probability ``coverage`` (seeded by the passage and the source, so a passage is
in the same sources for every task), like search engines with overlapping indexes: the first k
sources together hold a passage with probability 1 - (1 - coverage)^k. Answers are graded by the
suite's exact evaluator.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from roma_lab.bench import Item

from ._env import AgentTask, ToolContext
from ._qa import _SEARCH, BM25Source, _QAEnvironment

__all__ = ["SEARCH_BENCHMARK", "SEARCH_FAMILIES", "search_tasks", "task_facts"]

SEARCH_BENCHMARK = "suite-research-search"
#: The research families whose answers need looked-up facts (one hop, two hops, conflicting records).
SEARCH_FAMILIES = ("single_hop", "multi_hop", "conflicting_sources")


def task_facts(task) -> tuple[str, ...]:
    """The facts behind one research task (``roma_lab.router`` Task) as passages; () for other families."""
    p = task.payload
    if task.family in ("single_hop", "multi_hop", "retrieval_outage"):
        facts = [f"Compound {p['compound']} was first synthesised by the {p['lab']}."]
        if "city" in p:
            facts.append(f"The {p['lab']} is located in {p['city']}.")
        return tuple(facts)
    if task.family == "conflicting_sources":
        return tuple(f"According to the {r['source']} ({r['year']}), the {p['lab']} is directed by {r['value']}."
                     for r in p["records"])
    return ()


def _entities(task) -> set[str]:
    return {task.payload[k] for k in ("compound", "lab") if k in task.payload}


def _in_source(passage: str, source: int, coverage: float, seed: int) -> bool:
    digest = hashlib.sha256(f"{seed}|{source}|{passage}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < coverage


def search_tasks(split: str, n: int | None, *, n_sources: int = 5, coverage: float = 0.6, seed: int = 0,
                 suite_seed: int | None = None) -> list[AgentTask]:
    """``n`` research tasks of ``split`` (families spread as by ``sample_suite_tasks``) with a
    ``search`` tool over ``n_sources`` sources; the agent's ``search_sources`` picks the first k."""
    from roma_lab.router import DEFAULT_SEED, generate_suite

    from roma_lab.stats import check_sample_size

    from ._toolbench import SuiteGrader, sample_suite_tasks

    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    suite = generate_suite(DEFAULT_SEED if suite_seed is None else suite_seed)
    by_id = {t.task_id: t for t in suite}
    facts = {t.task_id: task_facts(t) for t in suite if task_facts(t)}
    picked = [by_id[t.item.item_id] for t in sample_suite_tasks(split, None, seed=seed)
              if t.stratum in SEARCH_FAMILIES]
    check_sample_size(n, len(picked), f"research tasks of the {split} split")
    picked = picked if n is None else picked[:n]
    tasks = []
    for task in picked:
        own = _entities(task)
        corpus = list(dict.fromkeys(
            f for other_id, passages in facts.items()
            if other_id == task.task_id or not (_entities(by_id[other_id]) & own) for f in passages))
        sources = tuple(BM25Source.over(f"source{i + 1}", [f for f in corpus if _in_source(f, i, coverage, seed)]
                                        or ["(empty source)"])
                        for i in range(n_sources))
        item = Item(benchmark=SEARCH_BENCHMARK, item_id=task.task_id, question=task.prompt, answer=task.answer,
                    metadata={"family": task.family, "corpus_size": len(corpus)})

        def environment(context: ToolContext, sources: Sequence[BM25Source] = sources) -> _QAEnvironment:
            return _QAEnvironment((_SEARCH,), tuple(sources), context)

        tasks.append(AgentTask(item=item, split=task.split, stratum=task.family, environment=environment,
                               grader=SuiteGrader(task)))
    return tasks
