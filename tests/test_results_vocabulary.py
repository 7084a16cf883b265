"""The one results vocabulary: paper_reported schema, beside_paper, agreement, summarize, compare."""

import math
import re

import numpy as np
import pandas as pd
import pytest

from roma_lab.results import (
    DIFFERS,
    MATCHES,
    NOT_COMPARABLE,
    NOT_IN_PAPER,
    NOT_MEASURED,
    PAPER_COLUMNS,
    PaperTableError,
    agreement,
    as_metrics,
    beside_paper,
    compare,
    read_paper_reported,
    summarize,
    wide,
)
from roma_lab.stats import StatsSettings, bootstrap_ci, paired_ci, plan_paired


def paper_rows(*rows):
    base = {"artefact": "t1", "subset": "test", "unit": "fraction", "derived": False, "source": "§1", "note": ""}
    return pd.DataFrame([base | r for r in rows], columns=list(PAPER_COLUMNS))


# --- agreement: hand-made values on both sides of each threshold -------------------------------------------------

@pytest.mark.parametrize(("paper", "ours", "unit", "verdict"), [
    (0.935, 0.935, "fraction", MATCHES),
    (0.935, 0.944, "fraction", MATCHES),       # 0.9 pp: inside 0.01 absolute
    (0.935, 0.946, "fraction", DIFFERS),       # 1.1 pp: outside
    (0.935, 0.924, "fraction", DIFFERS),
    (93.5, 94.4, "percent", MATCHES),          # 1% of 93.5 = 0.935
    (93.5, 94.5, "percent", DIFFERS),
    (1.76, 1.77, "cost units", MATCHES),       # small magnitudes: at least 0.01 absolute
    (1.76, 1.78, "cost units", DIFFERS),
    (0.0156, 0.03, "p-value", MATCHES),        # within a factor of two
    (0.0156, 0.0075, "p-value", DIFFERS),
    (0.0156, 0.0320, "p-value", DIFFERS),
    (1e-10, 1e-12, "p-value bound", MATCHES),  # the paper says p < 1e-10
    (1e-10, 2e-10, "p-value bound", DIFFERS),
    (0.5, math.nan, "fraction", NOT_MEASURED),
])
def test_agreement_rule_on_both_sides_of_its_tolerance(paper, ours, unit, verdict):
    assert agreement(paper, ours, unit) == verdict


# --- beside_paper --------------------------------------------------------------------------------------------------

def test_beside_paper_outer_join_keeps_every_paper_figure_and_marks_ours_only_rows():
    paper = paper_rows({"condition": "learned", "metric": "success", "value": 1.0},
                       {"condition": "static", "metric": "success", "value": 0.935},
                       {"condition": "oracle", "metric": "success", "value": 1.0})
    ours = pd.DataFrame([
        {"condition": "learned", "subset": "test", "metric": "success", "value": 0.90, "ci_low": 0.85,
         "ci_high": 0.95, "n": 108},
        {"condition": "static", "subset": "test", "metric": "success", "value": 0.935, "ci_low": 0.88,
         "ci_high": 0.97, "n": 108},
        {"condition": "hybrid", "subset": "test", "metric": "success", "value": 0.95},
        {"condition": "learned", "subset": "test", "metric": "latency_ms", "value": 0.1},  # paper has no such metric
    ])
    table = beside_paper(ours, paper, "t1", why="our templates", why_not_measured="not run here", setting="n=108")
    by = table.set_index("condition")
    assert list(table["condition"]).count("learned") == 1  # latency row left out
    assert by.loc["learned", "agreement"] == DIFFERS and by.loc["learned", "why"] == "our templates"
    assert by.loc["learned", "paper_in_ci"] is not None and not by.loc["learned", "paper_in_ci"]
    assert by.loc["static", "agreement"] == MATCHES and by.loc["static", "why"] == ""
    assert bool(by.loc["static", "paper_in_ci"])
    assert by.loc["oracle", "agreement"] == NOT_MEASURED and by.loc["oracle", "why"] == "not run here"
    assert by.loc["hybrid", "agreement"] == NOT_IN_PAPER and math.isnan(by.loc["hybrid", "paper"])
    assert by.loc["learned", "difference"] == pytest.approx(-0.10)
    assert set(table["setting"].iloc[[0, 1]]) == {"n=108"}


