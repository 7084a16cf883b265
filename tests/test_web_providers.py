"""roma_lab.web's providers: each one's request shape and reply parsing against its loopback stub and a
reply sample in its documented format, every fault the stubs inject, the spec parser, keys, prices."""

from __future__ import annotations

import json
import threading
import time

import pytest
from web_site import Route, Site, redirect

from roma_lab.web import (
    PRICES,
    PROVIDERS,
    BadReplyError,
    HTTPStatusError,
    MissingKeyError,
    ProviderStub,
    UnknownProviderError,
    Web,
    WebArgumentError,
    WebDeadlineError,
    WebError,
    WebResult,
    WebSettings,
    call_cost,
    parse_provider,
    web_meter,
)

KEY_ENV = {"serper": "SERPER_API_KEY", "tavily": "TAVILY_API_KEY", "exa": "EXA_API_KEY", "brave": "BRAVE_API_KEY"}
HITS = (
    WebResult("Alpha one", "https://alpha.example/one", "The first alpha & its beta.", "2025-03-01"),
    WebResult("Alpha two", "https://alpha.example/two", "A second hit.", "2024-11-30"),
    WebResult("Alpha three", "https://alpha.example/three", "A third hit.", None),
    WebResult("Alpha four", "https://alpha.example/four", "A fourth hit.", None),
)


def expected(name: str, base_url: str, k: int) -> list[WebResult]:
    """What the room returns for the stub's canned HITS: as given, except Wikipedia's URL (made from the
    title) and date (the page's last edit; the stub gives a fixed one when the hit has none)."""
    hits = list(HITS[:k])
    if name == "wikipedia":
        return [WebResult(h.title, f"{base_url}/wiki/{h.title.replace(' ', '_')}", h.snippet,
                          h.date or "2026-01-01T00:00:00Z") for h in hits]
    return hits


def fast(spec: str, **given) -> WebSettings:
    return WebSettings(**{"search": spec, "backoff_s": 0.01, "deadline_s": 10.0, **given})


@pytest.fixture
def keys(monkeypatch):
    """Each keyed provider's variable set to a key of its own."""
    for name, variable in KEY_ENV.items():
        monkeypatch.setenv(variable, f"key-of-{name}-7f3a")
    return {name: f"key-of-{name}-7f3a" for name in KEY_ENV}


REQUESTS = {
    "serper": ("POST", "/search", {}, {"q": "alpha beta", "num": 3}),
    "tavily": ("POST", "/search", {}, {"query": "alpha beta", "max_results": 3, "search_depth": "basic",
                                       "include_answer": False, "include_raw_content": False, "include_images": False}),
    "exa": ("POST", "/search", {}, {"query": "alpha beta", "numResults": 3, "type": "auto", "contents": {"highlights": True}}),
    "brave": ("GET", "/res/v1/web/search", {"q": "alpha beta", "count": "3"}, None),
    "searxng": ("GET", "/search", {"q": "alpha beta", "format": "json"}, None),
    "wikipedia": ("GET", "/w/api.php", {"action": "query", "list": "search", "srsearch": "alpha beta", "srlimit": "3",
                                        "srprop": "snippet|timestamp", "format": "json", "formatversion": "2"}, None),
}
AUTH = {"serper": ("x-api-key", "{key}"), "tavily": ("authorization", "Bearer {key}"), "exa": ("x-api-key", "{key}"),
        "brave": ("x-subscription-token", "{key}")}


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_each_provider_sends_its_documented_request_and_parses_its_reply(name, keys):
    with ProviderStub(name, HITS, key=keys.get(name)) as stub, Web(fast(stub.spec)) as web:
        results = web.search("  alpha beta ", 3)
        (request,) = stub.requests
    assert results == expected(name, stub.base_url, 3)
    method, path, query, body = REQUESTS[name]
    assert (request.method, request.path, request.query, request.body) == (method, path, query, body)
    assert request.headers["user-agent"].startswith("roma_lab/")
    sent_auth = {h: request.headers.get(h) for h in ("x-api-key", "authorization", "x-subscription-token")}
    if name in AUTH:
        header, form = AUTH[name]
        assert sent_auth == {h: form.format(key=keys[name]) if h == header else None for h in sent_auth}
    else:
        assert sent_auth == dict.fromkeys(sent_auth)  # a keyless service is sent no key at all


