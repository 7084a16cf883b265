"""The execution-tree viewer in real JupyterLab and Chromium (issue 13 §3): notebooks run in the page,
rows are clicked and filtered, the selection reaches the kernel, states and timelines are the
trace's, cached calls are marked; and an executed notebook exported as HTML shows the tree with the
network off."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from schedules import most_at_once

from roma_lab.widgets._view import DISCONNECTED_NOTE

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
COMPARISON = '.roma-view.rv-live[data-view="run-comparison"]'
TREE = '.roma-view.rv-live[data-view="execution-tree"]'


def one_cell_notebook(path: Path, source: str) -> Path:
    """A notebook of one code cell at ``path``, its kernelspec as JupyterLab writes it."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, path)
    return path


def call_intervals(pane) -> list[tuple[float, float]]:
    return [(float(s.get_attribute("data-start")), float(s.get_attribute("data-end")))
            for s in pane.locator('.rt-seg[data-kind="call"]').all()]


def test_schedules_side_by_side_click_filter_and_the_kernel_sees_the_selection(lab, page, smoke_parameters):
    nb = lab.open(page, NOTEBOOKS / "02_measure_structure.ipynb", smoke_parameters("02_measure_structure"))
    nb.run_all()
    view = page.locator(COMPARISON)  # .rv-live: drawn by the widget's script, not the static fallback
    view.wait_for()
    one, many = view.locator(".rt-pane").all()
    assert one.locator("h4").inner_text() == "max_concurrency=1"
    assert many.locator("h4").inner_text() == "max_concurrency=8"
    for pane in (one, many):
        assert pane.locator("tr[data-select]").count() == 13 and pane.get_by_text("run completed").count() == 1
    # the timelines are the recorded schedule: one slot never runs two calls at once, eight do
    assert most_at_once(call_intervals(one)) == 1 and most_at_once(call_intervals(many)) >= 2
    assert one.locator('.rt-seg[data-kind="queued"]').count() > 0
    assert many.locator('tr[data-select="0.0.2"] .rt-seg[data-kind="waiting"]').count() == 1  # after 0.0.1

    one.locator('tr[data-select="0.1.1"]').click()
    for pane in (one, many):
        assert "rv-selected" in pane.locator('tr[data-select="0.1.1"]').get_attribute("class")
        assert pane.locator('[data-detail="0.1.1"]').is_visible()
        assert not pane.locator('[data-detail="0"]').is_visible()
        assert "executor:think" in pane.locator('[data-detail="0.1.1"]').inner_text()
    shown = nb.execute("print([o for o in Out.values() if type(o).__name__ == 'RunComparison'][-1].selected_id)")
    assert shown.strip() == "0.1.1"  # the click reached the kernel

    view.locator('select[data-filter="roles"]').select_option("planner")
    visible = [r.get_attribute("data-select") for r in one.locator("tr[data-select]").all() if r.is_visible()]
    assert visible == ["0", "0.0", "0.1", "0.2"]  # the nodes that called the planner
    view.locator('select[data-filter="roles"]').select_option("")
    assert sum(r.is_visible() for r in one.locator("tr[data-select]").all()) == 13


def test_quickstart_tree_on_the_embedded_model_shows_prompts_and_marks_cached_calls(lab, page, smoke_parameters):
    # the smoke tier's goal on the smallest embedded model: its completions go through the cache
    parameters = smoke_parameters("01_run_quickstart") | {"LM": "local:smollm2-135m"}
    nb = lab.open(page, NOTEBOOKS / "01_run_quickstart.ipynb", parameters)
    nb.run_all(timeout_s=600)
    tree = page.locator(TREE).last
    tree.wait_for()
    run = json.loads((Path(parameters["OUT_DIR"]) / "run.json").read_text())
    assert tree.locator("tr[data-select]").count() == len(run["nodes"])
    assert f"run {run['status']}" in tree.locator(".rt-summary").inner_text()

    root = tree.locator('tr[data-select="0"]')
    root.click()
    detail = tree.locator('[data-detail="0"]')
    assert detail.is_visible() and "planner" in detail.inner_text()  # PLAN_ROOT: the root plans, no atomizer asked
    call = detail.locator("details.rt-call").first
    call.locator("summary").click()  # open the first call: its prompt as sent and the completion
    text = call.inner_text()
    assert "model request 1" in text and "system" in text and "completion" in text
    assert "Your output fields are" in text  # DSPy's prompt itself, not only the role's inputs

    # the same goal again, shown in the same widget: every completion now comes from the cache, and says so,
    # except those whose text failed to parse: such a reply is never served again (lm/_unparsed.py). A call
    # whose reply failed to parse has a further exchange (DSPy's adapter asked again); the 135M model's
    # replies differ with the CPU's kernels, so whether any failed differs from machine to machine.
    calls = [c for n in run["nodes"] for c in n["calls"]]
    failed = {str(e["completions"][0]) for c in calls for e in c.get("exchanges", [])[:-1] if e["completions"]}
    clean = [c for c in calls if len(c.get("exchanges", [])) == 1 and not c.get("error")
             and not {str(x) for e in c.get("exchanges", []) for x in e["completions"]} & failed]
    assert clean  # the check below is about something
    nb.execute("tree.show_run(run_quickstart(GOAL, OUT_DIR, lm=LM, max_depth=MAX_DEPTH, "
               "max_concurrency=MAX_CONCURRENCY, on_event=tree.on_event, plan_root=PLAN_ROOT))")
    tree.locator(".rt-cached").first.wait_for()
    again = json.loads((Path(parameters["OUT_DIR"]) / "run.json").read_text())
    replayed = sum(all(e["cached"] for e in c.get("exchanges", [])) and bool(c.get("exchanges", []))
                   for n in again["nodes"] for c in n["calls"])
    assert sum(len(n["calls"]) for n in again["nodes"]) == len(calls)  # the same calls, in the same order
    assert len(clean) <= replayed <= len(calls)  # every cleanly parsed reply came from the cache
    assert replayed == len(calls) or failed  # a call asked anew only where a reply had failed to parse
    assert f"{replayed} of {len(calls)} replayed from the cache" in tree.locator(".rt-summary").inner_text()
    assert "lookup" in tree.locator('[data-detail="0"]').inner_text()
    assert tree.locator('.rt-seg[data-cached="true"]').count() == replayed