def test_a_difference_or_a_missing_figure_without_a_reason_is_an_error():
    paper = paper_rows({"condition": "learned", "metric": "success", "value": 1.0})
    differs = pd.DataFrame([{"condition": "learned", "subset": "test", "metric": "success", "value": 0.5}])
    with pytest.raises(ValueError, match=re.escape("t1: learned/test/success differs from the paper (0.5 vs 1) "
                                                   "and no reason was given")):
        beside_paper(differs, paper, "t1", why_not_measured="x", why_not_comparable="x")  # the other reasons don't do
    assert beside_paper(differs, paper, "t1", why="ours is smaller").loc[0, "why"] == "ours is smaller"
    none = differs.iloc[0:0]
    with pytest.raises(ValueError, match=re.escape("t1: paper figure learned/test/success was not measured and no "
                                                   "reason was given")):
        beside_paper(none, paper, "t1", why="x", why_not_comparable="x")
    assert beside_paper(none, paper, "t1", why_not_measured="offline").loc[0, "why"] == "offline"


def test_a_figure_marked_not_comparable_says_so_with_a_reason_whatever_its_value():
    paper = paper_rows({"condition": "a", "metric": "success", "value": 0.5},
                       {"condition": "b", "metric": "success", "value": 0.5},
                       {"condition": "c", "metric": "success", "value": 0.5})
    ours = pd.DataFrame([
        {"condition": "a", "subset": "test", "metric": "success", "value": 0.5, "comparable": False},  # equal
        {"condition": "b", "subset": "test", "metric": "success", "value": math.nan, "comparable": False},
        {"condition": "c", "subset": "test", "metric": "success", "value": 0.5, "comparable": True},
        {"condition": "d", "subset": "test", "metric": "success", "value": 0.1, "comparable": False},
    ])
    table = beside_paper(ours, paper, "t1", why_not_comparable=lambda row: f"{row['condition']} proposed nothing")
    by = table.set_index("condition")
    assert by.loc["a", "agreement"] == NOT_COMPARABLE and by.loc["a", "why"] == "a proposed nothing"
    assert by.loc["a", "ours"] == 0.5  # the measured value is still shown
    assert by.loc["b", "agreement"] == NOT_COMPARABLE  # before "not measured": we ran it, it measures else
    assert by.loc["c", "agreement"] == MATCHES and by.loc["c", "why"] == ""
    assert by.loc["d", "agreement"] == NOT_IN_PAPER  # no paper figure to compare with at all
    with pytest.raises(ValueError, match=re.escape("t1: a/test/success is marked not comparable and no reason was given")):
        beside_paper(ours, paper, "t1", why="x", why_not_measured="x")
    with pytest.raises(ValueError, match="True or False"):
        beside_paper(ours.assign(comparable="no"), paper, "t1", why_not_comparable="x")


def test_why_may_depend_on_the_metric():
    paper = paper_rows({"condition": "a", "metric": "success", "value": 1.0},
                       {"condition": "a", "metric": "mean_cost", "value": 2.0, "unit": "cost units"})
    ours = pd.DataFrame([{"condition": "a", "subset": "test", "metric": m, "value": 0.0}
                         for m in ("success", "mean_cost")])
    table = beside_paper(ours, paper, "t1", why={"mean_cost": "prices differ", "*": "templates"})
    assert dict(zip(table["metric"], table["why"])) == {"success": "templates", "mean_cost": "prices differ"}


def test_fractions_are_read_in_the_papers_percent_and_incompatible_units_are_refused():
    paper = paper_rows({"condition": "a", "metric": "accuracy", "value": 30.0, "unit": "percent"})
    ours = pd.DataFrame([{"condition": "a", "subset": "test", "metric": "accuracy", "value": 0.30, "unit": "fraction",
                          "ci_low": 0.2, "ci_high": 0.4}])
    row = beside_paper(ours, paper, "t1").iloc[0]
    assert (row["ours"], row["ours_ci_low"], row["agreement"]) == (pytest.approx(30.0), pytest.approx(20.0), MATCHES)
    with pytest.raises(ValueError, match="reports 'percent'"):
        beside_paper(ours.assign(unit="ms"), paper, "t1")


