"""roma_lab.web's offline web: the generated world's documents and files on loopback, searched in
SearXNG's format and read as pages, so search -> URL -> fetch -> extract -> text runs with no network;
its command line serves, prints its address and stops cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from roma_lab.web import OfflineWeb, RefusedURLError, Web, WebSettings, serve_offline_web, web_meter

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "data" / "tasks" / "world_corpus.jsonl"
LEDGER = "year,quarter,revenue_k,costs_k\n2013,1,412,300\n2013,2,398,310\n"


@pytest.fixture(scope="module")
def world():
    with serve_offline_web(CORPUS, files={"ledger-5841.csv": LEDGER}) as web:
        yield web


def test_search_then_read_a_hit_runs_end_to_end_offline(world):
    with Web(world.settings(deadline_s=30.0)) as web, web_meter() as meter:
        hits = web.search("Drustgeith Foundation moved 2013", 5)
        assert hits[0].url == world.url_of("doc", "news-5841-2013") and hits[0].title == "news-5841-2013"
        assert "moved to Gamtholstad" in hits[0].snippet
        page = web.read(hits[0].url)
    assert page.title == "news-5841-2013" and "In 2013 the Drustgeith Foundation moved to Gamtholstad." in page.text
    assert [(c.provider, c.kind, c.cost, c.replayed) for c in meter.calls] == \
        [("searxng", "search", 0.0, False), ("reader", "read", 0.0, False)]


def test_files_are_found_by_name_linked_from_documents_and_read_as_they_are(world):
    with Web(world.settings(deadline_s=30.0)) as web:
        (hit,) = [h for h in web.search("ledger-5841.csv", 10) if h.title == "ledger-5841.csv"]
        assert web.read(hit.url).text == LEDGER
        profile = urllib.request.urlopen(world.url_of("doc", "profile-5841"), timeout=10).read().decode()
        assert f'<a href="{world.url_of("file", "ledger-5841.csv")}">ledger-5841.csv</a>' in profile


def test_the_search_speaks_searxngs_json_format(world):
    with urllib.request.urlopen(f"{world.base_url}/search?q=Drustgeith&format=json&pageno=2", timeout=10) as reply:
        assert reply.headers["Content-Type"] == "application/json"
        body = json.load(reply)
    assert {"query", "number_of_results", "results", "answers", "corrections", "infoboxes", "suggestions",
            "unresponsive_engines"} <= set(body)
    total = body["number_of_results"]
    assert body["query"] == "Drustgeith" and total > 10 and len(body["results"]) == min(10, total - 10)
    first = body["results"][0]
    assert {"url", "title", "content", "engine", "engines", "positions", "score", "category", "parsed_url",
            "publishedDate"} <= set(first)
    assert first["positions"] == [11] and first["url"].startswith(world.base_url)
    html = urllib.request.urlopen(f"{world.base_url}/search?q=Drustgeith", timeout=10).read()
    assert b"<ol><li><a href=" in html
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(f"{world.base_url}/doc/no-such-doc", timeout=10)
    assert raised.value.code == 404


def test_its_pages_are_refused_unless_its_host_is_allowed(world):
    with Web(WebSettings(search=world.search_spec, deadline_s=30.0)) as web:
        (hit, *_) = web.search("Gamtholstad", 3)
        with pytest.raises(RefusedURLError, match="127.0.0.1 is a loopback address"):
            web.read(hit.url)


def test_documents_as_a_mapping_and_files_from_a_folder(tmp_path):
    (tmp_path / "ledgers").mkdir()
    (tmp_path / "ledgers" / "l-1.csv").write_text("a,b\n1,2\n")
    with OfflineWeb({"d1": "Alpha paragraph.\n\nBeta paragraph mentions l-1.csv."}, files=tmp_path / "ledgers") as web:
        with Web(web.settings(deadline_s=30.0)) as client:
            page = client.read(web.url_of("doc", "d1"))
            assert "Alpha paragraph." in page.text and "Beta paragraph" in page.text
            assert client.read(web.url_of("file", "l-1.csv")).text == "a,b\n1,2\n"
    for bad, error in (({}, ValueError), ({"d": 3}, TypeError)):
        with pytest.raises(error):
            OfflineWeb(bad)
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "text": "ok"}\nnot json\n')
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        OfflineWeb(tmp_path / "bad.jsonl")


def test_the_command_line_serves_prints_its_address_and_stops_cleanly(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "only", "text": "The only document, about lighthouses."}) + "\n")
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "f.csv").write_text("x\n1\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    server = subprocess.Popen([sys.executable, "-m", "roma_lab.web", "serve", "--corpus", str(corpus), "--files",
                               str(tmp_path / "files")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = server.stdout.readline()
        assert line.startswith("serving 1 documents and 1 files at http://127.0.0.1:"), line + server.stderr.read()
        base = line.split(" at ")[1].split()[0]
        body = json.load(urllib.request.urlopen(f"{base}/search?q=lighthouses&format=json", timeout=10))
        assert body["results"][0]["url"] == f"{base}/doc/only"
    finally:
        server.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert server.wait(timeout=15) == 0 and time.monotonic() - started < 10
    bad = subprocess.run([sys.executable, "-m", "roma_lab.web", "serve", "--corpus", str(tmp_path / "missing.jsonl")],
                         capture_output=True, text=True, env=env, timeout=60, check=False)
    assert bad.returncode == 2 and "missing.jsonl" in bad.stderr


def test_importing_the_room_asks_no_network_and_loads_no_http_or_extractor_library():
    probe = ("import json, sys\nasked = []\n"
             "def audit(event, args):\n"
             "    if event in ('socket.connect', 'socket.getaddrinfo', 'socket.gethostbyname'):\n"
             "        asked.append(event)\n"
             "sys.addaudithook(audit)\n"
             "import roma_lab.web\n"
             "print(json.dumps([asked, sorted(m for m in ('httpx', 'trafilatura', 'pypdf', 'bm25s', 'dspy') "
             "if m in sys.modules)]))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [[], []]