@pytest.fixture(scope="module")
def executed_quickstart(tmp_path_factory) -> Path:
    """Notebook 01's executed copy as the runner leaves it (smoke tier), beside its run.json."""
    results = tmp_path_factory.mktemp("results")
    subprocess.run([sys.executable, "-m", "roma_lab.experiments", "--root", str(REPO), "run", "01_run_quickstart",
                    "--smoke", "--results", str(results)], check=True, timeout=900)
    return results / "01_run_quickstart" / "01_run_quickstart.ipynb"


def test_the_runners_executed_quickstart_opens_in_lab_with_its_live_tree(lab, page, executed_quickstart):
    # a newcomer opens the executed copy as it is, without `jupyter trust`: the runner signed it, so
    # JupyterLab renders the live widget (view.js, from the stored widget state) and not the sanitised fallback
    copy = lab.root / f"executed_{secrets.token_hex(4)}.ipynb"
    shutil.copyfile(executed_quickstart, copy)
    page.goto(f"{lab.url}/lab/workspaces/{secrets.token_hex(4)}/tree/{copy.name}?token={lab.token}")
    page.wait_for_function("name => window.jupyterapp?.shell?.currentWidget?.context?.path === name",
                           arg=copy.name)
    tree = page.locator(TREE).last  # .rv-live: drawn by the widget's JavaScript, absent from the fallback
    tree.wait_for()
    run = json.loads((executed_quickstart.parent / "run.json").read_text())
    assert tree.locator("tr[data-select]").count() == len(run["nodes"])
    calls = tree.locator('.rt-seg[data-kind="call"]')
    assert calls.count() == sum(len(n["calls"]) for n in run["nodes"])
    assert max(calls.nth(i).bounding_box()["width"] for i in range(calls.count())) > 0  # the timeline is drawn
    # drawn from the saved widget state with no kernel behind it: a sentence says so, not a bare red icon
    host = tree.locator("xpath=..")
    assert "jupyter-widgets-disconnected" in host.get_attribute("class").split()
    assert DISCONNECTED_NOTE in host.evaluate("h => getComputedStyle(h, '::before').content")


def test_an_exported_notebook_shows_its_tree_with_the_network_off(offline_page, tmp_path, executed_quickstart):
    executed = executed_quickstart
    assert "widgets" in json.loads(executed.read_text())["metadata"]  # the case nbconvert drew blank
    subprocess.run([sys.executable, "-m", "roma_lab.widgets", "export", str(executed), "-o",
                    str(tmp_path / "quickstart.html")], check=True, timeout=300)
    run = json.loads((executed.parent / "run.json").read_text())
    page, asked = offline_page(tmp_path / "quickstart.html")
    trees = page.locator('.roma-view[data-view="execution-tree"]')
    final = trees.last
    assert final.is_visible()
    assert final.locator("tr[data-select]").count() == len(run["nodes"])
    # the node column reads as a tree: left-aligned, a child indented under its parent (not right-aligned
    # by the page's table style, where 0.2 read as the root's sibling)
    cells = final.locator("tr[data-select] td:first-child")
    assert {cells.nth(i).evaluate("c => getComputedStyle(c).textAlign") for i in range(cells.count())} == {"left"}
    child = final.locator('tr[data-select]:not([data-select="0"]) td:first-child').first
    root = final.locator('tr[data-select="0"] td:first-child')
    assert child.evaluate("c => parseFloat(getComputedStyle(c).paddingLeft)") > root.evaluate(
        "c => parseFloat(getComputedStyle(c).paddingLeft)")
    assert "Usage per component" in page.inner_text("body")  # the rest of the notebook is there too
    roles = final.locator('select[data-filter="roles"]')  # the filter the notebook's text mentions
    assert roles.is_visible()
    roles.select_option("aggregator")
    shown = [r.get_attribute("data-select") for r in final.locator("tr[data-select]").all() if r.is_visible()]
    assert 0 < len(shown) < len(run["nodes"])  # only the nodes that called the aggregator
    roles.select_option("")
    assert all(r.is_visible() for r in final.locator("tr[data-select]").all())
    assert not final.locator('[data-detail="0"]').is_visible()
    final.locator('tr[data-select="0"]').click()  # without JavaScript a row opens onto its role calls
    assert final.locator('[data-detail="0"]').is_visible()
    assert asked == []  # nothing was fetched: not even an attempt


