"""LiteLLM matches a model name against its capability rules once per process, not on every call.

For a name its price list does not know, LiteLLM prices each response and looks up its capabilities
by searching every capability rule's regular expression (about 1,100 searches a call, uncached);
``lm/_litellm_rules.py`` remembers which rules a name matched. The calls go to a loopback server
(``stub_openai.StubServer``); the rules' patterns are wrapped to count their searches.
"""

import dataclasses
import re

import pytest
import questions
from online_server import online_isolation  # noqa: F401 - autouse fixture: a fresh DSPy cache per test
from stub_openai import StubServer

from roma_lab.lm import resolve_lm
from roma_lab.lm._litellm_rules import remember_rule_matches

fallback_generalizations = pytest.importorskip("litellm.litellm_core_utils.fallback_generalizations")
registry = fallback_generalizations._registry
litellms_own = type(registry).match_capabilities  # the method, whatever the instance now holds

NAMES = ["claude-sonnet-4-5-20250929", "anthropic/claude-opus-4-6", "gpt-4o", "openai/served", "served", "", "CLAUDE-haiku-3"]


class Counted:
    """A compiled pattern that counts its searches."""

    def __init__(self, pattern, searches: list):
        self.pattern, self.searches = pattern, searches

    def search(self, text):
        self.searches.append(text)
        return self.pattern.search(text)


def counted_rules(monkeypatch) -> list:
    searches: list = []
    rules = tuple(dataclasses.replace(rule, pattern=Counted(rule.pattern, searches)) for rule in registry.capability_rules)
    assert rules, "LiteLLM installed no capability rules: nothing to count"
    monkeypatch.setattr(registry, "capability_rules", rules)  # new rules: the memo starts afresh
    return searches


def test_a_remote_models_name_is_matched_against_litellms_rules_once_not_per_call(monkeypatch):
    searches = counted_rules(monkeypatch)
    with StubServer(['{"answer": "from A"}']) as server:
        lm = resolve_lm("openai/served", api_base=server.api_base, num_retries=0)
        assert questions.ask(lm, "Question 0?") == "from A"
        first = len(searches)
        assert first > 0  # LiteLLM did match the name's variants against its rules
        for i in range(1, 4):
            assert questions.ask(lm, f"Question {i}?") == "from A"
        assert len(server.completions) == 4  # every call reached the server (no cache hit)
        assert len(searches) == first  # before: about as many searches again on every call
        # the price stays LiteLLM's own answer for a name its list does not know: unknown
        assert [entry["cost"] for entry in lm.history] == [None] * 4


def test_remembered_matches_are_litellms_own_answers_and_new_rules_are_matched_afresh(monkeypatch):
    remember_rule_matches()
    assert "match_capabilities" in vars(registry)  # installed on the registry, for every caller
    for _ in range(2):  # asked and then remembered
        assert [registry.match_capabilities(n) for n in NAMES] == [litellms_own(registry, n) for n in NAMES]
    assert registry.match_capabilities("served") is None
    rule = dataclasses.replace(registry.capability_rules[0], pattern=re.compile("serv"),
                               model_info={"supports_vision": True})
    monkeypatch.setattr(registry, "capability_rules", (rule,))  # as a reload of LiteLLM's cost map installs
    assert registry.match_capabilities("served") == {"supports_vision": True} == litellms_own(registry, "served")
    rule.model_info["supports_vision"] = False  # the answer is built from the rules' model_info each time
    assert registry.match_capabilities("served") == {"supports_vision": False}
