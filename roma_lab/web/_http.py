"""The one HTTP boundary of the web room: every provider request and every page read passes here.

A request is bounded three ways. **Time**: one total deadline per call (:class:`Deadline`) covers
waiting for a slot, name lookups, connecting, every attempt, every back-off and every byte of the
body; each read's timeout is what is left of it and the body is read chunk by chunk against it, so
a server that drips its reply ends at the deadline (``Web`` also abandons a call at its deadline
from the outside). **Load**: per provider, at most ``max_in_flight`` requests at once and at most
``per_second`` started per second, process-wide (:func:`gate`). **Size**: a body is read up to
``max_bytes`` (after decompression) and cut there. A 429 or a 5xx is retried after its
``Retry-After`` (seconds or an HTTP date, honoured as sent) or after an exponential back-off with
jitter, never past the deadline; a connection that fails or drops is retried the same way.

Redirects are followed here, one hop at a time, so a guarded request (a page a model chose) checks
each hop's URL (``_guard.Guard``) and connects to the checked address: the URL's host replaced by
that address, the Host header and TLS server name (``sni_hostname``) kept as the URL names them, the
certificate checked against that name. A guarded request gets a connection of its own (no pooling:
two names behind one address must not share a TLS connection). A provider's own endpoint is the
user's configuration, not a model's choice, and is not guarded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import json
import random
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, quote_plus

from ._errors import BadReplyError, RefusedURLError, WebConnectionError, WebDeadlineError
from ._guard import Guard

__all__ = ["Deadline", "Fetcher", "Policy", "Reply", "Request", "Secret", "gate", "scrub"]

RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_jitter = random.Random()  # back-off spread only; never a result's randomness


class Secret:
    """An API key: its repr and str never show it, and it refuses to be pickled (a pickle is a file)."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __reduce__(self):
        raise TypeError("an API key is never pickled")


def scrub(text: str, secrets: Iterable[Secret]) -> str:
    """``text`` with every secret replaced by ``***``, also as it appears URL- or JSON-encoded."""
    for secret in secrets:
        value = secret.reveal()
        if not value:
            continue
        for form in sorted({value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1]}, key=len,
                           reverse=True):
            text = text.replace(form, "***")
    return text


class Deadline:
    """The total time one call may take, from its creation."""

    __slots__ = ("_end", "total_s")

    def __init__(self, total_s: float):
        self.total_s = total_s
        self._end = time.monotonic() + total_s

    def remaining(self) -> float:
        return max(0.0, self._end - time.monotonic())

    def error(self, what: str) -> WebDeadlineError:
        return WebDeadlineError(f"{what}: no complete answer within the call's deadline of {self.total_s:g} s "
                                "(a stalled or dripping server, or back-offs past it; set WebSettings.deadline_s, "
                                "or $ROMA_LAB_CALL_DEADLINE_S for every remote call)")


class _Gate:
    """At most ``max_in_flight`` requests at once, started at most ``per_second`` per second."""

    def __init__(self, max_in_flight: int, per_second: float | None):
        self.max_in_flight = max_in_flight
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._interval = 1.0 / per_second if per_second else 0.0
        self._lock = threading.Lock()
        self._next = 0.0

    @contextlib.contextmanager
    def slot(self, deadline: Deadline, what: str) -> Iterator[None]:
        if not self._slots.acquire(timeout=deadline.remaining()):
            raise deadline.error(f"{what}: waiting for one of its {self.max_in_flight} request slots")
        try:
            if self._interval:
                with self._lock:
                    start = max(time.monotonic(), self._next)
                    self._next = start + self._interval
                wait = start - time.monotonic()
                if wait >= deadline.remaining():
                    raise deadline.error(f"{what}: waiting for its rate limit")
                if wait > 0:
                    time.sleep(wait)
            yield
        finally:
            self._slots.release()


_gates: dict[tuple[str, int, float | None], _Gate] = {}
_gates_lock = threading.Lock()


def gate(name: str, max_in_flight: int, per_second: float | None) -> _Gate:
    """The process-wide gate of the service ``name`` under these limits (one per name and limits,
    created at first use, shared by every ``Web`` in the process; changed limits take a new one)."""
    key = (name, max_in_flight, per_second)
    with _gates_lock:
        if key not in _gates:
            _gates[key] = _Gate(max_in_flight, per_second)
        return _gates[key]


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    url: str
    headers: Mapping[str, str]
    params: Mapping[str, Any] | None = None
    json: Any = None


@dataclass(frozen=True, slots=True)
class Reply:
    """What came back. ``url``: the last hop's URL as named (not the address connected to);
    ``complete``: False when the body was cut at ``max_bytes``; ``attempts``: requests made;
    ``gave_up``: why an error status was not retried further (None: it was not retried, or succeeded)."""

    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes
    url: str
    complete: bool
    attempts: int
    gave_up: str | None = None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    def text_excerpt(self, chars: int = 300) -> str:
        return self.body[:chars * 4].decode("utf-8", "replace")[:chars]


@dataclass(frozen=True, slots=True)
class Policy:
    """Retries (after the first attempt), the base back-off, redirects followed, and the body size read."""

    retries: int
    backoff_s: float
    max_redirects: int
    max_bytes: int
    max_backoff_s: float = 30.0


