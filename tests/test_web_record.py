"""roma_lab.web's recorded web: record, then replay with the services gone (the same bytes, no request);
a replay miss is an error, never a live call; damaged entries; snapshots checked by SHA-256; concurrent
recorders of one call; and a planted API key found in no file the room writes nor in any message."""

from __future__ import annotations

import contextvars
import json
import pickle
import threading
import warnings

import pytest
from web_site import Route, Site

from roma_lab.results import QuarantineWarning
from roma_lab.web import (
    SNAPSHOT_DIR,
    DamagedRecordingError,
    HTTPStatusError,
    ProviderStub,
    ReplayMissError,
    Web,
    WebError,
    WebRecorder,
    WebResult,
    WebSettings,
    open_snapshot,
    web_meter,
)

HITS = (WebResult("One", "https://one.example/", "first", "2026-01-02"),
        WebResult("Two", "https://two.example/", "second", None))
KEY = "sk-PLANTED-9c1e4b2a7d"


def recording(spec: str, folder, mode: str, **given) -> WebSettings:
    return WebSettings(**{"search": spec, "recording": mode, "recording_dir": str(folder), "deadline_s": 10.0,
                          "backoff_s": 0.01, **given})


def as_bytes(value) -> bytes:
    return json.dumps([v.as_json() for v in value] if isinstance(value, list) else value.as_json(),
                      sort_keys=True).encode()


def test_record_then_replay_with_the_service_gone_gives_the_same_bytes_and_makes_no_request(tmp_path, monkeypatch):
    monkeypatch.setenv("SERPER_API_KEY", KEY)
    page = b"<html><head><title>Page</title></head><body><article><p>Recorded words of a page.</p></article></body></html>"
    with ProviderStub("serper", HITS, key=KEY) as stub, Site({"/p": Route(200, page)}) as site:
        settings = recording(stub.spec, tmp_path / "rec", "record", allow_hosts=(f"127.0.0.1:{site.port}",))
        with Web(settings) as web, web_meter() as meter:
            live_hits = web.search("one two", 2)
            live_page = web.read(f"{site.base}/p")
            assert web.search("one two", 2) == live_hits  # recorded: a hit, no second request
        assert len(stub.requests) == 1 and len(site.requests) == 1
        assert [c.replayed for c in meter.calls] == [False, False, True]
        assert [c.cost for c in meter.calls] == [0.001, 0.0, 0.0]
    monkeypatch.delenv("SERPER_API_KEY")  # a replay needs no key
    with Web(settings.__class__(**{**settings_fields(settings), "recording": "replay"})) as web, web_meter() as meter:
        replayed_hits = web.search("one two", 2)
        replayed_page = web.read(f"{site.base}/p")
    assert as_bytes(replayed_hits) == as_bytes(live_hits)
    assert replayed_page.replayed and not live_page.replayed
    assert replayed_page.text.encode() == live_page.text.encode() and replayed_page.fetched_at == live_page.fetched_at
    assert [(c.replayed, c.cost, c.error) for c in meter.calls] == [(True, 0.0, None), (True, 0.0, None)]


def settings_fields(settings: WebSettings) -> dict:
    return {name: getattr(settings, name) for name in settings.__slots__}


def test_a_replay_miss_is_an_error_and_never_a_live_call(tmp_path):
    with ProviderStub("searxng", HITS) as stub:
        with Web(recording(stub.spec, tmp_path, "record")) as web:
            web.search("recorded", 2)
        with Web(recording(stub.spec, tmp_path, "replay")) as web, web_meter() as meter:
            assert web.search("recorded", 2) == list(HITS)
            for other in (lambda: web.search("never asked", 2), lambda: web.search("recorded", 1),
                          lambda: web.read(f"{stub.base_url}/page")):
                with pytest.raises(ReplayMissError, match="was never recorded"):
                    other()
        assert len(stub.requests) == 1
    assert [c.error is None for c in meter.calls] == [True, False, False, False]
    assert all(c.cost == 0.0 for c in meter.calls)


