"""On-disk completion cache and replay, the one boundary through which local model calls pass.

A completion is stored under the SHA-256 of the canonical request (model id, system prompt,
messages, generation settings, the engine's kind and slot count, the rollout it belongs to), so
re-running a notebook repeats no model call, and a replay engine can serve recorded completions to
tests, failing loudly on anything not recorded. Each entry is checked against what it stores before it is
served: its key is recomputed from its request and a digest covers request, reply and the
generation's wall time, so an edited entry is damaged, never served. A served reply says it was
looked up (``cache_hit``), how long the recorded generation took (``latency_s``) and when it was
recorded (``recorded_at``; both None for entries written before they were recorded), so a replayed
run can be drawn with the timings it was recorded with (trace.replayed_schedule), and a run can tell a
replay of an earlier run from a request an earlier notebook of its own batch asked first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from roma_lab._environment import ENV
from roma_lab.results import (
    DamagedFileError,
    quarantine,
    read_regular_bytes,
    write_text_atomic,
)

from ._engine import SUPPORTED_PARAMS, request_messages
from ._rollout import current_rollout

__all__ = ["CacheMissError", "CachingEngine", "CorruptCacheEntryError", "ReplayEngine", "request_key"]

logger = logging.getLogger(__name__)


class CacheMissError(LookupError):
    """A replayed request was never recorded."""


class CorruptCacheEntryError(CacheMissError):
    """A cache entry is damaged (not a regular file, empty, truncated, not JSON, another schema,
    recorded for another request, or edited: its key or digest does not match what it stores). A
    replay engine raises it, naming the file; a caching engine moves the entry aside and generates
    the completion again."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"completion cache entry {path} is damaged ({reason}); delete it and record the completion "
                         "again by running once with resolve_lm(...) and the same ROMA_LAB_CACHE")
        self.path, self.reason = path, reason


class CachedCompletion(BaseModel):
    """What one cache file holds (written and read back, hence pydantic). ``digest`` is the SHA-256
    of every other field (``entry_digest``): entries recorded before it existed are damaged and
    regenerated, as an entry whose text was edited would be indistinguishable from them.
    ``latency_s`` is the wall time of the wrapped engine's call that generated the reply (any wait
    for one of its request slots included); ``recorded_at`` when it was written (Unix seconds). Entries
    written before these were recorded have none (None) and stay valid: their digest was taken without
    them (``_LATER``)."""

    model_config = ConfigDict(extra="forbid")
    key: str
    model_id: str
    request: dict
    text: str
    finish_reason: str
    input_tokens: int
    output_tokens: int
    digest: str
    latency_s: float | None = None
    recorded_at: float | None = None


# Fields added after entries were first written: left out of the digest when absent (None), so older
# entries still verify; once present they are covered like any other field.
_LATER = ("latency_s", "recorded_at")


def _canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def canonical_request(model_id: str, request, settings: dict | None = None, rollout: str | None = None) -> dict:
    """The parts of a request that decide its completion, as plain JSON data.

    ``settings`` are engine settings that change outputs without being in the request (the JSON
    decoding mode, the engine's kind and slot count: greedy outputs differ across slot counts and
    batch make-up); ``rollout`` the rollout the request belongs to (lm/_rollout.py), so each
    rollout of a repeated request gets its own completion.
    """
    config = {k: v for k, v in dataclasses.asdict(request.config).items() if v not in (None, (), [])}
    return {"model_id": model_id, "settings": settings or {}, "messages": request_messages(request), "config": config,
            "rollout": rollout}


def request_key(model_id: str, request, settings: dict | None = None, rollout: str | None = None) -> str:
    return _sha256(_canonical_json(canonical_request(model_id, request, settings, rollout)))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_digest(fields: dict) -> str:
    """SHA-256 over an entry's fields other than ``digest`` (its request, its reply and the time it
    took), a later field (``_LATER``) only when it is recorded."""
    return _sha256(_canonical_json({k: v for k, v in fields.items()
                                    if k != "digest" and not (k in _LATER and v is None)}))


