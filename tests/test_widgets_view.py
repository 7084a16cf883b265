"""The pieces both table-and-details views (execution tree, trajectory) take from ``widgets/_view.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from view_pages import expandable

from roma_lab.trace import RoleCall
from roma_lab.widgets import RunComparison, TrajectoryComparison
from roma_lab.widgets._view import (
    ASSETS,
    DISCONNECTED_NOTE,
    call_data,
    call_html,
    detail_section,
    expandable_row,
    known_sum,
    labelled,
    pane_css,
    row_hint,
    select_row,
    table_head,
    view_html,
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
    assert detail_section("d", 'a"<b', "body") == '<section class="d" data-detail="a&quot;&lt;b">body</section>'


def test_a_row_is_the_summary_of_a_details_that_holds_its_detail_once():
    """What lets a row open without JavaScript (exported pages, untrusted notebooks): no script, no
    link, no style needed; the detail is not copied elsewhere, and the row starts closed."""
    row = select_row("0.1", {"state": "done"}, "<td>c</td>")
    page = expandable_row(row, detail_section("zz-detail", "0.1", "the calls"), "zz-table")
    assert page == ('<details class="rv-row"><summary><table class="zz-table"><tr data-select="0.1" data-state="done">'
                    '<td>c</td></tr></table></summary><section class="zz-detail" data-detail="0.1">the calls</section>'
                    "</details>")
    assert expandable(page) == [("0.1", "0.1")]


def test_view_js_opens_and_filters_the_rows_python_renders():
    """view.js finds a detail's row, and hides a filtered row, by the class expandable_row gives it."""
    script = (ASSETS / "view.js").read_text()
    assert 'closest("details.rv-row").open' in script and 'closest("details.rv-row").classList' in script
    assert expandable_row("", "", "t").startswith('<details class="rv-row">')


def test_a_view_drawn_from_saved_widget_state_says_it_is_not_connected_instead_of_a_bare_red_icon():
    """Issue 52: above a widget restored from a saved notebook (no kernel behind its model) ipywidgets
    draws a red chain-broken icon with no tooltip; our views put a sentence in its place."""
    from jupyter_core.paths import jupyter_path

    manager = [f for d in jupyter_path("labextensions")
               for f in Path(d, "@jupyter-widgets", "jupyterlab-manager", "static").glob("*.js")]
    assert any(".jupyter-widgets-disconnected::before" in f.read_text(encoding="utf-8") for f in manager)  # the icon
    assert 'el.classList.add("rv-host")' in (ASSETS / "view.js").read_text()  # the widget's own element
    page = view_html("")
    note = page.index(".rv-host.jupyter-widgets-disconnected::before{")
    assert f'content:"{DISCONNECTED_NOTE}"}}' in page[note:] and "not connected to the kernel" in DISCONNECTED_NOTE
    # the icons of a picker's box and dropdown are hidden by rules as specific as the note's, so it comes last
    assert page.index(".jupyter-widgets-disconnected:has(.rv-host)::before") < note


def test_a_hint_differs_live_and_static_only_when_asked():
    assert row_hint("click <it>") == "<span><i>click &lt;it&gt;</i></span>"
    assert row_hint("live", "static") == ('<span class="rv-live-only"><i>live</i></span>'
                                          '<span class="rv-static-only"><i>static</i></span>')


def test_table_head_is_a_table_of_its_own_with_header_classes():
    assert table_head("t", [("a", ""), ("<b>n</b>", "num")]) == (
        '<table class="t"><thead><tr><th>a</th><th class="num"><b>n</b></th></tr></thead></table>')


def test_pane_css_fills_in_prefix_and_width_everywhere():
    css = pane_css("zz", 333, (60, 40))
    assert "{" + "p}" not in css and "min_width" not in css and "min-width:333px" in css
    assert {".roma-view table.zz-table", ".roma-view .zz-detail", ".roma-view .zz-call", ".roma-view .zz-error",
            ".roma-view .zz-compare", ".roma-view .zz-pane", ".roma-view .zz-num"} <= \
           {line.split("{")[0] for line in css.splitlines()}


def test_the_head_and_every_row_get_the_same_column_widths():
    """The head and each row are tables of their own: their columns line up by these widths alone."""
    css = pane_css("zz", 333, (60, 40))
    # border-box: the tree's indent of a deeper row must not widen its first column
    assert ".roma-view .zz-table>*>tr>:nth-child(1){width:60%;box-sizing:border-box}" in css
    assert ".roma-view .zz-table>*>tr>:nth-child(2){width:40%;box-sizing:border-box}" in css
    assert ":nth-child(3)" not in css
    assert "table-layout:fixed" in css.split(".roma-view table.zz-table{")[1].split("}")[0]


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
