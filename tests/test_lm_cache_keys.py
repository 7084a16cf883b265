"""Caches never serve another server's replies, nor a reply that failed to parse, nor an edited entry.

Two scripted OpenAI-compatible servers on loopback (``stub_openai.StubServer``) answer differently
and count their requests, so each test sees which server a reply came from; DSPy's request cache
lives in this test's tmp folder (memory and disk), and a fresh process reads the same disk cache.
"""

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import dspy
import pytest
import questions
from online_server import fresh_dspy_cache
from questions import Question
from stub_openai import StubServer

from roma_lab.lm import CachingEngine, CorruptCacheEntryError, ReplayEngine, ScriptedEngine, resolve_lm

NAME = "openai/served"
FROM_A, FROM_B = '{"answer": "from A"}', '{"answer": "from B"}'
# The fresh process: the same question at the server named by $ROMA_LAB_API_BASE, through the same cache.
ASK = """
import dspy
from roma_lab.lm import resolve_lm
with dspy.context(lm=resolve_lm("openai/served", num_retries=0), adapter=dspy.JSONAdapter()):
    print(dspy.Predict("question -> answer")(question="Which server?").answer)
"""


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """DSPy's request cache (memory and disk) and roma_lab's cache in tmp, no server named by the environment."""
    monkeypatch.setenv("DSPY_CACHEDIR", str(tmp_path / "dspy-cache"))
    monkeypatch.setenv("ROMA_LAB_CACHE", str(tmp_path / "roma-cache"))
    for name in ("ROMA_LAB_LM", "ROMA_LAB_API_BASE", "ROMA_LAB_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    try:  # what each server said it serves is kept per process: a port used again by another test is another server
        from roma_lab.lm import _server
    except ImportError:  # the code before ServerLM: the tests below then show what it did
        _server = None
    if _server is not None:
        monkeypatch.setattr(_server, "_identities", {})
    with fresh_dspy_cache(tmp_path / "dspy-cache", monkeypatch):
        yield


def ask(lm, question="Which server?"):
    return questions.ask(lm, question)


def ask_in_a_fresh_process(api_base: str) -> str:
    env = {**os.environ, "ROMA_LAB_API_BASE": api_base, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", ASK], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


# --- the server is part of DSPy's key -------------------------------------------------------------


def test_the_same_model_name_at_another_server_reaches_that_server_in_memory(monkeypatch):
    with StubServer([FROM_A]) as a, StubServer([FROM_B]) as b:
        monkeypatch.setenv("ROMA_LAB_API_BASE", a.api_base)
        assert ask(resolve_lm(NAME)) == "from A" and ask(resolve_lm(NAME)) == "from A"
        assert len(a.completions) == 1  # the cache still serves a repeated request
        monkeypatch.setenv("ROMA_LAB_API_BASE", b.api_base)
        assert ask(resolve_lm(NAME)) == "from B"  # before: "from A", and B got no request
        assert (len(a.completions), len(b.completions)) == (1, 1)
        monkeypatch.delenv("ROMA_LAB_API_BASE")
        assert ask(resolve_lm(NAME, api_base=a.api_base)) == "from A"  # api_base= alike; A's entry still serves
        assert ask(resolve_lm(NAME, api_base=b.api_base)) == "from B"
        assert (len(a.completions), len(b.completions)) == (1, 1)


def test_the_same_model_name_at_another_server_reaches_that_server_from_the_disk_cache():
    with StubServer([FROM_A]) as a, StubServer([FROM_B]) as b:
        assert ask(resolve_lm(NAME, api_base=a.api_base)) == "from A"
        assert ask_in_a_fresh_process(b.api_base) == "from B"  # before: A's reply, from disk
        assert ask_in_a_fresh_process(a.api_base) == "from A"  # A's entry on disk still serves
        assert (len(a.completions), len(b.completions)) == (1, 1)


def test_a_call_that_misses_dspys_cache_looks_it_up_once_and_stores_its_reply(monkeypatch):
    # issue 53 item 7: DSPy's execute looked the key up again after RemoteLM's own lookup had missed
    lookups = []
    real_get = dspy.cache.get
    monkeypatch.setattr(dspy.cache, "get", lambda *args, **kwargs: lookups.append(1) or real_get(*args, **kwargs))
    with StubServer([FROM_A]) as a:
        lm = resolve_lm(NAME, api_base=a.api_base)
        assert ask(lm) == "from A" and len(lookups) == 1
        assert ask(lm) == "from A" and len(lookups) == 2  # stored: served from the cache, no request
        assert len(a.completions) == 1
        assert ask_in_a_fresh_process(a.api_base) == "from A" and len(a.completions) == 1  # on disk too


def test_a_server_restarted_on_another_model_at_the_same_address_is_asked_again():
    one = [{"id": "/models/one.gguf", "object": "model", "created": 1, "meta": {"n_params": 135}}]
    two = [{"id": "/models/two.gguf", "object": "model", "created": 2, "meta": {"n_params": 1500}}]
    with StubServer([FROM_A], models=one) as first:
        assert ask(resolve_lm(NAME, api_base=first.api_base)) == "from A"  # llama.cpp: any name, its one file
        port, base = first.port, first.api_base
    with StubServer([FROM_B], models=two, port=port) as second:
        assert ask_in_a_fresh_process(base) == "from B"  # the server says it serves another file
        assert len(second.completions) == 1
    with StubServer([FROM_B], models=[{**one[0], "created": 99}], port=port) as again:
        # the same file again ("created" changes with every listing, so it is not part of the identity)
        assert ask_in_a_fresh_process(base) == "from A" and len(again.completions) == 0


def test_a_server_without_a_model_list_is_keyed_by_its_address_and_asked_once_per_process():
    with StubServer([FROM_A], models=None) as a, StubServer([FROM_B], models=None) as b:
        lm = resolve_lm(NAME, api_base=a.api_base)
        answers = [ask(lm), ask(lm, "again?"), ask(resolve_lm(NAME, api_base=b.api_base))]
        assert answers == ["from A", "from A", "from B"]
        from roma_lab.lm._server import UNKNOWN, server_identity

        assert server_identity(a.api_base, "served") == UNKNOWN and a.model_lists == 1


def test_a_server_that_never_lists_its_models_is_asked_once_within_the_bound(monkeypatch):
    monkeypatch.setattr("roma_lab.lm._server.MODELS_TIMEOUT_S", 0.5)
    with StubServer([FROM_A], models=[{"id": "served"}], hold_models=threading.Event()) as a:
        lm = resolve_lm(NAME, api_base=a.api_base)
        assert [ask(lm), ask(lm, "again?"), ask(lm)] == ["from A", "from A", "from A"]
        assert (a.model_lists, len(a.completions)) == (1, 2)  # recorded as unknown: not asked at every call
        from roma_lab.lm._server import UNKNOWN, server_identity

        assert server_identity(a.api_base, "served") == UNKNOWN  # not the list it would send after its hold


def test_a_server_that_cannot_be_reached_is_not_recorded_and_its_calls_fail_with_dspys_error():
    from roma_lab.lm._server import server_identity

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    base = f"http://127.0.0.1:{port}/v1"
    assert server_identity(base, "served") is None
    with pytest.raises(Exception, match="(?i)connect"):
        ask(resolve_lm(NAME, api_base=base, num_retries=0))
    with StubServer([FROM_A], models=[{"id": "served"}], port=port) as up:
        assert ask(resolve_lm(NAME, api_base=base)) == "from A" and up.model_lists == 1  # asked now it answers
        assert server_identity(base, "served") == [{"id": "served"}]


# --- a reply that failed to parse is never served again -------------------------------------------


def test_a_reply_that_failed_to_parse_is_removed_from_dspys_memory_and_disk_cache():
    with StubServer(["I cannot answer in JSON.", '{"answer": "Paris"}']) as server:
        lm = resolve_lm(NAME, api_base=server.api_base, num_retries=0)
        with pytest.raises(Exception, match="(?i)parse|json"):
            ask(lm, "Capital of France?")
        assert ask(lm, "Capital of France?") == "Paris" and len(server.completions) == 2  # before: the garbage again
    with StubServer(["Not JSON either.", '{"answer": "Rome"}']) as server:
        lm = resolve_lm(NAME, api_base=server.api_base, num_retries=0)
        with pytest.raises(Exception, match="(?i)parse|json"):
            ask(lm, "Capital of Italy?")
        dspy.cache.reset_memory_cache()  # what a fresh process sees: the disk cache
        assert ask(lm, "Capital of Italy?") == "Rome" and len(server.completions) == 2
        assert ask(lm, "Capital of Italy?") == "Rome" and len(server.completions) == 2  # a good reply stays cached
    from roma_lab.lm._unparsed import ForgetUnparsed

    assert not any(isinstance(c, ForgetUnparsed) for c in dspy.settings.get("callbacks") or [])  # ended with the call


def test_a_reply_that_failed_to_parse_under_dspys_own_chat_adapter_is_removed_too():
    # No adapter set (as the graders' judges): Predict makes a ChatAdapter, which falls back to JSON.
    chat_reply = "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"
    with StubServer(["No markers here.", "Nor JSON here.", chat_reply]) as server:
        lm = resolve_lm(NAME, api_base=server.api_base, num_retries=0)
        with pytest.raises(Exception, match="(?i)parse|json"):
            with dspy.context(lm=lm):
                dspy.Predict(Question)(question="Capital of France?")
        assert len(server.completions) == 2  # the chat request, then the JSON fallback
        with dspy.context(lm=lm):
            assert dspy.Predict(Question)(question="Capital of France?").answer == "Paris"
        assert len(server.completions) == 3  # before: both garbage replies served again


@pytest.mark.parametrize("mode", ["JSON adapter, sync", "DSPy's own adapter, async"])
def test_a_reply_that_failed_to_parse_is_removed_from_the_completion_cache(mode, tmp_path):
    from roma_lab.lm import AsyncEngine

    # The JSON adapter makes one call; DSPy's ChatAdapter a second, its JSON fallback.
    garbage = ["I cannot answer."] if mode.startswith("JSON") else ["I cannot answer.", "Nor in JSON."]
    replies = iter([*garbage, {"answer": "Paris"}])
    engine = ScriptedEngine(lambda request: next(replies))
    cached = CachingEngine(engine, model_id="fake", directory=tmp_path)
    lm = dspy.LM("local/fake", engine=cached, async_engine=AsyncEngine(cached), cache=False)

    def run():
        if mode.startswith("JSON"):
            return ask(lm, "Capital of France?")

        async def predict():
            with dspy.context(lm=lm):
                return (await dspy.Predict(Question).acall(question="Capital of France?")).answer

        return asyncio.run(predict())

    with pytest.raises(Exception, match="(?i)parse|json"):
        run()
    assert len(engine.requests) == len(garbage) and list(tmp_path.rglob("*.json")) == []  # before: kept
    assert run() == "Paris" and len(engine.requests) == len(garbage) + 1
    assert run() == "Paris" and len(engine.requests) == len(garbage) + 1  # a reply that parses stays cached


def test_identical_requests_in_flight_together_share_one_reply_so_a_replay_is_the_run(tmp_path):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    # Two identical requests generated side by side can differ (llama.cpp reuses another prefix for
    # each); the model here answers each call differently and holds the first until a second arrives.
    second = threading.Event()
    answers = iter(["1976", "1977"])

    def respond(request):
        if not second.is_set() and len(engine.requests) > 1:
            second.set()
        second.wait(timeout=1.0)
        return {"answer": next(answers)}

    engine = ScriptedEngine(respond)
    lm = dspy.LM("local/fake", engine=CachingEngine(engine, model_id="fake", directory=tmp_path), cache=False)
    with ThreadPoolExecutor(2) as pool:
        served_now = list(pool.map(lambda _: ask(lm, "Which year?"), range(2)))
    assert len(engine.requests) == 1  # before: 2, and the run saw 1976 and 1977
    assert served_now == ["1976", "1976"]
    assert replay_of(tmp_path, "Which year?") == "1976"  # what the run was served, not what was written last


def test_a_failed_request_in_flight_fails_its_twin_and_the_next_one_asks_again(tmp_path, monkeypatch):
    import threading
    from concurrent.futures import Future, ThreadPoolExecutor

    from roma_lab.lm import _cache

    twin_waits, calls = threading.Event(), []

    class Flight(Future):  # says when the twin waits on the first request's reply
        def result(self, timeout=None):
            twin_waits.set()
            return super().result(timeout)

    monkeypatch.setattr(_cache, "Future", Flight)

    def respond(request):
        calls.append(request)
        if len(calls) == 1:
            twin_waits.wait(timeout=2.0)
            raise TimeoutError("the model took too long")
        return {"answer": "42"}

    engine = ScriptedEngine(respond)
    cached = CachingEngine(engine, model_id="fake", directory=tmp_path)
    lm = dspy.LM("local/fake", engine=cached, cache=False)

    def one(i):
        try:
            return ask(lm, "Six times seven?")
        except Exception as exc:  # DSPy wraps the engine's error
            return type(exc).__name__

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(one, range(2)))
    assert "42" not in outcomes and len(calls) == 1  # the twin was not served a reply nobody generated
    assert ask(lm, "Six times seven?") == "42" and len(calls) == 2  # nothing recorded, nothing stuck in flight


# --- completion-cache entries are checked against what they store ----------------------------------


def recorded(directory: Path) -> Path:
    lm = dspy.LM("local/fake", engine=CachingEngine(ScriptedEngine(lambda r: {"answer": "42"}), model_id="fake",
                                                    directory=directory), cache=False)
    assert ask(lm, "Six times seven?") == "42"
    (entry,) = directory.rglob("*.json")
    return entry


def edit(entry: Path, change) -> None:
    data = json.loads(entry.read_text())
    change(data)
    entry.write_text(json.dumps(data))


EDITS = {
    "reply text edited, key kept": lambda d: d.update(text='{"answer": "41"}'),
    "request edited, key kept": lambda d: d["request"]["messages"][-1].update(content="Six times eight?"),
    "token counts edited": lambda d: d.update(output_tokens=d["output_tokens"] + 1),
    "recorded without a digest": lambda d: d.pop("digest", None),  # as the code before digests wrote it
    "request edited, digest recomputed": lambda d: _redigest(d["request"]["messages"][-1].update(content="8 x 6?"), d),
    "recorded latency edited": lambda d: d.update(latency_s=d["latency_s"] + 1),
    "recorded latency removed, digest kept": lambda d: d.pop("latency_s"),
    "recording time moved later, digest kept": lambda d: d.update(recorded_at=d["recorded_at"] + 3600),
    "recording time removed, digest kept": lambda d: d.pop("recorded_at"),
}


def _redigest(_, data: dict) -> None:
    """The digest made consistent again: only the key, recomputed from the request, tells."""
    from roma_lab.lm._cache import entry_digest

    data["digest"] = entry_digest(data)


def replay(directory: Path) -> str:
    return ask(dspy.LM("local/fake", engine=ReplayEngine(model_id="fake", directory=directory), cache=False),
               "Six times seven?")


def damaged_in(exc: BaseException) -> CorruptCacheEntryError | None:
    while exc is not None and not isinstance(exc, CorruptCacheEntryError):
        exc = exc.__cause__ or exc.__context__
    return exc


@pytest.mark.parametrize("name", EDITS)
def test_an_edited_entry_is_regenerated_by_caching_and_named_by_replay(name, tmp_path):
    from roma_lab.results import QuarantineWarning

    entry = recorded(tmp_path)
    edit(entry, EDITS[name])
    edited = entry.read_bytes()
    with pytest.raises(Exception) as info:
        replay(tmp_path)  # before: "41" served, or the edit went unnoticed
    damaged = damaged_in(info.value)
    assert damaged is not None and damaged.path == entry and str(entry) in str(damaged)
    assert entry.read_bytes() == edited  # replay never changes the recording
    fresh = ScriptedEngine(lambda r: {"answer": "42"})
    with pytest.warns(QuarantineWarning, match="damaged completion cache entry"):
        again = ask(dspy.LM("local/fake", engine=CachingEngine(fresh, model_id="fake", directory=tmp_path),
                            cache=False), "Six times seven?")
    assert again == "42" and len(fresh.requests) == 1
    assert [p.read_bytes() for p in entry.parent.glob(f"{entry.name}.quarantined-*")] == [edited]
    assert replay(tmp_path) == "42"  # the regenerated entry verifies


def _old_digest(data: dict) -> str:
    """The digest as the code before recorded latencies computed it (every field but the digest)."""
    import hashlib

    fields = {k: v for k, v in data.items() if k != "digest"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def replay_of(directory: Path, question: str) -> str:
    """The recorded answer to ``question``, replayed."""
    return ask(dspy.LM("local/fake", engine=ReplayEngine(model_id="fake", directory=directory), cache=False), question)


def served(directory: Path) -> dict:
    """The provider data of the replayed reply to the recorded question."""
    lm = dspy.LM("local/fake", engine=ReplayEngine(model_id="fake", directory=directory), cache=False)
    assert ask(lm, "Six times seven?") == "42"
    return lm.history[-1]["response"].provider_data


def test_an_entry_records_its_generation_time_and_when_and_a_replay_serves_both(tmp_path):
    import time

    slow = ScriptedEngine(lambda r: {"answer": "42"}, latency_s=0.2)
    lm = dspy.LM("local/fake", engine=CachingEngine(slow, model_id="fake", directory=tmp_path), cache=False)
    before = time.time()
    assert ask(lm, "Six times seven?") == "42"
    after = time.time()
    (entry,) = tmp_path.rglob("*.json")
    data = json.loads(entry.read_text())
    assert 0.2 <= data["latency_s"] < 1.0  # measured around the model's call
    assert before + 0.2 <= data["recorded_at"] <= after  # written once the reply came
    assert served(tmp_path) == {"cache_hit": True, "latency_s": data["latency_s"], "recorded_at": data["recorded_at"]}


def test_an_entry_written_before_latencies_were_recorded_still_replays_with_its_latency_unknown(tmp_path):
    entry = recorded(tmp_path)

    def as_written_before(data: dict) -> None:
        del data["latency_s"], data["recorded_at"]
        data["digest"] = _old_digest(data)

    edit(entry, as_written_before)
    # before: damaged, as it has no latency
    assert served(tmp_path) == {"cache_hit": True, "latency_s": None, "recorded_at": None}
    assert json.loads(entry.read_text()).get("latency_s") is None  # a replay never changes the recording


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _symlink(path: Path) -> None:
    elsewhere = path.parent.parent / "elsewhere.json"
    os.replace(path.with_name("kept.json"), elsewhere)  # the valid entry, moved out of its place
    path.symlink_to(elsewhere)


def _socket(path: Path) -> None:
    short = Path(tempfile.mkdtemp(dir=path.parent.parent)) / "s"  # a socket's path is limited to 107 bytes
    previous = os.getcwd()
    with socket.socket(socket.AF_UNIX) as server:
        os.chdir(short.parent)
        try:
            server.bind(short.name)
        finally:
            os.chdir(previous)
    os.replace(short, path)


NOT_FILES = {"FIFO": _fifo, "directory": _directory, "symbolic link": _symlink, "socket": _socket}


@pytest.mark.parametrize("kind", NOT_FILES)
def test_an_entry_that_is_not_a_regular_file_is_damaged_and_never_blocks(kind, tmp_path):
    entry = recorded(tmp_path)
    os.replace(entry, entry.with_name("kept.json"))
    NOT_FILES[kind](entry)
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(replay(tmp_path))
        except Exception as exc:  # noqa: BLE001 - inspected below
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=20)  # a hang guard: before, reading a FIFO waited for a writer forever
    if worker.is_alive():  # unblock the reader so the test process can end
        with open(entry, "wb"):
            pass
        pytest.fail(f"reading a {kind} entry blocked")
    damaged = damaged_in(outcome[0]) if isinstance(outcome[0], BaseException) else None
    assert damaged is not None and damaged.path == entry and "not a regular file" in damaged.reason, outcome
    fresh = ScriptedEngine(lambda r: {"answer": "42"})
    with pytest.warns(Warning, match="damaged completion cache entry"):
        again = ask(dspy.LM("local/fake", engine=CachingEngine(fresh, model_id="fake", directory=tmp_path),
                            cache=False), "Six times seven?")
    assert again == "42" and len(fresh.requests) == 1 and entry.is_file() and not entry.is_symlink()


def test_fresh_asks_the_model_again_and_replaces_the_recorded_completion(tmp_path, monkeypatch):
    """Issue 44: a replay is instant and says so; $ROMA_LAB_FRESH (run --fresh) measures instead."""
    from roma_lab.lm._cache import FRESH_ENV

    answers = iter(["41", "42", "43"])
    engine = ScriptedEngine(lambda r: {"answer": next(answers)})
    lm = dspy.LM("local/fake", engine=CachingEngine(engine, model_id="fake", directory=tmp_path), cache=False)
    assert ask(lm, "Six times seven?") == "41" and ask(lm, "Six times seven?") == "41"  # the second: a replay
    monkeypatch.setenv(FRESH_ENV, "1")
    assert ask(lm, "Six times seven?") == "42"  # asked again
    monkeypatch.delenv(FRESH_ENV)
    assert ask(lm, "Six times seven?") == "42"  # and the fresh completion is the recorded one now
