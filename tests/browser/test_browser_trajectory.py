"""The trajectory view in real JupyterLab and Chromium (issue 11): a notebook showing two configurations'
trajectories side by side runs in the page; a step is clicked, the rollout is switched, filters hide
rows, another task is picked, and what the page shows is the saved trajectories' record; the
selection reaches the kernel and back. An executed copy exported as HTML shows the same with the
network off.

The trajectories are real: ``roma_lab.evaluate`` runs the agent on meta-routing suite tasks with a scripted model
(tests/trajectory_fixtures.py), built before the browser opens (Playwright's event loop would stop
ROMA's asyncio.run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from trajectory_fixtures import study_trajectories
from view_pages import execute_notebook, parameterized

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "trajectory_view.ipynb"
COMPARISON = '.roma-view.rv-live[data-view="trajectory-comparison"]'
TASK = "dev-conflicting_sources-000"


def visible_rows(pane) -> list[str]:
    return [r.get_attribute("data-select") for r in pane.locator("tr[data-select]").all() if r.is_visible()]


def test_click_a_step_switch_rollout_filter_and_the_kernel_sees_the_selection(lab, page, study_dir):
    saved = study_trajectories(study_dir)
    vote_run, plan_run = saved["best-of-3-vote", TASK], saved["plan-and-revise", TASK]
    nb = lab.open(page, FIXTURE, {"OUT_DIR": str(study_dir)})
    nb.run_all()
    view = page.locator(COMPARISON)  # .rv-live: drawn by the widget's script, not the static fallback
    view.wait_for()
    vote, plan = view.locator(".tj-pane").all()
    assert [vote.locator("h4").inner_text(), plan.locator("h4").inner_text()] == ["best-of-3-vote", "plan-and-revise"]
    assert visible_rows(vote) == ["r0", "r0.1", "r0.2", "r0.3", "r1", "r1.1", "r1.2", "r1.3", "r2", "r2.1"]
    assert "the tie rule chose rollout 0" in vote.locator(".tj-selection").inner_text()
    # the chosen rollout is shown first, alone
    assert vote.locator('[data-detail="r0"]').is_visible() and not vote.locator('[data-detail="r0.1"]').is_visible()

    vote.locator('tr[data-select="r0.1"]').click()  # a step: the same step in both trajectories
    observation = vote_run.rollouts[0].steps[0].observation
    for pane, run in ((vote, vote_run), (plan, plan_run)):
        assert "rv-selected" in pane.locator('tr[data-select="r0.1"]').get_attribute("class")
        shown = pane.locator('[data-detail="r0.1"]')
        assert shown.is_visible() and not pane.locator('[data-detail="r0"]').is_visible()
        assert run.rollouts[0].steps[0].observation == observation
        assert shown.locator("pre").nth(1).inner_text() == observation  # thought, then the observation
    assert "initial plan" in plan.locator('[data-detail="r0.1"]').inner_text()
    assert nb.execute("print(picker.comparison.selected_id)").strip() == "r0.1"  # the click reached the kernel

    view.locator('select[data-filter="rollout"]').select_option("r1")  # switch rollout
    assert visible_rows(vote) == ["r1", "r1.1", "r1.2", "r1.3"] and visible_rows(plan) == []
    vote.locator('tr[data-select="r1"]').click()
    rollout = vote.locator('[data-detail="r1"]')
    assert rollout.is_visible() and "votes for Dr. Goran Gallagher" in rollout.inner_text()
    vote.locator('tr[data-select="r1.1"]').click()
    step = vote.locator('[data-detail="r1.1"]')
    assert step.is_visible() and not rollout.is_visible()
    assert f"unknown_tool: {vote_run.rollouts[1].steps[0].error}" in step.inner_text()
    assert "No steps yet." in step.inner_text()  # the memory the actor was shown at that step
    kernel = nb.execute("print(picker.comparison.selected_id, picker.comparison.selected['plan-and-revise'])").split()
    assert kernel == ["r1.1", "None"]  # plan-and-revise made one rollout: no r1.1 there

    view.locator('select[data-filter="status"]').select_option("unknown_tool")
    assert visible_rows(vote) == ["r1", "r1.1"]
    view.locator('select[data-filter="rollout"]').select_option("")
    assert visible_rows(vote) == ["r1", "r1.1"]  # the only rollout with an unknown tool
    view.locator('select[data-filter="status"]').select_option("")
    view.locator('select[data-filter="tool"]').select_option("verify")
    assert visible_rows(plan) == ["r0", "r0.2"] and visible_rows(vote) == ["r0", "r0.2"]
    view.locator('select[data-filter="tool"]').select_option("")
    assert len(visible_rows(vote)) == 10

    nb.execute("picker.comparison.selected_id = 'r2.1'")  # and back: the kernel's selection reaches the page
    vote.locator('[data-detail="r2.1"]').wait_for(state="visible")
    assert "Unable to determine" in vote.locator('[data-detail="r2.1"]').inner_text()

    other = "dev-conflicting_sources-001"  # another task, picked in the page
    page.locator(".widget-dropdown select").select_option(label=f"{other} · 2/2 correct")
    view.locator(".tj-head", has_text=other).first.wait_for()
    vote = view.locator(".tj-pane").first
    assert vote.locator('[data-detail="r2.1"]').is_visible()  # the same step of the other task
    observation = saved["best-of-3-vote", other].rollouts[0].steps[0].observation
    # r0.1's row is closed (r2.1 is selected): its text is in the page, not drawn
    assert TASK not in view.inner_text()
    assert observation.splitlines()[-1] in vote.locator('[data-detail="r0.1"]').text_content()


@pytest.fixture(scope="module")
def exported_page(study_dir, tmp_path_factory) -> Path:
    """The fixture notebook executed as papermill does (widget state stored), exported for offline reading."""
    from roma_lab.widgets import export_html

    return export_html(execute_notebook(parameterized(FIXTURE, {"OUT_DIR": str(study_dir)}),
                                        tmp_path_factory.mktemp("export") / "trajectory_view.ipynb"))


def test_an_exported_notebook_shows_the_trajectories_with_the_network_off(offline_page, exported_page, study_dir):
    saved = study_trajectories(study_dir)
    page, asked = offline_page(exported_page)
    view = page.locator('.roma-view[data-view="trajectory-comparison"]')
    assert view.is_visible() and page.locator(".rv-live").count() == 0  # the static view: no script ran
    vote = view.locator(".tj-pane").first
    assert vote.locator("tr[data-select]").count() == 3 + saved["best-of-3-vote", TASK].n_steps
    detail = vote.locator('[data-detail="r1.1"]')
    assert not detail.is_visible()
    vote.locator('tr[data-select="r1.1"]').click()  # without JavaScript a row opens onto its detail
    assert detail.is_visible() and "unknown_tool" in detail.inner_text()
    assert asked == []  # nothing was fetched: not even an attempt
