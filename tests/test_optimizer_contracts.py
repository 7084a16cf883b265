"""Pure text parts of roma_lab.optimizer: contracts, edit size, atomisation, deduplication, configs."""

import pandas as pd
import pytest

from roma_lab.optimizer import Contract, GepaPlusConfig
from roma_lab.optimizer._contracts import atomize, contracts_for, dedupe_sentences, default_contract, edit_size
from roma_lab.optimizer._records import calls_to_converge


def test_contract_reports_each_broken_clause():
    c = Contract("planner", required_terms=("subtasks", "dependencies"), forbidden_terms=("TODO",), max_chars=45)
    assert c.violations("List the subtasks and their dependencies.") == ()
    found = c.violations("List the steps. TODO: add more rules later, many of them.")
    assert found == (
        "missing required term 'subtasks'",
        "missing required term 'dependencies'",
        "contains forbidden term 'TODO'",
        "longer than 45 characters (57)",
    )
    assert c.violations("   ")[0] == "instruction is empty"


def test_contract_matches_whole_words_case_insensitively():
    c = Contract("m", required_terms=("goal",))
    assert c.violations("State the GOAL first.") == ()
    assert c.violations("Think like a goalkeeper.") == ("missing required term 'goal'",)


def test_contract_describe_is_empty_without_clauses():
    # describe() is what GEPA+ sends proposers (additional_instructions), the judge and the merger
    assert Contract("m").describe() == ""
    assert Contract("m", required_terms=("answer", "notes"), forbidden_terms=("TODO",), max_chars=80).describe() == (
        "The instruction must keep mentioning: answer, notes. It must not mention: TODO. "
        "It must be at most 80 characters long.")


@pytest.mark.parametrize(
    "kwargs, message",
    [({"component": ""}, "non-empty"), ({"component": "m", "required_terms": ("",)}, "non-empty strings"),
     ({"component": "m", "max_chars": 0}, "max_chars")],
)
def test_contract_rejects_bad_fields(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Contract(**kwargs)


def test_default_contract_keeps_only_fields_the_seed_mentions():
    c = default_contract("answer", "Use the notes to give the answer.", ("question", "notes", "answer"))
    assert c.required_terms == ("notes", "answer")


def test_contracts_for_rejects_unknown_and_mismatched_components():
    seed = {"a": ("Do a.", ("x",)), "b": ("Do b.", ("y",))}
    assert set(contracts_for(seed)) == {"a", "b"}
    with pytest.raises(ValueError, match="unknown components"):
        contracts_for(seed, {"zzz": Contract("zzz")})
    with pytest.raises(ValueError, match="must match"):
        contracts_for(seed, {"a": Contract("b")})


def test_edit_size_is_normalised():
    assert edit_size("Answer the question.", "Answer the question.") == 0.0
    assert edit_size("alpha beta", "gamma delta") == 1.0
    assert 0.0 < edit_size("Answer the question.", "Answer the question. Be brief.") < 0.5


def test_atomize_splits_sentences_and_lines():
    assert atomize("Do A. Then B!\n- keep C?  Also D") == ["Do A.", "Then B!", "- keep C?", "Also D"]


def test_dedupe_drops_repeats_but_keeps_layout():
    text = "Reply in UPPERCASE. Be brief.\n\n- reply in uppercase!\n- Cite the notes.\n\n\nBe brief."
    assert dedupe_sentences(text) == "Reply in UPPERCASE. Be brief.\n\n- Cite the notes."


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"k": 0}, "k \\(drafts per round\\) must be an int >= 1"),
        ({"k": True}, "k \\(drafts per round\\) must be an int >= 1, got True"),
        ({"k": 2, "n": 3}, "n \\(drafts merged\\) must be <= k"),
        ({"n": 0}, "n \\(drafts merged\\) must be an int >= 1, got 0"),
        ({"n": 1.0}, "n \\(drafts merged\\) must be an int >= 1, got 1.0"),
        ({"gamma": -1.0}, "gamma must be a finite number >= 0"),
        ({"delta": float("nan")}, "delta must be a finite number >= 0"),
        ({"judge": None}, "a judge model is required"),
        ({"merger": None}, "a merger model is required"),
        ({"proposers": ()}, "non-empty tuple"),
        ({"proposers": (("m", 3.0),)}, "temperature"),
        ({"max_judge_calls": -1}, "max_judge_calls"),
        ({"max_parallel": 0}, "max_parallel must be an int >= 1, got 0"),
        ({"max_parallel": False}, "max_parallel must be an int >= 1, got False"),
    ],
)
def test_config_rejects_bad_settings(kwargs, message):
    base = {"proposers": (("openai/x", 0.7),), "k": 3, "n": 2, "judge": "openai/j", "merger": "openai/m"}
    with pytest.raises(ValueError, match=message):
        GepaPlusConfig(**{**base, **kwargs})


def test_config_rejects_non_model_proposer():
    with pytest.raises(TypeError, match="proposer model"):
        GepaPlusConfig(proposers=((42, 0.5),), k=1, n=1, alpha=0.0)


def test_calls_to_converge_finds_first_call_within_tolerance():
    conv = pd.DataFrame({"total_metric_calls": [4, 15, 26, 37], "gepa_metric_calls": [4, 12, 20, 28],
                         "best_val_score": [0.0, 0.5, 0.74, 0.75]})
    # by default every metric call counts (GEPA+'s verifier runs included); GEPA's budget count on request
    assert calls_to_converge(conv) == 37
    assert calls_to_converge(conv, calls="gepa_metric_calls") == 28
    assert calls_to_converge(conv, tolerance=0.02) == 26
    assert calls_to_converge(conv, tolerance=0.01) == 26   # 0.74 is exactly 0.01 below the final 0.75
    assert calls_to_converge(conv, tolerance=0.0099) == 37
    with pytest.raises(ValueError, match="empty"):
        calls_to_converge(conv.iloc[:0])
    with pytest.raises(ValueError, match="tolerance"):
        calls_to_converge(conv, tolerance=-0.1)
