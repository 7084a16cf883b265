"""Notebook 40 (your own tasks) in real JupyterLab and Chromium (issue 25): the evaluation runs in
the page on the smoke tier (scripted model), ROMA's tree and the agent's trajectory stand side by
side, a clicked row opens in both panes and the selection reaches the kernel."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COMPARISON = '.roma-view.rv-live[data-view="run-comparison"]'


def test_two_systems_traces_side_by_side_and_a_click_reaches_the_kernel(lab, page, smoke_parameters):
    tasks = REPO / "data" / "tasks"
    parameters = smoke_parameters("40_evaluate_your_tasks") | {
        "TASKS_FILE": str(tasks / "world_questions.csv"), "CORPUS": str(tasks / "world_corpus.jsonl")}
    nb = lab.open(page, REPO / "notebooks" / "40_evaluate_your_tasks.ipynb", parameters)
    nb.run_all()
    view = page.locator(COMPARISON)  # .rv-live: drawn by the widget's script, not the static fallback
    view.wait_for()
    roma, agent = view.locator(".rt-pane").all()
    assert [roma.locator("h4").inner_text(), agent.locator("h4").inner_text()] == ["roma", "agent"]
    assert roma.locator("tr[data-select]").count() >= 1 and agent.locator("tr[data-select]").count() > 1
    selected = "print([o for o in Out.values() if type(o).__name__ == 'RunComparison'][-1].selected_id)"
    # ROMA's tree: root 0, its subtasks 0.0, 0.1; the agent's: the task, rollouts r0, r1, their steps
    for pane, row in ((roma, "0.1"), (agent, "r0.1")):
        pane.locator(f'tr[data-select="{row}"]').click()
        assert "rv-selected" in pane.locator(f'tr[data-select="{row}"]').get_attribute("class")
        detail = pane.locator(f'[data-detail="{row}"]')
        assert detail.is_visible()
        assert nb.execute(selected).strip() == row  # the click reached the kernel
    question = nb.execute("print(tasks.items[0].question)").strip()
    for pane in (roma, agent):  # both panes show the first task's traces
        assert question[:40] in pane.text_content()