def test_measured_rows_listed_twice_are_refused():
    paper = paper_rows({"condition": "a", "metric": "success", "value": 1.0})
    ours = pd.DataFrame([{"condition": "a", "subset": "test", "metric": "success", "value": 1.0}] * 2)
    with pytest.raises(ValueError, match="twice"):
        beside_paper(ours, paper, "t1")


# --- paper_reported files ------------------------------------------------------------------------------------------

def test_read_paper_reported_checks_the_schema(tmp_path):
    good = paper_rows({"condition": "a", "metric": "success", "value": 1.0})
    path = tmp_path / "paper_reported.csv"
    good.to_csv(path, index=False)
    back = read_paper_reported(path)
    assert back["derived"].dtype == bool and back["value"].iloc[0] == 1.0

    for broken, message in [
        (good.drop(columns="note"), "columns"),
        (good.assign(unit="furlongs"), "unknown unit"),
        (good.assign(value="n/a"), "not a number"),
        (good.assign(source=""), "no source"),
        (pd.concat([good, good]), "twice"),
    ]:
        broken.to_csv(path, index=False)
        with pytest.raises(PaperTableError, match=message):
            read_paper_reported(path)


# --- summarize -----------------------------------------------------------------------------------------------------

def scores_table():
    # condition a: 4 tasks x 2 runs; task t3 never scored (grader failed); condition b: all zeros
    rows = []
    for run in (0, 1):
        for t, score in zip(("t0", "t1", "t2", "t3"), (1.0, 1.0 if run == 0 else 0.0, 0.0, math.nan)):
            rows.append({"condition": "a", "subset": "test", "task_id": t, "run": run, "success": score,
                         "cost": 2.0})
            rows.append({"condition": "b", "subset": "test", "task_id": t, "run": run, "success": 0.0, "cost": 1.0})
    return pd.DataFrame(rows)


def test_summarize_averages_runs_per_task_and_counts_unscored_tasks():
    table = summarize(scores_table(), ["success", "cost"], ci=["success"], stats=StatsSettings(n_resamples=500))
    a = table[(table["condition"] == "a") & (table["metric"] == "success")].iloc[0]
    # per-task means: t0 1.0, t1 0.5, t2 0.0; t3 unscored
    assert a["value"] == pytest.approx(0.5) and a["n"] == 3 and a["n_missing"] == 1 and a["runs"] == 2
    assert 0.0 <= a["ci_low"] <= 0.5 <= a["ci_high"] <= 1.0 and "bootstrap" in a["ci_method"]
    cost = table[(table["condition"] == "a") & (table["metric"] == "cost")].iloc[0]
    assert cost["value"] == 2.0 and math.isnan(cost["ci_low"]) and cost["n"] == 4


def test_summarize_resamples_tasks_not_runs():
    # Ten runs of the same two tasks must give the CI of two tasks, not of twenty draws.
    few = pd.DataFrame([{"condition": "a", "subset": "s", "task_id": t, "run": r, "success": float(t == "x")}
                        for t in ("x", "y") for r in range(10)])
    row = summarize(few, ["success"], stats=StatsSettings(n_resamples=2000)).iloc[0]
    assert row["n"] == 2 and row["ci_low"] == 0.0 and row["ci_high"] == 1.0


def test_summarize_gives_no_ci_below_two_tasks():
    one = pd.DataFrame([{"condition": "a", "subset": "s", "task_id": "x", "success": 1.0}])
    row = summarize(one, ["success"], run=None).iloc[0]
    assert math.isnan(row["ci_low"]) and row["ci_method"].startswith("no CI")