def _entry_path(directory: Path, model_id: str, key: str) -> Path:
    return directory / model_id.replace("/", "_") / key[:2] / f"{key}.json"


def _to_response(entry: CachedCompletion):
    from dspy.lm15 import Message, Response, TextPart, Usage

    # Usage is that of the recorded call, so usage tables are identical when a run is replayed. The
    # mark lets a trace say the completion was looked up, not generated, and how long generating it
    # took and when (the controller reads them: LMExchange.from_history).
    return Response(id=None, model=entry.model_id, message=Message.assistant([TextPart(entry.text)]),
                    finish_reason=entry.finish_reason,
                    usage=Usage(input_tokens=entry.input_tokens, output_tokens=entry.output_tokens,
                                total_tokens=entry.input_tokens + entry.output_tokens),
                    provider_data={"cache_hit": True, "latency_s": entry.latency_s,
                                   "recorded_at": entry.recorded_at})


def _read_regular(path: Path) -> bytes | None:
    """The bytes of the regular file at ``path``, None when nothing is there; CorruptCacheEntryError for
    anything else (a FIFO, socket, device, directory or symbolic link), which is never opened in
    blocking mode (``roma_lab.results.read_regular_bytes``): reading a FIFO would wait for a writer forever."""
    try:
        return read_regular_bytes(path, follow_links=False)
    except FileNotFoundError:
        return None
    except DamagedFileError as exc:
        raise CorruptCacheEntryError(path, exc.problem) from None
    except OSError as exc:  # EACCES...
        raise CorruptCacheEntryError(path, f"not a regular file: unreadable ({exc.strerror})") from None


def _read(path: Path, key: str, model_id: str) -> CachedCompletion | None:
    """The entry at ``path``, or None when there is none; CorruptCacheEntryError when it is damaged."""
    data = _read_regular(path)
    if data is None:
        return None
    try:
        entry = CachedCompletion.model_validate_json(data)
    except ValidationError as exc:  # empty, truncated, random bytes, another schema, no digest
        raise CorruptCacheEntryError(path, f"not a cache entry: {exc.errors()[0]['msg']}") from None
    if (entry.key, entry.model_id) != (key, model_id):  # a file copied or renamed into the wrong place
        raise CorruptCacheEntryError(path, f"recorded for another request (key {entry.key[:12]}, model {entry.model_id!r})")
    if _sha256(_canonical_json(entry.request)) != key or entry.request.get("model_id") != model_id:
        raise CorruptCacheEntryError(path, "its key does not match the request it stores (the request was edited)")
    if entry_digest(entry.model_dump()) != entry.digest:
        raise CorruptCacheEntryError(path, "its digest does not match its content (the reply was edited)")
    return entry


#: Set to "1" (``python -m roma_lab.experiments run --fresh``), every embedded call asks the model again.
FRESH_ENV = ENV.fresh


