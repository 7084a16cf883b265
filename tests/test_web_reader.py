"""roma_lab.web's reader: HTML (trafilatura, markdownify when it finds no main text), text, PDF; the size
cuts marked; redirects followed to a limit; error statuses, unreadable content and a dripping or stalled
server as typed errors, within the call's deadline."""

from __future__ import annotations

import threading
import time

import pytest
from web_site import Route, Site, redirect, tiny_pdf

from roma_lab.web import (
    CUT_MARK,
    HTTPStatusError,
    RefusedURLError,
    UnreadablePageError,
    Web,
    WebArgumentError,
    WebDeadlineError,
    WebSettings,
    web_meter,
)

ARTICLE = b"""<!DOCTYPE html><html><head><title>The Drustgeith Foundation &amp; its moves</title>
<style>body { color: red }</style><script>var secret = "script text";</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>The Drustgeith Foundation</h1>
<p>The Drustgeith Foundation has been based in Buflelford since 1960, when it left its first seat.</p>
<p>In 2013 the foundation moved to Gamtholstad, where its present building opened in 1999.</p>
<table><tr><th>year</th><th>town</th></tr><tr><td>2013</td><td>Gamtholstad</td></tr></table>
</article><footer>Copyright notice</footer></body></html>"""


def site_web(site: Site, **given) -> Web:
    return Web(WebSettings(**{"allow_hosts": (f"127.0.0.1:{site.port}",), "deadline_s": 10.0, "backoff_s": 0.01,
                              **given}))


def test_html_becomes_markdown_text_of_its_main_content_with_its_title():
    with Site({"/a": Route(200, ARTICLE)}) as site, site_web(site) as web:
        page = web.read(f"{site.base}/a")
    assert page.title == "The Drustgeith Foundation & its moves" and page.status == 200
    assert page.content_type == "text/html" and page.url == f"{site.base}/a"
    assert "# The Drustgeith Foundation" in page.text and "moved to Gamtholstad" in page.text
    assert "| 2013 | Gamtholstad |" in page.text
    assert "script text" not in page.text and "color: red" not in page.text
    assert (page.chars, page.cut, page.replayed) == (len(page.text), False, False)


def test_html_without_main_content_still_gives_its_text():
    body = b"<html><head><title>Only a footer</title></head><body><footer>Contact the front desk</footer>" \
           b"<script>hidden()</script></body></html>"
    with Site({"/f": Route(200, body)}) as site, site_web(site) as web:
        page = web.read(f"{site.base}/f")
    assert page.title == "Only a footer" and "Contact the front desk" in page.text and "hidden" not in page.text


@pytest.mark.parametrize(("content_type", "body"), [
    ("text/plain; charset=utf-8", "plain text, kept as it is:\n  indented line\n"),
    ("text/csv", "year,quarter,revenue\n2013,1,100\n2013,2,120\n"),
    ("application/json", '{"a": [1, 2]}'),
    ("text/plain; charset=latin-1", "caf\xe9 cr\xe8me"),
])
def test_text_files_are_read_as_they_are(content_type, body):
    encoding = "latin-1" if "latin-1" in content_type else "utf-8"
    with Site({"/t": Route(200, body.encode(encoding), {"Content-Type": content_type})}) as site, site_web(site) as web:
        page = web.read(f"{site.base}/t")
    assert page.text == body and page.content_type == content_type.split(";")[0]


def test_a_pdf_is_read_through_pypdf_with_its_title():
    with Site({"/p.pdf": Route(200, tiny_pdf("Quarterly revenue rose", "Annual report"),
                               {"Content-Type": "application/pdf"})}) as site, site_web(site) as web:
        page = web.read(f"{site.base}/p.pdf")
    assert page.text == "Quarterly revenue rose" and page.title == "Annual report" and page.content_type == "application/pdf"


def test_content_without_a_type_is_told_by_its_first_bytes():
    routes = {"/pdf": Route(200, tiny_pdf("Sniffed PDF", "t"), {"Content-Type": "application/octet-stream"}),
              "/html": Route(200, b"<!DOCTYPE html><html><body><p>Sniffed HTML page</p></body></html>",
                             {"Content-Type": ""})}
    with Site(routes) as site, site_web(site) as web:
        assert web.read(f"{site.base}/pdf").text == "Sniffed PDF"
        assert "Sniffed HTML page" in web.read(f"{site.base}/html").text