def test_a_summary_interval_stays_within_the_range_of_its_scores():
    # the percentile task bootstrap takes quantiles of resampled means, so it never leaves [min, max] of the
    # per-task scores; the basic bootstrap (2 * mean - quantile) would, on these skewed small samples
    rng = np.random.default_rng(11)
    rows = [{"condition": f"c{n}-{i}", "subset": "s", "task_id": t, "success": float(rng.random() < p)}
            for n in (2, 3, 5, 8) for i, p in enumerate(rng.random(25) ** 2) for t in range(n)]
    rows += [{"condition": "fractions", "subset": "s", "task_id": t, "success": v}
             for t, v in enumerate([0.95, 1.0, 1.0, 0.9, 0.1])]
    table = summarize(pd.DataFrame(rows), ["success"], stats=StatsSettings(n_resamples=500))
    assert ((0 <= table["ci_low"]) & (table["ci_low"] <= table["value"]) & (table["value"] <= table["ci_high"])
            & (table["ci_high"] <= 1)).all()
    basic = [bootstrap_ci(g["success"].to_numpy(), n_resamples=500, method="basic") for _, g in
             pd.DataFrame(rows).groupby("condition")]
    assert any(ci.low < 0 or ci.high > 1 for ci in basic)  # the check above can fail


# --- compare -------------------------------------------------------------------------------------------------------

def test_compare_pairs_on_tasks_and_gives_the_exact_sign_test():
    # 9 wins, 3 losses, 2 ties: the style guide's known value p = 0.146
    a = [1.0] * 9 + [0.0] * 3 + [1.0, 0.0]
    b = [0.0] * 9 + [1.0] * 3 + [1.0, 0.0]
    rows = [{"condition": c, "subset": "s", "task_id": f"t{i}", "success": v}
            for c, values in (("a", a), ("b", b)) for i, v in enumerate(values)]
    row = compare(pd.DataFrame(rows), "a", "b", "success").iloc[0]
    assert (row["wins"], row["losses"], row["ties"]) == (9, 3, 2)
    assert row["sign_test_p"] == pytest.approx(0.146, abs=5e-4)
    assert row["value"] == pytest.approx(6 / 14) and row["condition"] == "a - b" and row["metric"] == "success_diff"
    assert row["ci_low"] < row["value"] < row["ci_high"]


def test_compare_uses_only_tasks_both_conditions_scored():
    df = scores_table()
    row = compare(df, "a", "b", "success").iloc[0]
    assert row["n"] == 3  # t3 is unscored for a
    assert row["mean_a"] == pytest.approx(0.5) and row["mean_b"] == 0.0


def test_compare_does_not_depend_on_row_order_and_mirrors_when_swapped():
    rng = np.random.default_rng(3)
    rows = [{"condition": c, "subset": "s", "task_id": f"t{i:02d}", "success": float(rng.random() < p)}
            for c, p in (("a", 0.7), ("b", 0.4)) for i in range(40)]
    df = pd.DataFrame(rows)
    ab = compare(df, "a", "b", "success", stats=StatsSettings(n_resamples=500)).iloc[0]
    shuffled = df.sample(frac=1.0, random_state=7)
    again = compare(shuffled, "a", "b", "success", stats=StatsSettings(n_resamples=500)).iloc[0]
    assert (again["ci_low"], again["ci_high"]) == (ab["ci_low"], ab["ci_high"])
    ba = compare(shuffled, "b", "a", "success", stats=StatsSettings(n_resamples=500)).iloc[0]
    assert ba["value"] == pytest.approx(-ab["value"])
    assert (ba["ci_low"], ba["ci_high"]) == pytest.approx((-ab["ci_high"], -ab["ci_low"]))


def _pairs(a, b, metric="success"):
    return pd.DataFrame([{"condition": c, "subset": "s", "task_id": f"t{i}", metric: v}
                         for c, values in (("a", a), ("b", b)) for i, v in enumerate(values)])


def test_compare_mde_is_the_planners_exact_sign_test_at_the_observed_and_the_worst_discordance():
    # 30 tasks, 12 discordant (9 wins, 3 losses): the planner's exact sign test at discordance 12/30 and at 1
    a, b = [1] * 9 + [0] * 3 + [1] * 10 + [0] * 8, [0] * 9 + [1] * 3 + [1] * 10 + [0] * 8
    row = compare(_pairs(a, b), "a", "b", "success").iloc[0]
    assert row["mde"] == pytest.approx(plan_paired(30, discordance=12 / 30).mde, abs=1e-12)
    assert row["mde_bound"] == pytest.approx(plan_paired(30).mde, abs=1e-12)
    assert 0 < row["mde"] < row["mde_bound"] < 1
    assert row["mde_method"] == ("exact sign test, 80% power, alpha 0.05; mde at the observed discordance 12/30; "
                                 "mde_bound at discordance 1 (worst case)")
    stricter = compare(_pairs(a, b), "a", "b", "success", stats=StatsSettings(alpha=0.01, power=0.9)).iloc[0]
    plan = plan_paired(30, discordance=12 / 30, alpha=0.01, power=0.9)
    assert (stricter["mde"], stricter["mde_bound"]) == pytest.approx((plan.mde, plan.mde_worst), abs=1e-12)
    assert stricter["mde_method"].startswith("exact sign test, 90% power, alpha 0.01")


