"""Values of Tables 4 and 5, the sensitivity block, failures, training size and hybrid on a small
fixed suite whose router is written by hand, so every expected figure can be checked on paper.

The suite: six families (answer-only, T, C, TV, G, DT), two train tasks each and one task per
family in dev, test and challenge, taken from the generated suite. The hand model knows one cue
word per dev/test/challenge template and gives that prompt the calibrated probabilities in `CUES`
(order D, T, C, G, V); tau is .40 and the T head has temperature 2, so removing calibration
moves p_T away from .5: p -> p^2 / (p^2 + (1-p)^2).
"""

import numpy as np
import pandas as pd
import pytest
from scipy.special import logit

from roma_lab import router
from roma_lab.results import wide
from roma_lab.papers import routing
from roma_lab.papers.routing import _tables
from roma_lab.router import _model
from roma_lab.stats import StatsSettings

FAMILIES = ("data_literal", "record_lookup", "statistic", "conflicting_sources", "retrieval_outage", "multi_hop")
LOW = (0.1,) * 5
CUES = {
    # dev
    "unchanged": LOW, "logged": (0.1, 0.93, 0.1, 0.1, 0.1), "calculate": (0.1, 0.1, 0.93, 0.1, 0.1),
    "outdated": (0.1, 0.93, 0.1, 0.1, 0.47), "delegate": (0.1, 0.1, 0.1, 0.83, 0.1), "home": (0.38, 0.93, 0.1, 0.1, 0.1),
    # test
    "dashboard": LOW, "entry": (0.1, 0.93, 0.1, 0.1, 0.1), "measurements": (0.1, 0.1, 0.93, 0.1, 0.1),
    "verifying": (0.1, 0.93, 0.1, 0.1, 0.57), "tools": (0.1, 0.37, 0.1, 0.83, 0.1), "operate": (0.63, 0.93, 0.1, 0.1, 0.1),
    # challenge
    "typed": LOW, "money": (0.1, 0.42, 0.1, 0.1, 0.1), "given": (0.1, 0.1, 0.67, 0.1, 0.1),
    "charge": (0.52, 0.93, 0.52, 0.52, 0.12), "maintenance": (0.1, 0.62, 0.1, 0.33, 0.1), "cooked": (0.32, 0.83, 0.1, 0.1, 0.1),
}
TEMPERATURES = np.array([1.0, 2.0, 1.0, 1.0, 1.0])
TAU = 0.40


def _small_suite():
    tasks = router.generate_suite()
    chosen = []
    for split, per_family in (("train", 2), ("dev", 1), ("test", 1), ("challenge", 1)):
        for family in FAMILIES:
            chosen += [t for t in tasks if t.split == split and t.family == family][:per_family]
    return tuple(chosen)


@pytest.fixture(scope="module")
def study():
    vocab = {"\n" + word: i for i, word in enumerate(CUES)}
    weights = np.array([TEMPERATURES * logit(np.array(p)) for p in CUES.values()])
    model = router.OperationModel(_model.Featurizer(vocab, chars=False), weights, np.zeros(5), TEMPERATURES, TAU)
    # tau "selected" from the router's grid: Table 5 sweeps the grid a study selected tau from
    hand = routing.RouterStudy(_small_suite(), model, pd.DataFrame({"tau": _model.TAU_GRID}), np.full(5, np.nan), 0.0,
                              None, router.TrainingConfig())
    for t in hand.tasks:   # the premise of every expectation below
        if t.split != "train":
            assert model.known_features(t.prompt) == 1, t.prompt
    return hand


def by_split(table, condition, column):
    """{split: figure} of one condition in a wide table (a sweep, or `wide` of a long summary)."""
    rows = table[table["condition"] == condition]
    return dict(zip(rows["subset"], rows[column]))


def test_the_hand_model_gives_each_prompt_its_cue_probabilities(study):
    t = next(t for t in study.split("test") if t.family == "retrieval_outage")
    np.testing.assert_allclose(study.model.probability(t.prompt), CUES["tools"], atol=1e-12)
    assert router.Learned(study.model)(t) == ("G",)          # p_T .37 is below tau .40


