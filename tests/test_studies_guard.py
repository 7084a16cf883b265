"""roma_lab.studies.compare_repeat_guard (notebook 44): both arms on the same tasks, every table
recomputable from its rows, and the protocol's rule picking the default as it says."""

from __future__ import annotations

import pandas as pd
import pytest

from roma_lab.stats import StatsSettings
from roma_lab.studies import ARMS, compare_repeat_guard, guard_decision

STATS = StatsSettings(n_resamples=50, seed=0)


def test_both_arms_run_the_same_tasks_and_the_rates_recompute_from_the_rows(tmp_path):
    tables = compare_repeat_guard(tmp_path, lm="scripted", n_tasks=3, stats=STATS)
    rows = pd.read_csv(tmp_path / "guard_rows.csv")
    assert set(rows["condition"]) == set(ARMS)
    on, off = (rows[rows["condition"] == arm].set_index("task_id") for arm in ARMS)
    assert sorted(on.index) == sorted(off.index) and len(on) == 3
    speed = tables["guard_speed"].set_index("arm")
    for arm, mine in (("guard on", on), ("guard off", off)):
        assert speed.loc[arm, "tasks_per_hour"] == pytest.approx(3 / mine["latency_s"].sum() * 3600)
        assert speed.loc[arm, "correct"] == int((mine["score"] == 1).sum())  # no answer counts as wrong
    ratio = tables["guard_paired"].set_index("metric").loc["tasks_per_hour_ratio"]
    assert ratio["value"] == pytest.approx(off["latency_s"].sum() / on["latency_s"].sum())
    assert (tmp_path / "guard_decision.csv").is_file()


def paired(ratio: float, low: float, high: float, diff: float, diff_low: float, diff_high: float) -> pd.DataFrame:
    return pd.DataFrame([
        {"metric": "correct_per_hour_ratio", "value": ratio, "ci_low": low, "ci_high": high},
        {"metric": "score_diff", "value": diff, "ci_low": diff_low, "ci_high": diff_high},
    ])


@pytest.mark.parametrize(("table", "default"), [
    (paired(1.4, 1.1, 1.8, -0.03, -0.15, 0.08), "guard on"),    # faster, no significant loss
    (paired(1.4, 1.1, 1.8, -0.30, -0.48, -0.12), "guard off"),  # faster, but a significant loss
    (paired(0.7, 0.5, 0.9, 0.03, -0.10, 0.16), "guard off"),    # the unguarded agent is faster
    (paired(0.7, 0.5, 0.9, 0.30, 0.12, 0.48), "guard on"),      # ... but significantly less accurate
    (paired(float("inf"), float("nan"), float("nan"), 0.2, 0.0, 0.4), "guard on"),  # only on answered right
    (paired(float("nan"), float("nan"), float("nan"), 0.0, -0.1, 0.1), "guard on"),  # nobody did: unchanged
])
def test_the_rule_picks_the_faster_arm_unless_it_loses_accuracy_significantly(table, default):
    decision = guard_decision(table)
    assert decision["default"] == default and decision["repeat_guard"] == str(default == "guard on")
    assert decision["why"]