def test_compare_at_the_newcomers_six_tasks_stays_in_range_and_says_n_detects_nothing():
    # issue 52: one system wrong on 5 of 6 where the other is right. The t-interval is -0.83 +- 0.43; the
    # normal-approximation bound was 1.14, a difference no [0, 1] score can show.
    roma, single = [0, 0, 0, 0, 0, 1], [1, 1, 1, 1, 1, 1]
    row = compare(_pairs(roma, single), "a", "b", "success").iloc[0]
    assert paired_ci(roma, single).low < -1  # what the table would print without the clip
    assert row["value"] == pytest.approx(-5 / 6)
    assert row["ci_low"] == -1.0 and row["ci_high"] == pytest.approx(paired_ci(roma, single).high)
    assert row["ci_method"] == "paired t-interval on per-task differences, 95%, clipped to [-1, 1]"
    assert math.isnan(row["mde"]) and math.isnan(plan_paired(6, discordance=5 / 6).mde)
    assert "mde at the observed discordance 5/6: n = 6 detects nothing" in row["mde_method"]
    assert row["mde_bound"] == pytest.approx(plan_paired(6).mde, abs=1e-12) and row["mde_bound"] <= 1
    # the basic bootstrap reflects its quantiles about the mean and leaves the range too: clipped, and said
    basic = compare(_pairs(roma, single), "a", "b", "success", stats=StatsSettings(paired_ci="basic")).iloc[0]
    assert basic["ci_low"] == -1.0 and basic["ci_method"].endswith("clipped to [-1, 1]")
    # five tasks: the sign test can never reach p <= 0.05, and the table says so in words
    five = compare(_pairs(roma[1:], single[1:]), "a", "b", "success").iloc[0]
    assert math.isnan(five["mde"]) and math.isnan(five["mde_bound"])
    assert five["mde_method"].endswith("n = 5 detects nothing, even at discordance 1")


@pytest.mark.parametrize("method", ["t", "basic", "percentile", "BCa"])
def test_a_paired_interval_of_unit_scores_never_leaves_minus_one_to_one(method):
    rng = np.random.default_rng(5)
    samples = [_pairs(rng.random(n) < rng.random(), rng.random(n) < rng.random()).assign(subset=f"{n}-{i}")
               for n in (2, 3, 4, 6, 10) for i in range(20)]
    table = compare(pd.concat(samples), "a", "b", "success", stats=StatsSettings(n_resamples=500, paired_ci=method))
    # t and basic reach past the range on these small samples and are clipped; percentile and BCa take
    # quantiles of resampled means, which stay inside it
    clipped = table["ci_method"].str.endswith("clipped to [-1, 1]")
    assert len(table) == 100 and (clipped.any() if method in ("t", "basic") else not clipped.any())
    assert ((-1 <= table["ci_low"]) & (table["ci_low"] <= table["value"]) & (table["value"] <= table["ci_high"])
            & (table["ci_high"] <= 1)).all()


def test_an_interval_inside_the_range_is_not_marked_clipped():
    row = compare(_pairs([1, 0, 1, 0, 1, 1, 0, 1], [0, 0, 1, 1, 0, 1, 0, 0]), "a", "b", "success").iloc[0]
    assert row["ci_method"] == "paired t-interval on per-task differences, 95%"
    assert row["ci_low"] == pytest.approx(paired_ci([1, 0, 1, 0, 1, 1, 0, 1], [0, 0, 1, 1, 0, 1, 0, 0]).low)


