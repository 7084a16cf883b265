"""The web as a retriever of passages, for a system that searches: a search, then its first hits read.

``WebPassages(web).search(query, k)`` gives ``roma_lab.tools.Passage`` s, as the BM25 retriever does,
so ROMA's search executor and the agent's sources take the web where they took a corpus: each hit
is its title, address and snippet, and the first ``read`` hits are replaced by their page's text
(cut at ``page_chars``). Every search and read is recorded as a tool call of the role call in
progress (``roma_lab.tools.record_tool_call``: its price, whether it was replayed from the recorded
web, its error), so a trace shows what the web gave and what it cost. A failed read leaves its hit's
snippet; a failed search gives no passage (the trace says why).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from ._errors import WebDeadlineError, WebError
from ._usage import web_meter
from ._web import Web

__all__ = ["WebPassages"]

T = TypeVar("T")


class WebPassages:
    """A retriever over ``web``: ``search(query, k)`` searches, reads the first ``read`` hits
    (``page_chars`` of each page's text), and records every call; ``read(url)`` is one page's text,
    for a system's own read tool."""

    def __init__(self, web: Web, *, read: int = 2, page_chars: int = 2_000):
        if read < 0 or page_chars < 1:
            raise ValueError(f"need read >= 0 and page_chars >= 1, got {read} and {page_chars}")
        self.web, self.read_first, self.page_chars = web, read, page_chars

    def __repr__(self) -> str:
        return f"WebPassages({self.web!r}, read={self.read_first}, page_chars={self.page_chars})"

    def search(self, query: str, k: int = 5) -> list[Any]:
        from roma_lab.tools import Passage

        try:
            hits = _traced("web_search", {"query": query, "k": k}, lambda: self.web.search(query, k),
                           size=lambda hits: sum(len(h.snippet) for h in hits))
        except WebError:
            return []
        passages = []
        for rank, hit in enumerate(hits):
            text = f"{hit.title} ({hit.url})\n{hit.snippet}"
            if rank < self.read_first:
                try:
                    text = f"{hit.title} ({hit.url})\n{self.read(hit.url)[:self.page_chars]}"
                except WebError:
                    pass  # the snippet stands; the failed read is in the trace
            passages.append(Passage(hit.url, text, 1.0 / (rank + 1)))
        return passages

    def read(self, url: str) -> str:
        """The text of the page at ``url`` (cut at the web's ``page_chars``), recorded as a tool call."""
        return _traced("web_read", {"url": url}, lambda: self.web.read(url), size=lambda page: len(page.text)).text


def _traced(name: str, arguments: dict[str, Any], call: Callable[[], T], *, size: Callable[[T], int]) -> T:
    """``call()`` with each web call it made recorded as one tool call (``name``, with the provider as
    its server); a failure is recorded, then raised."""
    from roma_lab.tools import record_tool_call

    started = time.monotonic()
    with web_meter() as meter:
        try:
            result = call()
        except WebError as err:
            failed = err
            result = None
        else:
            failed = None
    for made in meter.calls:  # one per search or read (its retries inside it)
        status = "ok" if made.error is None else "timed_out" if isinstance(failed, WebDeadlineError) else "error"
        record_tool_call(name, made.provider, arguments, started, status=status,
                         result_chars=size(result) if made.error is None else None, error=made.error,
                         cost=made.cost, replayed=made.replayed, latency_s=made.latency_s)
    if failed is not None:
        if not meter.calls:  # refused before any call (an empty query): no bill, still in the trace
            record_tool_call(name, None, arguments, started, status="error", result_chars=None, error=str(failed))
        raise failed
    return result
