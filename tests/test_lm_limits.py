"""roma_lab.lm's request bounds, retries and rollout ids: every request holds one of its model's
``max_concurrency`` slots while in flight (in-process engines and remote models, sync and async; a
cache hit holds none), a 429 is retried with back-off and then fails clearly, and a request inside
``lm.rollout(id)`` is keyed (and, remote, seeded) by that rollout.

Remote models are called at servers on 127.0.0.1 (``stub_openai.StubServer``, a server that
answers slowly counting the requests it holds, and ``online_server.FaultProxy``); no model runs.
"""

import asyncio
import threading
import time
import uuid

import dspy
import pytest
from online_server import FaultProxy, fresh_dspy_cache
from questions import aask, ask
from stub_openai import StubServer

from roma_lab.lm import (
    DEFAULT_REMOTE_CONCURRENCY,
    LIMIT_ENV,
    AsyncEngine,
    CachingEngine,
    LlamaEngine,
    ReplayEngine,
    ScriptedEngine,
    current_rollout,
    max_concurrency,
    replay_lm,
    resolve_lm,
    rollout,
    rollout_seed,
    scripted_lm,
    set_max_concurrency,
)
from roma_lab.lm._limits import request_slot


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """DSPy's request cache and roma_lab's cache in tmp, no model, server or limit from the environment,
    no limit set by another test."""
    monkeypatch.setenv("ROMA_LAB_CACHE", str(tmp_path / "roma-cache"))
    for name in ("ROMA_LAB_LM", "ROMA_LAB_API_BASE", "ROMA_LAB_API_KEY", LIMIT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("roma_lab.lm._limits._overrides", {})
    monkeypatch.setattr("roma_lab.lm._server._identities", {})
    with fresh_dspy_cache(tmp_path / "dspy-cache", monkeypatch):
        yield


def unique(prefix: str) -> str:
    """A model name no other test shares: limits are per name, process-wide."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class InFlight:
    """Counts the calls inside ``hold()`` at once; ``peak`` is the most there ever were."""

    def __init__(self, hold_s: float = 0.25):  # long enough for every started thread to overlap, on a busy machine
        self.hold_s, self.now, self.peak = hold_s, 0, 0
        self._lock = threading.Lock()

    def hold(self) -> None:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(self.hold_s)
        with self._lock:
            self.now -= 1

    def respond(self, request):
        self.hold()
        return {"answer": "ok"}


def on_threads(fn, n: int, timeout_s: float = 60.0) -> list:
    """``fn(i)`` for i < n, each on its own thread, all started at once; their results in order."""
    results, errors = [None] * n, []

    def run(i):
        try:
            results[i] = fn(i)
        except Exception as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    assert not any(t.is_alive() for t in threads), "a call never returned"
    if errors:
        raise errors[0]
    return results


# --- the bound, in-process ------------------------------------------------------------------------


def test_threads_hold_at_most_the_engines_slots_at_once():
    flight = InFlight()
    lm = scripted_lm(flight.respond, name=unique("scripted/sync"), slots=3)
    on_threads(lambda i: ask(lm, f"q{i}"), 12)
    assert max_concurrency(lm) == 3 and flight.peak == 3


def test_async_calls_hold_at_most_the_engines_slots_at_once():
    flight = InFlight()
    lm = scripted_lm(flight.respond, name=unique("scripted/async"), slots=2)

    async def main():
        await asyncio.gather(*(aask(lm, f"q{i}") for i in range(10)))

    asyncio.run(main())
    assert flight.peak == 2


def test_a_limit_set_for_the_name_overrides_the_slots_and_a_later_one_holds_for_new_requests():
    flight = InFlight()
    lm = scripted_lm(flight.respond, name=unique("scripted/override"), slots=8)
    set_max_concurrency(lm.model, 2)
    on_threads(lambda i: ask(lm, f"a{i}"), 10)
    assert (max_concurrency(lm), flight.peak) == (2, 2)
    flight.peak = 0
    set_max_concurrency(lm.model, 4)
    on_threads(lambda i: ask(lm, f"b{i}"), 10)
    assert (max_concurrency(lm), flight.peak) == (4, 4)
    flight.peak = 0
    set_max_concurrency(lm.model, None)  # back to the engine's own count
    on_threads(lambda i: ask(lm, f"c{i}"), 10)
    assert (max_concurrency(lm), flight.peak) == (8, 8)


def test_models_of_one_name_share_its_slots_and_other_names_do_not():
    flight = InFlight()
    name = unique("scripted/shared")
    one, two = (scripted_lm(flight.respond, name=name, slots=2) for _ in range(2))
    on_threads(lambda i: ask((one, two)[i % 2], f"q{i}"), 8)
    assert flight.peak == 2
    flight.peak = 0
    others = [scripted_lm(flight.respond, name=unique("scripted/own"), slots=1) for _ in range(4)]
    on_threads(lambda i: ask(others[i], f"q{i}"), 4)
    assert flight.peak == 4


def test_a_cache_hit_takes_no_slot(tmp_path):
    inner = ScriptedEngine(lambda request: {"answer": "recorded"}, slots=1)
    lm = dspy.LM(unique("local/hit"), engine=CachingEngine(inner, model_id="hit", directory=tmp_path), cache=False)
    assert ask(lm) == "recorded"
    with request_slot(lm.model, 1):  # every slot taken: only a request served from the cache can finish
        assert on_threads(lambda i: ask(lm), 1, timeout_s=10) == ["recorded"]
    assert len(inner.requests) == 1


def test_the_embedded_engine_generates_only_in_its_names_slot(monkeypatch):
    import contextlib

    from roma_lab.lm import _engine

    monkeypatch.setattr(_engine.EMBEDDED_HOST, "get", lambda *args: None)  # no model is loaded: generation is faked
    monkeypatch.setattr(_engine, "machine_turn", contextlib.nullcontext)  # other processes' turns do not matter
    monkeypatch.setattr(LlamaEngine, "_generate", lambda self, *args, **kwargs: ('{"answer": "local"}', "stop", 1, 1))
    lm = dspy.LM(unique("local/slot"), engine=LlamaEngine(lambda: None, model_id="slot", json_mode="repair"),
                 cache=False)
    done = threading.Event()
    with request_slot(lm.model, 1):  # the name's one slot taken
        worker = threading.Thread(target=lambda: (ask(lm), done.set()), daemon=True)
        worker.start()
        assert not done.wait(0.5)
    assert done.wait(30)


def test_engines_declare_their_slots_and_the_wrappers_pass_them_through(tmp_path, monkeypatch):
    scripted = ScriptedEngine()
    assert scripted.slots == 8 and ScriptedEngine(slots=3).slots == 3 and LlamaEngine.slots == 1
    cached = CachingEngine(ScriptedEngine(slots=5), model_id="m", directory=tmp_path)
    assert cached.slots == 5 and AsyncEngine(cached).slots == 5
    assert ReplayEngine(model_id="m", directory=tmp_path, settings={"slots": 4}).slots == 4
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="slots"):
            ScriptedEngine(slots=bad)
    monkeypatch.setattr("roma_lab.lm._resolve.part_paths", lambda spec: [])  # no weights needed: nothing runs
    local = resolve_lm("local:smollm2-135m")
    assert max_concurrency(local) == 1
    # the engine's kind and slot count are in the completion-cache key, the same for replay
    assert local.engine.settings == replay_lm("local:smollm2-135m").engine.settings == {
        "json_mode": local.engine.inner.json_mode, "engine": "llama-cpp-python", "slots": 1}


def test_a_scripted_engine_answers_after_its_latency_and_serves_its_slots_at_once():
    lm = scripted_lm(lambda request: {"answer": "late"}, name=unique("scripted/latency"), slots=8, latency_s=0.2)
    start = time.monotonic()
    assert ask(lm) == "late"
    assert time.monotonic() - start >= 0.2
    start = time.monotonic()
    on_threads(lambda i: ask(lm, f"q{i}"), 8)
    assert time.monotonic() - start < 0.8  # 1.6 s one after another


# --- limits from the environment ------------------------------------------------------------------


def test_a_remote_model_gets_the_remote_default_and_the_environment_sets_defaults_and_names(monkeypatch):
    remote = resolve_lm("openai/some-model", api_key="unused")
    plain = dspy.LM("openai/some-model", api_key="unused")  # its engine is "auto": a remote model too
    assert max_concurrency(remote) == max_concurrency(plain) == DEFAULT_REMOTE_CONCURRENCY
    local = scripted_lm(slots=3)
    monkeypatch.setenv(LIMIT_ENV, " 5 ")
    assert (max_concurrency(remote), max_concurrency(local)) == (5, 3)  # a plain number is for remote models
    monkeypatch.setenv(LIMIT_ENV, "openai/some-model=2, scripted=6")
    assert (max_concurrency(remote), max_concurrency(local), max_concurrency("openai/other")) == (2, 6, 8)
    set_max_concurrency("openai/some-model", 9)  # set in code wins over the environment
    assert max_concurrency(remote) == 9


@pytest.mark.parametrize("text", ["0", "-2", "x", "1.5", "a=", "=3", "a=0", "a=2,b", "a=b=c"])
def test_a_malformed_limit_in_the_environment_is_an_error_naming_it(text, monkeypatch):
    monkeypatch.setenv(LIMIT_ENV, text)
    with pytest.raises(ValueError, match=LIMIT_ENV):
        max_concurrency("openai/m")


@pytest.mark.parametrize("n", [0, -1, "x", 2.5])
def test_a_limit_set_in_code_is_a_whole_number_of_at_least_one(n):
    with pytest.raises(ValueError, match="set_max_concurrency"):
        set_max_concurrency("openai/m", n)


# --- the bound, remote ----------------------------------------------------------------------------


def test_remote_calls_hold_at_most_the_names_limit_on_threads_and_in_a_loop():
    flight = InFlight(0.1)
    with StubServer(['{"answer": "slow"}'], hold=flight.hold) as server:
        lm = resolve_lm(unique("openai/slow"), api_base=server.api_base, cache=False, num_retries=0)
        set_max_concurrency(lm.model, 3)
        on_threads(lambda i: ask(lm, f"q{i}"), 9)
        assert flight.peak == 3
        flight.peak = 0

        async def main():
            await asyncio.gather(*(aask(lm, f"a{i}") for i in range(9)))

        asyncio.run(main())
        assert flight.peak == 3


def test_a_remote_cache_hit_takes_no_slot():
    with StubServer(['{"answer": "from the server"}']) as server:
        lm = resolve_lm(unique("openai/hit"), api_base=server.api_base, num_retries=0)

        async def asked():
            return await asyncio.wait_for(aask(lm), 10)

        assert ask(lm) == asyncio.run(asked()) == "from the server"  # DSPy keys sync and async calls apart
        set_max_concurrency(lm.model, 1)
        with request_slot(lm.model):  # the only slot taken: only a request served from the cache can finish
            assert on_threads(lambda i: ask(lm), 1, timeout_s=10) == ["from the server"]
            assert asyncio.run(asked()) == "from the server"
        assert len(server.completions) == 2


# --- retries ------------------------------------------------------------------------------------


@pytest.fixture
def proxied():
    """A fault proxy before a scripted server; ``times`` records when each completion request came."""
    with StubServer(['{"answer": "after the rate limit"}']) as stub, FaultProxy(stub.port) as proxy:
        proxy.times = []
        proxy.on_request(lambda n: proxy.times.append(time.monotonic()))
        yield proxy


def test_a_rate_limit_is_retried_after_the_servers_retry_after(proxied):
    proxied.inject("429", times=2, retry_after="0.3")
    assert ask(resolve_lm("openai/limited", api_base=proxied.api_base)) == "after the rate limit"
    assert [e.status for e in proxied.exchanges] == [429, 429, 200]
    assert all(later - earlier >= 0.3 for earlier, later in zip(proxied.times, proxied.times[1:]))


def test_a_rate_limit_without_a_hint_backs_off_exponentially(proxied):
    proxied.inject("429", times=2, retry_after=None)
    assert ask(resolve_lm("openai/limited", api_base=proxied.api_base)) == "after the rate limit"
    gaps = [later - earlier for earlier, later in zip(proxied.times, proxied.times[1:])]
    assert len(gaps) == 2 and gaps[0] >= 1.0 and gaps[1] >= 2.0  # DSPy's 1 s, then 2 s


def test_remote_models_retry_five_times_by_default_and_the_caller_can_say_otherwise(proxied):
    assert resolve_lm("openai/limited", api_key="unused").num_retries == 5  # a provider's model too
    proxied.inject("429", times=5)
    assert ask(resolve_lm("openai/limited", api_base=proxied.api_base)) == "after the rate limit"  # DSPy's 3: fails
    assert len(proxied.exchanges) == 6
    assert resolve_lm("openai/limited", api_base=proxied.api_base, num_retries=1).num_retries == 1


def test_a_rate_limit_past_the_retries_is_a_clear_error_not_a_hang(proxied):
    proxied.inject("429")
    lm = resolve_lm("openai/limited", api_base=proxied.api_base, num_retries=2)
    with pytest.raises(dspy.utils.exceptions.LMRateLimitError, match="rate limited"):
        on_threads(lambda i: ask(lm), 1, timeout_s=30)
    assert [e.status for e in proxied.exchanges] == [429, 429, 429]


# --- rollout ids ----------------------------------------------------------------------------------


def counting_engine():
    """A scripted engine whose n-th generation answers "reply n": a served reply names its generation."""
    engine = ScriptedEngine(lambda request: {"answer": f"reply {len(engine.requests)}"})
    return engine


def test_a_rollout_id_is_a_new_local_completion_and_the_same_id_a_hit(tmp_path):
    engine = counting_engine()
    cached = CachingEngine(engine, model_id="rollouts", directory=tmp_path)
    lm = dspy.LM("local/rollouts", engine=cached, async_engine=AsyncEngine(cached), cache=False)
    assert ask(lm) == ask(lm) == "reply 1"  # no rollout: the recorded reply
    with rollout("run0:0"):
        assert current_rollout() == "run0:0"
        assert ask(lm) == "reply 2"
        assert ask(lm) == "reply 2"
        with rollout("run0:1"):  # the innermost id wins
            assert ask(lm) == "reply 3"
        assert ask(lm) == "reply 2"
    assert current_rollout() is None and ask(lm) == "reply 1"
    with rollout("run0:1"):
        assert asyncio.run(aask(lm)) == "reply 3"  # an async call carries the id into its worker thread
    assert len(engine.requests) == 3


def test_a_replay_serves_a_rollouts_completion_only_in_that_rollout(tmp_path):
    recorder = dspy.LM("local/rollouts", engine=CachingEngine(counting_engine(), model_id="rollouts",
                                                              directory=tmp_path), cache=False)
    with rollout("r:1"):
        assert ask(recorder) == "reply 1"
    replay = dspy.LM("local/rollouts", engine=ReplayEngine(model_id="rollouts", directory=tmp_path), cache=False)
    with rollout("r:1"):
        assert ask(replay) == "reply 1"
    with rollout("r:2"), pytest.raises(Exception, match="no recorded completion"):
        ask(replay)


@pytest.mark.parametrize("bad", ["", "  ", None, 1.5, True])
def test_a_rollout_id_is_a_non_empty_string_or_an_integer(bad):
    with pytest.raises(ValueError, match="rollout id"), rollout(bad):
        pass


def test_a_remote_rollout_is_its_own_cache_entry_and_is_sent_as_the_seed():
    replies = ['{"answer": "one"}', '{"answer": "two"}', '{"answer": "three"}']
    with StubServer(replies) as server:
        lm = resolve_lm("openai/rollouts", api_base=server.api_base, num_retries=0)
        assert ask(lm) == "one" and "seed" not in server.completions[0]
        with rollout("run1:0"):
            assert ask(lm) == "two"
            assert ask(lm) == "two"  # the same rollout: DSPy's cache
        with rollout("run1:1"):
            assert ask(lm) == "three"
        assert ask(lm) == "one"
        assert [body.get("seed") for body in server.completions] == [None, rollout_seed("run1:0"),
                                                                     rollout_seed("run1:1")]
        seeded = resolve_lm("openai/rollouts", api_base=server.api_base, num_retries=0, seed=7)
        with rollout("run1:2"):
            ask(seeded, "another question")
        assert server.completions[-1]["seed"] == 7  # the caller's seed is kept


def test_a_remote_rollout_is_in_an_async_calls_key_too():
    with StubServer(['{"answer": "one"}', '{"answer": "two"}']) as server:
        lm = resolve_lm("openai/rollouts", api_base=server.api_base, num_retries=0)

        async def in_rollout(rollout_id):
            with rollout(rollout_id):
                return await aask(lm)

        assert asyncio.run(in_rollout("a")) == "one"
        assert asyncio.run(in_rollout("a")) == "one"
        assert asyncio.run(in_rollout("b")) == "two"
        assert len(server.completions) == 2


def test_a_providers_model_keys_a_rollout_without_a_seed():
    from dspy.clients.execution import prepare

    lm = resolve_lm("anthropic/some-model", api_key="unused")
    with rollout("run2:0"):
        call = lm._keyed(prepare(lm, "hi", None, {}))
    assert call.key(lm, False)["_rollout"] == "run2:0" and "seed" not in call.legacy


def test_a_rollout_seed_is_a_stable_31_bit_number():
    assert rollout_seed("run:0") == rollout_seed("run:0") != rollout_seed("run:1")
    assert all(0 <= rollout_seed(f"r{i}") < 2**31 for i in range(100))