def test_all_pairs_tied_is_no_discordant_task_with_an_exact_bound_not_a_zero_width_interval():
    row = compare(_pairs([1, 1, 0, 1, 0, 1], [1, 1, 0, 1, 0, 1]), "a", "b", "success").iloc[0]
    assert row["value"] == 0 and row["ci_high"] - row["ci_low"] > 0.75
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((-(1 - 0.05 ** (1 / 6)), 1 - 0.05 ** (1 / 6)))
    assert row["ci_method"] == ("no discordant task (all 6 pairs tie): exact 95% bound on the share of tasks "
                                "that differ")
    assert math.isnan(row["mde"]) and "mde: no discordant task" in row["mde_method"]
    assert row["mde_bound"] == pytest.approx(plan_paired(6).mde, abs=1e-12)
    # with thirty tied pairs the bound narrows, as a sample that large should make it
    thirty = compare(_pairs([1, 0, 1] * 10, [1, 0, 1] * 10), "a", "b", "success").iloc[0]
    assert thirty["ci_high"] == pytest.approx(1 - 0.05 ** (1 / 30)) and thirty["ci_high"] < 0.1


def test_every_task_moved_alike_gets_an_exact_bound_and_a_t_test_mde():
    # Per-task means of 10 runs: every task gained one run (0.1), but 0.9 - 0.8 and 0.4 - 0.3 differ in the
    # last bit; neither an interval of width 5e-17 nor a plug-in MDE of 0 may come of it.
    a = [0.9, 0.4, 0.7, 0.2, 0.5, 0.6, 0.3, 0.8, 0.9, 0.4, 0.7, 0.2]
    row = compare(_pairs(a, [round(x - 0.1, 1) for x in a]), "a", "b", "success").iloc[0]
    assert row["value"] == pytest.approx(0.1) and row["ci_method"].startswith("every task moved by +0.1: exact 95%")
    assert row["ci_low"] < 0 and 0.1 < row["ci_high"] <= 1
    assert math.isnan(row["mde"]) and row["mde_method"].startswith("paired t-test, 80% power, alpha 0.05; mde: every")
    # scores that are not 0/1 are planned as the planner plans R runs: the t-test, bound at sd 1
    assert row["mde_bound"] == pytest.approx(plan_paired(12, sd_diff=1.0).mde, abs=1e-12)
    spread = compare(_pairs(a, [0.5] * 12), "a", "b", "success").iloc[0]
    sd = float(np.std(np.array(a) - 0.5, ddof=1))
    assert spread["mde"] == pytest.approx(plan_paired(12, sd_diff=sd).mde, abs=1e-12)
    assert f"mde at the observed sd {sd:.3g}" in spread["mde_method"]


def test_compare_plans_no_mde_for_scores_outside_the_unit_interval():
    row = compare(_pairs([3.0, 1.0, 2.0], [1.0, 1.0, 0.5], metric="cost"), "a", "b", "cost").iloc[0]
    assert math.isnan(row["mde"]) and math.isnan(row["mde_bound"]) and row["mde_method"].startswith("no MDE")
    assert row["ci_method"] == "paired t-interval on per-task differences, 95%" and row["ci_low"] < -1  # not clipped
    tied = compare(_pairs([3.0, 1.0], [3.0, 1.0], metric="cost"), "a", "b", "cost").iloc[0]
    assert math.isnan(tied["ci_low"]) and tied["ci_method"].startswith("no interval: no discordant task")
    one_task = compare(_pairs([1], [0]), "a", "b", "success").iloc[0]
    assert math.isnan(one_task["mde"]) and math.isnan(one_task["mde_bound"])
    assert one_task["mde_method"] == one_task["ci_method"] == "no comparison: fewer than 2 tasks scored by both"


def test_compare_refuses_an_absent_condition():
    with pytest.raises(ValueError, match="no rows"):
        compare(scores_table(), "a", "zzz", "success")


def test_as_metrics_makes_test_columns_into_metric_rows():
    df = scores_table()
    table = as_metrics(compare(df, "a", "b", "success").assign(condition="a - b"), ["sign_test_p"])
    assert list(table["metric"]) == ["success_diff", "success_diff_sign_test_p"]
    assert np.isclose(table["value"].iloc[1], table["sign_test_p"].iloc[0])


