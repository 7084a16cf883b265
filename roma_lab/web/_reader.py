"""A fetched page as text: HTML through trafilatura (markdownify when it finds no main text), a PDF
through pypdf, a text file (plain, CSV, markdown, JSON, XML) as it is; anything else is unreadable.

The text made here is the whole page's (the size cut is the caller's, after recording), except that
a body cut by the download limit says so on its last line; a PDF cut so cannot be read at all.
"""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime

from ._errors import UnreadablePageError
from ._http import Reply
from ._types import Page

__all__ = ["page_from"]

_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("application/json", "application/xml", "application/ld+json", "application/csv")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_CHARSET = re.compile(r"charset=[\"']?([\w.:-]+)", re.IGNORECASE)


def _kind(reply: Reply) -> str:
    """"html", "pdf" or "text" for what the reply holds, by its Content-Type, else by its first bytes."""
    media = reply.content_type
    if media in _HTML_TYPES:
        return "html"
    if media == "application/pdf":
        return "pdf"
    if media.startswith("text/") or media in _TEXT_TYPES or media.endswith(("+json", "+xml")):
        return "text"
    if media in ("", "application/octet-stream", "binary/octet-stream"):
        head = reply.body[:1024].lstrip().lower()
        if head.startswith(b"%pdf-"):
            return "pdf"
        if head.startswith((b"<!doctype html", b"<html")):
            return "html"
        try:
            reply.body.decode("utf-8")
            return "text"
        except UnicodeDecodeError:
            pass
    raise UnreadablePageError(f"{reply.url}: {media or 'content without a type'} is not text "
                              "(the reader reads HTML, PDF and text files)")


def _decode(reply: Reply) -> str:
    match = _CHARSET.search(reply.headers.get("content-type", ""))
    encoding = match.group(1) if match else "utf-8"
    try:
        return reply.body.decode(encoding, "replace")
    except LookupError:  # a charset Python does not know
        return reply.body.decode("utf-8", "replace")


def _html(reply: Reply) -> tuple[str, str]:
    import trafilatura

    document = _decode(reply)
    try:
        text = trafilatura.extract(document, output_format="markdown", include_tables=True, include_links=False,
                                   include_comments=False, favor_recall=True, with_metadata=False)
    except Exception:  # noqa: BLE001 - markup lxml cannot parse: the fallback below reads any
        text = None
    if not text or not text.strip():
        try:
            text = _markdownify(document)
        except Exception as err:  # noqa: BLE001 - a page no extractor reads is unreadable, not a crash
            raise UnreadablePageError(f"{reply.url}: HTML that cannot be read ({type(err).__name__})") from None
    return _title(document), text.strip()


def _markdownify(document: str) -> str:
    """The whole page as markdown, without what a browser does not show as text."""
    from bs4 import BeautifulSoup
    from markdownify import markdownify

    soup = BeautifulSoup(document, "html.parser")
    for hidden in soup(["script", "style", "noscript", "template", "head"]):
        hidden.decompose()
    return re.sub(r"\n{3,}", "\n\n", markdownify(str(soup), heading_style="ATX"))


def _title(document: str) -> str:
    """The page's ``<title>``, what a browser shows for it ("" without one)."""
    import html

    match = _TITLE.search(document[:65536])
    return " ".join(html.unescape(match.group(1)).split()) if match else ""


def _pdf(reply: Reply) -> tuple[str, str]:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(reply.body))
        text = "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)
        title = (reader.metadata.title if reader.metadata is not None else None) or ""
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as err:  # pypdf's parse errors are not all its own
        raise UnreadablePageError(f"{reply.url}: a PDF that cannot be read ({type(err).__name__}: {err})") from None
    return str(title).strip(), text.strip()


def page_from(reply: Reply) -> Page:
    """The page a successful reply holds, with its whole text (``cut`` False: the size cut is later).
    UnreadablePageError for content that is not text, a PDF cut by the download limit, or one that
    does not parse."""
    kind = _kind(reply)
    if kind == "pdf":
        if not reply.complete:
            raise UnreadablePageError(f"{reply.url}: the PDF is larger than the download limit of "
                                      f"{len(reply.body):,} bytes, and a cut PDF cannot be read")
        title, text = _pdf(reply)
    elif kind == "html":
        title, text = _html(reply)
    else:
        title, text = reply.url.rstrip("/").rsplit("/", 1)[-1], _decode(reply)
    if not reply.complete:
        text += f"\n[… cut: the download stopped at the limit of {len(reply.body):,} bytes]"
    return Page(url=reply.url, title=title, text=text, fetched_at=datetime.now(UTC).isoformat(timespec="seconds"),
                status=reply.status, content_type=reply.content_type or f"({kind})", chars=len(text), cut=False)
