"""roma_lab.trace's evidence rule: an answer its passages do not support is flagged, not only one whose
search found nothing (issue 52: BM25 returns a passage sharing any word, so "a passage came back" proved
nothing), and the flag climbs to what used or aggregated it."""

from __future__ import annotations

import pytest

from roma_lab.trace import MIN_SUPPORT, Node, RoleCall, Run, answer_support, without_evidence

UNRELATED = "Q: What year was Nigerian artist Uzo Njoku born? A: 1994"


def search_node(node_id: str, goal: str, output: str, passages: list[str], parent: str | None = "0") -> Node:
    call = RoleCall(role="executor:search", inputs={"goal": goal, "context": ""},
                    outputs={"output": output, "passages": passages}, context_chars=1, input_tokens=5,
                    output_tokens=5, cost=0.0, latency_s=0.1, started_s=0.0)
    return Node(id=node_id, parent_id=parent, depth=0 if parent is None else 1, goal=goal, task_type="search",
                status="completed", output=output, calls=(call,))


def flags(*nodes: Node) -> dict[str, str]:
    return without_evidence(nodes)


def test_the_newcomer_s_mona_lisa_answer_over_an_unrelated_passage_is_flagged():
    node = search_node("0", "Who painted the Mona Lisa and in what century was it painted?",
                       "Leonardo da Vinci painted it in the 15th century.", [UNRELATED], parent=None)
    assert "15th" in flags(node)["0"]  # the number it states is in no passage


def test_an_answer_its_passage_holds_is_not_flagged_whatever_its_wording():
    passage = "Q: In what year were the first Zildjian cymbals created? A: 1618"
    goal = "Find the year the first Zildjian cymbals were made."
    for answer in ("1618", "The first Zildjian cymbals were made in 1618.", "Based on the passages, 1618."):
        assert flags(search_node("0", goal, answer, [passage], parent=None)) == {}, answer


def test_a_number_none_of_the_passages_holds_flags_an_answer_whose_words_they_all_hold():
    passage = "The first Zildjian cymbals were cast in Constantinople in 1618."
    node = search_node("0", "When were Zildjian cymbals first made?", "Constantinople, 1619", [passage], parent=None)
    assert "1619" in flags(node)["0"]


def test_thousands_separators_and_accents_do_not_make_a_supported_answer_unsupported():
    node = search_node("0", "Population at the last census?", "253,729 residents in Suleymaniye",
                       ["The census of 2013 counted 253729 residents in Süleymaniye."], parent=None)
    assert flags(node) == {}


@pytest.mark.parametrize(("held", "flagged"), [(2, False), (1, True)])
def test_the_support_threshold_is_half_of_the_answer_s_own_words(held, flagged):
    """Four content words, none in the goal; the passage holds ``held`` of them (MIN_SUPPORT is 0.5)."""
    assert MIN_SUPPORT == 0.5
    words = ["alpha", "bravo", "charlie", "delta"]
    node = search_node("0", "Which code words?", " ".join(words), [" ".join(words[:held])], parent=None)
    assert ("0" in flags(node)) is flagged
    assert answer_support([node], "0") == held / 4


def test_an_answer_that_only_restates_the_goal_has_nothing_to_check_and_is_not_flagged_for_it():
    node = search_node("0", "Name the capital of France.", "The capital of France.", [UNRELATED], parent=None)
    assert flags(node) == {} and answer_support([node], "0") is None


def test_the_flag_climbs_to_the_node_that_aggregates_an_unsupported_answer():
    root = Node(id="0", parent_id=None, depth=0, goal="Capitals of France and Japan", task_type="think",
                status="completed", output="Paris and Tokyo")
    kids = (search_node("0.1", "Capital of France?", "Paris", ["Paris is the capital of France."]),
            search_node("0.2", "Capital of Japan?", "Tokyo", [UNRELATED]))
    run = Run(goal=root.goal, status="completed", output=root.output, nodes=(root, *kids), wall_s=1.0)
    flagged = without_evidence(run.nodes)
    assert set(flagged) == {"0", "0.2"} and "aggregates 0.2" in flagged["0"]
    assert answer_support(run.nodes, "0") == 0.5  # Paris is in a passage read below the root, Tokyo in none
