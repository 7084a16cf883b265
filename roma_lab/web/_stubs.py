"""Loopback stubs of every provider's wire format, with faults on request (for tests and teaching).

``ProviderStub("serper", results, key="...")`` answers the provider's endpoint (``POST /search``
for Serper, ``GET /res/v1/web/search`` for Brave...) on 127.0.0.1 with ``results`` in the reply
shape the provider documents, after checking the key travels in the provider's own header (else a
401, as the service answers); ``Web(WebSettings(search=stub.spec))`` asks it. Every request it got
is kept in ``requests`` (method, path, query, headers, JSON body), so a test pins the request shape.

``fail(*faults)`` makes the next requests fail, one fault each, in order: "429" (with
``Retry-After: <retry_after>``, by default 0), "429-bare" (no Retry-After), "500", "invalid-json" (a 200 whose body is not
JSON), "drip" (the reply sent one byte every ``drip_s`` seconds), "echo-key" (a 401 whose body
repeats the key it was sent, as some services do). ``on_request(request)``, if given, is called
before each answer (in the server's thread): it may wait (to hold requests in flight together) and
may return the results to answer that request with instead of ``results``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ._loopback import LoopbackServer, QuietHandler
from ._providers import PROVIDERS
from ._types import WebResult

__all__ = ["FAULTS", "ProviderStub", "StubRequest"]

FAULTS = ("429", "429-bare", "500", "invalid-json", "drip", "echo-key")
_ROUTES = {"serper": ("POST", "/search"), "tavily": ("POST", "/search"), "exa": ("POST", "/search"),
           "brave": ("GET", "/res/v1/web/search"), "searxng": ("GET", "/search"), "wikipedia": ("GET", "/w/api.php")}


@dataclass(frozen=True, slots=True)
class StubRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names in lower case
    body: Any  # the JSON body, None without one


def _sent_key(name: str, headers: dict[str, str]) -> str | None:
    if name == "serper":
        return headers.get("x-api-key")
    if name == "exa":
        return headers.get("x-api-key")
    if name == "brave":
        return headers.get("x-subscription-token")
    if name == "tavily":
        auth = headers.get("authorization", "")
        return auth[len("Bearer "):] if auth.startswith("Bearer ") else None
    return None


def _reply(name: str, results: Sequence[WebResult], query: str, k: int) -> dict[str, Any]:
    """The provider's documented reply shape, holding ``results``."""
    hits = list(results)[:k]
    if name == "serper":
        return {"searchParameters": {"q": query, "type": "search", "num": k, "engine": "google"},
                "organic": [{"title": r.title, "link": r.url, "snippet": r.snippet, "position": i,
                             **({"date": r.date} if r.date else {})} for i, r in enumerate(hits, start=1)],
                "relatedSearches": [], "credits": 1}
    if name == "tavily":
        return {"query": query, "follow_up_questions": None, "answer": None, "images": [],
                "results": [{"title": r.title, "url": r.url, "content": r.snippet, "score": round(0.9 - i / 100, 4),
                             "raw_content": None, **({"published_date": r.date} if r.date else {})}
                            for i, r in enumerate(hits)],
                "response_time": 0.42, "request_id": "stub-request"}
    if name == "exa":
        return {"requestId": "stub-request", "resolvedSearchType": "neural", "searchType": "auto",
                "results": [{"id": r.url, "title": r.title, "url": r.url, "publishedDate": r.date, "author": None,
                             "highlights": [r.snippet], "highlightScores": [0.5]} for r in hits],
                "costDollars": {"total": 0.007}}
    if name == "brave":
        return {"type": "search", "query": {"original": query, "more_results_available": False},
                "mixed": {"type": "mixed", "main": [{"type": "web", "index": i, "all": False} for i in range(len(hits))]},
                "web": {"type": "search", "family_friendly": True,
                        "results": [{"type": "search_result", "title": r.title, "url": r.url,
                                     "description": f"<strong>{r.snippet}</strong>", "language": "en",
                                     "family_friendly": True, "meta_url": {"scheme": "https", "path": "", "netloc": ""},
                                     **({"page_age": r.date, "age": r.date} if r.date else {})} for r in hits]}}
    if name == "searxng":
        return {"query": query, "number_of_results": len(hits),
                "results": [{"url": r.url, "title": r.title, "content": r.snippet, "engine": "stub", "engines": ["stub"],
                             "positions": [i], "score": 1.0 / i, "category": "general", "publishedDate": r.date}
                            for i, r in enumerate(hits, start=1)],
                "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []}
    if name == "wikipedia":
        return {"batchcomplete": True, "continue": {"sroffset": len(hits), "continue": "-||"},
                "query": {"searchinfo": {"totalhits": len(hits)},
                          "search": [{"ns": 0, "title": r.title, "pageid": 1000 + i,
                                      "snippet": f'<span class="searchmatch">{r.snippet}</span>',
                                      "timestamp": r.date or "2026-01-01T00:00:00Z"} for i, r in enumerate(hits)]}}
    raise ValueError(f"no stub for provider {name!r}")


class ProviderStub(LoopbackServer):
    """A loopback stub of provider ``name`` answering with ``results`` (see the module docstring).
    ``key``: the key it expects (None: it checks none); ``drip_s``: the pause between dripped bytes;
    ``retry_after``: the Retry-After header of its "429" fault."""

    def __init__(self, name: str, results: Sequence[WebResult], *, key: str | None = None, drip_s: float = 0.05,
                 retry_after: str = "0",
                 on_request: Callable[[StubRequest], Sequence[WebResult] | None] | None = None, port: int = 0):
        if name not in PROVIDERS:
            raise ValueError(f"no provider {name!r}; known: {', '.join(sorted(PROVIDERS))}")
        self.name, self.results, self.key, self.drip_s = name, tuple(results), key, drip_s
        self.retry_after, self.on_request = retry_after, on_request
        self.requests: list[StubRequest] = []
        self._faults: list[str] = []
        self._lock = threading.Lock()
        super().__init__(self._handler(), port=port, name=f"roma_lab-stub-{name}")

    @property
    def spec(self) -> str:
        return f"{self.name}={self.base_url}"

    def fail(self, *faults: str) -> None:
        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            raise ValueError(f"unknown fault {unknown[0]!r}; one of {', '.join(FAULTS)}")
        with self._lock:
            self._faults.extend(faults)

    def _take(self, request: StubRequest) -> str | None:
        with self._lock:
            self.requests.append(request)
            return self._faults.pop(0) if self._faults else None

    def _handler(self) -> type[QuietHandler]:
        stub = self

        class Handler(QuietHandler):
            def _answer(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                request = StubRequest(self.command, parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()},
                                      {k.lower(): v for k, v in self.headers.items()}, body)
                fault = stub._take(request)
                if (self.command, parts.path) != _ROUTES[stub.name]:
                    return self.send_body(404, b'{"error": "not found"}', "application/json")
                sent = _sent_key(stub.name, request.headers)
                if fault == "echo-key":
                    return self.send_body(401, json.dumps({"error": f"invalid API key {sent!r}"}).encode(),
                                          "application/json")
                if stub.key is not None and sent != stub.key:
                    return self.send_body(401, b'{"message": "Unauthorized"}', "application/json")
                if fault in ("429", "429-bare"):
                    headers = {"Retry-After": stub.retry_after} if fault == "429" else {}
                    return self.send_body(429, b'{"message": "rate limited"}', "application/json", headers)
                if fault == "500":
                    return self.send_body(500, b'{"message": "internal error"}', "application/json")
                if fault == "invalid-json":
                    return self.send_body(200, b'{"results": [ {"title": "cut off', "application/json")
                results = stub.on_request(request) if stub.on_request is not None else None
                query, k = _query_and_k(stub.name, request)
                data = json.dumps(_reply(stub.name, stub.results if results is None else results, query, k)).encode()
                if fault != "drip":
                    return self.send_body(200, data, "application/json")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                for i in range(len(data)):
                    if stub.release.wait(stub.drip_s):
                        return
                    try:
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                    except OSError:  # the client gave up: what a deadline does
                        return

            do_GET = do_POST = _answer

        return Handler


def _query_and_k(name: str, request: StubRequest) -> tuple[str, int]:
    body = request.body if isinstance(request.body, dict) else {}
    q = request.query
    if name == "serper":
        return body.get("q", ""), int(body.get("num", 10))
    if name == "tavily":
        return body.get("query", ""), int(body.get("max_results", 5))
    if name == "exa":
        return body.get("query", ""), int(body.get("numResults", 10))
    if name == "brave":
        return q.get("q", ""), int(q.get("count", 20))
    if name == "wikipedia":
        return q.get("srsearch", ""), int(q.get("srlimit", 10))
    return q.get("q", ""), 20  # searxng: a page, however many were asked