class CachingEngine:
    """Wraps an engine: serve a request from ``directory`` if recorded, else call and record it. The
    key holds ``settings`` and the current rollout; a hit takes no request slot (only the wrapped
    engine does)."""

    # A reply that fails to parse is removed from the cache (lm/_unparsed.py): AsyncEngine reads this.
    watches_parses = True

    def __init__(self, inner, *, model_id: str, directory: Path, settings: dict | None = None):
        self.inner = inner
        self.model_id = model_id
        self.directory = Path(directory)
        self.settings = settings or {}
        self.slots = getattr(inner, "slots", 1)
        self.supports_response_schema = getattr(inner, "supports_response_schema", False)
        self.supported_params = getattr(inner, "supported_params", frozenset())

    def complete(self, request):
        rollout = current_rollout()
        key = request_key(self.model_id, request, self.settings, rollout)
        path = _entry_path(self.directory, self.model_id, key)
        try:
            # $ROMA_LAB_FRESH: ask the model again (a replay is instant, a fresh run measures); the new
            # completion replaces the recorded one
            entry = None if os.environ.get(FRESH_ENV) == "1" else _read(path, key, self.model_id)
        except CorruptCacheEntryError as exc:
            entry = None
            try:
                quarantine(path, f"damaged completion cache entry ({exc.reason}); the completion is generated again")
            except FileNotFoundError:  # another process moved it aside first
                pass
        if entry is None:
            # The same request already in flight here: wait for its reply and serve that. Two identical
            # requests generated side by side can differ (llama.cpp reuses a different prefix for each),
            # and whichever was written last would then be the one a replay serves, not the one every
            # later call in the run was served: the replay would not be the run.
            with _flights_lock:
                flight = _flights.get(path)
                leading = flight is None
                if leading:
                    flight = _flights[path] = Future()
            if leading:
                try:
                    response, entry = self._generate(request, key, rollout, path)
                    flight.set_result(entry)
                except BaseException as exc:
                    flight.set_exception(exc)
                    raise
                finally:
                    with _flights_lock:
                        del _flights[path]
            else:
                entry = flight.result()  # the leader's error, if it failed: the same request would fail
                response = _to_response(entry)
        else:
            response = _to_response(entry)
        from ._unparsed import remember, watch_parses

        # A reply the adapter then fails to parse is removed, so a rerun asks the model again (an
        # async call is watched by AsyncEngine: this may run in a worker thread's copy of the context).
        watch_parses()
        remember(entry.text, ("completion", str(path)), lambda: _forget(path))
        return response

    def _generate(self, request, key: str, rollout, path: Path):
        """Ask the wrapped engine and record its reply at ``path``: (the response, the entry)."""
        started = time.monotonic()
        response = self.inner.complete(request)
        latency = time.monotonic() - started
        usage = response.usage
        # The request as JSON data, so the key recomputes from the stored copy exactly.
        fields = {"key": key, "model_id": self.model_id,
                  "request": json.loads(_canonical_json(canonical_request(self.model_id, request, self.settings,
                                                                          rollout))),
                  "text": response.text or "", "finish_reason": response.finish_reason,
                  "input_tokens": usage.input_tokens or 0, "output_tokens": usage.output_tokens or 0,
                  "latency_s": latency, "recorded_at": time.time()}
        entry = CachedCompletion(**fields, digest=entry_digest(fields))
        write_text_atomic(path, entry.model_dump_json(indent=1))  # an interrupted run leaves no half entry
        return response, entry

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        self.inner.close()


# Requests being generated in this process, by entry path: identical ones in flight share one reply.
_flights: dict[Path, Future] = {}
_flights_lock = threading.Lock()


def _forget(path: Path) -> None:
    """Remove an entry whose reply failed to parse (its path names its request)."""
    path.unlink(missing_ok=True)
    logger.warning("%s: its reply failed to parse and the entry was removed; the next run asks the model again", path)


class ReplayEngine:
    """Serves only recorded completions; a request never recorded raises CacheMissError. Its
    ``slots`` are those of the engine that recorded them, as ``settings`` name it."""

    supports_response_schema = True
    supported_params = SUPPORTED_PARAMS

    def __init__(self, *, model_id: str, directory: Path, settings: dict | None = None):
        self.model_id = model_id
        self.directory = Path(directory)
        self.settings = settings or {}
        self.slots = self.settings.get("slots", 1)

    def complete(self, request):
        key = request_key(self.model_id, request, self.settings, current_rollout())
        path = _entry_path(self.directory, self.model_id, key)
        entry = _read(path, key, self.model_id)  # a damaged entry raises CorruptCacheEntryError, naming it
        if entry is None:
            last = request.messages[-1].text if request.messages else ""
            raise CacheMissError(
                f"no recorded completion for model {self.model_id!r} in {self.directory} (key {key[:12]}; last message "
                f"starts {last[:80]!r}). Record it by running once with resolve_lm(...) and the same ROMA_LAB_CACHE."
            )
        return _to_response(entry)

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Nothing to release."""
