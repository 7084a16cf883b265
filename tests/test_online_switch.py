"""Pointing every notebook at one's own server: $ROMA_LAB_API_BASE and $ROMA_LAB_API_KEY reach
``resolve_lm`` for ``openai/<name>`` models and nothing else, and tables say where a model ran.
No server needed: these check what ``resolve_lm`` builds, not what a server answers."""

import dspy
import pytest

from roma_lab.lm import model_label, resolve_lm

BASE = "http://127.0.0.1:8080/v1"


@pytest.fixture(autouse=True)
def no_server_named(monkeypatch):
    for name in ("ROMA_LAB_LM", "ROMA_LAB_API_BASE", "ROMA_LAB_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_the_environment_sends_an_openai_name_to_the_users_server_through_litellm(monkeypatch):
    monkeypatch.setenv("ROMA_LAB_API_BASE", BASE)
    monkeypatch.setenv("ROMA_LAB_API_KEY", "lab-key")
    lm = resolve_lm("openai/qwen2.5-7b", max_tokens=64)
    assert isinstance(lm, dspy.LM) and lm.model == "openai/qwen2.5-7b" and lm.engine == "litellm"
    assert (lm.kwargs["api_base"], lm.kwargs["api_key"], lm.kwargs["max_tokens"]) == (BASE, "lab-key", 64)
    assert (lm.kwargs["temperature"], lm.kwargs["timeout"]) == (0.0, 600.0)  # greedy as in-process; ROMA's call limit
    assert resolve_lm("openai/qwen2.5-7b").kwargs["max_tokens"] == resolve_lm("local:smollm2-135m").kwargs["max_tokens"]
    assert model_label(lm) == model_label("openai/qwen2.5-7b") == f"openai/qwen2.5-7b @ {BASE}"


def test_the_model_name_itself_can_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("ROMA_LAB_LM", "openai/served")
    monkeypatch.setenv("ROMA_LAB_API_BASE", BASE)
    lm = resolve_lm()
    assert lm.model == "openai/served" and lm.kwargs["api_base"] == BASE


def test_a_server_without_a_key_gets_a_placeholder_never_the_openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("ROMA_LAB_API_BASE", BASE)
    assert resolve_lm("openai/served").kwargs["api_key"] == "no-key"
    monkeypatch.delenv("ROMA_LAB_API_BASE")
    explicit = resolve_lm("openai/served", api_base=BASE)  # also when the address is passed in code
    assert explicit.kwargs["api_key"] == "no-key" and explicit.engine == "litellm"


def test_arguments_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("ROMA_LAB_API_BASE", BASE)
    lm = resolve_lm("openai/served", api_base="http://10.0.0.2:9000/v1", api_key="k", engine="auto",
                    temperature=0.7, max_tokens=None)
    assert (lm.kwargs["api_base"], lm.kwargs["api_key"], lm.engine) == ("http://10.0.0.2:9000/v1", "k", "auto")
    assert lm.kwargs["temperature"] == 0.7 and lm.kwargs.get("max_tokens") is None


def test_other_providers_and_openai_itself_are_untouched(monkeypatch):
    # gpt-4o-mini without the prefix is OpenAI's own model: a judge on OpenAI beside a system on a server
    for name in ("anthropic/claude-sonnet-4", "ollama_chat/qwen2.5", "gemini/gemini-2.5-flash", "gpt-4o-mini"):
        monkeypatch.setenv("ROMA_LAB_API_BASE", BASE)
        lm = resolve_lm(name)
        assert "api_base" not in lm.kwargs and "api_key" not in lm.kwargs and lm.engine == "auto"
        assert model_label(lm) == model_label(name) == name
    monkeypatch.delenv("ROMA_LAB_API_BASE")
    cloud = resolve_lm("openai/gpt-4o-mini")  # no server named: OpenAI's own endpoint, key, engine, defaults
    assert "api_base" not in cloud.kwargs and "api_key" not in cloud.kwargs and cloud.engine == "auto"
    assert [cloud.kwargs.get(k) for k in ("temperature", "max_tokens", "timeout")] == [None, None, None]
    assert model_label(cloud) == "openai/gpt-4o-mini"


def test_local_and_scripted_models_ignore_the_server(monkeypatch):
    monkeypatch.setenv("ROMA_LAB_API_BASE", BASE)
    monkeypatch.setattr("roma_lab.lm._resolve.part_paths", lambda spec: [])
    assert resolve_lm("local:smollm2-135m").model.startswith("local/smollm2-135m@")
    assert model_label("local") == "local" and model_label("scripted").startswith("scripted (test double")


def test_a_key_without_a_server_is_refused(monkeypatch):
    monkeypatch.setenv("ROMA_LAB_API_KEY", "lab-key")
    with pytest.raises(ValueError, match="ROMA_LAB_API_BASE is not"):
        resolve_lm("openai/served")


def test_a_label_never_shows_a_password(monkeypatch):
    monkeypatch.setenv("ROMA_LAB_API_BASE", "https://user:pw@models.lab.example:8443/v1")
    assert model_label("openai/served") == "openai/served @ https://models.lab.example:8443/v1"
