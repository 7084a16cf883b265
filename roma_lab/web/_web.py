"""``Web``: the one interface of the room, ``search(query, k)`` and ``read(url)``.

Reading order of a call: the arguments are checked (a bad one is a :class:`WebArgumentError`, a
tool error like any other); the provider (or the reader) builds the request and its canonical form;
the recorder serves it, or makes it live (record mode, or no recording); the live call runs on a
worker thread abandoned at the call's deadline, so no call outlives it; the reply is cut to the
size limits; the call is counted (``web_meter``). Any failure is a :class:`WebError` whose message
has had every key scrubbed out of it.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ._errors import BadReplyError, HTTPStatusError, WebError
from ._guard import Guard, Resolver
from ._http import Deadline, Fetcher, Policy, Reply, Request, gate, scrub
from ._price import call_cost
from ._providers import parse_provider
from ._reader import page_from
from ._record import WebRecorder, record_key
from ._settings import WebSettings
from ._types import Page, WebResult, cut_text
from ._usage import WebCall, record_call

__all__ = ["MAX_QUERY_CHARS", "Web", "WebArgumentError", "open_web"]

#: The longest query sent (Brave's documented limit; the others accept at least this).
MAX_QUERY_CHARS = 400
READER = "reader"
_READER_IN_FLIGHT = 8
T = TypeVar("T")
_ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.9,text/*;q=0.8,*/*;q=0.1"


class WebArgumentError(WebError, ValueError):
    """A query that is empty or too long, a k that is no whole number >= 1, a URL that is no string."""


def _within(deadline: Deadline, call: Callable[[], Any], what: str) -> Any:
    """``call()`` on a daemon thread in a copy of this context: its result or its error, or past the
    deadline a WebDeadlineError (the thread is left to end on its own; its reads time out by then)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = err

    worker = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True, name="roma_lab-web")
    worker.start()
    worker.join(deadline.remaining())
    if worker.is_alive():
        raise deadline.error(what)
    if "error" in box:
        raise box["error"]
    return box["value"]


def _check_status(reply: Reply, what: str) -> None:
    if 200 <= reply.status < 300:
        return
    why = f" ({reply.gave_up})" if reply.gave_up else ""
    raise HTTPStatusError(f"{what}: HTTP {reply.status} {reply.reason}{why}: {reply.text_excerpt()!r}", reply.status)


