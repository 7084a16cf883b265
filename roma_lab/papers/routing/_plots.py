"""Figures for the meta-routing notebooks; each takes a tidy table and returns a matplotlib Figure."""

from __future__ import annotations

import numpy as np
import pandas as pd


def _figure(ncols: int = 1, width: float = 6.0):
    import matplotlib.pyplot as plt

    return plt.subplots(1, ncols, figsize=(width * ncols, 3.6), squeeze=False)


def plot_split_contrast(*summaries: pd.DataFrame):
    """Figure 1: success per policy on the standard test vs the locked challenge split, with CIs.

    Takes one or more long summaries (e.g. Table 2's and Table 3's); reads their success rows."""
    summary = pd.concat(summaries, ignore_index=True)
    success = summary[summary["metric"] == "success"]
    fig, axes = _figure(width=9)
    ax = axes[0, 0]
    policies = list(dict.fromkeys(success["condition"]))
    x = np.arange(len(policies))
    for i, (split, colour) in enumerate((("test", "tab:blue"), ("challenge", "tab:orange"))):
        s = success[success["subset"] == split].set_index("condition").reindex(policies)
        err = np.vstack([s["value"] - s["ci_low"], s["ci_high"] - s["value"]])
        ax.bar(x + (i - 0.5) * 0.38, s["value"], 0.38, yerr=err, capsize=3, label=split, color=colour)
    ax.set_xticks(x, policies, rotation=20)
    ax.set_ylabel("success (95% task-bootstrap CI)")
    ax.set_ylim(0, 1.05)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))  # outside: bars reach 1.0
    ax.set_title("Standard test vs locked challenge")
    fig.tight_layout()
    return fig


def plot_threshold_sweep(sweep: pd.DataFrame, *, selected_tau: float | None = None):
    """Table 5 as a figure: success and mean cost against tau for each split."""
    fig, axes = _figure(ncols=2, width=4.8)
    ax_s, ax_c = axes[0]
    for split, g in sweep.groupby("subset", sort=False):
        ax_s.plot(g["tau"], g["success"], marker="o", label=split)
        ax_c.plot(g["tau"], g["mean_cost"], marker="o", label=split)
    for ax, label in ((ax_s, "success"), (ax_c, "mean route cost")):
        if selected_tau is not None:
            ax.axvline(selected_tau, color="grey", linestyle="--", linewidth=1)
        ax.set_xlabel("threshold tau")
        ax.set_ylabel(label)
        ax.legend()
    fig.tight_layout()
    return fig


def plot_training_size(curve: pd.DataFrame):
    """Success against the number of training tasks, per split."""
    fig, axes = _figure()
    ax = axes[0, 0]
    for split, g in curve.groupby("subset", sort=False):
        ax.plot(g["n_train"], g["success"], marker="o", label=split)
    ax.set_xlabel("training tasks")
    ax.set_ylabel("success")
    ax.set_ylim(0, 1.05)
    ax.legend()
    fig.tight_layout()
    return fig
