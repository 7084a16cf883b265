"""Remote models: a request slot per call, the rollout in the key, and at a server of the user's,
DSPy's request cache keyed by the server, not the name alone.

``RemoteLM`` is the ``dspy.LM`` of every remote model ``resolve_lm`` makes: each call that misses
DSPy's request cache holds one of the model name's request slots (``lm/_limits.py``) while in
flight, its retries included, and a call inside ``lm.rollout(id)`` has the id in its cache key and,
for an ``openai/`` model given no seed, ``rollout_seed(id)`` as its seed (``lm/_rollout.py``).

DSPy leaves ``api_base``/``base_url``/``api_key`` out of its cache key, so pointing a model name at
another server served the first server's replies. ``ServerLM`` is a ``dspy.LM`` whose calls add
the server to that key: its address as ``model_label`` writes it, and the model's identity as the
server reports it (``GET {base}/models``, asked once per address and name in a process, within the
call's deadline: ``_Watchdog``). It also removes a reply that failed to parse from DSPy's cache
(``_unparsed``). See design/online.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
import warnings

import dspy
from dspy.clients._deprecation import warn_openai_messages
# _cached, _store: DSPy's own request-cache lookup and store (pinned DSPy 3.4), so a hit is served
# without a slot and a miss is not looked up twice
from dspy.clients.execution import (
    IGNORED_CACHE_KEYS,
    PreparedCall,
    _cached,
    _store,
    aexecute,
    execute,
    finalize,
    prepare,
)
from dspy.utils.callback import with_callbacks

from ._deadline import awithin_deadline, call_deadline_s, within_deadline
from ._limits import arequest_slot, request_slot
from ._litellm_rules import remember_rule_matches
from ._remote import shown_address
from ._rollout import current_rollout, rollout_seed
from ._unparsed import remember, watch_parses

__all__ = ["MODELS_TIMEOUT_S", "UNKNOWN", "RemoteLM", "ServerLM", "server_identity"]

#: Bound on the one ``GET {base}/models`` per address and name (a hang guard, not a speed check): on
#: the whole question, not on each read, and never more than half the deadline of the call that asks.
MODELS_TIMEOUT_S = 10.0
#: The identity recorded for a server that answers but lists no models (no /models route, an
#: error page, another format, no whole list within the bound): its address alone keys its replies.
UNKNOWN = "unknown"
# Fields of a /models entry that say what is served; others (llama.cpp's and vLLM's "created",
# vLLM's permission ids) change with every answer and would make every key new.
_IDENTITY_FIELDS = ("id", "root", "parent", "owned_by", "meta")

logger = logging.getLogger(__name__)

_identities: dict[tuple[str, str], object] = {}
_asking: dict[tuple[str, str], threading.Lock] = {}  # one question at a time per address and name
_asking_lock = threading.Lock()


class _Watchdog:
    """Shuts the sockets of one question down when its bound has passed, so no read of it outlasts the
    bound: a socket timeout bounds each read, and a server that drips its list a byte a second never
    trips it. A connection is watched from its end of ``connect()`` (an HTTPS handshake is bounded
    per read, by the socket timeout); it is ``cut`` when the bound ended it after it connected."""

    def __init__(self, seconds: float):
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._expired = False

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()

    @property
    def cut(self) -> bool:
        with self._lock:
            return self._expired and bool(self._sockets)

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self._expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self._expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    """End every read and write on ``sock`` now (a blocked read returns end-of-file). The OS socket's
    own shutdown: ``SSLSocket.shutdown`` would also drop its TLS state under a reading thread."""
    with contextlib.suppress(OSError):  # already closed
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watched:
    """An ``http.client`` connection whose socket its ``watchdog`` shuts at the bound."""

    def __init__(self, *args, watchdog: _Watchdog, **kwargs):
        super().__init__(*args, **kwargs)
        self.watchdog = watchdog

    def connect(self) -> None:
        super().connect()
        self.watchdog.watch(self.sock)


class _WatchedHTTPConnection(_Watched, http.client.HTTPConnection):
    pass


class _WatchedHTTPSConnection(_Watched, http.client.HTTPSConnection):
    pass


class _WatchedHTTP(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog):
        super().__init__()
        self.watchdog = watchdog

    def http_open(self, req):
        return self.do_open(_WatchedHTTPConnection, req, watchdog=self.watchdog)


class _WatchedHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog):
        super().__init__()
        self.watchdog = watchdog

    def https_open(self, req):
        return self.do_open(_WatchedHTTPSConnection, req, watchdog=self.watchdog)


def _listed(address: str, api_key: str | None, within_s: float) -> list[dict] | None:
    """The server's /models entries; [] when it answers with no listing, or sends no whole list within
    ``within_s`` seconds; None when it cannot be reached."""
    headers = {"Accept": "application/json"} | ({"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        request = urllib.request.Request(address.rstrip("/") + "/models", headers=headers)
    except ValueError:  # not a URL: the call itself fails with DSPy's error
        return None
    with _Watchdog(within_s) as watchdog:  # urllib's own proxies and TLS, its connections watched
        opener = urllib.request.build_opener(_WatchedHTTP(watchdog), _WatchedHTTPS(watchdog))
        try:
            with opener.open(request, timeout=within_s) as reply:
                body = json.loads(reply.read())
        except urllib.error.HTTPError:  # it answered: 404 (no /models), 401, 500...
            return []
        except OSError as err:
            if isinstance(err, TimeoutError) or watchdog.cut:  # connected, but no list within the bound:
                return []  # not asked again in this process
            return None  # refused, no route, a connect timeout (URLError): not reached, nothing known about it
        except http.client.HTTPException:  # it answered, not as HTTP (a body cut short, a bad status line)
            return []
        except ValueError:  # it answered, not with JSON
            return []
    data = body.get("data") if isinstance(body, dict) else None
    return [entry for entry in data if isinstance(entry, dict) and "id" in entry] if isinstance(data, list) else []


def server_identity(address: str, name: str, api_key: str | None = None, *, within_s: float = MODELS_TIMEOUT_S):
    """What the server at ``address`` reports serving for model ``name`` (without its LiteLLM prefix):
    the listed entry of that id, else every listed entry (llama.cpp's server answers any name with
    its one model file), else :data:`UNKNOWN`. None when the server cannot be reached: that is not
    recorded, so the next call asks again. Known within ``within_s`` (at most :data:`MODELS_TIMEOUT_S`)
    seconds, the wait for another call asking the same included; None if that call is still asking."""
    ends = time.monotonic() + min(within_s, MODELS_TIMEOUT_S)
    asked = (shown_address(address), name)
    with _asking_lock:
        lock = _asking.setdefault(asked, threading.Lock())
    if not lock.acquire(timeout=max(ends - time.monotonic(), 0.0)):
        return None
    try:  # asked once per address and name, also by concurrent first calls
        if asked in _identities:
            return _identities[asked]
        left = ends - time.monotonic()
        entries = _listed(address, api_key, left) if left > 0 else None
        if entries is None:
            return None
        shown = [{k: entry[k] for k in _IDENTITY_FIELDS if k in entry} for entry in entries]
        named = [entry for entry in shown if entry["id"] == name]
        identity = named or sorted(shown, key=lambda e: json.dumps(e, sort_keys=True, default=str)) or UNKNOWN
        _identities[asked] = identity
        return identity
    finally:
        lock.release()


@dataclasses.dataclass
class _KeyedCall(PreparedCall):
    """DSPy's prepared call with more in its cache key (the rollout, the server), its deadline and the
    seconds of it already spent asking the server what it serves."""

    extra: dict = dataclasses.field(default_factory=dict)
    deadline_s: float = 0.0
    spent_s: float = 0.0

    def key(self, lm, asynchronous):
        return {**super().key(lm, asynchronous), **self.extra}


def _seeded(fields: dict, seed: int) -> dict:
    """The call's fields with ``seed`` sent, unless the caller gave one."""
    if fields["request"] is not None:  # an explicit lm15 Request: its config carries the seed
        config = fields["request"].config
        if config.seed is None:
            fields["request"] = dataclasses.replace(fields["request"], config=dataclasses.replace(config, seed=seed))
    elif fields["legacy"].get("seed") is None:
        fields["legacy"] = {**fields["legacy"], "seed": seed}
    return fields