def test_as_metrics_names_each_figure_by_its_metric_so_two_comparisons_meet_the_paper():
    # success and cost compared: each CI bound and sign test is its own row, none listed twice
    df = scores_table()
    both = pd.concat([compare(df, "a", "b", m) for m in ("success", "cost")], ignore_index=True)
    table = as_metrics(both, ["ci_low", "sign_test_p"])
    assert list(table["metric"]) == ["success_diff", "cost_diff", "success_diff_ci_low", "cost_diff_ci_low",
                                     "success_diff_sign_test_p", "cost_diff_sign_test_p"]
    paper = paper_rows({"condition": "a - b", "metric": "success_diff_ci_low", "value": -0.5},
                       {"condition": "a - b", "metric": "cost_diff", "value": 1.0, "unit": "cost units"})
    beside = beside_paper(table, paper, "t1", why="x").set_index("metric")
    low = table.set_index("metric").loc["success_diff", "ci_low"]
    assert beside.loc["success_diff_ci_low", "ours"] == low and beside.loc["cost_diff", "ours"] == 1.0
    assert len(beside) == 2


def test_wide_puts_one_group_per_row_with_each_ci_beside_its_metric():
    table = summarize(scores_table(), ["success", "cost"], ci=["success"], stats=StatsSettings(n_resamples=200))
    view = wide(table)
    assert list(view.columns) == ["condition", "subset", "success", "success_ci_low", "success_ci_high", "cost"]
    assert list(view["condition"]) == ["a", "b"]
    long = table.set_index(["condition", "metric"])
    for row in view.itertuples():
        assert row.success == long.loc[(row.condition, "success"), "value"]
        assert row.success_ci_low == long.loc[(row.condition, "success"), "ci_low"]
        assert row.cost == long.loc[(row.condition, "cost"), "value"]
    # a metric only some groups have is NaN elsewhere; a figure listed twice is refused
    extra = pd.DataFrame([{"condition": "b", "subset": "test", "metric": "backoff_rate", "value": 0.5}])
    view = wide(pd.concat([table, extra], ignore_index=True)).set_index("condition")
    assert math.isnan(view.loc["a", "backoff_rate"]) and view.loc["b", "backoff_rate"] == 0.5
    with pytest.raises(ValueError, match="twice"):
        wide(pd.concat([table, table.iloc[:1]], ignore_index=True))


def test_a_probability_is_a_known_unit(tmp_path):
    path = tmp_path / "paper_reported.csv"
    paper_rows({"condition": "a", "metric": "p_C", "value": 0.192, "unit": "probability"}).to_csv(path, index=False)
    assert read_paper_reported(path)["unit"].tolist() == ["probability"]


def test_summaries_do_not_depend_on_the_order_rows_arrive_in():
    # continuous scores over many tasks, so a different draw order would move the percentiles
    rng = np.random.default_rng(1)
    df = pd.DataFrame([{"condition": c, "subset": "s", "task_id": f"t{i:02d}", "run": 0, "success": rng.random()}
                       for c in ("a", "b") for i in range(15)])
    shuffled = df.sample(frac=1.0, random_state=3).reset_index(drop=True)
    # groups keep the order they first appear in; their figures must not depend on it
    key = ["condition", "metric"]
    before = summarize(df, ["success"], stats=StatsSettings(n_resamples=300)).sort_values(key, ignore_index=True)
    after = summarize(shuffled, ["success"], stats=StatsSettings(n_resamples=300)).sort_values(key, ignore_index=True)
    pd.testing.assert_frame_equal(before, after)
    pd.testing.assert_frame_equal(compare(df, "a", "b", "success", stats=StatsSettings(n_resamples=300)),
                                  compare(shuffled, "a", "b", "success", stats=StatsSettings(n_resamples=300)))


def test_beside_paper_keeps_the_papers_order_then_ours_only_rows():
    paper = paper_rows({"condition": "zeta", "metric": "success", "value": 1.0},
                       {"condition": "alpha", "metric": "success", "value": 1.0})
    ours = pd.DataFrame([{"condition": c, "subset": "test", "metric": "success", "value": 1.0}
                         for c in ("mine", "alpha", "zeta")])
    assert list(beside_paper(ours, paper, "t1")["condition"]) == ["zeta", "alpha", "mine"]
