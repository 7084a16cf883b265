"""Paper beside ours, for a reader who would rather look than read: the compact table and the figure.

Both take a :func:`beside_paper` table. The compact view keeps what a reader compares (the model
ours was measured on, condition, paper, ours with its CI, agreement, reason) and counts the rest;
the figure draws, per metric, our value with its 95% CI bar and the paper's point beside it, so a
difference and its uncertainty show at a glance. The full table stays on disk.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ._paper import NOT_IN_PAPER, NOT_MEASURED
from ._summary import MODEL

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["NOT_A_MEASUREMENT", "compact_beside_paper", "label_if_not_measured", "plot_beside_paper"]

#: How a model label says its rows are no measurement (``roma_lab.lm.model_label`` of the scripted test double).
NOT_A_MEASUREMENT = "not a measurement"

#: ``model`` comes second, on screen: a figure measured on the scripted test double says so beside it.
COMPACT_COLUMNS = ("artefact", "model", "condition", "subset", "metric", "paper", "ours [95% CI]", "n", "agreement",
                   "why")


def _interval(value: float, low: float, high: float) -> str:
    if value is None or math.isnan(value):
        return "—"
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"{value:.3g} (no CI)"
    return f"{value:.3g} [{low:.3g}, {high:.3g}]"


def compact_beside_paper(table: pd.DataFrame, *, include_not_in_paper: bool = False) -> pd.DataFrame:
    """The rows that stand beside a paper figure (measured or not), in the reader's columns
    (:data:`COMPACT_COLUMNS`); our conditions the paper does not have are left out unless
    ``include_not_in_paper``, and the frame's ``attrs["left_out"]`` says how many were. A table
    without a ``model`` column (written before it had one) is refused: it cannot say what ours ran on."""
    import pandas as pd

    if "model" not in table.columns:
        raise ValueError("the table has no model column, so it cannot say which model our figures come from; "
                         "rebuild it with beside_paper")
    kept = table if include_not_in_paper else table[table["agreement"] != NOT_IN_PAPER]
    out = pd.DataFrame({
        "artefact": kept["artefact"], "model": kept["model"], "condition": kept["condition"],
        "subset": kept["subset"], "metric": kept["metric"], "paper": kept["paper"],
        "ours [95% CI]": [_interval(v, lo, hi) for v, lo, hi in
                          zip(kept["ours"], kept["ours_ci_low"], kept["ours_ci_high"], strict=True)],
        "n": kept["n"], "agreement": kept["agreement"], "why": kept["why"]}, columns=list(COMPACT_COLUMNS))
    out = out.reset_index(drop=True)
    out.attrs["left_out"] = len(table) - len(kept)
    return out


def label_if_not_measured(fig: Figure, models) -> bool:
    """Mark ``fig`` on its face when any of ``models`` (model labels) is no measurement (the scripted
    test double of the smoke tier and the tests): a diagonal watermark and a line under the title,
    so a smoke figure can never pass for a result, wherever it is copied. True when it marked it."""
    named = sorted({str(m) for m in models if isinstance(m, str) and NOT_A_MEASUREMENT in m})
    if not named:
        return False
    fig.text(0.5, 0.5, "SCRIPTED MODEL: NOT A MEASUREMENT", ha="center", va="center", rotation=20, fontsize=22,
             color="tab:red", alpha=0.18, weight="bold", zorder=10)
    fig.text(0.5, 0.005, f"drawn from {', '.join(named)}: a smoke or test run, not results", ha="center",
             va="bottom", fontsize=8, color="tab:red")
    return True


def plot_beside_paper(table: pd.DataFrame, *, metrics: list[str] | None = None, title: str | None = None,
                      include_not_in_paper: bool = False) -> Figure:
    """One panel per metric: ours (point and 95% CI bar) beside the paper's figure (open diamond)
    for each condition (and subset, when there are several), in the paper's unit. A paper figure we
    did not measure has its diamond alone. Our conditions the paper lacks are left out (they are in
    our own unit, not the paper's) unless ``include_not_in_paper``."""
    import matplotlib.pyplot as plt
    import numpy as np

    shown = table if include_not_in_paper else table[table["agreement"] != NOT_IN_PAPER]
    shown = shown if metrics is None else shown[shown["metric"].isin(metrics)]
    names = list(dict.fromkeys(shown["metric"]))
    if not names:
        raise ValueError("nothing to draw: the table has no rows for the metrics asked")
    several_subsets = shown["subset"].nunique() > 1
    width = sum(max(4.0, 0.8 * int((shown["metric"] == m).sum()) + 2.0) for m in names)  # room for every label
    fig, axes = plt.subplots(1, len(names), figsize=(width, 3.8), squeeze=False)
    scripted = MODEL in shown.columns and any(NOT_A_MEASUREMENT in str(m) for m in shown[MODEL])
    for ax, metric in zip(axes[0], names, strict=True):
        rows = shown[shown["metric"] == metric]
        labels = [f"{c}\n{s}" if several_subsets else str(c) for c, s in zip(rows["condition"], rows["subset"],
                                                                              strict=True)]
        x = np.arange(len(rows))
        ours, low, high = (rows[c].to_numpy(float) for c in ("ours", "ours_ci_low", "ours_ci_high"))
        measured = ~np.isnan(ours)
        err = np.vstack([ours - np.where(np.isnan(low), ours, low), np.where(np.isnan(high), ours, high) - ours])
        ax.errorbar(x[measured] - 0.08, ours[measured], yerr=err[:, measured], fmt="o", capsize=4, color="tab:blue",
                    label="scripted test double (95% CI): not ours" if scripted else "ours (95% CI)")
        paper = rows["paper"].to_numpy(float)
        in_paper = ~np.isnan(paper)
        ax.plot(x[in_paper] + 0.08, paper[in_paper], "D", mfc="none", color="tab:red", ms=7, label="paper")
        for i, verdict in enumerate(rows["agreement"]):
            if verdict == NOT_MEASURED:
                ax.annotate("not measured", (x[i], paper[i]), textcoords="offset points", xytext=(0, 8),
                            ha="center", fontsize=7, color="grey")
        ax.set_xticks(x, labels, rotation=25, ha="right", fontsize=8)
        unit = next((u for u in rows["unit"] if isinstance(u, str) and u), "")
        ax.set_ylabel(f"{metric} ({unit})" if unit else metric)
        ax.set_xlim(-0.6, len(rows) - 0.4)
        ax.grid(axis="y", alpha=0.3)
    axes[0, -1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    heading = title or f"{shown['artefact'].iloc[0]}: ours beside the paper"
    fig.suptitle(("SMOKE RUN, NOT RESULTS: " if scripted else "") + heading, fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    if MODEL in shown.columns:
        label_if_not_measured(fig, shown[MODEL])
    return fig
