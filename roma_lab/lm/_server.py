"""A model at a server of the user's: DSPy's request cache keyed by the server, not the name alone.

DSPy leaves ``api_base``/``base_url``/``api_key`` out of its cache key, so pointing a model name at
another server served the first server's replies. ``ServerLM`` is a ``dspy.LM`` whose calls add
the server to that key: its address as ``model_label`` writes it, and the model's identity as the
server reports it (``GET {base}/models``, asked once per address and name in a process). It also
removes a reply that failed to parse from DSPy's cache (``_unparsed``). See design/online.md.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import urllib.error
import urllib.request

import dspy
from dspy.clients._deprecation import warn_openai_messages
from dspy.clients.execution import IGNORED_CACHE_KEYS, PreparedCall, aexecute, execute, finalize, prepare
from dspy.utils.callback import with_callbacks

from ._remote import shown_address
from ._unparsed import remember, watch_parses

__all__ = ["MODELS_TIMEOUT_S", "UNKNOWN", "ServerLM", "server_identity"]

#: Bound on the one ``GET {base}/models`` per address and name (a hang guard, not a speed check).
MODELS_TIMEOUT_S = 10.0
#: The identity recorded for a server that answers but lists no models (no /models route, an
#: error page, another format, no answer within MODELS_TIMEOUT_S): its address alone keys its replies.
UNKNOWN = "unknown"
# Fields of a /models entry that say what is served; others (llama.cpp's and vLLM's "created",
# vLLM's permission ids) change with every answer and would make every key new.
_IDENTITY_FIELDS = ("id", "root", "parent", "owned_by", "meta")

logger = logging.getLogger(__name__)

_identities: dict[tuple[str, str], object] = {}
_asking: dict[tuple[str, str], threading.Lock] = {}  # one question at a time per address and name
_asking_lock = threading.Lock()


def _listed(address: str, api_key: str | None) -> list[dict] | None:
    """The server's /models entries; [] when it answers with no listing; None when it cannot be reached."""
    headers = {"Accept": "application/json"} | ({"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        request = urllib.request.Request(address.rstrip("/") + "/models", headers=headers)
    except ValueError:  # not a URL: the call itself fails with DSPy's error
        return None
    try:
        with urllib.request.urlopen(request, timeout=MODELS_TIMEOUT_S) as reply:
            body = json.loads(reply.read())
    except urllib.error.HTTPError:  # it answered: 404 (no /models), 401, 500...
        return []
    except TimeoutError:  # connected, but no list within the bound: not asked again in this process
        return []
    except OSError:  # refused, no route, a connect timeout (URLError): not reached, nothing known about it
        return None
    except ValueError:  # it answered, not with JSON
        return []
    data = body.get("data") if isinstance(body, dict) else None
    return [entry for entry in data if isinstance(entry, dict) and "id" in entry] if isinstance(data, list) else []


def server_identity(address: str, name: str, api_key: str | None = None):
    """What the server at ``address`` reports serving for model ``name`` (without its LiteLLM prefix):
    the listed entry of that id, else every listed entry (llama.cpp's server answers any name with
    its one model file), else :data:`UNKNOWN`. None when the server cannot be reached: that is not
    recorded, so the next call asks again."""
    asked = (shown_address(address), name)
    with _asking_lock:
        lock = _asking.setdefault(asked, threading.Lock())
    with lock:  # asked once per address and name, also by concurrent first calls
        if asked in _identities:
            return _identities[asked]
        entries = _listed(address, api_key)
        if entries is None:
            return None
        shown = [{k: entry[k] for k in _IDENTITY_FIELDS if k in entry} for entry in entries]
        named = [entry for entry in shown if entry["id"] == name]
        identity = named or sorted(shown, key=lambda e: json.dumps(e, sort_keys=True, default=str)) or UNKNOWN
        _identities[asked] = identity
        return identity


@dataclasses.dataclass
class _ServerCall(PreparedCall):
    """DSPy's prepared call with the server added to its cache key."""

    server: dict | None = None

    def key(self, lm, asynchronous):
        return {**super().key(lm, asynchronous), "_server": self.server}


class ServerLM(dspy.LM):
    """``dspy.LM`` for a model at a server named by ``api_base`` (or ``base_url``).

    Everything is DSPy's (engines, retries, history, usage, both cache tiers) except the cache key,
    which also holds ``{"address": <model_label's address>, "models": <server_identity>}``. When the
    server cannot be reached to say what it serves, the call skips the cache: it goes to the server
    (and fails there as any call would) and nothing is stored under an unknown identity.
    """

    def _keyed(self, call: PreparedCall) -> _ServerCall:
        options = {**self.kwargs, **call.legacy}
        given = options.get("api_base") or options.get("base_url")
        address = shown_address(given) if given else None
        name = self.model.partition("/")[2] or self.model
        identity = server_identity(given, name, options.get("api_key")) if given else UNKNOWN
        fields = {f.name: getattr(call, f.name) for f in dataclasses.fields(PreparedCall)}
        if identity is None:
            fields["cache"] = False
        return _ServerCall(**fields, server={"address": address, "models": identity})

    def _remember(self, call: _ServerCall, outputs, asynchronous: bool):
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
                           "server again", self.model, call.server["address"])

        watch_parses()
        for output in outputs:
            text = output.get("text") if isinstance(output, dict) else output
            if isinstance(text, str):
                remember(text, ("dspy", digest), remove)
        return outputs

    @with_callbacks
    def __call__(self, prompt=None, *, messages=None, **kwargs):
        call = self._keyed(prepare(self, prompt, messages, kwargs))
        warn_openai_messages(self, messages)
        return self._remember(call, finalize(self, call, execute(self, call)), False)

    @with_callbacks
    async def acall(self, prompt=None, *, messages=None, **kwargs):
        import asyncio

        # prepare may read local files and _keyed may ask the server: both off the event loop
        call = await asyncio.to_thread(lambda: self._keyed(prepare(self, prompt, messages, kwargs, asynchronous=True)))
        warn_openai_messages(self, messages)
        return self._remember(call, finalize(self, call, await aexecute(self, call)), True)