class _Transient(Exception):
    """A connection that failed or dropped: retried, then a WebConnectionError."""


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class Fetcher:
    """Sends requests as the module docstring says, with ``user_agent``; ``close()`` ends its pooled
    connections (those of the providers' endpoints)."""

    def __init__(self, user_agent: str):
        self.user_agent = user_agent
        self._client = None
        self._lock = threading.Lock()

    def _pooled(self):
        import httpx

        with self._lock:
            if self._client is None:
                # trust_env=False: no proxy from the environment (a proxy resolves names itself, which
                # would undo the guard's pinning), no .netrc credentials sent anywhere
                self._client = httpx.Client(trust_env=False, follow_redirects=False)
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def send(self, request: Request, *, what: str, deadline: Deadline, gate: _Gate, policy: Policy,
             guard: Guard | None) -> Reply:
        """The reply to ``request`` (any status: the caller decides what an error status means),
        after the retries a 429, a 5xx or a failed connection gets. ``what`` names the call in errors."""
        attempt = 0
        while True:
            attempt += 1
            try:
                with gate.slot(deadline, what):
                    reply = self._follow(request, what, deadline, policy, guard)
            except _Transient as err:
                if attempt > policy.retries:
                    raise WebConnectionError(f"{what}: {err} (after {attempt} attempts)") from None
                wait = self._backoff(policy, attempt)
                if wait >= deadline.remaining():
                    raise deadline.error(f"{what}: {err}; the next attempt would start past it") from None
            else:
                reply = dataclasses.replace(reply, attempts=attempt)
                if reply.status not in RETRIED_STATUSES:
                    return reply
                if attempt > policy.retries:
                    return dataclasses.replace(reply, gave_up=f"after {attempt} attempts")
                asked = _retry_after(reply.headers)
                wait = self._backoff(policy, attempt) if asked is None else asked
                if wait >= deadline.remaining():
                    said = f"Retry-After {asked:g} s" if asked is not None else f"the next back-off ({wait:.1f} s)"
                    return dataclasses.replace(reply, gave_up=f"{said} would end past the call's deadline of "
                                                              f"{deadline.total_s:g} s")
            time.sleep(wait)

    @staticmethod
    def _backoff(policy: Policy, attempt: int) -> float:
        ceiling = min(policy.max_backoff_s, policy.backoff_s * 2 ** (attempt - 1))
        return ceiling * _jitter.uniform(0.5, 1.0)  # spread callers that failed together

    def _follow(self, request: Request, what: str, deadline: Deadline, policy: Policy, guard: Guard | None) -> Reply:
        import httpx

        method, url, params, body, headers = request.method, request.url, request.params, request.json, request.headers
        origin = httpx.URL(url).copy_with(path="/", query=None, fragment=None)
        for hop in range(policy.max_redirects + 1):
            reply = self._once(method, url, headers, params, body, what, deadline, policy, guard)
            location = reply.headers.get("location")
            if reply.status not in _REDIRECTS or not location:
                return reply
            if hop == policy.max_redirects:
                raise RefusedURLError(f"{what}: more than {policy.max_redirects} redirects (the last to {location!r:.200})")
            try:
                url = str(httpx.URL(reply.url).join(location))
            except (httpx.InvalidURL, ValueError) as err:
                raise RefusedURLError(f"{what}: a redirect to {location!r:.200}, which is not a URL ({err})") from None
            params = None  # the new URL is whole
            if httpx.URL(url).copy_with(path="/", query=None, fragment=None) != origin:
                # another origin is sent no header of ours: a key travels in one (as browsers drop Authorization)
                headers = {name: value for name, value in headers.items() if name.lower() == "accept"}
            if reply.status == 303 or (reply.status in (301, 302) and method == "POST"):
                method, body = "GET", None
        raise AssertionError("unreachable")

    def _once(self, method: str, url: str, headers: Mapping[str, str], params, body, what: str, deadline: Deadline,
              policy: Policy, guard: Guard | None) -> Reply:
        import httpx

        sent = {"User-Agent": self.user_agent, **headers}
        extensions = {}
        if guard is not None:
            target = guard.check(url, timeout_s=deadline.remaining())
            connect_to = target.connect_url()
            sent["Host"] = target.host_header()
            if target.url.scheme == "https":
                extensions["sni_hostname"] = target.host
            client = httpx.Client(trust_env=False, follow_redirects=False)
        else:
            connect_to = url
            client = self._pooled()
        left = deadline.remaining()
        if left <= 0:
            raise deadline.error(what)
        try:
            with client.stream(method, connect_to, params=params, json=body, headers=sent,
                               timeout=httpx.Timeout(left), extensions=extensions) as response:
                data, complete = bytearray(), True
                for chunk in response.iter_bytes():
                    if deadline.remaining() <= 0:
                        raise deadline.error(f"{what}: the body was still arriving")
                    data += chunk
                    if len(data) > policy.max_bytes:
                        del data[policy.max_bytes:]
                        complete = False
                        break
                named = str(httpx.URL(url).copy_merge_params(params)) if params else url
                return Reply(response.status_code, response.reason_phrase, {k.lower(): v for k, v in response.headers.items()},
                             bytes(data), named, complete, attempts=1)
        except httpx.TimeoutException:
            raise deadline.error(what) from None
        except httpx.InvalidURL as err:
            raise RefusedURLError(f"{what}: {url!r:.200} is not a URL httpx can send ({err})") from None
        except httpx.DecodingError as err:
            raise BadReplyError(f"{what}: the body could not be decoded as its Content-Encoding says ({err})") from None
        except httpx.TransportError as err:
            raise _Transient(f"{type(err).__name__}: {err}" if str(err) else type(err).__name__) from None
        finally:
            if guard is not None:
                client.close()
