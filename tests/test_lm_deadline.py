"""Issue 41: a server that drips its reply or stalls ends each call within its total deadline, as a
typed error row (no network: servers on 127.0.0.1 only)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler

import pandas as pd
import pytest
from online_server import LoopbackServer, online_isolation  # noqa: F401 - online_isolation is a fixture

from roma_lab.evaluate import evaluate, single_call
from roma_lab.lm import ModelCallDeadlineError, call_deadline_s, resolve_lm


class DripServer(LoopbackServer):
    """Answers every completion with headers, then one byte every ``every_s`` seconds, never ending
    (until the test closes it): no HTTP read timeout ever fires."""

    def __init__(self, every_s: float = 0.2):
        self.stop = threading.Event()
        stop = self.stop

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # no model list: the server names nothing
                self.send_response(404)
                self.end_headers()

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "1000000")
                self.end_headers()
                try:
                    while not stop.wait(every_s):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                except OSError:  # the client gave up: its connection is closed
                    pass

        super().__init__(Handler, name="drip")

    def _release(self) -> None:
        self.stop.set()


def test_a_dripping_server_ends_a_default_single_call_run_with_error_rows_within_the_deadline(tmp_path, monkeypatch):
    with DripServer() as server:
        monkeypatch.setenv("ROMA_LAB_API_BASE", server.api_base)
        monkeypatch.setenv("ROMA_LAB_CALL_DEADLINE_S", "1.5")
        tasks = [{"id": f"t{i}", "question": f"q{i}?", "answer": "a"} for i in range(2)]
        import dspy  # noqa: F401 - imported before the clock starts: importing takes seconds

        started, box = time.monotonic(), {}
        # on a thread, so that a deadline broken again fails this test instead of hanging the suite
        worker = threading.Thread(target=lambda: box.update(result=evaluate(
            [single_call("openai/drip")], tasks, out=tmp_path, progress=False)), daemon=True)
        worker.start()
        worker.join(60)
        took = time.monotonic() - started
        assert not worker.is_alive(), "a call to a dripping server did not end within 60 s"
        result = box["result"]
    assert list(result.rows["status"]) == ["system_error", "system_error"]
    assert result.rows["error"].str.contains("ModelCallDeadlineError").all()
    assert took < 30, took  # each call ended at its deadline of 1.5 s (with start-up on a busy machine), not never
    assert result.summary().iloc[0]["n"] == 2 and result.summary().iloc[0]["value"] == 0.0


def test_the_deadline_is_per_model_then_per_run_then_the_default(monkeypatch):
    monkeypatch.delenv("ROMA_LAB_CALL_DEADLINE_S", raising=False)
    assert call_deadline_s() == 300.0 and call_deadline_s(7) == 7.0
    monkeypatch.setenv("ROMA_LAB_CALL_DEADLINE_S", "20")
    assert call_deadline_s() == 20.0 and call_deadline_s(7) == 7.0
    for bad in (0, -1, float("inf"), float("nan"), True):
        with pytest.raises(ValueError, match="deadline"):
            call_deadline_s(bad)
    monkeypatch.setenv("ROMA_LAB_CALL_DEADLINE_S", "soon")
    with pytest.raises(ValueError, match="ROMA_LAB_CALL_DEADLINE_S"):
        call_deadline_s()
    with pytest.raises(ValueError, match="deadline"):
        resolve_lm("openai/x", deadline_s=-3)


def test_a_model_named_with_its_own_deadline_keeps_it_in_copies_and_an_async_call_is_cancelled(monkeypatch):
    import asyncio

    with DripServer() as server:
        monkeypatch.setenv("ROMA_LAB_API_BASE", server.api_base)
        lm = resolve_lm("openai/drip", deadline_s=0.8, cache=False).copy(temperature=0.5)
        assert lm.deadline_s == 0.8
        started = time.monotonic()
        with pytest.raises(ModelCallDeadlineError, match="0.8 s"):
            lm("hello")
        with pytest.raises(ModelCallDeadlineError):
            asyncio.run(lm.acall("hello"))
        assert time.monotonic() - started < 8


# --- usage outside its domain (issue 41) -----------------------------------------------------------


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": -5, "completion_tokens": 3, "total_tokens": -2},
    {"prompt_tokens": 10**15, "completion_tokens": 3, "total_tokens": 10**15 + 3},
])
def test_usage_outside_its_domain_is_unknown_never_a_number_and_never_fails_a_run(tmp_path, monkeypatch, usage):
    """(A count that is not a number never reaches roma_lab: LiteLLM refuses the reply, an error row.)"""
    from stub_openai import StubServer

    from roma_lab.controller import Roma
    from roma_lab.lm import UsageWarning

    answer = '{"reasoning": "2 and 2", "output": "4", "answer": "4"}'  # a single call's and ROMA's fields
    with StubServer([answer], usage=usage) as server:
        monkeypatch.setenv("ROMA_LAB_API_BASE", server.api_base)
        with pytest.warns(UsageWarning, match="not a token count"):
            result = evaluate([single_call("openai/odd")], [{"id": "t", "question": "2+2?", "answer": "4"}],
                              out=tmp_path, progress=False)
        row = result.rows.iloc[0]
        assert row["status"] == "correct" and pd.isna(row["input_tokens"]) and row["output_tokens"] == 3
        # under ROMA the same reply is a completed run with the token count unknown (was InvalidRunError)
        with pytest.warns(UsageWarning):
            run = Roma(lm=resolve_lm("openai/odd", cache=False), max_depth=0).run("2+2?")
    assert run.status == "completed" and run.root.calls[0].input_tokens is None


def test_call_usage_refuses_every_count_outside_the_domain_of_a_count():
    from roma_lab.lm import UsageWarning, call_usage

    for bad in (-1, 1.5, float("nan"), "3", True, 10**12):
        with pytest.warns(UsageWarning):
            usage = call_usage({"m": {"prompt_tokens": bad, "completion_tokens": 2}}, [])
        assert usage.input_tokens is None and usage.output_tokens == 2
    with pytest.warns(UsageWarning, match="cost"):
        assert call_usage({"openai/m": {"prompt_tokens": 1}}, [{"model": "openai/m", "cost": -0.5}]).cost is None


def test_a_reply_of_megabytes_is_cut_marked_and_warned_about(monkeypatch):
    from stub_openai import StubServer

    from roma_lab.lm._server import MAX_REPLY_CHARS, ReplyCutWarning

    with StubServer(["x" * (MAX_REPLY_CHARS * 5)]) as server:
        monkeypatch.setenv("ROMA_LAB_API_BASE", server.api_base)
        with pytest.warns(ReplyCutWarning, match="was cut"):
            (reply,) = resolve_lm("openai/huge", cache=False)("hello")
    text = reply if isinstance(reply, str) else reply["text"]
    assert len(text) < MAX_REPLY_CHARS + 100 and text.endswith(f"<cut: the reply had {MAX_REPLY_CHARS * 5:,} characters>")