def test_table5_success_and_cost_per_tau(study):
    sweep = routing.threshold_table(study)["table5_threshold"]
    success = {(r.subset, round(r.tau, 2)): r.success for r in sweep.itertuples()}
    # test: the outage keeps T (.37) below .40; conflicting loses V (.57) from .60; multi-hop D (.63) from .65
    expected_test = {0.30: 5, 0.35: 5, 0.40: 6, 0.45: 6, 0.50: 6, 0.55: 6, 0.60: 5, 0.65: 4, 0.70: 4}
    # challenge: multi-hop needs D (.32) so only .30; lookup T (.42) up to .40; statistic C (.67) up to .65
    expected_challenge = {0.30: 4, 0.35: 3, 0.40: 3, 0.45: 2, 0.50: 2, 0.55: 2, 0.60: 2, 0.65: 2, 0.70: 1}
    for tau in _model.TAU_GRID:
        assert success[("test", tau)] == pytest.approx(expected_test[tau] / 6), tau
        assert success[("challenge", tau)] == pytest.approx(expected_challenge[tau] / 6), tau
    at_tau = sweep[sweep["selected"]].set_index("subset")
    assert list(at_tau["tau"]) == [TAU, TAU]
    # routes at .40 -- test: (), T, C, TV, G, DT; challenge: (), T, C, DTC, T, T -- plus the answer action
    assert at_tau.loc["test", "mean_cost"] == pytest.approx((0.3 + 1.3 + 1.45 + 1.95 + 1.7 + 1.75) / 6)
    assert at_tau.loc["challenge", "mean_cost"] == pytest.approx((0.3 + 1.3 + 1.45 + 2.9 + 1.3 + 1.3) / 6)
    assert at_tau.loc["test", "exact_route"] == 1.0 and at_tau.loc["challenge", "exact_route"] == pytest.approx(3 / 6)


def test_table4_ablations(study):
    table = wide(routing.ablation_table(study, stats=StatsSettings(n_resamples=50))["table4_ablations"])
    success = {(r.condition, r.subset): r.success for r in table.itertuples()}
    assert success[("full", "test")] == 1.0 and success[("full", "challenge")] == 0.5
    # without temperatures p_T .42 -> .344 drops the challenge lookup; the test split keeps every route
    assert success[("no_calibration", "test")] == 1.0 and success[("no_calibration", "challenge")] == pytest.approx(2 / 6)
    # without the budget the conflicting paraphrase takes D, T, C and G (4 operations): still wrong, now over M
    assert success[("no_budget", "challenge")] == 0.5
    assert by_split(table, "no_budget", "budget_compliant")["challenge"] == pytest.approx(5 / 6)
    assert by_split(table, "no_budget", "cost")["challenge"] == pytest.approx((0.3 + 1.3 + 1.45 + 4.3 + 1.3 + 1.3) / 6)
    assert by_split(table, "full", "budget_compliant") == {"test": 1.0, "challenge": 1.0}
    # one operation: the argmax T cannot solve TV, DT or the outage paraphrase
    assert success[("one_operation", "test")] == pytest.approx(4 / 6)
    assert success[("one_operation", "challenge")] == pytest.approx(3 / 6)
    assert set(table.loc[table["condition"] != "no_char_features", "tau"]) == {TAU}
    # the word-only router is refitted on the 12 train tasks and re-thresholded on dev, like any study
    refit = routing.RouterStudy.fit(study.tasks, training=router.TrainingConfig(chars=False))
    expected = router.evaluate([router.Learned(refit.model)], study.split("test") + study.split("challenge"), repeats=1)
    assert by_split(table, "no_char_features", "success") == expected.groupby("subset")["success"].mean().to_dict()
    word_only = table[table["condition"] == "no_char_features"].iloc[0]
    assert word_only["tau"] == refit.model.tau
    train = [t.prompt for t in study.split("train")]
    assert word_only["n_features"] == _model.Featurizer.fit(train, chars=False).n_features


def test_failure_analysis_by_family(study):
    out = routing.failure_analysis(study)
    table = out["failures_by_family"].set_index("family")
    assert table["n_tasks"].tolist() == [1] * 6
    assert table["n_failures"].to_dict() == {"data_literal": 0, "record_lookup": 0, "statistic": 0,
                                             "conflicting_sources": 1, "retrieval_outage": 1, "multi_hop": 1}
    assert table.loc["conflicting_sources", "typical_route"] == "DTC" and table.loc["conflicting_sources", "incorrect"] == 1
    assert table.loc["retrieval_outage", "typical_route"] == "T" and table.loc["retrieval_outage", "unavailable"] == 1
    assert table.loc["multi_hop", "typical_route"] == "T" and table.loc["multi_hop", "incorrect"] == 1
    assert table.loc["multi_hop", "p_D"] == pytest.approx(0.32) and table.loc["conflicting_sources", "p_V"] == pytest.approx(0.12)
    assert sorted(out["failures_tasks"]["family"]) == ["conflicting_sources", "multi_hop", "retrieval_outage"]
    beside = out["failures_vs_paper"].set_index(["condition", "metric"])
    assert beside.loc[("multi_hop", "n_failures"), "ours"] == 1 and beside.loc[("multi_hop", "n_failures"), "agreement"] == "differs"
    assert beside.loc[("retrieval_outage", "p_G"), "ours"] == pytest.approx(0.33)
    assert beside.loc[("aggregate_computation", "n_failures"), "agreement"] == "not measured"   # not in this suite
    assert beside.loc[("aggregate_computation", "n_failures"), "why"] == "this suite has no such row"
    # every family's failure count, and the probability of each operation its minimum route needs
    measured = beside[beside["agreement"] != "not measured"]
    expected = {(f, "n_failures") for f in FAMILIES} | {(f, f"p_{op}") for f, route in
                                                         zip(table.index, table["minimum_route"]) for op in route}
    assert set(measured.index) == expected


