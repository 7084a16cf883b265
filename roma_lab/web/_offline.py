"""An offline web on loopback: a corpus served as HTML pages with a SearXNG-format search over it.

``serve_offline_web(documents, files=...)`` serves, on 127.0.0.1 only:

- ``/search?q=...&format=json[&pageno=N]``: SearXNG's JSON reply (``query``, ``number_of_results``,
  ``results`` with ``url``/``title``/``content``/``engine``/``score``..., ten a page), ranked by BM25
  (``roma_lab.tools.BM25Retriever``) over the documents and the files (a file indexed with its name,
  so a search for ``ledger-5841.csv`` finds it); without ``format=json``, the same hits as HTML;
- ``/doc/<id>``: a document as an HTML page (its id as the title, its paragraphs, the file names it
  mentions linked to the files);
- ``/files/<name>``: a file as it is (``text/csv`` for a .csv, else by its name's type).

So the whole online path (search -> URL -> fetch -> extract -> text) runs with no network:
``Web(web.settings())`` searches it as ``searxng=<base URL>`` and may read its pages (its host is
on the allow list those settings carry). Documents are a mapping (id -> text) or a JSONL file of
``{"id", "text"}`` objects (a generated world's ``documents``; ``data/tasks/world_corpus.jsonl``);
files a mapping (name -> text) or a folder. A replayable run names a fixed ``port``: the pages'
URLs, which recordings key reads by, hold it.
"""

from __future__ import annotations

import html
import json
import math
import mimetypes
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from ._loopback import LoopbackServer, QuietHandler
from ._settings import WebSettings

__all__ = ["OfflineWeb", "serve_offline_web"]

PAGE_SIZE = 10
_SNIPPET_CHARS = 240


def _documents(documents: Mapping[str, str] | str | os.PathLike[str]) -> dict[str, str]:
    if isinstance(documents, Mapping):
        docs = {str(k): v for k, v in documents.items()}
    else:
        path, docs = Path(documents), {}
        for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}: line {number} is not JSON ({err.msg})") from None
            if not isinstance(record, dict) or not isinstance(record.get("text"), str) or "id" not in record:
                raise ValueError(f"{path}: line {number} is not an object with an id and a string text")
            docs[str(record["id"])] = record["text"]
    bad = [k for k, v in docs.items() if not isinstance(v, str)]
    if bad:
        raise TypeError(f"a document's text is a string; {bad[0]!r} is not")
    if not docs:
        raise ValueError("an offline web needs at least one document")
    return docs


def _files(files: Mapping[str, str] | str | os.PathLike[str] | None) -> dict[str, str]:
    if files is None:
        return {}
    if isinstance(files, Mapping):
        found = {str(k): v for k, v in files.items()}
    else:
        folder = Path(files)
        if not folder.is_dir():
            raise NotADirectoryError(f"{folder}: files are served from a folder")
        found = {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
                 for p in sorted(folder.rglob("*")) if p.is_file()}
    bad = [k for k, v in found.items() if not isinstance(v, str)]
    if bad:
        raise TypeError(f"a file's content is a string; {bad[0]!r} is not")
    return found


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[:_SNIPPET_CHARS].rsplit(" ", 1)[0] + " …"