#: The longest reply text kept from a remote model, in characters (a reply is a few thousand): a longer
#: one is cut to this, marked, and warned about, so no trace, cache or table holds megabytes of it.
MAX_REPLY_CHARS = 200_000


class ReplyCutWarning(UserWarning):
    """A model's reply was longer than ``MAX_REPLY_CHARS`` and was cut (the row's prediction shows the mark)."""


def _bounded(model: str, outputs):
    """``outputs`` with every text longer than ``MAX_REPLY_CHARS`` cut and marked."""
    if not isinstance(outputs, list):
        return outputs

    def cut(text: str) -> str:
        warnings.warn(f"{model}: a reply of {len(text):,} characters was cut to {MAX_REPLY_CHARS:,}", ReplyCutWarning,
                      stacklevel=4)
        return text[:MAX_REPLY_CHARS] + f"<cut: the reply had {len(text):,} characters>"

    bounded = []
    for output in outputs:
        if isinstance(output, str) and len(output) > MAX_REPLY_CHARS:
            output = cut(output)
        elif isinstance(output, dict) and isinstance(output.get("text"), str) and len(output["text"]) > MAX_REPLY_CHARS:
            output = {**output, "text": cut(output["text"])}
        bounded.append(output)
    return bounded


def _fresh(lm: RemoteLM, call: _KeyedCall):
    """DSPy's ``execute`` of a call whose cache lookup just missed, without a second lookup (its key
    hashed and both cache tiers read again, for every call), its result stored as ``execute`` stores it."""
    result = execute(lm, dataclasses.replace(call, cache=False))
    _store(lm, call, result, False)
    return result


