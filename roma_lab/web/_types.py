"""What a search and a read give back: a :class:`WebResult` per hit and a :class:`Page` per read.

Both are plain values that round-trip through JSON exactly (``as_json`` / ``from_json``): a
recording stores them so, which is why a replay gives the same bytes as the live call did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["CUT_MARK", "Page", "WebResult", "cut_text"]

#: What ends a text cut at a size limit (a snippet, a page), so a reader knows there was more.
CUT_MARK = "[… cut: {shown:,} of {total:,} characters shown]"


def cut_text(text: str, limit: int) -> tuple[str, bool]:
    """``text`` whole if it has at most ``limit`` characters, else its first ``limit`` characters
    followed by :data:`CUT_MARK` on a line of its own; and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n{CUT_MARK.format(shown=limit, total=len(text))}", True


def _from(cls, data: Mapping[str, Any]):
    names = {f.name for f in fields(cls)}
    if not isinstance(data, Mapping) or set(data) != names:
        raise ValueError(f"a {cls.__name__} has the fields {sorted(names)}, got {data!r:.200}")
    return cls(**data)


@dataclass(frozen=True, slots=True)
class WebResult:
    """One search hit as the provider gave it: ``snippet`` is plain text (a provider's HTML
    highlighting removed), ``date`` the provider's date string for the page if it gave one."""

    title: str
    url: str
    snippet: str
    date: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WebResult:
        return _from(cls, data)


@dataclass(frozen=True, slots=True)
class Page:
    """One page read. ``url`` is where it was read from, after redirects; ``status`` the final HTTP
    status (always a 2xx: an error status is an ``HTTPStatusError``); ``fetched_at`` the UTC time of
    the fetch (ISO 8601; a replay keeps the recorded one); ``content_type`` the media type served;
    ``text`` markdown-ish text from HTML, the text of a PDF, or a text file as it is; ``chars`` the
    length of the whole text and ``cut`` whether ``text`` was cut to the size limit (the cut is
    marked in the text); ``replayed`` whether it came from a recording rather than the network."""

    url: str
    title: str
    text: str
    fetched_at: str
    status: int
    content_type: str
    chars: int
    cut: bool
    replayed: bool = False

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Page:
        return _from(cls, data)
