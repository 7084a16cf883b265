"""The search providers: small adapters speaking each service's documented wire format.

Each adapter says how a search for ``query`` with ``k`` results is asked (method, path, query
parameters, JSON body, the header that carries the key) and how the reply becomes
:class:`WebResult` s. A provider is chosen by a spec string, ``name`` or ``name=BASE_URL``
(:func:`parse_provider`): the base URL overrides the service's own (a proxy, a self-hosted
instance, a test's loopback stub); the key comes from the service's conventional variable.

==========  ======================================  ====================================================
spec        request                                 reply: results
==========  ======================================  ====================================================
serper      POST /search, X-API-KEY, {q, num}       organic[]: title, link, snippet, date
tavily      POST /search, Bearer, {query,           results[]: title, url, content, published_date
            max_results, search_depth: basic}
exa         POST /search, x-api-key, {query,        results[]: title, url, highlights/text,
            numResults, type: auto, contents:       publishedDate
            {highlights: true}}
brave       GET /res/v1/web/search?q&count,         web.results[]: title, url, description (HTML),
            X-Subscription-Token                    page_age / age
searxng     GET /search?q&format=json (no key)      results[]: title, url, content, publishedDate
wikipedia   GET /w/api.php?action=query&list=       query.search[]: title, snippet (HTML), timestamp;
            search&srsearch&srlimit (no key)        the URL is /wiki/<title>
==========  ======================================  ====================================================

Documentation: https://serper.dev (playground), https://docs.tavily.com/documentation/api-reference/endpoint/search,
https://exa.ai/docs/reference/search, https://api-dashboard.search.brave.com/app/documentation/web-search/get-started,
https://docs.searxng.org/dev/search_api.html, https://www.mediawiki.org/wiki/API:Search.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from ._errors import BadReplyError, MissingKeyError, UnknownProviderError
from ._http import Request, Secret
from ._types import WebResult

__all__ = ["PROVIDERS", "SearchProvider", "parse_provider"]

_TAGS = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


def plain(text: Any) -> str:
    """A provider's snippet or title as plain text: HTML tags (highlighting) removed, entities
    decoded, runs of whitespace made one space."""
    if not isinstance(text, str):
        return ""
    return _SPACE.sub(" ", html.unescape(_TAGS.sub("", text))).strip()


def _items(payload: Any, *path: str) -> list[Any]:
    """The list at ``path`` in ``payload`` ([] when the last key is absent: no results); BadReplyError
    when the reply has another shape."""
    node = payload
    for depth, key in enumerate(path):
        if not isinstance(node, Mapping):
            where = ".".join(path[:depth]) or "the reply"
            raise BadReplyError(f"{where} is a JSON {type(node).__name__}, not an object")
        if key not in node or node[key] is None:
            return []
        node = node[key]
    if not isinstance(node, list):
        raise BadReplyError(f"{'.'.join(path)} is a JSON {type(node).__name__}, not a list")
    return node


def _result(title: Any, url: Any, snippet: Any, date: Any) -> WebResult | None:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None  # a hit without a fetchable address is no hit
    return WebResult(title=plain(title) or url, url=url, snippet=plain(snippet),
                     date=date if isinstance(date, str) and date else None)


# --- each service: its request and its reply ------------------------------------------------------


def _serper_request(query: str, k: int) -> tuple[str, str, dict | None, dict | None]:
    return "POST", "/search", None, {"q": query, "num": k}


def _serper_results(payload: Any, base_url: str) -> list[WebResult | None]:
    return [_result(i.get("title"), i.get("link"), i.get("snippet"), i.get("date"))
            for i in _items(payload, "organic") if isinstance(i, Mapping)]


def _tavily_request(query: str, k: int) -> tuple[str, str, dict | None, dict | None]:
    return "POST", "/search", None, {"query": query, "max_results": k, "search_depth": "basic",
                                     "include_answer": False, "include_raw_content": False, "include_images": False}


def _tavily_results(payload: Any, base_url: str) -> list[WebResult | None]:
    return [_result(i.get("title"), i.get("url"), i.get("content"), i.get("published_date"))
            for i in _items(payload, "results") if isinstance(i, Mapping)]


def _exa_request(query: str, k: int) -> tuple[str, str, dict | None, dict | None]:
    return "POST", "/search", None, {"query": query, "numResults": k, "type": "auto", "contents": {"highlights": True}}


def _exa_snippet(item: Mapping[str, Any]) -> Any:
    highlights = item.get("highlights")
    if isinstance(highlights, list) and highlights:
        return " … ".join(h for h in highlights if isinstance(h, str))
    return item.get("summary") or item.get("text")


def _exa_results(payload: Any, base_url: str) -> list[WebResult | None]:
    return [_result(i.get("title"), i.get("url"), _exa_snippet(i), i.get("publishedDate"))
            for i in _items(payload, "results") if isinstance(i, Mapping)]


def _brave_request(query: str, k: int) -> tuple[str, str, dict | None, dict | None]:
    return "GET", "/res/v1/web/search", {"q": query, "count": k}, None


def _brave_results(payload: Any, base_url: str) -> list[WebResult | None]:
    return [_result(i.get("title"), i.get("url"), i.get("description"), i.get("page_age") or i.get("age"))
            for i in _items(payload, "web", "results") if isinstance(i, Mapping)]


def _searxng_request(query: str, k: int) -> tuple[str, str, dict | None, dict | None]:
    # SearXNG has no result count: it answers a page (~10-20 hits), cut to k here
    return "GET", "/search", {"q": query, "format": "json"}, None


def _searxng_results(payload: Any, base_url: str) -> list[WebResult | None]:
    return [_result(i.get("title"), i.get("url"), i.get("content"), i.get("publishedDate"))
            for i in _items(payload, "results") if isinstance(i, Mapping)]


def _wikipedia_request(query: str, k: int) -> tuple[str, str, dict | None, dict | None]:
    return "GET", "/w/api.php", {"action": "query", "list": "search", "srsearch": query, "srlimit": k,
                                 "srprop": "snippet|timestamp", "format": "json", "formatversion": 2}, None


def _wikipedia_results(payload: Any, base_url: str) -> list[WebResult | None]:
    if isinstance(payload, Mapping) and isinstance(payload.get("error"), Mapping):  # the API's errors come as 200
        error = payload["error"]
        raise BadReplyError(f"the API answered an error: {error.get('code')}: {plain(error.get('info'))}")
    return [_result(i.get("title"), f"{base_url}/wiki/{quote(i['title'].replace(' ', '_'), safe='/:()_,')}"
                    if isinstance(i.get("title"), str) else None, i.get("snippet"), i.get("timestamp"))
            for i in _items(payload, "query", "search") if isinstance(i, Mapping)]


@dataclass(frozen=True, slots=True)
class Adapter:
    """One service: its name, where it is, the variable holding its key and the header that sends
    it (None: keyless), the most results it returns per request, how many requests it takes at once
    by default, and its request and reply."""

    name: str
    base_url: str | None  # None: self-hosted only, the spec must name it
    key_env: str | None
    auth: Callable[[str], dict[str, str]] | None
    max_k: int
    max_in_flight: int
    request: Callable[[str, int], tuple[str, str, dict | None, dict | None]]
    results: Callable[[Any, str], list[WebResult | None]]
    docs: str


PROVIDERS: Mapping[str, Adapter] = {a.name: a for a in (
    Adapter("serper", "https://google.serper.dev", "SERPER_API_KEY", lambda key: {"X-API-KEY": key},
            100, 4, _serper_request, _serper_results, "https://serper.dev"),
    Adapter("tavily", "https://api.tavily.com", "TAVILY_API_KEY", lambda key: {"Authorization": f"Bearer {key}"},
            20, 4, _tavily_request, _tavily_results, "https://docs.tavily.com/documentation/api-reference/endpoint/search"),
    Adapter("exa", "https://api.exa.ai", "EXA_API_KEY", lambda key: {"x-api-key": key},
            100, 4, _exa_request, _exa_results, "https://exa.ai/docs/reference/search"),
    # BRAVE_API_KEY: the name Brave's own MCP server and most agent tools read
    Adapter("brave", "https://api.search.brave.com", "BRAVE_API_KEY", lambda key: {"X-Subscription-Token": key},
            20, 4, _brave_request, _brave_results,
            "https://api-dashboard.search.brave.com/app/documentation/web-search/get-started"),
    Adapter("searxng", None, None, None, 100, 4, _searxng_request, _searxng_results,
            "https://docs.searxng.org/dev/search_api.html"),
    # Wikimedia asks API clients to send requests one at a time (API:Etiquette)
    Adapter("wikipedia", "https://en.wikipedia.org", None, None, 500, 1, _wikipedia_request, _wikipedia_results,
            "https://www.mediawiki.org/wiki/API:Search"),
)}


@dataclass(frozen=True, slots=True)
class SearchProvider:
    """A provider ready to ask: its adapter, the base URL in use and its key (None: keyless, or a
    replay that needs none). The key is a :class:`Secret`: never in a repr, a record or a message."""

    adapter: Adapter = field(repr=False)
    base_url: str
    key: Secret | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.adapter.name

    @property
    def spec(self) -> str:
        """The spec that names this provider where it is (``name`` at its own address)."""
        return self.name if self.base_url == self.adapter.base_url else f"{self.name}={self.base_url}"

    def request(self, query: str, k: int) -> tuple[Request, dict[str, Any]]:
        """The HTTP request for ``query`` and ``k``, and its canonical form: everything the reply
        depends on (provider, endpoint, parameters, body) and nothing secret (the key travels in a
        header, which the canonical form leaves out)."""
        method, path, params, body = self.adapter.request(query, k)
        headers = {"Accept": "application/json"}
        if self.key is not None and self.adapter.auth is not None:
            headers.update(self.adapter.auth(self.key.reveal()))
        url = f"{self.base_url}{path}"
        # k as such too: SearXNG is sent none, and the reply recorded holds the first k hits
        canonical = {"provider": self.name, "method": method, "endpoint": url, "params": params, "body": body, "k": k}
        return Request(method, url, headers, params, body), json.loads(json.dumps(canonical))

    def results(self, payload: Any, k: int) -> list[WebResult]:
        """The first ``k`` usable hits of a reply (hits without an http(s) URL are skipped)."""
        return [r for r in self.adapter.results(payload, self.base_url) if r is not None][:k]


def _base_url(name: str, url: str) -> str:
    url = url.strip().rstrip("/")
    if not re.match(r"^https?://[^/\s]+", url):
        raise UnknownProviderError(f"web search {name!r}: its address must be an http(s) URL, got {url!r}")
    return url


def parse_provider(spec: str, *, need_key: bool = True, environ: Mapping[str, str] | None = None) -> SearchProvider:
    """The provider a spec names: ``name`` or ``name=BASE_URL`` (e.g. ``serper``,
    ``searxng=http://127.0.0.1:8888``, ``wikipedia=https://de.wikipedia.org``). Its key is read
    from its variable (``SERPER_API_KEY``...; ``environ``, else the process environment);
    MissingKeyError naming the variable when it is unset and ``need_key`` (a replay needs none)."""
    if not isinstance(spec, str) or not spec.strip():
        raise UnknownProviderError(f"a web search provider spec is a name, or name=URL; got {spec!r}. "
                                   f"Known: {', '.join(sorted(PROVIDERS))}")
    name, sep, url = spec.strip().partition("=")
    name = name.strip().lower()
    adapter = PROVIDERS.get(name)
    if adapter is None:
        raise UnknownProviderError(f"unknown web search provider {name!r}; known: {', '.join(sorted(PROVIDERS))}")
    if sep:
        base = _base_url(name, url)
    elif adapter.base_url is None:
        raise UnknownProviderError(f"web search {name!r} is self-hosted: name its address, e.g. "
                                   f"{name}=http://127.0.0.1:8888")
    else:
        base = adapter.base_url
    key = None
    if adapter.key_env is not None:
        value = (os.environ if environ is None else environ).get(adapter.key_env, "").strip()
        if value:
            key = Secret(value)
        elif need_key:
            raise MissingKeyError(name, adapter.key_env)
    return SearchProvider(adapter, base, key)
