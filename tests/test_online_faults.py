"""Faults on the online path: a real llama.cpp server down at start, killed mid-run, and (through the
fault-injecting proxy, since a real server cannot be told to produce them) HTTP 429 and 500, a reply
that is not JSON, a reply slower than the timeout.

For each: the failure is typed where it lands (the node's error in the saved ROMA trace, the task's
row in evaluate's attempt log), nothing finished is lost, and the rerun resumes once the server
answers again (evaluate retries error rows; DSPy's request cache serves the calls that had succeeded,
so they are not sent again). Retries with back-off are DSPy's (``num_retries``, design/online.md):
the tests count requests, never seconds.
"""

import json

import pytest
from evaluations import attempts
from online_server import (  # noqa: F401 - llama_server, online_isolation and proxy are fixtures
    SERVED_NAME,
    FaultProxy,
    LlamaServer,
    free_port,
    llama_server,
    online_isolation,
    proxy,
)

from roma_lab import bench
from roma_lab.controller import Roma
from roma_lab.evaluate import TaskSet, evaluate, roma
from roma_lab.evaluate._log import read_log_df
from roma_lab.lm import resolve_lm
from roma_lab.trace import load_trace, trace_path

NAME = f"openai/{SERVED_NAME}"
# Two SimpleQA items the greedy small model answers in parseable JSON at depth 0 and 1 (two requests each).
FIRST, SECOND = bench.load_simpleqa()[0], bench.load_simpleqa()[2]


def served(api_base, **kwargs):
    return resolve_lm(NAME, api_base=api_base, max_tokens=24, **kwargs)


EVALUATION = "simpleqa_evaluation"  # the evaluate folder, beside the DSPy cache the fixtures keep in tmp_path


def run_items(lm, out, items=(SECOND,), max_depth=0):
    """ROMA on ``items`` through evaluate (string-match graded); the rows for ``items``."""
    system = roma(lm, label="roma", max_depth=max_depth, max_concurrency=1)
    return evaluate([system], TaskSet("simpleqa", tuple(items)), bench.StringMatchGrader(), out=out / EVALUATION,
                    progress=False).rows


def rows_on_disk(out):
    """Every row ever written (the log keeps an error row and, after the rerun, the task's new row)."""
    return len(attempts(out / EVALUATION))


def saved_trace(out, item=SECOND):
    return load_trace(trace_path(out / EVALUATION, "roma", 0, item.item_id))


FAULTS = {  # kind -> (proxy fault, extra LM settings, what the trace and the row name)
    "429": ({}, {}, "LMRateLimitError"),
    "500": ({}, {}, "LMServerError"),
    "malformed": ({}, {}, "Unterminated string"),
    "slow": ({"hold_s": 300.0}, {"timeout": 2}, "LMTimeoutError"),  # held until teardown: past any timeout
}


@pytest.mark.parametrize("kind", list(FAULTS))
def test_an_http_fault_is_typed_in_trace_and_row_and_the_rerun_resumes(kind, proxy, tmp_path):
    fault, settings, named = FAULTS[kind]
    lm = served(proxy.api_base, num_retries=1, **settings)
    proxy.inject(kind, **fault)
    row = run_items(lm, tmp_path).iloc[0]

    assert row["error_stage"] == "system" and named in row["error"] and row["error"].startswith("RomaRunError")
    assert row["status"] == "system_error" and row["trace"] is not None
    trace = saved_trace(tmp_path)  # the failed run is kept beside the row
    failed = trace.root.calls[-1]
    assert trace.status == "failed" and named in trace.root.error and named in failed.error
    assert failed.cost is None and failed.model == NAME
    assert [e.fault for e in proxy.exchanges] == [kind, kind]  # one try and DSPy's one retry, both failed

    proxy.inject(None)  # the server answers again
    again = run_items(lm, tmp_path).iloc[0]
    assert again["error_stage"] is None and again["label"] in ("CORRECT", "INCORRECT", "NOT_ATTEMPTED")
    assert saved_trace(tmp_path).status == "completed"
    assert rows_on_disk(tmp_path) == 2  # the error row is kept in the log; the table shows the latest
    assert len(read_log_df(tmp_path / EVALUATION / "attempts.csv")) == 1