class OfflineWeb(LoopbackServer):
    """The offline web over ``documents`` and ``files`` on 127.0.0.1:``port`` (0: a free port). Not
    serving until ``start()`` (or ``with``; :func:`serve_offline_web` starts it)."""

    def __init__(self, documents: Mapping[str, str] | str | os.PathLike[str], *,
                 files: Mapping[str, str] | str | os.PathLike[str] | None = None, port: int = 0):
        from roma_lab.tools import BM25Retriever

        self.documents = _documents(documents)
        self.files = _files(files)
        self._entries = [("doc", d) for d in self.documents] + [("file", f) for f in self.files]
        self._index = BM25Retriever([self.documents[name] if kind == "doc" else f"{name}\n{self.files[name]}"
                                     for kind, name in self._entries])
        self._linked = re.compile("|".join(re.escape(html.escape(n)) for n in sorted(self.files, key=len, reverse=True))) \
            if self.files else None
        self.requests = 0  # every request answered: a replay shows it made none
        self._count = threading.Lock()
        super().__init__(self._handler(), port=port, name="roma_lab-offline-web")

    @property
    def search_spec(self) -> str:
        """The provider spec that searches it: ``searxng=<base URL>``."""
        return f"searxng={self.base_url}"

    @property
    def allow_hosts(self) -> tuple[str, ...]:
        return (f"127.0.0.1:{self.port}",)

    def settings(self, **given: Any) -> WebSettings:
        """WebSettings that search this web and may read its pages (``given`` settings added)."""
        return WebSettings(**{"search": self.search_spec, "allow_hosts": self.allow_hosts, **given})

    def url_of(self, kind: str, name: str) -> str:
        """The URL of a document (``kind`` "doc") or a file ("file")."""
        return f"{self.base_url}/{'doc' if kind == 'doc' else 'files'}/{quote(name, safe='')}"

    def _hits(self, query: str, page: int) -> tuple[list[dict[str, Any]], int]:
        passages = self._index.search(query, k=len(self._entries)) if query.strip() else []
        chosen = passages[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
        hits = []
        for position, passage in enumerate(chosen, start=(page - 1) * PAGE_SIZE + 1):
            kind, name = self._entries[int(passage.doc_id)]
            text = self.documents[name] if kind == "doc" else self.files[name]
            url = self.url_of(kind, name)
            hits.append({"url": url, "title": name, "content": _snippet(text), "engine": "offline",
                         "engines": ["offline"], "positions": [position], "score": round(passage.score, 6),
                         "category": "general" if kind == "doc" else "files", "template": "default.html",
                         "parsed_url": list(urlsplit(url)), "publishedDate": None})
        return hits, len(passages)

    def _page(self, name: str) -> bytes:
        paragraphs = [p for p in re.split(r"\n\s*\n", self.documents[name]) if p.strip()]
        body = []
        for paragraph in paragraphs:
            text = html.escape(paragraph.strip())
            if self._linked is not None:
                text = self._linked.sub(lambda m: f'<a href="{self.url_of("file", html.unescape(m.group(0)))}">'
                                                  f"{m.group(0)}</a>", text)
            body.append(f"<p>{text}</p>")
        title = html.escape(name)
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>\n'
                f"<body><main><article><h1>{title}</h1>\n{''.join(body)}\n</article></main></body></html>\n").encode()

    def _results_page(self, query: str, hits: list[dict[str, Any]]) -> bytes:
        items = "".join(f'<li><a href="{html.escape(h["url"])}">{html.escape(h["title"])}</a><p>{html.escape(h["content"])}</p></li>'
                        for h in hits)
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(query)} - offline web'
                f"</title></head>\n<body><ol>{items}</ol></body></html>\n").encode()

    def _handler(self) -> type[QuietHandler]:
        web = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                with web._count:
                    web.requests += 1
                parts = urlsplit(self.path)
                path = unquote(parts.path)
                if path == "/search":
                    form = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                    try:
                        page = max(1, int(form.get("pageno", "1")))
                    except ValueError:
                        page = 1
                    query = form.get("q", "")
                    hits, total = web._hits(query, page)
                    if form.get("format") == "json":
                        reply = {"query": query, "number_of_results": total, "results": hits, "answers": [],
                                 "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": [],
                                 "pages": math.ceil(total / PAGE_SIZE)}
                        return self.send_body(200, json.dumps(reply).encode(), "application/json")
                    return self.send_body(200, web._results_page(query, hits), "text/html; charset=utf-8")
                if path.startswith("/doc/") and path[5:] in web.documents:
                    return self.send_body(200, web._page(path[5:]), "text/html; charset=utf-8")
                if path.startswith("/files/") and path[7:] in web.files:
                    name = path[7:]
                    media = "text/csv" if name.endswith(".csv") else (mimetypes.guess_type(name)[0] or "text/plain")
                    return self.send_body(200, web.files[name].encode(), f"{media}; charset=utf-8")
                if path == "/":
                    hits = [{"url": web.url_of(kind, name), "title": name, "content": ""} for kind, name in web._entries]
                    return self.send_body(200, web._results_page("index", hits), "text/html; charset=utf-8")
                self.send_body(404, b"not found\n", "text/plain; charset=utf-8")

            do_HEAD = do_GET

        return Handler


def serve_offline_web(documents: Mapping[str, str] | str | os.PathLike[str], *,
                      files: Mapping[str, str] | str | os.PathLike[str] | None = None, port: int = 0) -> OfflineWeb:
    """An :class:`OfflineWeb`, serving (stop it with ``stop()``, or use it in ``with``)."""
    return OfflineWeb(documents, files=files, port=port).start()
