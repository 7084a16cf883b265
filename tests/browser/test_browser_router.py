"""The meta-routing tau slider (notebook 14) in real JupyterLab and Chromium: moving the slider in the
page redraws the readout and the plot with what the kernel computes at the new tau."""

from __future__ import annotations

import re
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "14_sweep_threshold.ipynb"
KERNEL_READOUT = (
    "explorer = [o for o in Out.values() if type(o).__name__ == 'ThresholdExplorer'][-1]\n"
    "tau = explorer.slider.value\n"
    "print(f'tau = {tau:.2f}', *(f'{s}: success {v[\"success\"]:.3f}, cost {v[\"mean_cost\"]:.2f}'\n"
    "                          for s, v in explorer.at(tau).items()), sep='\\n')"
)


def test_moving_the_tau_slider_redraws_what_the_kernel_computes(lab, page, tmp_path):
    nb = lab.open(page, NOTEBOOK, {"OUT_DIR": str(tmp_path / "14")})
    nb.run_all()
    explorer = nb.output(-1)  # the explorer is the notebook's last cell
    slider = explorer.locator(".widget-slider")
    slider.wait_for()
    readout = explorer.locator("tr", has_text="selected on dev")  # tau, then each split's success and cost
    before = readout.inner_text()
    selected = float(re.search(r"selected on dev: (\d\.\d\d)", before).group(1))
    assert before.startswith(f"tau = {selected:.2f}")
    plot = explorer.locator("img").first.get_attribute("src")

    handle = slider.locator(".noUi-handle")
    handle.focus()
    for _ in range(5):
        handle.press("ArrowRight")  # one step (0.01) each
    moved = f"tau = {selected + 0.05:.2f}"
    explorer.get_by_text(re.compile("^" + re.escape(moved) + " ")).wait_for()
    page.wait_for_function("([el, old]) => el.querySelector('img') && el.querySelector('img').src !== old",
                           arg=[explorer.element_handle(), plot])

    kernel = nb.execute(KERNEL_READOUT).strip().splitlines()
    assert kernel[0] == moved  # the kernel's slider moved with the page's
    shown = readout.inner_text()
    for line in kernel[1:]:  # success and mean cost of each split at the new tau
        assert line in shown, (line, shown)
