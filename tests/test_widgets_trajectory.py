"""Trajectory view (issue 11): the pure view builder, the one HTML renderer (widget and static view),
the widgets driven as the browser would, saved trajectories side by side, and the offline HTML
export of an executed notebook. Trajectories are real: ``roma_lab.agents`` on the meta-routing tool
suite with a scripted model (tests/trajectory_fixtures.py). The browser itself is exercised in
tests/browser/test_browser_trajectory.py."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import dspy
import pytest
from trajectory_fixtures import CONFIGS, run_one, scripted_lm, study_trajectories, tasks
from view_pages import (
    assert_loads_nothing_from_a_network,
    detail,
    execute_notebook,
    expandable,
    parameterized,
    rows,
    text,
)

from roma_lab.agents import Agent, AgentConfig, AgentTask, Tool
from roma_lab.trace import ROLLOUT_STATUSES, RecordedGrade, Trajectory, read_trajectories
from roma_lab.bench import Item, StringMatchGrader
from roma_lab.lm import ScriptedEngine
from roma_lab.widgets import (
    TrajectoryComparison,
    TrajectoryPicker,
    TrajectoryWidget,
    compare_trajectories_html,
    export_html,
    saved_trajectories,
    trajectory_html,
    trajectory_to_view,
)
from roma_lab.widgets._trajectory import STATUS_COLORS, view_ids

FIXTURE_NOTEBOOK = Path(__file__).parent / "fixtures" / "trajectory_view.ipynb"
PLAN = "plan-and-revise"
VOTE = "best-of-3-vote"
TASK = "dev-conflicting_sources-000"
OTHER = "dev-conflicting_sources-001"


@pytest.fixture(scope="module")
def study(study_dir) -> dict[tuple[str, str], Trajectory]:
    return study_trajectories(study_dir)


# --- the view dict ---


def test_view_is_plain_json_with_every_rollout_and_step_as_recorded(study):
    for trajectory in study.values():
        view = trajectory_to_view(trajectory)
        assert json.loads(json.dumps(view)) == view
        ids = view_ids(view)
        assert len(ids) == len(set(ids)) == len(trajectory.rollouts) + trajectory.n_steps
        for r, rv in zip(trajectory.rollouts, view["rollouts"], strict=True):
            assert (rv["kind"], rv["seed"], rv["status"], rv["answer"]) == (r.kind, r.seed, r.status, r.answer)
            for s, sv in zip(r.steps, rv["steps"], strict=True):
                call = s.tool_call
                assert sv["index"] == s.index and sv["action"] == s.action and sv["answer"] == s.answer
                assert sv["observation"] == s.observation
                assert sv["arguments"] == (call.arguments if call else {})
                assert (sv["memory_shown"], sv["feedback_shown"], sv["error"]) == \
                       (s.memory_shown, s.feedback_shown, s.error)
        assert view["totals"]["steps"] == trajectory.n_steps
        assert view["totals"]["tool_calls"] == trajectory.n_tool_calls


def test_step_status_and_tool_are_read_from_the_record(study):
    view = trajectory_to_view(study[VOTE, TASK])
    r1 = view["rollouts"][1]["steps"]
    assert [(s["status"], s["tool"]) for s in r1] == [("unknown_tool", "web_search"), ("ok", "retrieve"),
                                                       ("answered", "final_answer")]
    assert "unknown tool 'web_search'" in r1[0]["error"]
    assert "Your previous step failed: unknown tool 'web_search'" in r1[1]["feedback_shown"]


def test_plan_revisions_say_which_steps_were_shown_each(study):
    trajectory = study[PLAN, TASK]
    view = trajectory_to_view(trajectory)
    rollout = view["rollouts"][0]
    assert [(p["id"], p["label"], p["seen_by"]) for p in rollout["plans"]] == [
        ("r0.p0", "initial plan", ["r0.1"]), ("r0.p1", "revision after step 1", ["r0.2"]),
        ("r0.p2", "revision after step 2", ["r0.3"])]
    for step in rollout["steps"]:  # the plan credited is the text the step records as shown
        plan = next(p for p in rollout["plans"] if p["id"] == step["plan_id"])
        assert plan["plan"] == step["plan_shown"]
    assert rollout["plans"][1]["observations"] == list(trajectory.rollouts[0].plans[1].observations)
    page = trajectory_html(view)
    assert "rev. @1" in rows(page)["r0.2"] and "initial" in rows(page)["r0.1"]
    assert "revision after step 1 · shown at step 2" in text(detail(page, "r0"))
    assert "plan: revision after step 2" in text(detail(page, "r0.3"))


def test_a_revision_the_actor_never_saw_is_never_credited():
    official = AgentConfig(name="official", planning="revise", revise_every=2, revision_visibility="official")
    view = trajectory_to_view(run_one(official))
    plans, steps = view["rollouts"][0]["plans"], view["rollouts"][0]["steps"]
    assert [(p["label"], p["visible"], p["seen_by"]) for p in plans] == [
        ("initial plan", True, ["r0.1", "r0.2", "r0.3"]), ("revision after step 2", False, [])]
    assert {s["plan_id"] for s in steps} == {"r0.p0"}
    assert "never shown to the actor" in text(detail(trajectory_html(view), "r0"))


SAME = "1. retrieve the records\n2. verify which one is current\n3. answer"  # the fixture planner's own text


def test_a_plan_repeated_word_for_word_is_credited_to_the_one_in_force():
    config = AgentConfig(name="same", planning="revise", revise_every=1)
    view = trajectory_to_view(run_one(config, reviser=lambda inputs: {"revised_plan": SAME}))
    rollout = view["rollouts"][0]
    assert {p["plan"] for p in rollout["plans"]} == {SAME}
    assert [s["plan_id"] for s in rollout["steps"]] == ["r0.p0", "r0.p1", "r0.p2"]

    official = AgentConfig(name="same", planning="revise", revise_every=2, revision_visibility="official")
    rollout = trajectory_to_view(run_one(official, reviser=lambda inputs: {"revised_plan": SAME}))["rollouts"][0]
    assert [s["plan_id"] for s in rollout["steps"]] == ["r0.p0"] * 3  # same words, never shown: not credited


def test_a_step_is_credited_the_plan_it_records_as_shown(study):
    """Read from the record, not from the revision schedule: had the actor been shown the initial plan
    at step 3 (as the official code does), the view says so."""
    trajectory = study[PLAN, TASK]
    r = trajectory.rollouts[0]
    stale = replace(r.steps[2], plan_shown=r.plans[0].plan)
    view = trajectory_to_view(replace(trajectory, rollouts=(replace(r, steps=(*r.steps[:2], stale)),)))
    assert [s["plan_id"] for s in view["rollouts"][0]["steps"]] == ["r0.p0", "r0.p1", "r0.p0"]
    assert view["rollouts"][0]["plans"][2]["seen_by"] == []


def test_memory_shown_at_each_step_is_in_its_detail(study):
    trajectory = study[PLAN, TASK]
    page = trajectory_html(trajectory_to_view(trajectory))
    third = trajectory.rollouts[0].steps[2]
    assert "summary: Step 1" in third.memory_shown and "Step 2:" in third.memory_shown  # window 1 + summaries
    assert f"<pre>{html.escape(third.memory_shown)}</pre>" in detail(page, "r0.3")
    assert "<b>memory</b>" in detail(page, "r0.1") and "No steps yet." in detail(page, "r0.1")
    assert f"<pre>{html.escape(trajectory.rollouts[0].steps[0].summary)}</pre>" in detail(page, "r0.1")


# --- the selection among rollouts ---


def test_a_vote_tie_shows_the_votes_and_the_rollout_the_tie_rule_chose(study):
    view = trajectory_to_view(study[VOTE, TASK])
    s = view["selection"]
    assert (s["method"], s["chosen"], s["tie"], s["decided_by_tie"]) == ("vote", 0, True, 0)
    assert s["tied"] == ["Dr. Emil Kimura", "Dr. Goran Gallagher"] and s["votes"] == dict.fromkeys(s["tied"], 1)
    assert [r["vote"] for r in view["rollouts"]] == ["Dr. Emil Kimura", "Dr. Goran Gallagher", None]
    assert [r["chosen"] for r in view["rollouts"]] == [True, False, False]
    page = trajectory_html(view)
    shown = text(page.split('<table class="tj-table"')[0])
    assert "tie between Dr. Emil Kimura, Dr. Goran Gallagher: the tie rule chose rollout 0" in shown
    assert "a tie goes to the answer given first" in shown
    assert "votes for Dr. Goran Gallagher" in text(rows(page)["r1"]) and "does not vote" in text(rows(page)["r2"])
    assert "chosen" in text(rows(page)["r0"]) and "chosen" not in text(rows(page)["r1"])


def test_a_clear_majority_names_no_tie():
    four = AgentConfig(name="bo4", tts="best_of_n", n_rollouts=4, selection="vote", temperature=0.7)
    view = trajectory_to_view(run_one(four))
    s = view["selection"]
    assert (s["tie"], s["tied"], s["decided_by_tie"]) == (False, [], None)
    assert s["votes"] == {"Dr. Emil Kimura": 2, "Dr. Goran Gallagher": 1}
    assert "tie rule chose" not in text(trajectory_html(view))


def test_a_score_tie_goes_to_the_lowest_index_and_says_so():
    scored = AgentConfig(name="score", tts="best_of_n", n_rollouts=3, selection="score", temperature=0.7)
    view = trajectory_to_view(run_one(scored))  # the scorer gives every rollout 7
    s = view["selection"]
    assert (s["scores"], s["tie"], s["tied"], s["decided_by_tie"]) == ([7.0, 7.0, 7.0], True, [0, 1, 2], 0)
    assert [r["score"] for r in view["rollouts"]] == [7.0, 7.0, 7.0]
    assert "tie between rollout 0, rollout 1, rollout 2: the tie rule chose rollout 0" in text(trajectory_html(view))

    graded = run_one(scored, scorer=lambda i: {"analysis": "x", "score": 9 if "verify(" in i["attempt"] else 3})
    view = trajectory_to_view(graded)
    s = view["selection"]
    assert (s["scores"], s["tie"], s["decided_by_tie"], s["chosen"]) == ([9.0, 3.0, 3.0], False, None, 0)
    assert [r["score"] for r in view["rollouts"]] == [9.0, 3.0, 3.0]
    assert "score 9" in text(rows(trajectory_html(view))["r0"]) and "score 3" in text(rows(trajectory_html(view))["r1"])


def test_the_final_answer_and_its_grade_are_shown(study):
    trajectory = study[VOTE, TASK]
    page = trajectory_html(trajectory_to_view(trajectory))
    outcome = text(re.search(r'<div class="tj-outcome">.*?</div>', page, re.DOTALL).group(0))
    assert f"final answer {trajectory.answer} answered" in outcome
    assert "success score 1 by meta-routing exact evaluator" in outcome
    wrong = replace(trajectory, grade=RecordedGrade(label="incorrect_answer", score=0.0, grader="g"))
    assert "incorrect_answer score 0 by g" in text(trajectory_html(trajectory_to_view(wrong)))
    assert "not graded" in text(trajectory_html(trajectory_to_view(replace(trajectory, grade=None))))


# --- model calls ---


def view_calls(view):
    """Every call the view shows, wherever it shows it."""
    yield from view["selection"]["calls"]
    for r in view["rollouts"]:
        for n in r["delegation"] or ():
            yield from n["calls"]
        for p in r["plans"]:
            yield from p["calls"]
        for s in r["steps"]:
            yield from s["calls"]


@pytest.mark.parametrize("config", [*CONFIGS, AgentConfig(name="subtasks", subtasks=True)], ids=lambda c: c.name)
def test_every_model_call_is_in_the_view_once_with_its_role_and_the_runs_usage(config):
    trajectory = run_one(config)
    view = trajectory_to_view(trajectory)
    recorded = trajectory.calls_df()  # the one usage count: the trajectory's run
    assert Counter(c["role"] for c in view_calls(view)) == Counter(recorded["role"])
    assert {r["role"]: r["calls"] for r in view["roles"]} == dict(Counter(recorded["role"]))
    by_role = recorded.groupby("role")["input_tokens"].sum().to_dict()
    assert {r["role"]: r["input_tokens"] for r in view["roles"]} == by_role
    total = trajectory.usage_df().iloc[-1]
    assert view["totals"]["model_calls"] == len(recorded) == total["calls"]
    assert view["totals"]["input_tokens"] == recorded["input_tokens"].sum() == total["input_tokens"]
    assert view["totals"]["output_tokens"] == recorded["output_tokens"].sum() == total["output_tokens"]
    assert view["totals"]["cost"] == 0.0  # the scripted model runs in-process


def test_step_calls_show_their_outputs_and_the_prompt_as_sent(study):
    trajectory = study[PLAN, TASK]
    page = trajectory_html(trajectory_to_view(trajectory))
    step = detail(page, "r0.1")
    actor = trajectory.rollouts[0].steps[0].calls[0]
    assert "<b>actor</b>" in step and html.escape(json.dumps(actor.outputs, indent=1)) in step
    assert "<b>summarizer</b>" in step  # the step's memory summary is its call too
    assert "prompt and completion not recorded for this call" not in step
    assert html.escape(actor.exchanges[0].messages[-1]["content"]) in step  # the prompt as sent


def test_a_delegated_rollout_shows_romas_prompts_completions_and_cached_marks(tmp_path):
    config, task = AgentConfig(name="subtasks", subtasks=True), tasks()[0]
    fresh = Agent(config, lm=scripted_lm(tmp_path)).run(task)
    cached = Agent(config, lm=scripted_lm(tmp_path)).run(task)  # every request again: served by the cache
    for trajectory, is_cached in ((fresh, False), (cached, True)):
        view = trajectory_to_view(trajectory)
        roma = view["rollouts"][0]["delegation"]
        planning = [c for n in roma for c in n["calls"]]
        assert [c["role"] for c in planning] == ["decomposer:atomizer", "decomposer:planner", "decomposer:aggregator"]
        assert all(c["cached"] is is_cached and len(c["exchanges"]) == 1 for c in planning)
        page = detail(trajectory_html(view), "r0")
        exchange = planning[0]["exchanges"][0]
        for message in exchange["messages"]:
            assert f"<pre>{html.escape(message['content'])}</pre>" in page  # the prompt as sent, whole
        assert f"<pre>{html.escape(exchange['completions'][0])}</pre>" in page
        assert ("model request 1 (cached)" in page) is is_cached and ('class="tj-mark">cached' in page) is is_cached
        roles = {r["role"]: r for r in view["roles"]}
        assert (roles["decomposer:planner"]["recorded"], roles["decomposer:planner"]["cached"]) == (1, int(is_cached))
        subtask_steps = [s for s in view["rollouts"][0]["steps"] if s["subtask"]]
        assert len(subtask_steps) == 6 and all(s["plan_id"] is None for s in subtask_steps)


# --- HTML ---


class MarkupEnv:
    tools = (Tool("echo", "repeats some markup"),)

    def call(self, name, arguments):
        return "<script>alert('x')</script> & <b>bold</b>"


def test_static_html_escapes_and_every_row_opens_its_detail_without_javascript():
    def respond(request):
        memory = request.inputs.get("memory", "")
        if "Step 1:" not in memory:
            return {"thought": "<i>", "action": "echo", "arguments": "{}", "answer": ""}
        return {"thought": "done", "action": "final_answer", "arguments": "{}", "answer": "<answer & more>"}

    item = Item("toy", "t<1>", "What does <echo> say?", "x")
    task = AgentTask(item=item, split="dev", stratum="toy", environment=lambda context: MarkupEnv(),
                     grader=StringMatchGrader())
    lm = dspy.LM("scripted/markup", engine=ScriptedEngine(respond), cache=False)
    view = trajectory_to_view(Agent(AgentConfig(thought=True), lm=lm).run(task))
    page = trajectory_html(view)
    assert "<script>" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "What does &lt;echo&gt; say?" in page and "&lt;answer &amp; more&gt;" in page
    assert "<answer" not in page and "<echo>" not in page
    assert "<b>thought</b><pre>&lt;i&gt;</pre>" in detail(page, "r0.1")  # the model's text is never markup
    assert set(rows(page)) == set(view_ids(view))
    # issue 26: each row is the summary of its own detail, in page order, and no detail is copied
    assert expandable(page) == [(i, i) for i in view_ids(view)]
    assert all(page.count(f'data-detail="{i}"') == 1 for i in view_ids(view))
    assert 'href="#' not in page and "click a rollout or a step to see it whole" in page


def test_rows_carry_filter_attributes_and_a_rollout_row_the_union_of_its_steps(study):
    page = trajectory_html(trajectory_to_view(study[VOTE, TASK]))
    found = rows(page)
    assert 'data-status="unknown_tool"' in found["r1.1"] and 'data-tool="web_search"' in found["r1.1"]
    assert 'data-rollout="r1"' in found["r1.1"] and 'data-rollout="r2"' in found["r2.1"]
    assert 'data-rollout="r1"' in found["r1"]  # the rollout filter keeps the rollout's own row
    assert 'data-status="answered ok unknown_tool"' in found["r1"]
    assert 'data-tool="final_answer retrieve web_search"' in found["r1"]
    for attr, values in (("rollout", ["r0", "r1", "r2"]), ("status", ["answered", "ok", "unknown_tool"]),
                         ("tool", ["final_answer", "retrieve", "verify", "web_search"])):
        select = re.search(rf'<select data-filter="{attr}">(.*?)</select>', page).group(1)
        assert re.findall(r'<option value="([^"]*)">', select) == ["", *values]


def test_every_status_has_a_colour():
    assert set(ROLLOUT_STATUSES) | {"ok"} <= set(STATUS_COLORS)


# --- widgets ---


def test_selecting_as_the_browser_would_reaches_python_observers(study):
    widget = TrajectoryWidget(study[VOTE, TASK])
    assert widget.selected_id == "r0" and widget.selected["chosen"]  # the chosen rollout first
    seen = []
    widget.observe(lambda change: seen.append(widget.selected), names="selected_id")
    widget.set_state({"selected_id": "r1.1"})  # the message a click in the browser sends
    assert widget.selected_id == "r1.1" and seen[-1]["status"] == "unknown_tool"
    assert 'data-select="r1.1"' in widget._html and 'data-detail="r1.1"' in widget._html


def test_a_list_wise_pick_is_the_rollout_shown_first():
    listwise = AgentConfig(name="list", tts="best_of_n", n_rollouts=3, selection="list", temperature=0.7)
    trajectory = run_one(listwise, selector=lambda inputs: {"analysis": "the second", "index": 1})
    widget = TrajectoryWidget(trajectory)
    assert trajectory.selection.chosen == 1 and widget.selected_id == "r1" and widget.selected["chosen"]
    s = widget.view["selection"]
    assert (s["method"], s["chosen"], s["tie"], s["calls"][0]["role"]) == ("list", 1, False, "selector")
    assert "chose rollout 1" in text(widget._html) and "chosen" in text(rows(widget._html)["r1"])


def test_selection_survives_a_new_trajectory_or_falls_back_to_the_chosen_rollout(study):
    widget = TrajectoryWidget()
    assert widget.selected_id == "" and widget.selected is None
    widget.show_trajectory(study[VOTE, TASK])
    widget.selected_id = "r2.1"
    widget.show_trajectory(study[VOTE, OTHER])
    assert widget.selected_id == "r2.1"
    widget.show_trajectory(study[PLAN, TASK])  # one rollout: r2.1 is gone
    assert widget.selected_id == "r0"


def test_the_widget_carries_its_static_view_beside_the_widget_view(study):
    trajectory = study[PLAN, TASK]
    widget = TrajectoryWidget(trajectory)
    data, _ = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/html"] == widget._html == trajectory_html(trajectory_to_view(trajectory))


def test_comparison_shows_one_id_in_every_trajectory(study):
    pair = {"vote": study[VOTE, TASK], "plan": study[PLAN, TASK]}
    comparison = TrajectoryComparison(pair)
    assert comparison.labels == ["vote", "plan"] and comparison.selected_id == "r0"
    comparison.set_state({"selected_id": "r0.2"})
    assert comparison._html.count('data-detail="r0.2"') == 2
    assert comparison.selected["vote"]["tool"] == "verify" and comparison.selected["plan"]["tool"] == "verify"
    comparison.set_state({"selected_id": "r1.1"})
    assert comparison.selected == {"vote": comparison.selected["vote"], "plan": None}
    page = comparison._html
    assert page.index("<h4 style='margin:4px 0'>vote</h4>") < page.index("<h4 style='margin:4px 0'>plan</h4>")
    assert page.count('<select data-filter="status">') == 1  # one set of filters for every pane
    pairs = expandable(page)  # without JavaScript each pane's rows open their own details
    assert len(pairs) == sum(len(view_ids(v)) for v in comparison.views) and all(r == b for r, b in pairs)
    assert '<span class="rv-static-only"><i>click a rollout or a step to see it whole</i></span>' in page
    assert comparison._repr_mimebundle_()[0]["text/html"] == page
    assert TrajectoryComparison([study[PLAN, TASK]]).labels == ["trajectory 1"]
    with pytest.raises(ValueError, match="at least one trajectory"):
        TrajectoryComparison({})
    with pytest.raises(ValueError, match="2 trajectories but 1 labels"):
        compare_trajectories_html([trajectory_to_view(t) for t in pair.values()], ["one"])


# --- saved trajectories ---


def altered(study_dir: Path, folder: Path) -> Path:
    """A copy of the saved study in evaluate's layout where best-of-3 got OTHER wrong and plan-and-revise
    has a second run of TASK."""
    changed = []
    for t in read_trajectories(study_dir):
        if t.task_id == OTHER and t.config["name"] == VOTE:
            t = replace(t, grade=RecordedGrade(label="incorrect_answer", score=0.0, grader="g"))
        changed.append(t)
        if t.task_id == TASK and t.config["name"] == PLAN:
            changed.append(replace(t, run=1))
    for t in changed:
        path = folder / t.config["name"] / "traces" / t.config["name"] / f"r{t.run}" / f"{t.task_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(t.to_json())
    return folder


def test_saved_trajectories_picks_one_task_and_labels_each_configuration(study_dir, tmp_path):
    found = saved_trajectories(study_dir)
    assert list(found) == ["best-of-3-vote", "plan-and-revise"]  # both solve both tasks: the first task
    assert {t.task_id for t in found.values()} == {TASK}
    assert {t.task_id for t in saved_trajectories(study_dir, task_id=OTHER).values()} == {OTHER}
    one_config = study_dir / "plan-and-revise"
    assert list(saved_trajectories(one_config, run=None)) == ["plan-and-revise r0"]

    # the default is the first task on whose grade the configurations disagree
    assert {t.task_id for t in saved_trajectories(altered(study_dir, tmp_path)).values()} == {OTHER}

    with pytest.raises(ValueError, match="no saved trajectory of run 3"):
        saved_trajectories(study_dir, run=3)
    with pytest.raises(ValueError, match="no saved trajectory of task 'nope'"):
        saved_trajectories(study_dir, task_id="nope")


def test_the_picker_lists_the_saved_tasks_and_shows_the_one_picked(study_dir, tmp_path):
    picker = TrajectoryPicker(altered(study_dir, tmp_path))
    assert picker.picker.options == ((f"{TASK} · 2/2 correct", TASK), (f"{OTHER} · 1/2 correct", OTHER))
    assert picker.picker.value == OTHER and {v["task_id"] for v in picker.comparison.views} == {OTHER}
    assert f"showing task <code>{OTHER}</code>" in picker.shown.value and "needs the notebook's kernel" in picker.shown.value
    picker.comparison.selected_id = "r1.1"
    picker.picker.value = TASK  # as the dropdown in the browser sets it
    assert {v["task_id"] for v in picker.comparison.views} == {TASK}
    assert f"showing task <code>{TASK}</code>" in picker.shown.value
    assert picker.comparison.labels == ["best-of-3-vote", "plan-and-revise"]
    assert picker.comparison.selected_id == "r1.1"  # the same step of the other task
    static = picker._repr_mimebundle_()["text/html"]
    assert static == f"<p>task <code>{TASK}</code></p>" + picker.comparison._html
    every_run = TrajectoryPicker(tmp_path, task_id=TASK, run=None)
    assert every_run.picker.options[0] == (f"{TASK} · 3/3 correct", TASK)
    assert every_run.comparison.labels == ["best-of-3-vote r0", "plan-and-revise r0", "plan-and-revise r1"]


# --- an executed notebook exported as HTML, offline ---


@pytest.fixture(scope="module")
def executed_notebook(study_dir, tmp_path_factory):
    """The fixture notebook executed as papermill does (parameters injected, widget state stored)."""
    return execute_notebook(parameterized(FIXTURE_NOTEBOOK, {"OUT_DIR": str(study_dir)}),
                            tmp_path_factory.mktemp("export") / "trajectory_view.ipynb")


def test_the_exported_page_shows_every_trajectory_and_loads_nothing_from_a_network(executed_notebook, study):
    page = export_html(executed_notebook).read_text()
    assert 'data-view="trajectory-comparison"' in page
    expected = {i for label in (VOTE, PLAN) for i in view_ids(trajectory_to_view(study[label, TASK]))}
    assert set(rows(page)) == expected
    assert "the tie rule chose rollout 0" in text(page)
    assert_loads_nothing_from_a_network(page)
