"""The simulated paired design and the calibration study (few repetitions: the notebook runs the full grid)."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from roma_lab.results import (
    CALIBRATION_COLUMNS,
    STATS_FILE,
    CalibrationSettings,
    StatsRecord,
    calibrate_statistics,
    compare,
    read_table,
)
from roma_lab.stats import (
    DEFAULT_STATS,
    PairedDesign,
    StatsSettings,
    design_truth,
    paired_ci,
    plan_paired,
    simulate_scores,
)

#: Small but real: 300 studies per cell puts one Monte Carlo standard error of a 95% coverage at 1.3 points.
SMALL = CalibrationSettings(n_tasks=(30,), effects=(0.0, 0.1), methods=("t", "percentile"), n_studies=300,
                            grid_studies=60, seed=3)


@pytest.fixture(scope="module")
def table():
    return calibrate_statistics(settings=SMALL)


@pytest.mark.parametrize("design", [PairedDesign(), PairedDesign(base_rate=0.2, effect=0.15, runs=3),
                                    PairedDesign(base_rate=0.7, task_sd=0.5, effect=-0.1)])
def test_design_truth_is_what_the_simulation_draws(design):
    truth = design_truth(design)
    scores = simulate_scores(design, 400, 60, np.random.default_rng(5))
    baseline, other = scores[:, 0].mean(axis=-1), scores[:, 1].mean(axis=-1)
    differences = other - baseline
    assert baseline.mean() == pytest.approx(design.base_rate, abs=0.01)
    assert differences.mean() == pytest.approx(design.effect, abs=0.01)
    assert differences.std(axis=1, ddof=1).mean() == pytest.approx(truth.sd_diff, rel=0.03)
    single = scores[..., 0]  # one run of each: the discordance the sign test's planner takes
    assert (single[:, 0] != single[:, 1]).mean() == pytest.approx(truth.discordance, abs=0.01)


def test_simulation_is_seeded_and_refuses_the_global_rng():
    design = PairedDesign(effect=0.1)
    first = simulate_scores(design, 20, 3, np.random.default_rng(1))
    assert np.array_equal(first, simulate_scores(design, 20, 3, np.random.default_rng(1)))
    assert not np.array_equal(first, simulate_scores(design, 20, 3, np.random.default_rng(2)))
    with pytest.raises(TypeError, match="Generator"):
        simulate_scores(design, 20, 3, np.random)
    with pytest.raises(ValueError, match="base_rate \\+ effect"):
        PairedDesign(base_rate=0.9, effect=0.2)


def test_the_table_has_every_check_with_its_standard_error(table):
    assert list(table.columns) == list(CALIBRATION_COLUMNS)
    checks = set(table["check"])
    assert checks == {"ci_coverage", "ci_power", "sign_test_false_positive", "sign_test_power",
                      "holm_family_wise_error"}
    assert set(table.loc[table["check"] == "ci_coverage", "method"]) == {"t", "percentile"}
    assert set(table["cell"]) >= {"planted", "at planner MDE", "at normal MDE"}
    row = table.iloc[0]
    assert row["mc_se"] == pytest.approx(math.sqrt(row["rate"] * (1 - row["rate"]) / row["studies"]))
    holm = table[table["check"] == "holm_family_wise_error"].iloc[0]
    assert holm["method"] == "Holm over 6 sign tests" and holm["studies"] == 60


def test_the_default_ci_covers_and_the_sign_test_keeps_its_size(table):
    default = table[(table["check"] == "ci_coverage") & (table["method"] == DEFAULT_STATS.paired_ci)]
    assert len(default) == 4 and default["holds"].all(), default
    assert table.loc[table["check"].isin(["sign_test_false_positive", "holm_family_wise_error"]), "holds"].all()


def test_power_comes_true_at_the_planner_mde(table):
    at_mde = table[(table["check"] == "sign_test_power") & (table["cell"] == "at planner MDE")].iloc[0]
    assert at_mde["expected"] == pytest.approx(DEFAULT_STATS.power)
    assert at_mde["effect"] == pytest.approx(plan_paired(30, discordance=at_mde["discordance"]).mde, abs=1e-6)
    assert at_mde["holds"] and abs(at_mde["rate"] - 0.8) < 3 * at_mde["mc_se"] + 0.02
    # the normal approximation's MDE is smaller than the exact test's, and the test falls short there
    normal = table[(table["check"] == "sign_test_power") & (table["cell"] == "at normal MDE")].iloc[0]
    assert normal["effect"] < at_mde["effect"] and normal["expected"] < DEFAULT_STATS.power


def test_coverage_is_measured_not_assumed():
    """80% intervals must be seen to cover about 80%, and failed against the 95% band they would claim."""
    settings = dataclasses.replace(SMALL, effects=(0.1,), n_studies=200, grid_studies=10)
    loose = calibrate_statistics(settings=settings, stats=StatsSettings(level=0.8))
    coverage = loose[(loose["check"] == "ci_coverage") & (loose["cell"] == "planted")]
    assert coverage["expected"].eq(0.8).all() and coverage["rate"].between(0.74, 0.88).all()
    assert not coverage["rate"].between(0.93, 0.97).any()


def test_writes_the_table_and_records_its_stats(tmp_path):
    settings = dataclasses.replace(SMALL, effects=(0.2,), methods=("t",), n_studies=20, grid_studies=5)
    out = calibrate_statistics(tmp_path, settings=settings)
    pd.testing.assert_frame_equal(read_table(tmp_path, "calibration"), out, check_dtype=False)
    assert StatsRecord.model_validate_json((tmp_path / STATS_FILE).read_text()).model_dump() == DEFAULT_STATS.as_dict()
    with pytest.raises(ValueError, match="default method"):
        calibrate_statistics(settings=dataclasses.replace(settings, methods=("percentile",)))
    with pytest.raises(ValueError, match="unknown CI method"):
        calibrate_statistics(settings=dataclasses.replace(settings, methods=("t", "studentized")))


def test_compare_uses_the_paired_ci_named_in_the_settings():
    rng = np.random.default_rng(0)
    rows = pd.DataFrame({"condition": np.repeat(["a", "b"], 40), "task_id": np.tile(np.arange(40), 2),
                         "subset": "s", "success": rng.integers(0, 2, 80).astype(float)})
    by_t = compare(rows, "a", "b", "success").iloc[0]
    by_percentile = compare(rows, "a", "b", "success", stats=StatsSettings(paired_ci="percentile")).iloc[0]
    a, b = rows["success"].to_numpy()[:40], rows["success"].to_numpy()[40:]
    assert (by_t["ci_low"], by_t["ci_high"]) == pytest.approx((paired_ci(a, b).low, paired_ci(a, b).high))
    assert by_t["ci_method"] == "paired t-interval on per-task differences, 95%"
    assert by_percentile["ci_method"] == "paired task bootstrap percentile, 95%, 2000 resamples"
    assert by_t["sign_test_p"] == by_percentile["sign_test_p"] and by_t["ci_low"] != by_percentile["ci_low"]