def test_the_key_is_provider_endpoint_and_parameters(tmp_path, monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    with ProviderStub("tavily", HITS) as stub:
        with Web(recording(stub.spec, tmp_path, "record")) as web:
            web.search("q", 2)
        monkeypatch.setenv("TAVILY_API_KEY", "another-key-entirely")  # the key is no part of it
        with Web(recording(stub.spec, tmp_path, "replay")) as web:
            web.search("q", 2)
        with ProviderStub("tavily", HITS) as elsewhere, Web(recording(elsewhere.spec, tmp_path, "replay")) as web:
            with pytest.raises(ReplayMissError):  # another endpoint
                web.search("q", 2)


def entries(folder):
    return sorted(p for p in folder.rglob("*.json") if p.name != "manifest.json")


def test_an_edited_entry_is_refused_in_replay_and_made_again_in_record(tmp_path):
    with ProviderStub("searxng", HITS) as stub:
        with Web(recording(stub.spec, tmp_path, "record")) as web:
            web.search("q", 2)
        (entry,) = entries(tmp_path)
        data = json.loads(entry.read_text())
        data["reply"]["results"][0]["title"] = "Edited"
        entry.write_text(json.dumps(data))
        with Web(recording(stub.spec, tmp_path, "replay")) as web, pytest.raises(DamagedRecordingError,
                                                                                 match="digest does not match") as raised:
            web.search("q", 2)
        assert raised.value.path == entry and isinstance(raised.value, WebError)
        with Web(recording(stub.spec, tmp_path, "record")) as web, pytest.warns(QuarantineWarning):
            assert web.search("q", 2) == list(HITS)
        assert len(stub.requests) == 2
        entry.write_text("{not json")
        with Web(recording(stub.spec, tmp_path, "replay")) as web, pytest.raises(DamagedRecordingError, match="not a recorded call"):
            web.search("q", 2)


def test_a_snapshot_replays_the_run_offline_and_refuses_a_tampered_entry(tmp_path):
    run = tmp_path / "run"
    with ProviderStub("searxng", HITS) as stub:
        recorder = WebRecorder(tmp_path / "cache", "record")
        with Web(recording(stub.spec, tmp_path / "unused", "off"), recorder=recorder) as web:
            live = [web.search(q, 2) for q in ("a", "b")]
        with Web(recording(stub.spec, tmp_path / "cache", "record")) as web:
            web.search("from another run", 2)  # in the folder, not served by the recorder above
        snapshot = recorder.export_snapshot(run)
    assert snapshot == run / SNAPSHOT_DIR
    manifest = json.loads((snapshot / "manifest.json").read_text())
    assert len(manifest["entries"]) == 2 and len(entries(tmp_path / "cache")) == 3
    with Web(recording(stub.spec, tmp_path / "none", "off"), recorder=open_snapshot(run)) as web:
        assert [as_bytes(web.search(q, 2)) for q in ("a", "b")] == [as_bytes(hits) for hits in live]
        with pytest.raises(ReplayMissError):
            web.search("from another run", 2)

    first = snapshot / min(manifest["entries"])
    original = first.read_bytes()
    first.write_bytes(original.replace(b'"One"', b'"0ne"'))
    with pytest.raises(DamagedRecordingError, match="SHA-256 does not match the snapshot's manifest") as raised:
        open_snapshot(run)
    assert raised.value.path == first
    first.write_bytes(original)
    recorder = open_snapshot(run)
    first.write_bytes(original.replace(b'"One"', b'"0ne"'))  # edited after it was opened: caught when read
    with Web(recording(stub.spec, tmp_path / "none", "off"), recorder=recorder) as web, \
            pytest.raises(DamagedRecordingError, match=first.name):
        for q in ("a", "b"):
            web.search(q, 2)
    first.write_bytes(original)
    planted = snapshot / "searxng" / "ab" / ("ab" * 32 + ".json")
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text("{}")
    with pytest.raises(DamagedRecordingError, match="not listed"):
        open_snapshot(run)
    planted.unlink()
    first.unlink()
    with pytest.raises(DamagedRecordingError, match="missing"):
        open_snapshot(run)
    with pytest.raises(DamagedRecordingError, match="no snapshot manifest"):
        open_snapshot(tmp_path / "nowhere")


def test_identical_calls_in_flight_make_one_request(tmp_path):
    started = threading.Event()

    def slow(request):
        started.set()
        threading.Event().wait(0.3)

    with ProviderStub("searxng", HITS, on_request=slow) as stub, Web(recording(stub.spec, tmp_path, "record")) as web, \
            web_meter() as meter:
        results = [None, None]

        def search(i):
            results[i] = web.search("same", 2)

        threads = [threading.Thread(target=contextvars.copy_context().run, args=(search, i)) for i in range(2)]
        threads[0].start()
        started.wait(5)
        threads[1].start()
        for t in threads:
            t.join()
    assert results[0] == results[1] == list(HITS) and len(stub.requests) == 1
    assert sorted(c.replayed for c in meter.calls) == [False, True]


def test_concurrent_recorders_of_one_call_serve_what_the_first_wrote(tmp_path):
    """Two recorders (two processes' worth: no shared flight) ask the same call at once and get different
    replies; the first written wins, and both callers are served it, so a replay serves what they were."""
    both_in = threading.Barrier(2, timeout=5)
    answers = iter([[HITS[0]], [HITS[1]]])
    lock = threading.Lock()

    def differ(request):
        both_in.wait()
        with lock:
            return next(answers)

    with ProviderStub("searxng", HITS, on_request=differ) as stub:
        webs = [Web(recording(stub.spec, tmp_path, "record")) for _ in range(2)]
        got = [None, None]
        threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, webs[i].search("same", 2))) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with Web(recording(stub.spec, tmp_path, "replay")) as web:
            replayed = web.search("same", 2)
    assert len(stub.requests) == 2 and got[0] == got[1] == replayed
    assert len(entries(tmp_path)) == 1 and not list(tmp_path.rglob(".*tmp*"))


