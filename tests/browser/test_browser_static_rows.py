"""Rows that open without JavaScript (issue 26), in real Chromium: an exported notebook and the static
HTML of every row-and-detail view (execution tree, run comparison, trajectory), read with JavaScript
switched off, open a clicked (or keyboard-activated) row onto its role calls; the live widget in
JupyterLab still selects on click, opens only the selected row and sends the selection to the kernel.

Runs and pages are built in module fixtures, before the browser opens (Playwright's event loop would
stop ROMA's asyncio.run)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from view_pages import execute_notebook

SCRIPT_RAN = "<script>document.documentElement.dataset.script = 'ran'</script>"
# A run whose middle subtask fails: its row must open onto the failed role call.
RUN_CELL = """\
from roma_lab.controller import Roma, ScriptedRoles, Subtask
from roma_lab.widgets import ExecutionTreeWidget, RunComparison
roles = ScriptedRoles({'root <goal>': (Subtask('fetch', 'search'), Subtask('bad', 'think'),
                                       Subtask('after bad', 'write', (1,)))}, fail=('bad',))
run = Roma(**roles.role_kwargs(), max_depth=1).run('root <goal>')"""


def scripted_run():
    namespace: dict = {}
    exec(RUN_CELL, namespace)
    return namespace["run"]


@pytest.fixture(scope="module")
def static_pages(tmp_path_factory, study_dir) -> dict[str, Path]:
    """Each view's static HTML (what a notebook saves beside the widget) as a page of its own, with a
    script that marks the page if it ever runs."""
    from trajectory_fixtures import study_trajectories

    from roma_lab.widgets import ExecutionTreeWidget, RunComparison, TrajectoryWidget

    saved = study_trajectories(study_dir)
    run = scripted_run()
    views = {"tree": ExecutionTreeWidget(run), "comparison": RunComparison({"first": run, "second": run}),
             "trajectory": TrajectoryWidget(saved["best-of-3-vote", "dev-conflicting_sources-000"])}
    folder = tmp_path_factory.mktemp("static")
    pages = {}
    for name, view in views.items():
        pages[name] = folder / f"{name}.html"
        pages[name].write_text(f'<!doctype html><meta charset="utf-8">{view._repr_mimebundle_()[0]["text/html"]}'
                               f"{SCRIPT_RAN}")
    return pages


@pytest.fixture(scope="module")
def exported_page(tmp_path_factory) -> Path:
    """A notebook showing a tree, executed as papermill does (widget state stored), exported offline."""
    from roma_lab.widgets import export_html

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(RUN_CELL), nbformat.v4.new_code_cell(
        "ExecutionTreeWidget(run)")])
    return export_html(execute_notebook(nb, tmp_path_factory.mktemp("export") / "static_rows.ipynb"))


@pytest.fixture
def no_script(browser):
    """Opens a local file in a context with JavaScript disabled and the network off."""
    context = browser.new_context(java_script_enabled=False, offline=True)

    def open_page(path: Path):
        page = context.new_page()
        page.goto(path.as_uri())
        return page

    yield open_page
    context.close()


def test_an_exported_notebook_opens_a_clicked_row_onto_its_role_calls_with_javascript_off(no_script, exported_page):
    page = no_script(exported_page)
    tree = page.locator('.roma-view[data-view="execution-tree"]')
    assert tree.locator("tr[data-select]").count() == 4 and page.locator(".rv-live").count() == 0
    failed = tree.locator('[data-detail="0.1"]')
    assert not failed.is_visible()  # rows start closed: the page is the table
    tree.locator('tr[data-select="0.1"]').click()
    assert failed.is_visible() and "executor:think" in failed.inner_text() and "bad" in failed.inner_text()
    assert "failed" in failed.inner_text()
    assert not tree.locator('[data-detail="0"]').is_visible()  # only the clicked row opened
    assert "click a row to see its role calls" in tree.inner_text()


def test_static_views_open_rows_by_click_and_by_keyboard_without_javascript(no_script, static_pages):
    page = no_script(static_pages["tree"])
    assert page.locator("html[data-script]").count() == 0  # the page's own script never ran
    tree = page.locator('.roma-view[data-view="execution-tree"]')
    root, failed = tree.locator('[data-detail="0"]'), tree.locator('[data-detail="0.1"]')
    tree.locator('tr[data-select="0"]').click()
    assert root.is_visible() and "planner" in root.inner_text()
    call = root.locator("details.rt-call").first  # a role call inside an open row opens on its own
    call.locator("summary").click()
    assert "outputs" in call.inner_text() and root.is_visible()
    tree.locator('tr[data-select="0"]').click()  # a second click closes the row
    assert not root.is_visible()
    tree.locator('details.rv-row:has(tr[data-select="0.1"]) > summary').focus()
    page.keyboard.press("Enter")  # keyboard users open a row too
    assert failed.is_visible() and "executor:think" in failed.inner_text()

    page = no_script(static_pages["comparison"])
    first, second = page.locator(".rt-pane").all()
    first.locator('tr[data-select="0.2"]').click()  # without a kernel each pane opens on its own
    assert first.locator('[data-detail="0.2"]').is_visible() and not second.locator('[data-detail="0.2"]').is_visible()
    assert "after 0.1" in first.locator('[data-detail="0.2"]').inner_text()

    page = no_script(static_pages["trajectory"])
    view = page.locator('.roma-view[data-view="trajectory"]')
    step = view.locator('[data-detail="r1.1"]')
    assert not step.is_visible()
    view.locator('tr[data-select="r1.1"]').click()
    assert step.is_visible() and "unknown_tool" in step.inner_text() and "No steps yet." in step.inner_text()
    view.locator('tr[data-select="r1"]').click()
    assert "votes for Dr. Goran Gallagher" in view.locator('[data-detail="r1"]').inner_text()


def test_the_live_widget_still_selects_on_click_and_opens_only_the_selected_row(lab, page, tmp_path):
    notebook = tmp_path / "static_rows_live.ipynb"
    cells = [nbformat.v4.new_code_cell(RUN_CELL), nbformat.v4.new_code_cell("tree = ExecutionTreeWidget(run)\ntree")]
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}  # no kernel dialog
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=kernel), notebook)
    nb = lab.open(page, notebook)
    nb.run_all()
    tree = page.locator('.roma-view.rv-live[data-view="execution-tree"]')  # drawn by view.js
    tree.wait_for()
    root, failed = tree.locator('[data-detail="0"]'), tree.locator('[data-detail="0.1"]')
    assert root.is_visible() and not failed.is_visible()  # the root is selected first
    tree.locator('tr[data-select="0.1"]').click()
    assert failed.is_visible() and not root.is_visible() and "executor:think" in failed.inner_text()
    assert "rv-selected" in tree.locator('tr[data-select="0.1"]').get_attribute("class")
    assert nb.execute("print(tree.selected_id)").strip() == "0.1"  # the click reached the kernel
    tree.locator('tr[data-select="0.1"]').click()  # a click on the selected row keeps it selected and open
    assert failed.is_visible()
    call = failed.locator("details.rt-call").first  # a role call opens inside the row, selecting nothing
    call.locator("summary").click()
    assert call.get_attribute("open") is not None and nb.execute("print(tree.selected_id)").strip() == "0.1"
    tree.locator('details.rv-row:has(tr[data-select="0.2"]) > summary').focus()
    page.keyboard.press("Enter")  # the keyboard selects as a click does
    tree.locator('[data-detail="0.2"]').wait_for(state="visible")
    assert not failed.is_visible() and nb.execute("print(tree.selected_id)").strip() == "0.2"
    nb.execute("tree.selected_id = '0'")  # and back: the kernel's selection opens its row
    root.wait_for(state="visible")
    tree.locator('select[data-filter="state"]').select_option("failed")  # a filtered-out row hides with its detail
    visible = [r.get_attribute("data-select") for r in tree.locator("tr[data-select]").all() if r.is_visible()]
    assert visible == ["0.1"] and not root.is_visible()
