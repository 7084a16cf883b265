"""The pieces both table-and-details views (execution tree, trajectory) take from ``widgets/_view.py``."""

from __future__ import annotations

import pytest

from roma_lab.controller import RoleCall
from roma_lab.widgets import RunComparison, TrajectoryComparison
from roma_lab.widgets._view import (
    call_data,
    call_html,
    detail_section,
    known_sum,
    labelled,
    pane_css,
    select_row,
    table_head,
)


def test_labelled_keeps_a_mapping_and_numbers_a_sequence_from_one():
    assert list(labelled({"b": 2, "a": 1}, "run", "X").items()) == [("b", 2), ("a", 1)]
    assert labelled(iter(["x", "y"]), "run", "X") == {"run 1": "x", "run 2": "y"}


@pytest.mark.parametrize("empty", [[], {}, iter(())])
def test_labelled_refuses_nothing_to_compare_naming_who_needs_it(empty):
    with pytest.raises(ValueError, match="^RunComparison needs at least one run$"):
        labelled(empty, "run", "RunComparison")


@pytest.mark.parametrize("widget", [RunComparison, TrajectoryComparison])
@pytest.mark.parametrize("empty", [[], {}])
def test_comparison_widgets_refuse_an_empty_comparison(widget, empty):
    with pytest.raises(ValueError, match=f"^{widget.__name__} needs at least one"):
        widget(empty)


def test_known_sum_is_unknown_with_any_unknown_term():
    assert known_sum([1, 2, 3]) == 6 and known_sum([]) == 0
    assert known_sum([1, None, 3]) is None and known_sum(iter([None])) is None


def test_rows_and_details_escape_what_they_carry():
    row = select_row('a"<b', {"state": "x y", "tool": "&"}, "<td>c</td>", css_class="k")
    assert row == '<tr class="k" data-select="a&quot;&lt;b" data-state="x y" data-tool="&amp;"><td>c</td></tr>'
    assert select_row("1", {}, "") == '<tr data-select="1"></tr>'
    assert detail_section("d", "0.1", 'u-0.1"', "body") == \
        '<section class="d" data-detail="0.1" id="u-0.1&quot;">body</section>'


def test_table_head_widths_and_classes_line_up():
    assert table_head([("a", 60, ""), ("<b>n</b>", 40, "num")]) == (
        '<colgroup><col style="width:60%"><col style="width:40%"></colgroup>'
        '<thead><tr><th>a</th><th class="num"><b>n</b></th></tr></thead>')


def test_pane_css_fills_in_prefix_and_width_everywhere():
    css = pane_css("zz", 333)
    assert "{" + "p}" not in css and "min_width" not in css and "min-width:333px" in css
    assert {".roma-view table.zz-table", ".roma-view .zz-detail", ".roma-view .zz-call", ".roma-view .zz-error",
            ".roma-view .zz-compare", ".roma-view .zz-pane", ".roma-view .zz-num"} <= \
           {line.split("{")[0] for line in css.splitlines()}


ROLE_CALL = RoleCall(role="executor:think", inputs={"context": "g<1>"}, outputs={"answer": "42"}, context_chars=5,
                     input_tokens=3, output_tokens=None, cost=None, latency_s=0.25, started_s=1.5, model="m",
                     queued_s=0.5)
CALL = {**call_data(ROLE_CALL), "cached": False}


def test_call_data_is_one_record_for_role_and_agent_calls():
    c = call_data(ROLE_CALL)
    assert (c["role"], c["component"], c["wait_s"], c["started_s"], c["cost"]) == ("executor:think", "executor", 1.0,
                                                                                    1.5, None)
    assert c["cached"] is None and c["exchanges"] == []  # no model request recorded


def test_a_call_shows_its_inputs_only_when_asked_and_always_its_outputs():
    tree_like = call_html(CALL, "k", prefix="rt", mark="rt-cached", empty="none recorded", inputs=True)
    assert "<b>inputs</b>" in tree_like and "g&lt;1&gt;" in tree_like and "<b>outputs</b>" in tree_like
    plain = call_html(CALL, "k", prefix="tj", mark="tj-mark", empty="none recorded")
    assert "<b>inputs</b>" not in plain and "g&lt;1&gt;" not in plain and "42" in plain
    assert "3 in / unknown out tokens" in plain and "none recorded" in plain and "cached" not in plain
    assert "cost unknown" in plain and "waited 1.000 s for a slot" in plain and "context 5 chars" in plain


def test_a_cached_call_is_marked_and_its_latency_is_a_lookup():
    page = call_html({**CALL, "cached": True, "error": "boom"}, "k", prefix="tj", mark="tj-mark", empty="")
    assert '<span class="tj-mark">cached</span>' in page and "0.250 s lookup" in page
    assert '<span class="tj-error">error: boom</span>' in page and 'class="tj-call" data-key="k"' in page


def test_both_comparisons_select_one_id_in_every_pane():
    from roma_lab.controller import Roma, ScriptedRoles

    def run(goal):
        return Roma(**ScriptedRoles({}).role_kwargs(), max_depth=0).run(goal)

    runs = {"a": run("goal"), "b": run("other goal")}
    comparison = RunComparison(runs)
    assert comparison.selected_id == "0" and list(comparison.selected) == ["a", "b"]
    assert comparison.selected["a"]["goal"] == "goal" and comparison.selected["b"]["goal"] == "other goal"
    comparison.selected_id = "no such node"
    assert comparison.selected == {"a": None, "b": None}
    comparison.show_runs({"c": runs["a"]})  # an id the new runs lack falls back to the first one's root
    assert comparison.selected_id == "0" and comparison.labels == ["c"]