# A reply per provider in its documented format (fields the room ignores left in), so the parser is pinned
# to the service's shape, not only to our stub's.
DOC_REPLIES = {
    "serper": {"searchParameters": {"q": "apple inc", "type": "search", "engine": "google"},
               "knowledgeGraph": {"title": "Apple"},
               "organic": [{"title": "Apple", "link": "https://www.apple.com/", "snippet": "Discover the innovative world.",
                            "sitelinks": [{"title": "Support", "link": "https://support.apple.com/"}], "position": 1},
                           {"title": "Apple Inc. - Wikipedia", "link": "https://en.wikipedia.org/wiki/Apple_Inc.",
                            "snippet": "Apple Inc. is an American company.", "date": "Dec 1, 2026", "position": 2}],
               "peopleAlsoAsk": [], "relatedSearches": [{"query": "apple stock"}], "credits": 1},
    "tavily": {"query": "Who is Leo Messi?", "answer": None, "images": [],
               "results": [{"title": "Lionel Messi Facts", "url": "https://www.britannica.com/facts/Lionel-Messi",
                            "content": "Lionel Messi, an Argentine footballer.", "score": 0.81, "raw_content": None}],
               "response_time": "1.67", "request_id": "123e4567-e89b-12d3-a456-426614174111"},
    "exa": {"requestId": "b5947044c4b78efa9552a7c89b306d95", "resolvedSearchType": "neural",
            "results": [{"title": "A Comprehensive Overview", "url": "https://arxiv.org/pdf/2307.06435.pdf",
                         "publishedDate": "2023-11-16T01:36:32.547Z", "author": "Humza Naveed", "id": "https://arxiv.org/abs/2307.06435",
                         "highlights": ["Such requirements have limited their adoption"], "highlightScores": [0.46]}],
            "costDollars": {"total": 0.007}},
    "brave": {"type": "search", "query": {"original": "brave search"},
              "web": {"type": "search", "results": [{"title": "Brave Search", "url": "https://search.brave.com/",
                                                     "description": "Search the web <strong>privately</strong>&#x27;s way.",
                                                     "page_age": "2026-09-01T00:00:00", "age": "3 months ago"}]}},
    "searxng": {"query": "searxng", "number_of_results": 0,
                "results": [{"url": "https://docs.searxng.org/", "title": "Welcome to SearXNG", "content": "A metasearch engine.",
                             "engine": "duckduckgo", "parsed_url": ["https", "docs.searxng.org", "/", "", "", ""],
                             "template": "default.html", "engines": ["duckduckgo"], "positions": [1], "score": 1.0,
                             "category": "general", "publishedDate": None}],
                "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []},
    "wikipedia": {"batchcomplete": True, "continue": {"sroffset": 1, "continue": "-||"},
                  "query": {"searchinfo": {"totalhits": 5060},
                            "search": [{"ns": 0, "title": "Nelson Mandela", "pageid": 21492751, "size": 196026,
                                        "wordcount": 23664, "snippet": "<span class=\"searchmatch\">Nelson</span> Rolihlahla &amp; more",
                                        "timestamp": "2018-07-23T07:59:43Z"}]}},
}
DOC_PARSED = {
    "serper": [WebResult("Apple", "https://www.apple.com/", "Discover the innovative world.", None),
               WebResult("Apple Inc. - Wikipedia", "https://en.wikipedia.org/wiki/Apple_Inc.",
                         "Apple Inc. is an American company.", "Dec 1, 2026")],
    "tavily": [WebResult("Lionel Messi Facts", "https://www.britannica.com/facts/Lionel-Messi",
                         "Lionel Messi, an Argentine footballer.", None)],
    "exa": [WebResult("A Comprehensive Overview", "https://arxiv.org/pdf/2307.06435.pdf",
                      "Such requirements have limited their adoption", "2023-11-16T01:36:32.547Z")],
    "brave": [WebResult("Brave Search", "https://search.brave.com/", "Search the web privately's way.", "2026-09-01T00:00:00")],
    "searxng": [WebResult("Welcome to SearXNG", "https://docs.searxng.org/", "A metasearch engine.", None)],
    "wikipedia": [WebResult("Nelson Mandela", "https://en.wikipedia.org/wiki/Nelson_Mandela", "Nelson Rolihlahla & more",
                            "2018-07-23T07:59:43Z")],
}


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_each_provider_parses_a_reply_in_its_documented_format(name):
    spec = "searxng=https://searx.example" if name == "searxng" else name
    provider = parse_provider(spec, need_key=False)
    assert provider.results(DOC_REPLIES[name], 10) == DOC_PARSED[name]
    assert provider.results(DOC_REPLIES[name], 1) == DOC_PARSED[name][:1]


@pytest.mark.parametrize("name", sorted(PROVIDERS))
@pytest.mark.parametrize("reply", [[], "text", {"organic": "x", "results": "x", "web": {"results": "x"}, "query": {"search": "x"}},
                                   {"organic": {"a": 1}, "results": {"a": 1}, "web": [], "query": []}])
def test_a_reply_of_another_shape_is_a_bad_reply(name, reply):
    spec = "searxng=https://searx.example" if name == "searxng" else name
    with pytest.raises(BadReplyError):
        parse_provider(spec, need_key=False).results(reply, 5)


def test_a_reply_without_results_is_no_hits_and_hits_without_an_http_url_are_dropped():
    serper = parse_provider("serper", need_key=False)
    assert serper.results({"searchParameters": {}}, 5) == []
    assert serper.results({"organic": [{"title": "x", "link": "javascript:alert(1)"}, {"title": "y"},
                                       {"title": "z", "link": "https://z.example/"}]}, 5) == \
        [WebResult("z", "https://z.example/", "", None)]


def test_wikipedias_error_reply_is_a_bad_reply():
    with pytest.raises(BadReplyError, match="maxlag"):
        parse_provider("wikipedia").results({"error": {"code": "maxlag", "info": "Waiting for a database server"}}, 5)


@pytest.mark.parametrize("fault", ["429", "429-bare", "500"])
@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_a_429_or_500_is_retried_and_then_answered(name, fault, keys):
    with ProviderStub(name, HITS, key=keys.get(name)) as stub, Web(fast(stub.spec)) as web:
        stub.fail(fault)
        assert web.search("alpha", 2) == expected(name, stub.base_url, 2)
        assert len(stub.requests) == 2


def test_retry_after_is_honoured_and_without_it_the_back_off_has_jitter(keys):
    with ProviderStub("serper", HITS, key=keys["serper"], retry_after="1") as stub, \
            Web(fast(stub.spec, backoff_s=0.2)) as web:
        stub.fail("429")
        started = time.monotonic()
        web.search("alpha", 1)
        assert time.monotonic() - started >= 1.0  # at least what the server asked
        stub.fail("429-bare", "429-bare")
        started = time.monotonic()
        web.search("alpha beta", 1)
        waited = time.monotonic() - started
        assert 0.1 + 0.2 <= waited < 0.2 + 0.4 + 1.0  # 0.5-1x of 0.2 s, then of 0.4 s


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_past_its_retries_an_error_status_is_a_typed_error_naming_it(name, keys):
    with ProviderStub(name, HITS, key=keys.get(name)) as stub, Web(fast(stub.spec, retries=2)) as web:
        stub.fail("500", "500", "500", "500")
        with pytest.raises(HTTPStatusError, match="HTTP 500.*after 3 attempts") as raised:
            web.search("alpha", 2)
        assert raised.value.status == 500 and len(stub.requests) == 3


def test_a_retry_after_past_the_deadline_stops_at_once(keys):
    with ProviderStub("tavily", HITS, key=keys["tavily"], retry_after="120") as stub, \
            Web(fast(stub.spec, deadline_s=3.0)) as web:
        stub.fail("429")
        started = time.monotonic()
        with pytest.raises(HTTPStatusError, match="Retry-After 120 s would end past the call's deadline") as raised:
            web.search("alpha", 2)
        assert raised.value.status == 429 and len(stub.requests) == 1 and time.monotonic() - started < 2


def test_a_client_error_is_not_retried(keys, monkeypatch):
    monkeypatch.setenv("EXA_API_KEY", "a-wrong-key")
    with ProviderStub("exa", HITS, key=keys["exa"]) as stub, Web(fast(stub.spec)) as web:
        with pytest.raises(HTTPStatusError, match="HTTP 401") as raised:
            web.search("alpha", 2)
        assert raised.value.status == 401 and len(stub.requests) == 1


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_a_reply_that_is_not_json_is_a_bad_reply_not_retried(name, keys):
    with ProviderStub(name, HITS, key=keys.get(name)) as stub, Web(fast(stub.spec)) as web:
        stub.fail("invalid-json")
        with pytest.raises(BadReplyError, match="not JSON"):
            web.search("alpha", 2)
        assert len(stub.requests) == 1
        assert web.search("alpha", 2) == expected(name, stub.base_url, 2)  # the next call is fine


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_a_dripped_reply_ends_at_the_deadline(name, keys):
    with ProviderStub(name, HITS, key=keys.get(name), drip_s=0.05) as stub, Web(fast(stub.spec, deadline_s=1.0)) as web:
        stub.fail("drip")
        started = time.monotonic()
        with pytest.raises(WebDeadlineError, match="deadline of 1 s") as raised:
            web.search("alpha", 2)
        assert 0.9 <= time.monotonic() - started < 3.0  # the upper bound is slack for a loaded machine
        assert raised.value.tool_status == "timed_out" and isinstance(raised.value, TimeoutError)


def test_a_reply_larger_than_its_limit_is_refused(keys):
    with ProviderStub("searxng", HITS) as stub, Web(fast(stub.spec, reply_bytes=100)) as web:
        with pytest.raises(BadReplyError, match="larger than 100 bytes"):
            web.search("alpha", 2)


def test_requests_in_flight_are_capped_per_provider():
    active, peak, lock = [0], [0], threading.Lock()

    def hold(request):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.15)
        with lock:
            active[0] -= 1

    with ProviderStub("searxng", HITS, on_request=hold) as stub, Web(fast(stub.spec, max_in_flight=2)) as web:
        threads = [threading.Thread(target=web.search, args=(f"q{i}", 1)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert peak[0] == 2 and len(stub.requests) == 6


def test_requests_are_started_at_most_per_second():
    with ProviderStub("searxng", HITS) as stub, Web(fast(stub.spec, per_second=20.0)) as web:
        started = time.monotonic()
        for i in range(5):
            web.search(f"rate {i}", 1)
        assert time.monotonic() - started >= 4 / 20 - 0.01


def test_a_spec_names_a_known_provider_and_its_address():
    assert parse_provider("wikipedia").base_url == "https://en.wikipedia.org"
    assert parse_provider("Wikipedia=https://de.wikipedia.org/").base_url == "https://de.wikipedia.org"
    assert parse_provider("searxng=http://10.0.0.2:8888").spec == "searxng=http://10.0.0.2:8888"
    with pytest.raises(UnknownProviderError, match="unknown web search provider 'google'; known: brave, exa, searxng, "
                                                   "serper, tavily, wikipedia"):
        parse_provider("google")
    with pytest.raises(UnknownProviderError, match="self-hosted: name its address, e.g. searxng=http"):
        parse_provider("searxng")
    with pytest.raises(UnknownProviderError, match="must be an http"):
        parse_provider("searxng=file:///etc")
    with pytest.raises(UnknownProviderError):
        parse_provider("")


@pytest.mark.parametrize("name", sorted(KEY_ENV))
def test_a_missing_key_names_the_variable_to_set(name, monkeypatch):
    monkeypatch.delenv(KEY_ENV[name], raising=False)
    with pytest.raises(MissingKeyError, match=rf"web search '{name}' needs \${KEY_ENV[name]}"):
        parse_provider(name)
    with pytest.raises(MissingKeyError):
        Web(WebSettings(search=name))
    assert parse_provider(name, need_key=False).key is None  # a replay needs none


def test_bad_arguments_are_typed_tool_errors(keys):
    with ProviderStub("searxng", HITS) as stub, Web(fast(stub.spec)) as web:
        for query, k in (("", 3), ("   ", 3), (None, 3), ("x" * 401, 3), ("ok", 0), ("ok", 2.0), ("ok", True)):
            with pytest.raises(WebArgumentError) as raised:
                web.search(query, k)
            assert isinstance(raised.value, WebError)
        assert stub.requests == []
        assert len(web.search("alpha", 50)) == 4  # k past max_results is lowered, not refused
        assert stub.requests[-1].query == {"q": "alpha", "format": "json"}


def test_k_is_lowered_to_the_settings_and_the_providers_maximum(keys):
    with ProviderStub("brave", HITS, key=keys["brave"]) as stub, Web(fast(stub.spec, max_results=50)) as web:
        web.search("alpha", 40)
        assert stub.requests[-1].query["count"] == "20"  # Brave's documented maximum


def test_snippets_are_cut_with_the_cut_marked():
    long = WebResult("Long", "https://long.example/", "word " * 200, None)
    with ProviderStub("searxng", [long]) as stub, Web(fast(stub.spec, snippet_chars=50)) as web:
        (hit,) = web.search("long", 1)
    assert hit.snippet.startswith(("word " * 10)[:50]) and hit.snippet.endswith("[… cut: 50 of 999 characters shown]")


def test_every_call_is_metered_with_its_price(keys):
    with ProviderStub("serper", HITS, key=keys["serper"]) as stub, Web(fast(stub.spec, retries=0)) as web, \
            web_meter() as outer:
        with web_meter() as inner:
            web.search("alpha", 2)
        stub.fail("500")
        with pytest.raises(HTTPStatusError):
            web.search("beta", 2)
    assert [(c.provider, c.kind, c.target, c.cost, c.replayed, c.results, c.error is None) for c in outer.calls] == \
        [("serper", "search", "alpha", 0.001, False, 2, True), ("serper", "search", "beta", None, False, None, False)]
    assert inner.calls == outer.calls[:1] and inner.cost() == 0.001 and outer.cost() is None


def test_the_price_table_prices_each_provider_and_an_unknown_one_is_none():
    assert set(PRICES) == {*PROVIDERS, "reader"}
    assert call_cost("serper", results=10, replayed=False, ok=True) == 0.001
    assert call_cost("tavily", results=20, replayed=False, ok=True) == 0.008
    assert call_cost("exa", results=10, replayed=False, ok=True) == 0.007
    assert call_cost("exa", results=15, replayed=False, ok=True) == pytest.approx(0.012)
    assert call_cost("brave", results=20, replayed=False, ok=True) == 0.005
    for free in ("searxng", "wikipedia", "reader"):
        assert call_cost(free, results=10, replayed=False, ok=True) == 0.0
        assert call_cost(free, results=10, replayed=False, ok=False) == 0.0
    assert call_cost("serper", results=10, replayed=True, ok=True) == 0.0  # a replay reached no provider
    assert call_cost("serper", results=10, replayed=False, ok=False) is None
    assert call_cost("a-provider-without-a-price", results=1, replayed=False, ok=True) is None


def test_settings_report_every_problem_at_once_and_read_the_environment(monkeypatch):
    with pytest.raises(ValueError) as raised:
        WebSettings(search="", recording="sometimes", deadline_s=-1, max_results=0, retries=-1, per_second=0)
    for name in ("search", "recording", "deadline_s", "max_results", "retries", "per_second"):
        assert name in str(raised.value)
    monkeypatch.setenv("ROMA_LAB_WEB", "searxng=http://127.0.0.1:9")
    monkeypatch.setenv("ROMA_LAB_WEB_RECORD", "replay")
    monkeypatch.setenv("ROMA_LAB_WEB_DIR", "/tmp/web-recording")
    monkeypatch.setenv("ROMA_LAB_WEB_ALLOW", "127.0.0.1:9, localhost")
    settings = WebSettings.from_environment(retries=1)
    assert (settings.search, settings.recording, settings.recording_dir, settings.allow_hosts, settings.retries) == \
        ("searxng=http://127.0.0.1:9", "replay", "/tmp/web-recording", ("127.0.0.1:9", "localhost"), 1)
    assert WebSettings.from_environment(search="wikipedia").search == "wikipedia"
    assert WebSettings(allow_hosts="localhost").allow_hosts == ("localhost",)


def test_a_redirect_keeps_the_key_on_its_origin_and_never_sends_it_to_another(keys):
    reply = Route(200, json.dumps({"organic": [{"title": "T", "link": "https://t.example/", "snippet": "s"}]}).encode(),
                  {"Content-Type": "application/json"})
    with Site({"/search": reply}) as there, \
            Site({"/search": redirect("/v2/search", 308), "/v2/search": redirect(f"{there.base}/search", 307)}) as here, \
            Web(fast(f"serper={here.base}")) as web:
        assert web.search("q", 1) == [WebResult("T", "https://t.example/", "s", None)]
    assert [h.get("x-api-key") for h in here.headers] == [keys["serper"], keys["serper"]]
    (moved,) = there.headers
    assert "x-api-key" not in moved and moved["accept"] == "application/json"


def test_coroutines_and_worker_threads_carry_the_meter():
    import asyncio

    from roma_lab._concurrent import concurrent_map

    with ProviderStub("searxng", HITS) as stub, Web(fast(stub.spec)) as web, web_meter() as meter:
        assert asyncio.run(web.asearch("from a coroutine", 2)) == list(HITS[:2])
        concurrent_map(lambda q: web.search(q, 1), ["t1", "t2", "t3"], workers=3)
    assert sorted(c.target for c in meter.calls) == ["from a coroutine", "t1", "t2", "t3"]
