"""The open web, live and frozen: web search through real providers and a page reader, safe against
the machine's own network, bounded in time, load, size and money, recorded and replayed bit for bit.

``Web(WebSettings(search="serper"))`` gives ``search(query, k) -> list[WebResult]`` and ``read(url)
-> Page`` (``asearch`` / ``aread`` in a coroutine); providers are Serper, Tavily, Exa, Brave,
SearXNG and Wikipedia, each a small adapter of its documented wire format (``_providers.py``), its
key read from its usual variable. A URL a model chose is fetched only if it is public (``_guard.py``,
checked on every redirect, connecting to the checked address). Each call has one total deadline and
per-provider limits (``_http.py``), is priced from one table (``PRICES``, ``call_cost``) and counted
by any open ``web_meter()``; every failure is a ``WebError``. ``WebSettings(recording="record")``
records calls at the provider boundary and ``"replay"`` serves only recorded ones (``_record.py``);
``WebRecorder.export_snapshot(run_dir)`` / ``open_snapshot(run_dir)`` carry a run's web with it,
checked by SHA-256. ``serve_offline_web(documents, files=...)`` (and ``python -m roma_lab.web serve
--corpus FILE.jsonl``) is a web on loopback with a SearXNG-format search, and ``ProviderStub`` a
loopback stub of each provider with faults. ``WebPassages(web)`` is the web as a retriever of passages
(a search, then its first hits read; each call a tool call of the trace), for the systems that search.
See design/web.md.
"""

from ._errors import (
    BadReplyError,
    DamagedRecordingError,
    HTTPStatusError,
    MissingKeyError,
    RefusedURLError,
    ReplayMissError,
    UnknownProviderError,
    UnreadablePageError,
    WebConnectionError,
    WebDeadlineError,
    WebError,
)
from ._guard import Guard, address_refusal
from ._offline import OfflineWeb, serve_offline_web
from ._passages import WebPassages
from ._price import PRICES, WebPrice, call_cost
from ._providers import PROVIDERS, SearchProvider, parse_provider
from ._record import MANIFEST as SNAPSHOT_MANIFEST
from ._record import SNAPSHOT_DIR, WebRecorder, open_snapshot, record_key
from ._settings import WebSettings
from ._stubs import FAULTS, ProviderStub, StubRequest
from ._types import CUT_MARK, Page, WebResult
from ._usage import WebCall, WebMeter, web_meter
from ._web import MAX_QUERY_CHARS, Web, WebArgumentError, open_web

__all__ = [
    "CUT_MARK",
    "FAULTS",
    "MAX_QUERY_CHARS",
    "PRICES",
    "PROVIDERS",
    "SNAPSHOT_DIR",
    "SNAPSHOT_MANIFEST",
    "BadReplyError",
    "DamagedRecordingError",
    "Guard",
    "HTTPStatusError",
    "MissingKeyError",
    "OfflineWeb",
    "Page",
    "ProviderStub",
    "RefusedURLError",
    "ReplayMissError",
    "SearchProvider",
    "StubRequest",
    "UnknownProviderError",
    "UnreadablePageError",
    "Web",
    "WebArgumentError",
    "WebCall",
    "WebConnectionError",
    "WebDeadlineError",
    "WebError",
    "WebMeter",
    "WebPassages",
    "WebPrice",
    "WebRecorder",
    "WebResult",
    "WebSettings",
    "address_refusal",
    "call_cost",
    "open_snapshot",
    "open_web",
    "parse_provider",
    "record_key",
    "serve_offline_web",
    "web_meter",
]