class RemoteLM(dspy.LM):
    """``dspy.LM`` for a remote model: everything is DSPy's (engines, retries with back-off, history,
    usage, both cache tiers) except that a call missing the cache holds a request slot of the model's
    name and ends within its total deadline (``deadline_s``: ``lm/_deadline.py``), and a call in a
    rollout has the rollout in its cache key (and as seed, see the module)."""

    def __init__(self, model: str, *, deadline_s: float | None = None, **kwargs):
        call_deadline_s(deadline_s)  # a bad deadline is refused when the model is named, not at its first call
        super().__init__(model, **kwargs)
        self.deadline_s = deadline_s

    def _keyed(self, call: PreparedCall) -> _KeyedCall:
        fields = {f.name: getattr(call, f.name) for f in dataclasses.fields(PreparedCall)}
        deadline = call_deadline_s(self.deadline_s)
        rollout = current_rollout()
        if rollout is None:
            return _KeyedCall(**fields, deadline_s=deadline)
        if self.model.startswith("openai/"):  # OpenAI's API and the servers speaking it take a seed
            fields = _seeded(fields, rollout_seed(rollout))
        return _KeyedCall(**fields, extra={"_rollout": rollout}, deadline_s=deadline)

    def _remember(self, call: _KeyedCall, outputs, asynchronous: bool):
        """The outputs as they are: at a provider's endpoint a reply that failed to parse stays in
        DSPy's cache (``ServerLM`` removes it)."""
        return outputs

    def _execute(self, call: _KeyedCall):
        if (hit := _cached(self, call, False)) is not None:
            return hit
        remember_rule_matches()
        with request_slot(self.model):
            return within_deadline(lambda: _fresh(self, call), call.deadline_s, self.model, spent_s=call.spent_s)

    async def _aexecute(self, call: _KeyedCall):
        import asyncio

        if call.cache and (hit := await asyncio.to_thread(_cached, self, call, True)) is not None:
            return hit
        remember_rule_matches()
        async with arequest_slot(self.model):
            return await awithin_deadline(aexecute(self, call), call.deadline_s, self.model, spent_s=call.spent_s)

    @with_callbacks
    def __call__(self, prompt=None, *, messages=None, **kwargs):
        call = self._keyed(prepare(self, prompt, messages, kwargs))
        warn_openai_messages(self, messages)
        return _bounded(self.model, self._remember(call, finalize(self, call, self._execute(call)), False))

    @with_callbacks
    async def acall(self, prompt=None, *, messages=None, **kwargs):
        import asyncio

        # prepare may read local files and _keyed may ask the server: both off the event loop
        call = await asyncio.to_thread(lambda: self._keyed(prepare(self, prompt, messages, kwargs, asynchronous=True)))
        warn_openai_messages(self, messages)
        return _bounded(self.model, self._remember(call, finalize(self, call, await self._aexecute(call)), True))


class ServerLM(RemoteLM):
    """``RemoteLM`` for a model at a server named by ``api_base`` (or ``base_url``), whose cache key
    also holds ``{"address": <model_label's address>, "models": <server_identity>}``, asked in at most
    half the call's deadline (the call has what is left). When the server cannot be reached to say
    what it serves, the call skips the cache: it goes to the server (and fails there as any call
    would) and nothing is stored under an unknown identity.
    """

    def _keyed(self, call: PreparedCall) -> _KeyedCall:
        call = super()._keyed(call)
        options = {**self.kwargs, **call.legacy}
        given = options.get("api_base") or options.get("base_url")
        address = shown_address(given) if given else None
        name = self.model.partition("/")[2] or self.model
        started = time.monotonic()
        # the question may take half the call's deadline: a server that drips its list is still asked the call
        identity = server_identity(given, name, options.get("api_key"), within_s=call.deadline_s / 2) if given \
            else UNKNOWN
        call.spent_s = time.monotonic() - started
        if identity is None:
            call.cache = False
        call.extra["_server"] = {"address": address, "models": identity}
        return call

    def _remember(self, call: _KeyedCall, outputs, asynchronous: bool):
        """Let a parse failure of these outputs remove their DSPy cache entry."""
        if not call.cache or not isinstance(outputs, list):
            return outputs
        cache, key = dspy.cache, call.key(self, asynchronous)
        digest = cache.cache_key(key, IGNORED_CACHE_KEYS)

        def remove() -> None:
            with getattr(cache, "_lock", threading.Lock()):
                cache.memory_cache.pop(digest, None)
            if cache.enable_disk_cache:
                cache.disk_cache.delete(digest)
            logger.warning("%s @ %s: a reply failed to parse and was removed from DSPy's cache; the next run asks the "
                           "server again", self.model, call.extra["_server"]["address"])

        watch_parses()
        for output in outputs:
            text = output.get("text") if isinstance(output, dict) else output
            if isinstance(text, str):
                remember(text, ("dspy", digest), remove)
        return outputs
