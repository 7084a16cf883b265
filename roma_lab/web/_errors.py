"""The web room's typed errors: every failure of a search or a read is a :class:`WebError`.

A caller turns one into a tool error (its message, and ``tool_status`` for the trace) and the run
goes on: no httpx, socket, JSON or extractor exception ever leaves the room, and no message names a
secret (``Web`` scrubs every key it holds out of every message before raising).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

__all__ = [
    "BadReplyError",
    "DamagedRecordingError",
    "HTTPStatusError",
    "MissingKeyError",
    "RefusedURLError",
    "ReplayMissError",
    "UnknownProviderError",
    "UnreadablePageError",
    "WebConnectionError",
    "WebDeadlineError",
    "WebError",
]


class WebError(RuntimeError):
    """A search or a read that gave no usable result. ``tool_status`` is what a trace's ``ToolCall``
    records for it ("error", or "timed_out" for a call past its deadline)."""

    tool_status: ClassVar[Literal["error", "timed_out"]] = "error"


class UnknownProviderError(WebError, ValueError):
    """A provider spec names no provider the room knows, or is malformed; the message lists the known ones."""


class MissingKeyError(WebError):
    """The provider needs an API key and its environment variable is unset; the message names the variable."""

    def __init__(self, provider: str, variable: str):
        super().__init__(f"web search {provider!r} needs ${variable}: set it to your {provider} API key "
                         f"(or replay a recording, which needs no key)")
        self.provider, self.variable = provider, variable


class RefusedURLError(WebError):
    """A URL that is never fetched: not http(s), credentials in it, a host that is or resolves to a
    private, loopback, link-local, CGNAT, multicast, reserved, unspecified or cloud-metadata address
    (and is not on the allow list), or a redirect to one, or too many redirects."""


class HTTPStatusError(WebError):
    """The server answered with an error status (after the retries a 429 or 5xx gets)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class BadReplyError(WebError):
    """A provider's reply is not its documented wire format (not JSON, or the wrong shape)."""


class UnreadablePageError(WebError):
    """A page whose content cannot be turned into text (an image, an archive, a PDF cut by the size limit)."""


class WebConnectionError(WebError):
    """No connection, or the connection dropped, on every attempt."""


class WebDeadlineError(WebError, TimeoutError):
    """No complete answer within the call's total deadline (a stalled or dripping server, long
    back-offs); a TimeoutError, so a stall guard counts it like any silent service."""

    tool_status = "timed_out"


class ReplayMissError(WebError, LookupError):
    """A replayed call that was never recorded: never answered by a live call instead."""


class DamagedRecordingError(WebError):
    """A recorded entry or snapshot is not what was written: unreadable, another schema, edited (its
    digest or its manifest hash does not match), missing from its snapshot, or not listed in it."""

    def __init__(self, path: str | Path, problem: str):
        super().__init__(f"web recording {path}: {problem}")
        self.path = Path(path)
