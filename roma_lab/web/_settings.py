"""The web room's settings: one frozen value, the only place its defaults are written, checked when
made (every problem reported at once) and recorded with a run as it is (it holds no secret: keys
are read from their variables when a ``Web`` is made)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from roma_lab._environment import ENV

__all__ = ["WebSettings"]


def _allow_list(text: str) -> tuple[str, ...]:
    return tuple(h.strip() for h in text.split(",") if h.strip())


@dataclass(frozen=True, slots=True)
class WebSettings:
    """How a :class:`~roma_lab.web.Web` searches and reads.

    ``search``: the provider spec (``serper``, ``searxng=http://host:port``, ``wikipedia``...).
    ``allow_hosts``: hosts a read may reach although they are private (``127.0.0.1:8765``: the
    offline web). ``recording``: "off", "record" or "replay", in ``recording_dir`` (None: the
    ``web`` folder of roma_lab's cache, $ROMA_LAB_CACHE). ``deadline_s``: one call's total time
    (None: ``roma_lab.lm.call_deadline_s()``, $ROMA_LAB_CALL_DEADLINE_S or 300 s).
    ``max_results``: the most hits a search returns (a larger k is lowered to it). ``snippet_chars``
    and ``page_chars``: where a hit's snippet and a page's text are cut (the cut marked);
    ``page_bytes`` and ``reply_bytes``: the most bytes read of a page and of a provider's reply.
    ``max_redirects``; ``retries`` after the first attempt of a 429, a 5xx or a failed connection,
    after ``backoff_s`` doubling (with jitter) unless the server says ``Retry-After``.
    ``max_in_flight``: requests at once per provider, and for the reader (None: the provider's
    default: 1 for Wikipedia, 4 otherwise; 8 for the reader); ``per_second``: requests started per
    second per provider (None: no limit). ``contact``: a URL or address for the User-Agent header,
    which Wikimedia's policy asks automated clients to give.
    """

    search: str = "wikipedia"
    allow_hosts: tuple[str, ...] = ()
    recording: Literal["off", "record", "replay"] = "off"
    recording_dir: str | None = None
    deadline_s: float | None = None
    max_results: int = 10
    snippet_chars: int = 400
    page_chars: int = 20_000
    page_bytes: int = 5_000_000
    reply_bytes: int = 2_000_000
    max_redirects: int = 5
    retries: int = 3
    backoff_s: float = 1.0
    max_in_flight: int | None = None
    per_second: float | None = None
    contact: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.allow_hosts, str):  # one host given as a string: not its characters
            object.__setattr__(self, "allow_hosts", (self.allow_hosts,))
        else:
            object.__setattr__(self, "allow_hosts", tuple(self.allow_hosts))
        problems = []

        def positive_int(name: str, value: Any, minimum: int = 1) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                problems.append(f"{name} must be a whole number >= {minimum}, got {value!r}")

        def positive(name: str, value: Any, allow_none: bool) -> None:
            if value is None and allow_none:
                return
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                problems.append(f"{name} must be a positive number{' or None' if allow_none else ''}, got {value!r}")

        if not isinstance(self.search, str) or not self.search.strip():
            problems.append(f"search must name a provider (e.g. 'wikipedia', 'searxng=http://host:port'), got {self.search!r}")
        if not all(isinstance(h, str) and h.strip() for h in self.allow_hosts):
            problems.append(f"allow_hosts must be host or host:port strings, got {self.allow_hosts!r}")
        if self.recording not in ("off", "record", "replay"):
            problems.append(f"recording must be 'off', 'record' or 'replay', got {self.recording!r}")
        if self.recording_dir is not None and not isinstance(self.recording_dir, str | os.PathLike):
            problems.append(f"recording_dir must be a path or None, got {self.recording_dir!r}")
        positive("deadline_s", self.deadline_s, allow_none=True)
        positive("backoff_s", self.backoff_s, allow_none=False)
        positive("per_second", self.per_second, allow_none=True)
        for name in ("max_results", "snippet_chars", "page_chars", "page_bytes", "reply_bytes"):
            positive_int(name, getattr(self, name))
        positive_int("max_redirects", self.max_redirects, minimum=0)
        positive_int("retries", self.retries, minimum=0)
        if self.max_in_flight is not None:
            positive_int("max_in_flight", self.max_in_flight)
        if not isinstance(self.contact, str):
            problems.append(f"contact must be a string, got {self.contact!r}")
        if problems:
            raise ValueError("WebSettings: " + "; ".join(problems))

    @classmethod
    def from_environment(cls, **given: Any) -> WebSettings:
        """Settings from the environment, ``given`` ones winning: $ROMA_LAB_WEB (the provider spec),
        $ROMA_LAB_WEB_RECORD (off/record/replay), $ROMA_LAB_WEB_DIR (the recording folder),
        $ROMA_LAB_WEB_ALLOW (allowed hosts, comma-separated)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - names)
        if unknown:
            raise TypeError(f"WebSettings has no setting {', '.join(unknown)}")
        found: dict[str, Any] = {}
        for field_name, variable in (("search", ENV.web), ("recording", ENV.web_record), ("recording_dir", ENV.web_dir)):
            value = os.environ.get(variable, "").strip()
            if value:
                found[field_name] = value
        allowed = _allow_list(os.environ.get(ENV.web_allow, ""))
        if allowed:
            found["allow_hosts"] = allowed
        return cls(**{**found, **given})

    def folder(self) -> Path:
        """The recording folder in force: ``recording_dir``, else roma_lab's cache's ``web`` folder."""
        if self.recording_dir is not None:
            return Path(self.recording_dir)
        from roma_lab.lm import cache_dir

        return cache_dir() / "web"
