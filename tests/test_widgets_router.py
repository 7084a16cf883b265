"""roma_lab.widgets router views: state built and driven without a browser."""

import pytest

from roma_lab import router, widgets
from roma_lab.papers import routing


@pytest.fixture(scope="module")
def study():
    return routing.RouterStudy.build()


def test_threshold_explorer_redraws_on_slider_change(study):
    explorer = widgets.ThresholdExplorer(study, taus=(0.3, 0.5, 0.7))
    assert explorer.slider.value == pytest.approx(study.model.tau)
    low = explorer.at(0.3)["challenge"]
    high = explorer.at(0.7)["challenge"]
    assert high["mean_cost"] <= low["mean_cost"]          # a higher threshold never adds operations
    at_high = router.evaluate([router.Learned(study.model.with_threshold(0.7))], study.split("challenge"), repeats=1)
    assert high == {"tau": 0.7, "success": at_high["success"].mean(), "mean_cost": pytest.approx(at_high["cost"].mean())}
    explorer.slider.value = 0.7                           # as the browser would
    assert "tau = 0.70" in explorer.readout.value
    assert f"{high['success']:.3f}" in explorer.readout.value
    assert "tau = 0.70" in explorer._repr_html_()


def test_route_inspector_follows_the_picker(study):
    inspector = widgets.RouteInspector(study, "challenge", failures_only=True)
    results = router.evaluate([router.Learned(study.model)], study.split("challenge"), repeats=1)
    assert list(inspector.picker.options) == list(results.loc[~results["success"], "task_id"])
    target = inspector.picker.options[-1]
    inspector.picker.value = target
    assert target in inspector.view.value and "expected" in inspector.view.value
    assert inspector._repr_html_() == inspector.view.value


def test_saved_notebooks_get_static_html_beside_the_widget(study):
    from IPython.core.formatters import DisplayFormatter

    for view in (widgets.RouteInspector(study, "test"), widgets.ThresholdExplorer(study, taus=(0.3, 0.5))):
        data, _ = DisplayFormatter().format(view)
        assert "application/vnd.jupyter.widget-view+json" in data
        assert data["text/html"] == view._repr_html_()


def test_render_route_html_escapes_text(study):
    info = router.inspect_route(study, "test-data_literal-000") | {"prompt": "<script>x</script>"}
    assert "<script>" not in widgets.render_route_html(info)


def test_the_static_tau_view_has_the_curves_and_a_tau_table(study):
    # issue 26: an executed notebook's tau explorer was one line of text without a kernel
    explorer = widgets.ThresholdExplorer(study, taus=(0.3, 0.4, 0.5, 0.6, 0.7))
    page = explorer._repr_html_()
    assert 'src="data:image/png;base64,' in page and "tau = " in page
    table = explorer.table_html(every=2)
    assert table.count("<tr>") == 1 + 3  # the header, then tau 0.3, 0.5, 0.7
    at = explorer.at(0.5)["challenge"]
    assert "<td>0.50</td>" in table or "<td>0.50 <b>" in table
    assert f"{at['success']:.3f}" in table and f"{at['mean_cost']:.2f}" in table
