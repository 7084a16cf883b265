"""The evaluation-protocol statistics (design/protocol.md) against hand-worked values and seeded simulations."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from roma_lab.results import MATCHES, PAPER_COLUMNS, PROTOCOL_COLUMNS, beside_paper, compare, summarize_protocol
from roma_lab.stats import (
    StatsSettings,
    VarianceComponents,
    Vote,
    bootstrap_ci,
    holm_adjust,
    max_discordance,
    min_detectable_effect,
    plan_paired,
    variance_components,
    vote,
)

# Worked by hand in design/protocol.md: three tasks x three runs.
HAND = {"t1": [1, 1, 1], "t2": [1, 0, 0], "t3": [0, 0, 0]}
HAND_ANSWERS = {"t1": ["x", "x", "x"], "t2": ["a", "b", "c"], "t3": ["u", "u", "v"]}


def tidy(matrix, *, condition="base", subset="s", answers=None, runs=None):
    rows = []
    for task, values in matrix.items():
        for r, value in enumerate(values):
            row = {"condition": condition, "subset": subset, "task_id": task,
                   "run": runs[r] if runs else r, "success": value}
            if answers is not None:
                row["answer"] = answers[task][r]
            rows.append(row)
    return pd.DataFrame(rows)


def value(table, metric, condition="base", subset="s"):
    hit = table[(table["metric"] == metric) & (table["condition"] == condition) & (table["subset"] == subset)]
    assert len(hit) == 1, (metric, condition, subset, len(hit))
    return hit.iloc[0]


# --- the hand-worked 3 x 3 example ------------------------------------------------------------------------------

def test_every_estimator_on_the_hand_worked_example():
    table = summarize_protocol(tidy(HAND), ks=(2, 3), stats=StatsSettings(n_resamples=200))
    assert list(table.columns) == ["condition", "subset", *PROTOCOL_COLUMNS]
    assert value(table, "pass@1")["value"] == pytest.approx(4 / 9)
    # per-run accuracies 2/3, 1/3, 1/3: sd = sqrt(((2/9)^2 + 2 (1/9)^2) / 2) = sqrt(1/27)
    assert value(table, "pass@1_run_sd")["value"] == pytest.approx(math.sqrt(1 / 27))
    # unbiased pass@2 of t2 (1 of 3 correct) is 1 - C(2,2)/C(3,2) = 2/3, not 1 - (2/3)^2 = 5/9
    assert value(table, "pass@2")["value"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert value(table, "pass@3")["value"] == pytest.approx(2 / 3)
    # votes over 0/1 scores: t2 has one success in three, so the vote is wrong; binary with R=3 never ties
    assert value(table, "maj@3")["value"] == pytest.approx(1 / 3)
    assert value(table, "maj@3_tie_rate")["value"] == 0
    # s_i^2 = 0, 1/3, 0 -> within 1/9; var(1, 1/3, 0; ddof 1) = 7/27, minus (1/9)/3 -> between 2/9
    assert value(table, "var_run_to_run")["value"] == pytest.approx(1 / 9)
    assert value(table, "var_task_to_task")["value"] == pytest.approx(2 / 9)
    assert set(table["runs"]) == {3}


def test_votes_over_answers_report_the_tie_and_give_it_to_the_lowest_run():
    table = summarize_protocol(tidy(HAND, answers=HAND_ANSWERS), answer="answer", stats=StatsSettings(n_resamples=200))
    # t2 answered a, b, c: a three-way tie, won by run 0's "a", which was correct
    assert value(table, "maj@3")["value"] == pytest.approx(2 / 3)
    assert value(table, "maj@3_tie_rate")["value"] == pytest.approx(1 / 3)


def test_tie_rule_ignores_row_order_and_run_label_order():
    answers = {"t1": ["late", "early", "mid"], "t2": ["p", "q", "q"]}
    matrix = {"t1": [0, 1, 0], "t2": [1, 0, 0]}
    # run labels 2, 0, 1: "early" was given by run 0, so it wins the three-way tie on t1
    frame = tidy(matrix, answers=answers, runs=[2, 0, 1])
    table = summarize_protocol(frame, answer="answer", stats=StatsSettings(n_resamples=100))
    assert value(table, "maj@3")["value"] == pytest.approx(0.5)  # t1 right (run 0), t2 wrong ("q" x2)
    shuffled = summarize_protocol(frame.sample(frac=1, random_state=3), answer="answer",
                                  stats=StatsSettings(n_resamples=100))
    pd.testing.assert_frame_equal(table, shuffled)


def test_binary_vote_ties_with_an_even_number_of_runs():
    table = summarize_protocol(tidy({"t1": [0, 1], "t2": [1, 0], "t3": [1, 1]}), stats=StatsSettings(n_resamples=100))
    # t1 tie -> run 0 said 0; t2 tie -> run 0 said 1; t3 unanimous
    assert value(table, "maj@2")["value"] == pytest.approx(2 / 3)
    assert value(table, "maj@2_tie_rate")["value"] == pytest.approx(2 / 3)


def test_pass1_interval_resamples_tasks_not_runs():
    rng = np.random.default_rng(5)
    matrix = {f"t{i:02d}": list(rng.integers(0, 2, 4)) for i in range(12)}  # sorted = listed order
    table = summarize_protocol(tidy(matrix), stats=StatsSettings(n_resamples=500, seed=9))
    per_task = np.array([np.mean(v) for v in matrix.values()])
    expected = bootstrap_ci(per_task, n_resamples=500, seed=9)
    row = value(table, "pass@1")
    assert (row["ci_low"], row["ci_high"], row["n"]) == (expected.low, expected.high, 12)
    by_run = bootstrap_ci(np.concatenate(list(matrix.values())).astype(float), n_resamples=500, seed=9)
    assert (by_run.low, by_run.high) != (expected.low, expected.high)


def test_not_scored_runs_are_left_out_and_counted():
    table = summarize_protocol(tidy({"t1": [1, math.nan, 0], "t2": [1, 1, 1], "t3": [0, 0, 0]}),
                               stats=StatsSettings(n_resamples=100))
    assert value(table, "pass@1")["value"] == pytest.approx((0.5 + 1 + 0) / 3)
    # pass@3 needs three scored runs: t1 has two, so it is missing for that metric only
    row = value(table, "pass@3")
    assert (row["value"], row["n"], row["n_missing"]) == (pytest.approx(0.5), 2, 1)
    # s^2 of t1's (1, 0) is 1/2
    assert value(table, "var_run_to_run")["value"] == pytest.approx(1 / 6)


def test_a_single_run_gives_pass1_only():
    table = summarize_protocol(tidy({"t1": [1], "t2": [0]}), stats=StatsSettings(n_resamples=100))
    assert list(table["metric"]) == ["pass@1"]


@pytest.mark.parametrize(("change", "match"), [
    (lambda f: f.assign(success=f["success"] * 0.5), "0/1 scores"),
    (lambda f: pd.concat([f, f.iloc[:1]]), "duplicate"),
    (lambda f: pd.concat([f, tidy({"t1": [1, 1]}, condition="other")]), "same runs"),
    (lambda f: f.drop(columns="run"), "lack column"),
])
def test_bad_scores_are_refused_with_a_clear_error(change, match):
    with pytest.raises(ValueError, match=match):
        summarize_protocol(change(tidy(HAND)), stats=StatsSettings(n_resamples=100))


@pytest.mark.parametrize("ks", [(1,), (4,), (2.0,)])
def test_bad_k_is_refused(ks):
    with pytest.raises(ValueError, match="ks"):
        summarize_protocol(tidy(HAND), ks=ks)


# --- comparisons with a baseline: paired differences, Holm per table column, MDE ------------------------------------

def comparison_frame():
    rng = np.random.default_rng(21)
    frames = []
    for subset, n_tasks in (("easy", 30), ("hard", 24)):
        base = rng.random(n_tasks) < 0.4
        for name, flip in (("base", 0.0), ("small", 0.1), ("large", 0.45), ("none", 0.0)):
            for r in range(3):
                noise = rng.random(n_tasks) < 0.15
                success = (base | (rng.random(n_tasks) < flip)) ^ noise
                frames.append(pd.DataFrame({"condition": name, "subset": subset, "task_id": np.arange(n_tasks),
                                            "run": r, "success": success.astype(float)}))
    return pd.concat(frames, ignore_index=True)


def test_comparisons_holm_within_each_subset_and_mde_from_the_per_task_differences():
    scores = comparison_frame()
    table = summarize_protocol(scores, baseline="base", stats=StatsSettings(n_resamples=300, seed=4))
    for subset in ("easy", "hard"):
        rows = table[table["subset"] == subset].set_index(["condition", "metric"])["value"]
        names = ["small - base", "large - base", "none - base"]
        raw = np.array([rows[(c, "sign_test_p")] for c in names])
        assert np.allclose([rows[(c, "sign_test_p_holm")] for c in names], holm_adjust(raw))
        assert len(set(np.round(raw, 12))) == 3  # distinct p-values, so the family matters
        for c in names:
            name = c.split(" - ")[0]
            per_task = scores[scores["subset"] == subset].groupby(["condition", "task_id"])["success"].mean()
            d = (per_task[name] - per_task["base"]).to_numpy()
            # per-task means of 3 runs: planned as the planner plans R runs, the paired t-test at the sd
            assert rows[(c, "mde")] == pytest.approx(plan_paired(d.size, sd_diff=float(d.std(ddof=1))).mde)
            assert rows[(c, "mde_bound")] == pytest.approx(plan_paired(d.size, sd_diff=1.0).mde)
            assert rows[(c, "pass@1_diff")] == pytest.approx(d.mean())
    reference = compare(scores.rename(columns={"success": "pass@1"}), "large", "base", "pass@1",
                        stats=StatsSettings(n_resamples=300, seed=4))
    mine = table[table["metric"].eq("pass@1_diff") & table["condition"].eq("large - base")]
    assert np.allclose(mine[["value", "ci_low", "ci_high", "wins", "losses", "ties"]].to_numpy(float),
                       reference[["value", "ci_low", "ci_high", "wins", "losses", "ties"]].to_numpy(float))
    holm_rows = table[table["metric"] == "sign_test_p_holm"]
    assert holm_rows["method"].str.contains("Holm over the 3 conditions").all()


def test_every_statistic_follows_the_one_stats_settings_given():
    scores = comparison_frame()
    looser = StatsSettings(n_resamples=300, seed=4, level=0.9, alpha=0.1, power=0.9)
    default = summarize_protocol(scores, baseline="base", stats=StatsSettings(n_resamples=300, seed=4))
    given = summarize_protocol(scores, baseline="base", stats=looser)
    width = {name: (t["ci_high"] - t["ci_low"]).to_numpy() for name, t in (("default", default), ("given", given))}
    spread = default["ci_low"].notna().to_numpy() & (width["default"] > 0)  # a metric equal on every task has none
    # a 90% interval from the same resamples is narrower: the level reached the summary and the comparisons
    # (on 0/1 data a quantile can land on the same value at both levels, so no interval is wider, most narrower)
    narrower = width["given"][spread] < width["default"][spread]
    assert (width["given"][spread] <= width["default"][spread]).all() and narrower.mean() > 0.8
    assert set(given.loc[given["metric"].isin(["pass@1", "pass@1_diff"]), "ci_method"].str.extract(r"(\d+%)")[0]) \
        == {"90%"}
    mde = given[given["metric"] == "mde"]
    d = scores[scores["subset"] == "easy"].groupby(["condition", "task_id"])["success"].mean()
    d = (d["large"] - d["base"]).to_numpy()
    expected = plan_paired(d.size, sd_diff=float(d.std(ddof=1)), alpha=0.1, power=0.9).mde
    assert mde.set_index(["condition", "subset"]).loc[("large - base", "easy"), "value"] == pytest.approx(expected)
    assert mde["method"].str.contains("90% power, alpha 0.1").all()


def test_protocol_rows_meet_paper_figures_in_percent_through_beside_paper():
    table = summarize_protocol(comparison_frame(), baseline="base", stats=StatsSettings(n_resamples=100))
    ours = table[(table["subset"] == "easy")]
    mine = value(table, "pass@1", subset="easy")
    diff = value(table, "pass@1_diff", condition="large - base", subset="easy")
    paper = pd.DataFrame([
        {"artefact": "t", "condition": "base", "subset": "easy", "metric": "pass@1", "unit": "percent",
         "value": round(100 * mine["value"], 2), "derived": False, "source": "cell", "note": ""},
        {"artefact": "t", "condition": "large - base", "subset": "easy", "metric": "pass@1_diff",
         "unit": "percentage points", "value": round(100 * diff["value"], 2), "derived": False, "source": "cell",
         "note": ""}], columns=list(PAPER_COLUMNS))
    joined = beside_paper(ours, paper, "t").set_index("condition")
    assert (joined.loc[["base", "large - base"], "agreement"] == MATCHES).all()
    assert joined.loc["base", "ours"] == pytest.approx(100 * mine["value"])
    assert value(table, "sign_test_p", condition="large - base", subset="easy")["unit"] == "p-value"


def test_per_stratum_breakdown_keeps_the_extra_key_and_its_own_families():
    scores = comparison_frame()
    scores["level"] = np.where(scores["task_id"] % 2 == 0, "L1", "L2")
    table = summarize_protocol(scores, baseline="base", by=("subset", "level"), stats=StatsSettings(n_resamples=100))
    assert list(table.columns[:3]) == ["condition", "subset", "level"]
    holm = table[table["metric"] == "sign_test_p_holm"]
    assert len(holm) == 2 * 2 * 3  # subsets x levels x compared conditions
    for (_, _), group in table[table["metric"] == "sign_test_p"].groupby(["subset", "level"]):
        adjusted = holm.set_index(["subset", "level", "condition"]).loc[
            [(s, lv, c) for s, lv, c in group[["subset", "level", "condition"]].itertuples(index=False)], "value"]
        assert np.allclose(adjusted, holm_adjust(group["value"].to_numpy()))


def test_a_missing_baseline_is_an_error():
    with pytest.raises(ValueError, match="no rows"):
        summarize_protocol(comparison_frame(), baseline="absent", stats=StatsSettings(n_resamples=50))
    with pytest.raises(ValueError, match="nothing to compare"):
        summarize_protocol(tidy(HAND), baseline="base", stats=StatsSettings(n_resamples=50))


# --- votes ----------------------------------------------------------------------------------------------------------

def test_vote_reports_ties_and_counts():
    assert vote(["b", "a", "a", "b"]) == Vote(answer="b", votes=2, tied=True)
    assert vote(["a", "b", "b"]) == Vote(answer="b", votes=2, tied=False)
    assert vote([" Paris", "paris"], key=str.strip) == Vote(answer=" Paris", votes=1, tied=True)


# --- variance components --------------------------------------------------------------------------------------------

def test_variance_components_hand_values():
    assert variance_components([3, 3, 3], [3, 1, 0]) == VarianceComponents(
        within=pytest.approx(1 / 9), between=pytest.approx(2 / 9), n_tasks=3)
    # unequal runs: s^2 = 1/2 and 1/4; var(1/2, 1/4) = 1/32; mean(s^2/n) = (1/4 + 1/16)/2 -> between -1/8 (< 0 allowed)
    parts = variance_components([2, 4], [1, 1])
    assert parts.within == pytest.approx(3 / 8)
    assert parts.between == pytest.approx(1 / 32 - 5 / 32)


def test_variance_components_are_unbiased_in_a_seeded_simulation():
    rng = np.random.default_rng(2024)
    p = rng.beta(0.8, 0.8, size=40)
    runs = 4
    draws = rng.binomial(runs, p, size=(4000, p.size))
    estimates = np.array([[e.within, e.between] for e in
                          (variance_components(np.full(p.size, runs), row) for row in draws)])
    within, between = estimates.mean(axis=0)
    assert within == pytest.approx(np.mean(p * (1 - p)), rel=0.01)
    assert between == pytest.approx(p.var(ddof=1), rel=0.03)
    assert between < within  # this design: Beta(.8,.8) tasks, so the two are far enough apart to tell a swap


@pytest.mark.parametrize(("n", "c", "error"), [
    ([3], [1], ValueError), ([3, 1], [1, 0], ValueError), ([3, 3], [4, 0], ValueError),
    ([3.0, 3.0], [1, 0], TypeError), ([3, 3, 3], [1, 0], ValueError),
])
def test_variance_components_reject_bad_input(n, c, error):
    with pytest.raises(error):
        variance_components(n, c)


# --- Holm -----------------------------------------------------------------------------------------------------------

def test_holm_hand_values():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert np.allclose(holm_adjust([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    assert np.allclose(holm_adjust([0.5, 0.4]), [0.8, 0.8])
    assert np.allclose(holm_adjust([0.9, 0.6, 0.7]), [1.0, 1.0, 1.0])
    assert np.allclose(holm_adjust([0.2]), [0.2])


def test_holm_leaves_nan_out_of_the_family():
    adjusted = holm_adjust([0.01, math.nan, 0.04])
    assert math.isnan(adjusted[1])
    assert np.allclose(adjusted[[0, 2]], [0.02, 0.04])


def test_holm_rejects_bad_input():
    with pytest.raises(ValueError):
        holm_adjust([0.2, 1.5])
    with pytest.raises(ValueError):
        holm_adjust([[0.1, 0.2]])


# --- minimum detectable effect ----------------------------------------------------------------------------------------

Z_A, Z_B = sps.norm.ppf(0.975), sps.norm.ppf(0.8)


def test_mde_rows_are_the_planners_and_say_when_n_detects_nothing():
    # Two tasks where the conditions agree everywhere (the all-tied tiny sample of a smoke-sized study):
    # nothing to plan from, and two tasks detect nothing even at the worst case; the rows say so.
    base = {"a": [1.0, 1.0], "b": [0.0, 0.0]}
    tied = pd.concat([tidy(base), tidy(base, condition="other")], ignore_index=True)
    rows = summarize_protocol(tied, baseline="base", stats=StatsSettings(n_resamples=50, seed=1))
    rows = rows.set_index(["condition", "metric"])
    assert math.isnan(rows.loc[("other - base", "mde"), "value"])
    assert math.isnan(rows.loc[("other - base", "mde_bound"), "value"])
    assert rows.loc[("other - base", "mde_bound"), "method"].endswith("n = 2 detects nothing, even at discordance 1")
    # 30 tasks, one run, 9 of them moved: the exact sign test at discordance 9/30, and at 1 for the bound
    tasks = {f"t{i}": [float(i < 12)] for i in range(30)}
    moved = pd.concat([tidy(tasks), tidy({t: [float(i < 3)] for i, t in enumerate(tasks)}, condition="other")],
                      ignore_index=True)
    rows = summarize_protocol(moved, baseline="base", stats=StatsSettings(n_resamples=50, seed=1))
    rows = rows.set_index(["condition", "metric"])
    assert rows.loc[("other - base", "mde"), "value"] == pytest.approx(plan_paired(30, discordance=9 / 30).mde)
    assert rows.loc[("other - base", "mde_bound"), "value"] == pytest.approx(plan_paired(30).mde)
    assert "exact sign test" in rows.loc[("other - base", "mde"), "method"]


def test_mde_with_a_known_sd_by_hand():
    mde = min_detectable_effect(100, sd_diff=0.5)
    assert mde.effect == pytest.approx((1.959964 + 0.841621) * 0.5 / 10, abs=1e-6)
    assert (mde.n_tasks, mde.alpha, mde.power, mde.sd_diff) == (100, 0.05, 0.8, 0.5)
    assert math.isnan(mde.discordance)


def test_mde_with_a_discordance_solves_the_mcnemar_power_equation():
    for n, psi in ((165, 0.3), (53, 0.5), (1000, 0.05)):
        delta = min_detectable_effect(n, discordance=psi).effect
        achieved = sps.norm.cdf((math.sqrt(n) * delta - Z_A * math.sqrt(psi)) / math.sqrt(psi - delta**2))
        assert achieved == pytest.approx(0.8, abs=1e-9)


def test_mcnemar_mde_has_the_stated_power_in_a_seeded_simulation():
    n, psi, reps = 165, 0.3, 20000
    delta = min_detectable_effect(n, discordance=psi).effect
    counts = np.random.default_rng(7).multinomial(n, [(psi + delta) / 2, (psi - delta) / 2, 1 - psi], size=reps)
    wins, losses = counts[:, 0], counts[:, 1]
    z = (wins - losses) / np.sqrt(np.maximum(wins + losses, 1))
    assert np.mean(np.abs(z) > Z_A) == pytest.approx(0.8, abs=0.015)


def test_paired_z_mde_has_the_stated_power_in_a_seeded_simulation():
    n, sd, reps = 80, 0.4, 20000
    delta = min_detectable_effect(n, sd_diff=sd).effect
    d = np.random.default_rng(8).normal(delta, sd, size=(reps, n))
    z = d.mean(axis=1) / (sd / math.sqrt(n))
    assert np.mean(np.abs(z) > Z_A) == pytest.approx(0.8, abs=0.015)


def test_max_discordance_inverts_the_mde():
    for n, delta in ((165, 0.10), (86, 0.15)):
        psi = max_discordance(n, delta)
        assert delta < psi < 1
        assert min_detectable_effect(n, discordance=psi).effect == pytest.approx(delta, rel=1e-9)
    assert math.isnan(max_discordance(26, 0.04))  # one task of 26: never detectable
    assert max_discordance(165, 0.9) == 1.0
    assert max_discordance(165, -0.1) == max_discordance(165, 0.1)


def test_an_mde_beyond_the_discordance_is_not_attainable():
    mde = min_detectable_effect(26, discordance=0.1)
    assert math.isnan(mde.effect) and "no effect reaches" in mde.method


@pytest.mark.parametrize("kwargs", [
    {"n_tasks": 50}, {"n_tasks": 50, "sd_diff": 0.1, "discordance": 0.2}, {"n_tasks": 1, "sd_diff": 0.1},
    {"n_tasks": 50, "discordance": 0.0}, {"n_tasks": 50, "sd_diff": -1.0}, {"n_tasks": 50, "sd_diff": 0.1, "power": 1},
])
def test_mde_rejects_bad_input(kwargs):
    with pytest.raises(ValueError):
        min_detectable_effect(**kwargs)