def test_training_size_curve_refits_each_size_on_train(study):
    out = routing.training_size_curve(study, sizes=(6, 12))
    curve = out["training_size"]
    assert list(zip(curve["n_train"], curve["subset"])) == [(6, "test"), (6, "challenge"), (12, "test"), (12, "challenge")]
    for n in (6, 12):
        refit = routing.RouterStudy.fit(study.tasks, training=study.training, n_train=n)
        rows = curve[curve["n_train"] == n].set_index("subset")
        assert set(rows["tau"]) == {refit.model.tau} and set(rows["n_features"]) == {refit.model.featurizer.n_features}
        for split in ("test", "challenge"):
            res = router.evaluate([router.Learned(refit.model)], study.split(split), repeats=1)
            assert rows.loc[split, "success"] == res["success"].mean()
    # 12 is all of train: the same vocabulary as a fit on every train prompt
    train = [t.prompt for t in study.split("train")]
    assert set(curve.loc[curve["n_train"] == 12, "n_features"]) == {_model.Featurizer.fit(train).n_features}
    beside = out["training_size_vs_paper"]
    assert sorted(beside["n_train"].unique()) == [6, 12] and set(beside["paper"]) == {1.0, 0.759}


def test_hybrid_gate_chosen_on_dev_and_its_effect(study):
    out = routing.hybrid_table(study, stats=StatsSettings(n_resamples=50))
    selection = out["hybrid_selection"]
    assert len(selection) == len(_tables.HYBRID_MARGINS) * len(_tables.HYBRID_ENTROPIES)
    # dev: the learned route misses multi-hop (p_D .38 < .40); only a margin >= .05 backs it off to DTV
    plain = selection[(selection["margin"] == 0) & selection["max_entropy"].isna()].iloc[0]
    assert plain["dev_success"] == pytest.approx(5 / 6) and plain["dev_backoff_rate"] == 0
    summary = wide(out["hybrid_summary"])
    gate = summary[summary["condition"] == "hybrid"].set_index("subset")
    chosen = selection[(selection["margin"] == 0.05) & selection["max_entropy"].isna()].iloc[0]
    assert selection.index[selection["selected"]].tolist() == [chosen.name]   # margin .05, no entropy limit
    assert chosen["dev_success"] == 1.0
    assert chosen["dev_mean_cost"] == pytest.approx((0.3 + 1.3 + 1.45 + 1.95 + 1.7 + 2.4) / 6)
    # test: the outage's p_T .37 is within .05 of tau, so it backs off to DTV and fails; challenge:
    # the lookup's p_T .42 backs off to DTC and still succeeds
    assert gate.loc["test", "success"] == pytest.approx(5 / 6) and gate.loc["challenge", "success"] == 0.5
    assert gate.loc["test", "backoff_rate"] == pytest.approx(1 / 6) == gate.loc["challenge", "backoff_rate"]
    assert summary.loc[summary["condition"] != "hybrid", "backoff_rate"].isna().all()
    assert by_split(summary, "learned", "success") == {"test": 1.0, "challenge": 0.5}
    assert by_split(summary, "static", "success") == pytest.approx({"test": 5 / 6, "challenge": 5 / 6})
    paired = out["hybrid_paired"].set_index(["subset", "condition", "metric"])
    row = paired.loc[("test", "hybrid - learned", "success_diff")]
    assert row["value"] == pytest.approx(-1 / 6) and (row["wins"], row["losses"]) == (0, 1)
    # backing off the outage to DTV costs .70 more on that one task
    assert paired.loc[("test", "hybrid - learned", "cost_diff"), "value"] == pytest.approx((2.4 - 1.7) / 6)


def test_sensitivity_block_rewords_only_the_four_families(study):
    table = _tables.wording_sensitivity(study, stats=StatsSettings(n_resamples=50)).set_index("wording")
    assert list(table.index) == ["locked", "as_dev", "as_challenge", "pre_lock"]
    # this suite holds two of the four families: conflicting sources and retrieval outage
    assert table.loc["locked", "success"] == 1.0
    assert table.loc["as_dev", "success"] == 1.0                      # "outdated" -> TV, "delegate" -> G
    assert table.loc["as_challenge", "success"] == pytest.approx(4 / 6)   # "charge" -> DTC, "maintenance" -> T
    # the pre-lock wordings hold no cue this model knows: no evidence, the direct route, no answer
    assert table.loc["pre_lock", "success"] == pytest.approx(4 / 6)
    assert table["n_failures_in_reworded"].tolist() == [0, 0, 2, 2]
    assert (table["n_failures"] == table["n_failures_in_reworded"]).all()
    assert table.loc["locked", "test_split_hash"] == router.suite_hash(study.split("test"))
    assert table["test_split_hash"].nunique() == 4