def test_a_planted_key_is_in_no_file_the_room_writes_nor_in_any_message(tmp_path, monkeypatch):
    monkeypatch.setenv("BRAVE_API_KEY", KEY)
    messages = []
    with ProviderStub("brave", HITS, key=KEY) as stub:
        settings = recording(stub.spec, tmp_path / "rec", "record", retries=0)
        recorder = WebRecorder(tmp_path / "rec", "record")
        with Web(settings, recorder=recorder) as web, web_meter() as meter, warnings.catch_warnings(record=True) as caught:
            web.search("alpha", 2)
            stub.fail("echo-key", "500", "invalid-json")
            for _ in range(3):
                with pytest.raises(WebError) as raised:
                    web.search(f"fails {_}", 2)
                messages.append(str(raised.value))
            messages += [repr(web), repr(web.provider), repr(settings), repr(recorder), str(meter.calls)]
            messages += [str(w.message) for w in caught]
            with pytest.raises(TypeError):
                pickle.dumps(web.provider.key)
        assert stub.requests[1].headers["x-subscription-token"] == KEY  # it was sent, and echoed back
        recorder.export_snapshot(tmp_path / "run")
    assert "invalid API key" in messages[0] and "***" in messages[0]
    forms = (KEY, KEY.replace("-", "%2D"))
    assert not [m for m in messages if any(f in m for f in forms)]
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) >= 3
    assert not [p for p in written if any(f.encode() in p.read_bytes() for f in forms)]


def test_the_error_of_a_failed_live_call_in_record_mode_is_not_recorded(tmp_path):
    with ProviderStub("searxng", HITS) as stub, Web(recording(stub.spec, tmp_path, "record", retries=0)) as web:
        stub.fail("500")
        with pytest.raises(HTTPStatusError):
            web.search("q", 2)
        assert entries(tmp_path) == []
        assert web.search("q", 2) == list(HITS)