@pytest.mark.parametrize(("content_type", "body"), [
    ("image/png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), ("application/zip", b"PK\x03\x04"),
    ("application/octet-stream", b"\xff\xfe\x00\x01binary"), ("application/pdf", b"%PDF-1.4 not really a pdf"),
])
def test_content_that_is_not_text_is_unreadable(content_type, body):
    with Site({"/x": Route(200, body, {"Content-Type": content_type})}) as site, site_web(site) as web:
        with pytest.raises(UnreadablePageError):
            web.read(f"{site.base}/x")


def test_a_long_page_is_cut_at_page_chars_with_the_cut_marked():
    text = "".join(f"line {i:05d}\n" for i in range(3000))
    with Site({"/long": Route(200, text.encode(), {"Content-Type": "text/plain"})}) as site, \
            site_web(site, page_chars=1000) as web:
        page = web.read(f"{site.base}/long")
    assert page.cut and page.chars == len(text)
    assert page.text == text[:1000] + "\n" + CUT_MARK.format(shown=1000, total=len(text))


def test_a_download_is_cut_at_page_bytes_and_says_so():
    text = "x" * 50_000
    with Site({"/big": Route(200, text.encode(), {"Content-Type": "text/plain"})}) as site, \
            site_web(site, page_bytes=4096) as web:
        page = web.read(f"{site.base}/big")
    assert page.text == "x" * 4096 + "\n[… cut: the download stopped at the limit of 4,096 bytes]"


def test_a_pdf_cut_by_the_download_limit_is_unreadable():
    pdf = tiny_pdf("Some words " * 50, "t")
    with Site({"/p": Route(200, pdf, {"Content-Type": "application/pdf"})}) as site, site_web(site, page_bytes=200) as web:
        with pytest.raises(UnreadablePageError, match="larger than the download limit"):
            web.read(f"{site.base}/p")


def test_redirects_are_followed_to_the_final_page_and_no_further_than_the_limit():
    routes = {"/r1": redirect("/r2", 301), "/r2": redirect("/r3", 307), "/r3": redirect("/end", 308),
              "/end": Route(200, b"arrived", {"Content-Type": "text/plain"}), "/loop": redirect("/loop")}
    with Site(routes) as site:
        with site_web(site) as web:
            page = web.read(f"{site.base}/r1")
            assert (page.text, page.url) == ("arrived", f"{site.base}/end")
            with pytest.raises(RefusedURLError, match="more than 5 redirects"):
                web.read(f"{site.base}/loop")
        assert sum(path == "/loop" for path, _ in site.requests) == 6
        with site_web(site, max_redirects=2) as web, pytest.raises(RefusedURLError, match="more than 2 redirects"):
            web.read(f"{site.base}/r1")


def test_an_error_status_is_a_typed_error_and_only_429_and_5xx_are_retried():
    with Site({"/gone": Route(404, b"no such page"), "/down": Route(503, b"down for maintenance")}) as site, \
            site_web(site, retries=2) as web:
        with pytest.raises(HTTPStatusError, match="HTTP 404 Not Found") as raised:
            web.read(f"{site.base}/gone")
        assert raised.value.status == 404
        with pytest.raises(HTTPStatusError, match="HTTP 503.*after 3 attempts.*down for maintenance"):
            web.read(f"{site.base}/down")
    assert [path for path, _ in site.requests] == ["/gone", "/down", "/down", "/down"]


@pytest.mark.parametrize("route", [Route(200, b"<html><body>" + b"drip " * 400 + b"</body></html>", drip_s=0.02),
                                   Route(200, b"never sent", stall=True)], ids=["drip", "stall"])
def test_a_dripping_or_stalled_server_ends_at_the_deadline(route):
    with Site({"/slow": route}) as site, site_web(site, deadline_s=1.0) as web, web_meter() as meter:
        started = time.monotonic()
        with pytest.raises(WebDeadlineError, match="deadline of 1 s"):
            web.read(f"{site.base}/slow")
        assert 0.9 <= time.monotonic() - started < 3.0  # the upper bound is slack for a loaded machine
    (call,) = meter.calls
    assert call.kind == "read" and call.error is not None and call.cost == 0.0


def test_reads_in_flight_are_capped():
    with Site({"/hold": Route(200, b"held", {"Content-Type": "text/plain"}, hold_s=0.2)}) as site, \
            site_web(site, max_in_flight=2) as web:
        threads = [threading.Thread(target=web.read, args=(f"{site.base}/hold",)) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert site.peak == 2 and len(site.requests) == 5


def test_a_read_needs_a_url():
    with Web(WebSettings()) as web:
        for url in ("", "  ", None, 42):
            with pytest.raises(WebArgumentError):
                web.read(url)