@pytest.mark.parametrize("kind", ["429", "500"])
def test_a_transient_fault_is_retried_with_backoff_and_the_call_succeeds(kind, proxy):
    lm = served(proxy.api_base)  # resolve_lm gives remote models num_retries=5
    proxy.inject(kind, times=1)
    run = Roma(lm=lm, max_depth=0).run(SECOND.question)
    assert run.status == "completed"
    assert [e.fault for e in proxy.exchanges] == [kind, None]
    (call,) = run.root.calls  # one role call; its tokens are those of the reply that came through
    usage = proxy.exchanges[1].response["usage"]
    assert (call.input_tokens, call.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])


def test_a_role_call_past_the_runs_time_limit_fails_its_node_and_a_new_run_completes(proxy):
    lm = served(proxy.api_base, num_retries=0)
    proxy.inject("slow", hold_s=300.0)
    run = Roma(lm=lm, max_depth=0, call_timeout_s=2).run(SECOND.question)
    assert run.status == "failed" and run.root.error == "executor:think: timed out after 2 s"
    (call,) = run.root.calls
    assert call.error.startswith("timed out after 2 s") and (call.input_tokens, call.cost) == (None, None)

    proxy.inject(None)
    assert Roma(lm=lm, max_depth=0, call_timeout_s=60).run(SECOND.question).status == "completed"


def test_a_server_down_at_start_fails_the_item_typed_and_the_rerun_completes_once_it_is_up(tmp_path):
    server = LlamaServer(tmp_path, port=free_port())  # nothing listens there yet
    lm = served(server.api_base, num_retries=1)
    row = run_items(lm, tmp_path).iloc[0]
    assert row["error_stage"] == "system" and "LMServerError" in row["error"] and "Connection error" in row["error"]
    assert "Connection error" in saved_trace(tmp_path).root.calls[0].error

    server.start()
    try:
        again = run_items(lm, tmp_path).iloc[0]
    finally:
        server.stop()
    assert again["error_stage"] is None and saved_trace(tmp_path).status == "completed"


def test_a_server_killed_mid_run_loses_nothing_and_the_rerun_sends_only_what_failed(tmp_path, monkeypatch):
    monkeypatch.setenv("ROMA_LAB_MAX_CONCURRENCY", "1")  # the tasks one after the other: the requests in order
    server = LlamaServer(tmp_path).start()
    try:
        with FaultProxy(server.port) as watcher:
            # Depth 1: each item is an atomizer then an executor request. The server dies when the
            # fourth request arrives: after the first item and the second item's atomizer.
            watcher.on_request(lambda n: server.stop() if n == 4 else None)
            lm = served(watcher.api_base, num_retries=1)
            rows = run_items(lm, tmp_path, items=(FIRST, SECOND), max_depth=1)

            assert rows["error"].isna().tolist() == [True, False]
            assert "LMServerError" in rows.iloc[1]["error"] and "Connection error" in rows.iloc[1]["error"]
            trace = saved_trace(tmp_path, SECOND)
            atomizer, executor = trace.root.calls
            assert atomizer.error is None and executor.error.startswith("LMServerError")
            sent_before = [e.request for e in watcher.exchanges]
            usage = watcher.exchanges[2].response["usage"]  # the atomizer's reply came through: its tokens are kept
            assert (atomizer.input_tokens, atomizer.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])

            server.start()  # same port: the server is back
            rows = run_items(lm, tmp_path, items=(FIRST, SECOND), max_depth=1)
            resent = [e.request for e in watcher.exchanges[len(sent_before):]]
    finally:
        server.stop()
    assert rows["error"].isna().all() and saved_trace(tmp_path, SECOND).status == "completed"
    # Only the failed executor request went out again: the first item was not rerun, and the second
    # item's atomizer reply came from DSPy's request cache.
    assert len(resent) == 1 and json.dumps(resent[0], sort_keys=True) == json.dumps(sent_before[3], sort_keys=True)
    assert rows_on_disk(tmp_path) == 3