class Web:
    """Search with one provider and read pages, within the ``settings``' limits, recorded or replayed.

    ``recorder``: a recording to use instead of the one ``settings.recording`` names (e.g.
    ``open_snapshot(run_dir)``). The provider's key is read from its variable now, unless the
    recording replays (a replay needs no key). ``resolve``: the name lookup of the URL guard
    (the system's unless given; tests give a fake DNS). Thread-safe; ``close()`` (or ``with``)
    ends its pooled connections.
    """

    def __init__(self, settings: WebSettings | None = None, *, recorder: WebRecorder | None = None,
                 resolve: Resolver | None = None):
        from roma_lab import __version__
        from roma_lab.lm import call_deadline_s

        self.settings = settings or WebSettings()
        if recorder is None and self.settings.recording != "off":
            recorder = WebRecorder(self.settings.folder(), self.settings.recording)
        self.recorder = recorder
        self.provider = parse_provider(self.settings.search, need_key=recorder is None or recorder.mode != "replay")
        self.deadline_s = call_deadline_s(self.settings.deadline_s)
        self.guard = Guard(self.settings.allow_hosts, resolve)
        contact = f"; {self.settings.contact}" if self.settings.contact else ""
        self._fetcher = Fetcher(f"roma_lab/{__version__} (research toolkit, automated agent{contact}) python-httpx")
        self._secrets = (self.provider.key,) if self.provider.key is not None else ()

    def __repr__(self) -> str:
        recording = "off" if self.recorder is None else repr(self.recorder)
        return f"Web(search={self.provider.spec!r}, recording={recording})"

    def __enter__(self) -> Web:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._fetcher.close()

    def _policy(self, max_bytes: int) -> Policy:
        s = self.settings
        return Policy(retries=s.retries, backoff_s=s.backoff_s, max_redirects=s.max_redirects, max_bytes=max_bytes)

    def search(self, query: str, k: int = 5) -> list[WebResult]:
        """Up to ``k`` hits for ``query`` (k above ``max_results`` or the provider's own maximum is
        lowered to it), snippets cut at ``snippet_chars``. A :class:`WebError` when it fails."""
        if not isinstance(query, str) or not query.strip():
            raise WebArgumentError(f"a web search needs a non-empty query, got {query!r:.80}")
        if len(query.strip()) > MAX_QUERY_CHARS:
            raise WebArgumentError(f"a web search query has at most {MAX_QUERY_CHARS} characters, got {len(query.strip())}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise WebArgumentError(f"k is the number of results, a whole number >= 1; got {k!r}")
        provider = self.provider
        k = min(k, self.settings.max_results, provider.adapter.max_k)
        request, canonical = provider.request(query.strip(), k)
        what = f"web search {provider.name} for {query.strip()!r:.100}"
        limits = gate(f"search:{provider.spec}", self.settings.max_in_flight or provider.adapter.max_in_flight,
                      self.settings.per_second)

        def live(deadline: Deadline) -> dict:
            reply = self._fetcher.send(request, what=what, deadline=deadline, gate=limits,
                                       policy=self._policy(self.settings.reply_bytes), guard=None)
            _check_status(reply, what)
            if not reply.complete:
                raise BadReplyError(f"{what}: the reply is larger than {self.settings.reply_bytes:,} bytes")
            try:
                payload = json.loads(reply.body)
            except (ValueError, RecursionError) as err:
                raise BadReplyError(f"{what}: the reply is not JSON ({err}): {reply.text_excerpt()!r}") from None
            try:
                results = provider.results(payload, k)
            except BadReplyError as err:
                raise BadReplyError(f"{what}: {err}") from None
            return {"results": [r.as_json() for r in results]}

        def results(reply: dict, replayed: bool) -> list[WebResult]:
            return [dataclasses.replace(hit, snippet=cut_text(hit.snippet, self.settings.snippet_chars)[0])
                    for hit in map(WebResult.from_json, reply["results"])]

        return self._call("search", provider.name, query.strip(), canonical, live, results, what, asked=k)

    def read(self, url: str) -> Page:
        """The page at ``url`` as text, cut at ``page_chars`` (the cut marked), after the URL guard
        (private addresses refused, on every redirect). A :class:`WebError` when it fails."""
        if not isinstance(url, str) or not url.strip():
            raise WebArgumentError(f"a read needs a URL, got {url!r:.80}")
        url = url.strip()
        what = f"reading {url!r:.200}"
        request = Request("GET", url, {"Accept": _ACCEPT})
        limits = gate(READER, self.settings.max_in_flight or _READER_IN_FLIGHT, None)

        def live(deadline: Deadline) -> dict:
            reply = self._fetcher.send(request, what=what, deadline=deadline, gate=limits,
                                       policy=self._policy(self.settings.page_bytes), guard=self.guard)
            _check_status(reply, what)
            return {"page": page_from(reply).as_json()}

        def page(reply: dict, replayed: bool) -> Page:
            whole = Page.from_json(reply["page"])
            text, cut = cut_text(whole.text, self.settings.page_chars)
            return dataclasses.replace(whole, text=text, cut=cut, replayed=replayed)

        canonical = {"provider": READER, "method": "GET", "url": url}
        return self._call("read", READER, url, canonical, live, page, what, asked=1)

    async def asearch(self, query: str, k: int = 5) -> list[WebResult]:
        """:meth:`search` from a coroutine (on a worker thread; the caller's context goes with it)."""
        return await asyncio.to_thread(self.search, query, k)

    async def aread(self, url: str) -> Page:
        """:meth:`read` from a coroutine (on a worker thread; the caller's context goes with it)."""
        return await asyncio.to_thread(self.read, url)

    def _call(self, kind: str, provider: str, target: str, canonical: dict, live: Callable[[Deadline], dict],
              convert: Callable[[dict, bool], T], what: str, *, asked: int) -> T:
        """``convert(reply, replayed)`` of the call, counted as one WebCall; errors scrubbed of keys."""
        deadline = Deadline(self.deadline_s)
        started = time.monotonic()
        key = record_key(kind, canonical)
        replayed = False
        try:
            if self.recorder is None:
                reply = _within(deadline, lambda: live(deadline), what)
            else:
                reply, replayed, key = self.recorder.call(kind, provider, canonical,
                                                          lambda: _within(deadline, lambda: live(deadline), what),
                                                          deadline=deadline, describe=what)
            try:
                value = convert(reply, replayed)
            except (KeyError, TypeError, ValueError) as err:  # only a recording of another version's shape
                raise BadReplyError(f"{what}: a recorded reply of another shape ({err})") from None
        except WebError as err:
            err.args = (scrub(str(err), self._secrets),)
            no_request = self.recorder is not None and self.recorder.mode == "replay"
            record_call(WebCall(provider, kind, target, call_cost(provider, results=asked, replayed=no_request, ok=False),
                                False, time.monotonic() - started, None, str(err), key))
            raise
        record_call(WebCall(provider, kind, target, call_cost(provider, results=asked, replayed=replayed, ok=True),
                            replayed, time.monotonic() - started,
                            len(reply["results"]) if kind == "search" else None, None, key))
        return value


def open_web(value: Any) -> Web:
    """A :class:`Web` from what a user names: a ``Web`` as it is; a ``WebSettings``; or a provider spec
    (``"serper"``, ``"searxng=http://host:port"``), read over $ROMA_LAB_WEB_* for everything else. A
    replay whose folder holds a run's exported snapshot opens it checked by hash (``open_snapshot``)."""
    from ._record import MANIFEST, SNAPSHOT_DIR, open_snapshot

    if isinstance(value, Web):
        return value
    settings = value if isinstance(value, WebSettings) else WebSettings.from_environment(search=value)
    folder = settings.folder()
    if settings.recording == "replay" and ((folder / MANIFEST).exists() or (folder / SNAPSHOT_DIR / MANIFEST).exists()):
        return Web(settings, recorder=open_snapshot(folder))
    return Web(settings)
