"""Paper beside ours as a compact table and as a figure (issue 26): what a reader compares, drawn
from the beside_paper table itself."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from roma_lab.results import PAPER_COLUMNS, beside_paper, compact_beside_paper, plot_beside_paper


def table() -> pd.DataFrame:
    paper = pd.DataFrame([
        ["fig3", "baseline", "gaia", "accuracy", "fraction", 0.40, False, "Figure 3: 40%", ""],
        ["fig3", "best-of-4", "gaia", "accuracy", "fraction", 0.55, False, "Figure 3: 55%", ""],
        ["fig3", "reflection", "gaia", "accuracy", "fraction", 0.50, False, "Figure 3: 50%", ""],
    ], columns=list(PAPER_COLUMNS))
    ours = pd.DataFrame({"condition": ["baseline", "best-of-4", "extra"], "subset": ["gaia"] * 3,
                         "metric": ["accuracy"] * 3, "value": [0.40, 0.20, 0.30], "ci_low": [0.1, 0.05, 0.1],
                         "ci_high": [0.7, 0.45, 0.5], "n": [10, 10, 10]})
    return beside_paper(ours, paper, "fig3", why="a 1.5B model, 10 tasks", why_not_measured="not run")


def test_the_compact_view_keeps_what_a_reader_compares_and_counts_the_rest():
    compact = compact_beside_paper(table())
    assert list(compact["condition"]) == ["baseline", "best-of-4", "reflection"]  # "extra" is not in the paper
    assert compact.attrs["left_out"] == 1
    assert list(compact["ours [95% CI]"]) == ["0.4 [0.1, 0.7]", "0.2 [0.05, 0.45]", "—"]
    assert list(compact["agreement"]) == ["matches", "differs", "not measured"]
    assert compact.loc[1, "why"].startswith("a 1.5B model") and compact.loc[2, "why"] == "not run"
    assert len(compact_beside_paper(table(), include_not_in_paper=True)) == 4


def test_the_figure_draws_ours_with_its_interval_beside_the_paper_point():
    fig = plot_beside_paper(table())
    (ax,) = fig.axes
    ours_line = ax.lines[0]  # the errorbar's points
    np.testing.assert_allclose(ours_line.get_ydata(), [0.40, 0.20])
    bars = [c for c in ax.collections if c.get_segments()][0].get_segments()
    assert [tuple(np.round(s[:, 1], 3)) for s in bars] == [(0.1, 0.7), (0.05, 0.45)]
    paper_line = next(line for line in ax.lines if line.get_label() == "paper")
    np.testing.assert_allclose(paper_line.get_ydata(), [0.40, 0.55, 0.50])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["baseline", "best-of-4", "reflection"]
    assert any(t.get_text() == "not measured" for t in ax.texts)
    assert ax.get_ylabel() == "accuracy (fraction)"
    everything = plot_beside_paper(table(), include_not_in_paper=True).axes[0]
    assert [t.get_text() for t in everything.get_xticklabels()][-1] == "extra"
    np.testing.assert_allclose(everything.lines[0].get_ydata(), [0.40, 0.20, 0.30])


def test_nothing_to_draw_is_an_error():
    with pytest.raises(ValueError, match="nothing to draw"):
        plot_beside_paper(table(), metrics=["recall"])


def _texts(fig) -> str:
    return " ".join([t.get_text() for t in fig.texts]  # the suptitle is one of them
                    + [t.get_text() for ax in fig.axes for t in (ax.get_legend().get_texts() if ax.get_legend() else [])])


def test_a_figure_drawn_from_the_scripted_model_says_so_on_its_face_and_a_measured_one_does_not():
    from roma_lab.lm import model_label

    scripted = table().assign(model=model_label("scripted"))
    text = _texts(plot_beside_paper(scripted))
    assert "NOT A MEASUREMENT" in text and text.count("SMOKE RUN, NOT RESULTS") == 1 and "ours (95% CI)" not in text
    measured = _texts(plot_beside_paper(table().assign(model="local")))
    assert "NOT A MEASUREMENT" not in measured and "SMOKE" not in measured and "ours (95% CI)" in measured