def test_the_offline_harness_refuses_and_records_every_request_but_the_file(offline_page, tmp_path):
    """What the two export tests rely on: a page that asks for anything is caught."""
    (tmp_path / "asks.html").write_text('<p>x</p><img src="http://example.invalid/a.png">'
                                        '<script src="https://cdn.invalid/b.js"></script>')
    page, asked = offline_page(tmp_path / "asks.html")
    page.wait_for_load_state()
    assert sorted(asked) == ["http://example.invalid/a.png", "https://cdn.invalid/b.js"]
    assert page.inner_text("body") == "x"


def test_a_call_in_flight_ticks_on_in_the_live_tree_between_trace_events(lab, page, tmp_path):
    """Issue 44: "now in planner (since 0.005 s)" read the same for 83 s; the live tree now says how long
    the call has waited on the model, and its clock runs on without a new event."""
    source = ("from roma_lab.trace import CallInFlight, Node\n"
              "from roma_lab.trace import NodeEvent\n"
              "from roma_lab.widgets import ExecutionTreeWidget\n"
              "root = Node(id='0', parent_id=None, depth=0, goal='g', task_type='think', status='running', "
              "created_s=0.0, started_s=0.0, in_flight=CallInFlight('planner', queued_s=0.0, started_s=0.005))\n"
              "w = ExecutionTreeWidget()\n"
              "w.on_event(NodeEvent('running', root))\n"
              "w.selected_id = '0'\n"
              "w")
    opened = lab.open(page, one_cell_notebook(tmp_path / "ticking.ipynb", source))
    opened.run_all()
    tick = page.locator(f"{TREE} [data-detail='0'] .rt-tick")
    tick.wait_for()
    first = int(tick.inner_text())
    page.wait_for_timeout(2500)
    assert "waiting on the model in planner" in page.locator(f"{TREE} [data-detail='0']").inner_text()
    assert int(tick.inner_text()) >= first + 2  # ticking, with no event from the kernel


def test_the_teacher_goal_shows_its_answers_without_evidence_flagged_amber_in_the_live_tree(lab, page, tmp_path):
    """Issue 44: a search that found nothing (and the nodes built on it) is never a green 'completed'."""
    source = ("import sys\n"
              f"sys.path.insert(0, {str(REPO / 'tests')!r})\n"
              "from test_widgets_tree import teacher_run\n"
              "from roma_lab.widgets import ExecutionTreeWidget\n"
              "ExecutionTreeWidget(teacher_run())")
    opened = lab.open(page, one_cell_notebook(tmp_path / "teacher.ipynb", source))
    opened.run_all()
    tree = page.locator(TREE)
    tree.wait_for()
    assert "3 without evidence" in tree.locator(".rt-summary").inner_text()
    flagged = {r.get_attribute("data-select") for r in tree.locator("tr[data-select]").all()
               if "no evidence" in r.inner_text()}
    assert flagged == {"0", "0.1", "0.3"}
    badge = tree.locator('tr[data-select="0.2"] .rt-badge')
    assert badge.inner_text() == "completed" and "67, 160, 71" in badge.evaluate("b => getComputedStyle(b).backgroundColor")
    tree.locator('tr[data-select="0.1"]').click()
    assert "its search found no passage" in tree.locator('[data-detail="0.1"]').inner_text()


def test_the_mona_lisa_goal_s_answer_over_unrelated_passages_is_flagged_in_the_live_tree(lab, page, tmp_path):
    """Issue 52: the goal a newcomer saw all green (its search passages unrelated, its answer from memory),
    as the embedded model ran it in notebook 43's measured run: its root is flagged, never green."""
    source = ("from roma_lab.trace import load_trace\n"
              "from roma_lab.widgets import ExecutionTreeWidget\n"
              f"ExecutionTreeWidget(load_trace({str(REPO / 'findings' / '43_measure_evidence_flags' / 'traces' / 'goal-10.json')!r}))")
    opened = lab.open(page, one_cell_notebook(tmp_path / "mona.ipynb", source))
    opened.run_all()
    tree = page.locator(TREE)
    tree.wait_for()
    root = tree.locator('tr[data-select="0"]')
    assert "no evidence" in root.inner_text()
    root.click()
    assert "no evidence:" in tree.locator('[data-detail="0"]').inner_text()
