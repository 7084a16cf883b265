"""roma_lab.router: operation semantics, suite determinism, evaluator, router, policies (the paper's
tables beside ours: tests/test_papers_routing_reproduce.py and tests/test_papers_routing_tables.py)."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from roma_lab import router
from roma_lab.papers import routing
from roma_lab.papers.routing import _tables
from roma_lab.router import _benchmark, _evaluate, _execute, _model, _ops, _policies
from roma_lab.stats import StatsSettings


@pytest.fixture(scope="module")
def suite():
    return router.generate_suite()


@pytest.fixture(scope="module")
def study():
    return routing.RouterStudy.build()


def first(suite, family, split="test"):
    return next(t for t in suite if t.family == family and t.split == split)


# ----------------------------------------------------------------------------- suite
def test_suite_sizes_and_workload_balance(suite):
    assert len(suite) == 504
    for split, size in {"train": 216, "dev": 72, "test": 108, "challenge": 108}.items():
        tasks = router.split_tasks(suite, split)
        assert len(tasks) == size
        per_workload = {w: sum(t.workload == w for t in tasks) for w in _benchmark.WORKLOADS}
        assert set(per_workload.values()) == {size // 3}
    assert len({t.task_id for t in suite}) == 504


def test_same_seed_same_hash_other_seed_other_hash(suite):
    assert router.suite_hash(router.generate_suite()) == router.suite_hash(suite)
    assert router.suite_hash(router.generate_suite(1)) != router.suite_hash(suite)


def test_templates_disjoint_across_splits_and_challenge_more_distant():
    for family in _benchmark.FAMILIES.values():
        t = family.templates
        assert len(set(t.values())) == 4, family.name
        # challenge paraphrases share fewer template words with train than the standard test does
        assert _benchmark.train_overlap(family, t["challenge"]) < _benchmark.train_overlap(family, t["test"]), family.name


def test_template_words_drop_slots_and_case():
    assert _benchmark.template_words("Sum the {stat} of Q1-values: {values}.") == {"sum", "the", "of", "q", "values"}
    family = _benchmark.FAMILIES["growth_rate"]
    assert _benchmark.train_overlap(family, family.templates["train"]) == 1.0
    # 3 shared words (by, what, percentage) out of 14 train words + 2 new ones
    assert _benchmark.train_overlap(family, "By what percentage, roughly, overall?") == pytest.approx(3 / 16)


def test_every_template_obeys_the_split_rule():
    # locked before scoring: dev/test near paraphrases of train, challenge a lexical shift
    assert router.split_rule_violations() == []


def test_standard_band_is_the_one_dev_already_spans():
    # the band is derived from dev (never rewritten), not chosen to admit a test template
    dev = [_benchmark.train_overlap(f, f.templates["dev"]) for f in _benchmark.FAMILIES.values()]
    challenge = [_benchmark.train_overlap(f, f.templates["challenge"]) for f in _benchmark.FAMILIES.values()]
    low, high = router.STANDARD_OVERLAP
    assert 0 <= min(dev) - low < 0.01 and 0 <= high - max(dev) < 0.01
    assert 0 <= router.CHALLENGE_MAX_OVERLAP - max(challenge) < 0.05


def test_split_rule_rejects_the_pre_lock_test_wording():
    pre_lock = {name: replace(f, templates={**f.templates, "test": _benchmark.PRE_LOCK_TEST_TEMPLATES.get(name, f.templates["test"])})
                for name, f in _benchmark.FAMILIES.items()}
    problems = router.split_rule_violations(pre_lock)
    assert sorted(p.split()[0] for p in problems) == sorted(_benchmark.PRE_LOCK_TEST_TEMPLATES)
    assert all(" test: overlap with train " in p for p in problems)
    # a challenge template as close to train as a standard one breaks the rule too
    near = {"statistic": replace(_benchmark.FAMILIES["statistic"], templates={
        **_benchmark.FAMILIES["statistic"].templates, "challenge": "Compute the {stat} of the values {values}."})}
    assert router.split_rule_violations(near) == ["statistic challenge: overlap with train 0.800, must be <= 0.2"]


def test_suite_families_shows_every_overlap_with_train():
    table = router.suite_families().set_index("family")
    for name, f in _benchmark.FAMILIES.items():
        for split in ("dev", "test", "challenge"):
            assert table.loc[name, f"overlap_{split}"] == _benchmark.train_overlap(f, f.templates[split])
    pre_lock = table["overlap_test_pre_lock"].dropna()
    assert set(pre_lock.index) == set(_benchmark.PRE_LOCK_TEST_TEMPLATES)
    assert (pre_lock > router.STANDARD_OVERLAP[1]).all()


def test_every_family_kind_is_present_in_every_split(suite):
    for split in _benchmark.SPLITS:
        kinds = {t.kind for t in router.split_tasks(suite, split)}
        assert kinds == {"literal", "selection", "composition", "conflict", "availability"}


def test_only_literal_prompts_carry_a_quoted_answer(suite):
    # otherwise the direct-answer parser could succeed without the operations the task needs
    for t in suite:
        assert ('"' in t.prompt) == (t.kind == "literal"), t.task_id


def test_suite_families_documents_each_minimum_route():
    table = router.suite_families()
    assert len(table) == len(_benchmark.FAMILIES)
    assert dict(zip(table.family, table.minimum_route))["invoice_reconciliation"] == "TCV"


def test_unknown_split_is_a_clear_error(suite):
    with pytest.raises(ValueError, match="unknown split 'validation'"):
        router.split_tasks(suite, "validation")


# ----------------------------------------------------------------------------- operations
def test_oracle_route_solves_every_task_and_direct_only_literals(suite):
    for t in suite:
        assert _execute.execute(t, t.labels).success, t.task_id
        assert _execute.execute(t, ()).success == (t.kind == "literal")


def test_execution_is_order_sensitive(suite):
    t = first(suite, "filtered_computation")
    assert _execute.execute(t, ("D", "T", "C")).success
    out = _execute.execute(t, ("T", "D", "C"))   # retrieval ran before the filter existed
    assert out.status == "incorrect_answer"
    assert _execute.execute(t, ("D", "C", "T")).status == "no_answer"


def test_missing_prerequisite_changes_the_artifact(suite):
    hop = first(suite, "multi_hop")
    out = _execute.execute(hop, ("T",))
    assert out.status == "incorrect_answer" and out.answer == hop.payload["lab"]
    locale = first(suite, "locale_normalisation")
    assert not _execute.execute(locale, ("C",)).success


def test_verification_needs_its_prerequisite(suite):
    inv = first(suite, "invoice_reconciliation")
    stated = f"{inv.payload['stated_total']:.2f}"
    assert _execute.execute(inv, ("T", "V")).answer == stated          # nothing recomputed to verify against
    assert _execute.execute(inv, ("T", "V", "C")).answer == stated     # verify ran before the code
    assert _execute.execute(inv, ("T", "C", "V")).success
    conflict = first(suite, "conflicting_sources")
    assert _execute.execute(conflict, ("V", "T")).status == "incorrect_answer"
    assert _execute.execute(conflict, ("T", "V")).success


def test_unavailable_component_stops_with_a_typed_failure(suite):
    t = first(suite, "retrieval_outage")
    out = _execute.execute(t, ("T", "G"))
    assert out.status == "unavailable_component" and out.answer is None
    assert [s.op for s in out.trace] == ["T"]                         # G never ran
    assert out.cost == pytest.approx(1.0)
    assert _execute.execute(t, ("G",)).success


def test_irrelevant_operation_costs_but_does_not_change_the_answer(suite):
    t = first(suite, "record_lookup")
    base, extra = _execute.execute(t, ("T",)), _execute.execute(t, ("T", "G"))
    assert base.answer == extra.answer and extra.success
    assert extra.cost == pytest.approx(base.cost + _ops.COSTS["G"])


def test_labels_never_grant_success(suite):
    t = first(suite, "filtered_computation")
    relabelled = replace(t, labels=("T",))
    assert not _execute.execute(relabelled, ("T",)).success
    assert _execute.execute(relabelled, ("D", "T", "C")).success


def test_evaluator_is_exact(suite):
    t = first(suite, "locale_normalisation")
    assert _execute.is_correct(t, t.answer) and _execute.is_correct(t, f" {t.answer}\n")
    assert not _execute.is_correct(t, t.answer.replace(",", ""))
    assert not _execute.is_correct(t, None)


def test_unknown_operation_is_an_error(suite):
    with pytest.raises(ValueError, match="unknown operation"):
        _execute.execute(suite[0], ("X",))
    with pytest.raises(ValueError, match="unknown operation"):
        _ops.canonical(["T", "Q"])


@settings(max_examples=200, deadline=None)
@given(index=st.integers(0, 503), route=st.lists(st.sampled_from(_ops.SUPPORT_OPS), max_size=6))
def test_any_route_ends_in_a_typed_outcome(suite, index, route):
    out = _execute.execute(suite[index], route)
    assert out.status in _execute.OUTCOMES
    assert out.cost <= _ops.route_cost(tuple(route)) + 1e-9
    assert out.trace[-1].op == "A" or out.status == "unavailable_component"


# ----------------------------------------------------------------------------- model
def test_dual_form_training_equals_plain_gradient_descent(suite):
    train = _tables._training_subset(router.split_tasks(suite, "train"), 40)
    feats = _model.Featurizer.fit([t.prompt for t in train])
    X, Y = feats.transform([t.prompt for t in train]), router.labels_matrix(train)
    _assert_textbook_update(X, Y, router.TrainingConfig(steps=60))


def test_dual_form_equals_the_textbook_update_on_dense_features():
    # the semantic router's heads train on dense sentence embeddings
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 12))
    Y = (rng.random((30, 5)) < 0.4).astype(float)
    Y[0], Y[1] = 1, 0
    _assert_textbook_update(X, Y, router.TrainingConfig(steps=40))


def _assert_textbook_update(X, Y, config):
    """`train_heads` equals the textbook class-weighted gradient descent on every feature column."""
    W, b = _model.train_heads(X, Y, config)
    n = X.shape[0]
    pos = Y.sum(axis=0)
    weights = np.where(Y == 1, n / (2 * pos), n / (2 * (n - pos)))
    W0, b0 = np.zeros((X.shape[1], 5)), np.zeros(5)
    for epoch in range(config.steps):
        lr = config.lr0 / np.sqrt(1 + epoch / 50)
        r = weights * (_model._sigmoid(X @ W0 + b0) - Y) / n
        W0 -= lr * (X.T @ r + config.l2 * W0)
        b0 -= lr * r.sum(axis=0)
    np.testing.assert_allclose(W, W0, atol=1e-10)
    np.testing.assert_allclose(b, b0, atol=1e-10)


def test_featurizer_min_df_and_binary_values():
    feats = _model.Featurizer.fit(["alpha beta", "alpha gamma", "delta"], chars=False, min_df=2)
    assert set(feats.vocabulary) == {"\nalpha"}
    X = feats.transform(["alpha alpha", "zeta"])
    assert isinstance(X, sparse.csr_matrix) and X.toarray().tolist() == [[1.0], [0.0]]


def test_router_fit_is_reproducible(study):
    again = routing.RouterStudy.build()
    np.testing.assert_array_equal(again.model.weights, study.model.weights)
    assert again.model.tau == study.model.tau
    assert np.array_equal(again.model.temperatures, study.model.temperatures)


def test_temperatures_minimise_dev_brier_per_head(study, suite):
    dev = router.split_tasks(suite, "dev")
    logits, labels = study.model.logits([t.prompt for t in dev]), router.labels_matrix(dev)
    for head in range(5):
        briers = [float(((_model._sigmoid(logits[:, head] / t) - labels[:, head]) ** 2).mean())
                  for t in _model.TEMPERATURE_GRID]
        assert study.model.temperatures[head] == _model.TEMPERATURE_GRID[int(np.argmin(briers))]
        assert study.dev_brier[head] == pytest.approx(min(briers))


def test_tau_is_the_best_dev_row_by_exact_route_then_f1_then_cost(study, suite):
    dev = router.split_tasks(suite, "dev")
    probs, labels = study.model.probabilities([t.prompt for t in dev]), router.labels_matrix(dev)
    table = study.tau_selection.set_index("tau")
    assert list(table.index) == list(_model.TAU_GRID)
    for tau in _model.TAU_GRID:   # every row is what dev measures at that tau
        routes = [_model.greedy_route(p, tau) for p in probs]
        assert table.loc[tau, "exact_route"] == _model.route_quality(routes, labels)["exact_route"]
    best = table.reset_index().sort_values(["exact_route", "f1", "mean_cost", "tau"],
                                           ascending=[False, False, True, True]).iloc[0]
    assert study.model.tau == best["tau"]


def test_single_and_batch_probabilities_agree(study, suite):
    texts = [t.prompt for t in suite[:20]]
    batch = study.model.probabilities(texts)
    for text, row in zip(texts, batch):
        np.testing.assert_allclose(study.model.probability(text), row, atol=1e-12)


def test_greedy_route_respects_budget_and_action_count():
    ones = np.ones(5)
    # equal probabilities: the three cheapest (D .45, V .65, T 1.0) win, placed in canonical order
    assert _model.greedy_route(ones, 0.5) == ("D", "T", "V")
    assert _model.greedy_route(ones, 0.5, budget=None, max_ops=None) == _ops.SUPPORT_OPS
    # ranked by (p - tau)/c: cheap V beats expensive G at equal probability
    assert _model.greedy_route(np.array([0, 0, 0, 0.9, 0.9]), 0.5, max_ops=1) == ("V",)
    # G ranks first but no longer fits once T and C are in; the cheaper V still does (skip, not stop)
    probs = np.array([0.0, 0.99, 0.99, 0.55, 0.6])
    assert _model.greedy_route(probs, 0.5, budget=3.2, max_ops=5) == ("T", "C", "V")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.2, 0.35, 0.4, 0.5, 0.55, 0.6, 0.9, 1.0]), min_size=5, max_size=5),
                min_size=1, max_size=12),
       st.sampled_from([0.0, 0.35, 0.4, 0.5, 1.0]), st.sampled_from([None, 0.3, 1.5, 2.3, 3.2, 4.5]),
       st.sampled_from([None, 0, 1, 2, 3, 5]))
def test_batch_routes_equal_the_greedy_route_of_every_row(rows, tau, budget, max_ops):
    # ties in (p - tau)/c and budget skips are where a vectorised pass can drift from the loop
    probs = np.array(rows)
    assert _model.routes_at(probs, tau, budget=budget, max_ops=max_ops) == [
        _model.greedy_route(p, tau, budget=budget, max_ops=max_ops) for p in probs]


@pytest.mark.parametrize("chars", [True, False])
def test_the_numpy_batch_featurizer_equals_the_per_prompt_n_grams(suite, chars):
    feats = _model.Featurizer.fit([t.prompt for t in router.split_tasks(suite, "train")], chars=chars)
    texts = ([t.prompt for t in suite] + list(router.natural_prompts()["prompt"])
             + ["Ünïcode: the revenue of R-1234", "ab", "x", "Q3  revenue\tof\nR-1"])
    batch = feats.transform(texts)
    for row, text in enumerate(texts):
        assert list(batch.indices[batch.indptr[row]:batch.indptr[row + 1]]) == list(feats.indices(text)), text


def test_batch_routing_equals_per_task_routing_on_the_suite(study, suite):
    texts = [t.prompt for t in suite]
    assert study.model.routes(texts) == [study.model.route(t) for t in texts]


@pytest.mark.parametrize("tau", [-0.1, 1.5])
def test_threshold_outside_unit_interval_is_rejected(study, tau):
    with pytest.raises(ValueError, match=r"tau must lie in \[0, 1\]"):
        study.model.with_threshold(tau)
    with pytest.raises(ValueError, match="tau"):
        _model.greedy_route(np.zeros(5), tau)


def test_negative_budget_is_rejected(study, suite):
    with pytest.raises(ValueError, match="budget must be >= 0"):
        router.evaluate([_policies.Direct()], suite[:3], budget=-1)


# ----------------------------------------------------------------------------- policies
def test_random_policy_is_deterministic_and_bounded(suite):
    policy = _policies.Random(seed=3)
    routes = [policy(t) for t in suite]
    assert routes == [_policies.Random(seed=3)(t) for t in suite]
    assert {len(r) for r in routes} == {0, 1, 2, 3}
    assert routes != [_policies.Random(seed=4)(t) for t in suite]


def _phrases_outside(rules, prompts):
    """Cue phrases that occur as whole words in none of `prompts`."""
    import re

    return [p for phrases in rules.values() for p in phrases
            if not any(re.search(rf"\b{re.escape(p)}\b", text.lower()) for text in prompts)]


def test_keyword_rules_come_from_training_vocabulary_only(suite):
    train = [t.prompt for t in router.split_tasks(suite, "train")]
    assert _phrases_outside(_policies.KEYWORD_RULES, train) == []
    # the check catches a cue that only dev ("calculate", "expert") or test ("down") uses
    for op, extra in (("C", "calculate"), ("G", "expert"), ("G", "down")):
        rules = {**_policies.KEYWORD_RULES, op: _policies.KEYWORD_RULES[op] + (extra,)}
        assert _phrases_outside(rules, train) == [extra]


def test_keyword_policy_routes_by_whole_word_cues(suite):
    keyword = _policies.Keyword()
    expected = {"multi_hop": ("D", "T"), "retrieval_outage": ("G",), "conflicting_sources": ("T", "V"),
                "invoice_reconciliation": ("T", "C", "V"), "locale_normalisation": ("D", "C"), "data_literal": ()}
    for family, route in expected.items():
        assert keyword(first(suite, family, "train")) == route, family
    # whole words only: "recorded" is not "record", "totals" is not "total"
    task = replace(first(suite, "record_lookup"), prompt="The recorded totals were retrieved.")
    assert keyword(task) == ()


def test_static_and_fixed_fail_exactly_the_outages(suite):
    test = router.split_tasks(suite, "test")
    for policy in (router.StaticWorkload(), _policies.FixedAgent()):
        failed = {t.family for t in test if not _execute.execute(t, policy(t)).success}
        assert failed == {"retrieval_outage"}


def test_one_shot_takes_the_highest_probability_operation(study, suite):
    one_shot = router.OneShot(study.model)
    for t in suite:
        probs = study.model.probability(t.prompt)
        best = int(np.argmax(probs))
        expected = (_ops.SUPPORT_OPS[best],) if probs[best] >= study.model.tau else ()
        assert one_shot(t) == expected


def test_hybrid_with_zero_margin_is_the_learned_router(study, suite):
    hybrid, learned = router.Hybrid(study.model, 0.0), router.Learned(study.model)
    assert all(hybrid(t) == learned(t) for t in router.split_tasks(suite, "challenge"))
    always = router.Hybrid(study.model, 1.0)
    assert all(always(t) == _policies.STATIC_ROUTES[t.workload] for t in router.split_tasks(suite, "dev"))
    diffuse = router.Hybrid(study.model, 0.0, max_entropy=0.0)     # any uncertainty at all backs off
    assert all(diffuse(t) == _policies.STATIC_ROUTES[t.workload] for t in router.split_tasks(suite, "dev"))


# ----------------------------------------------------------------------------- tables
def test_summary_metrics_on_a_known_table(study, suite):
    from roma_lab.results import compare, wide

    test = router.split_tasks(suite, "test")
    scores = router.evaluate([router.StaticWorkload(), _policies.FixedAgent(), _policies.Oracle()], test, repeats=1)
    assert set(scores["condition"]) == {"static", "fixed_agent", "oracle"} and set(scores["subset"]) == {"test"}
    long = _evaluate.summarize_routes(scores, stats=StatsSettings(n_resamples=200))
    assert not long.duplicated(["condition", "subset", "metric"]).any()
    s = wide(long).set_index("condition")
    assert s.loc["static", "budget_compliant"] == pytest.approx(2 / 3)
    assert s.loc["fixed_agent", "budget_compliant"] == 0
    assert s.loc["fixed_agent", "cost"] == pytest.approx(4.95)
    assert s.loc["oracle", "success"] == 1 and s.loc["oracle", "success_ci_low"] == 1
    assert s.loc["oracle", "exact_route"] == 1 and s.loc["oracle", "f1"] == 1
    outages = sum(t.family == "retrieval_outage" for t in test)
    assert s.loc["static", "n_unavailable"] == s.loc["static", "n_failures"] == outages
    assert s.loc["static", "n_incorrect"] == s.loc["static", "n_no_answer"] == 0
    # route quality is micro-averaged over operations: the fixed agent recalls every needed one
    needed = sum(len(t.labels) for t in test)
    assert s.loc["fixed_agent", "recall"] == 1 and s.loc["fixed_agent", "precision"] == pytest.approx(needed / (5 * len(test)))
    paired = compare(scores, "oracle", "static", "success", stats=StatsSettings(n_resamples=200)).iloc[0]
    assert (paired.wins, paired.losses) == (outages, 0)
    assert paired.sign_test_p == pytest.approx(2 * 0.5 ** outages)


def test_reword_changes_only_the_named_families(suite):
    test = router.split_tasks(suite, "test")
    reworded = _benchmark.reword(test, _benchmark.PRE_LOCK_TEST_TEMPLATES)
    changed = {a.family for a, b in zip(test, reworded) if a.prompt != b.prompt}
    assert changed == set(_benchmark.PRE_LOCK_TEST_TEMPLATES)
    assert all(a.answer == b.answer and a.labels == b.labels and a.task_id == b.task_id for a, b in zip(test, reworded))
    growth = next(t for t in reworded if t.family == "growth_rate")
    assert growth.prompt == _benchmark.PRE_LOCK_TEST_TEMPLATES["growth_rate"].format(**growth.slots)
    assert _benchmark.reword(test, {}) == test
    with pytest.raises(ValueError, match="unknown family"):
        _benchmark.reword(test, {"growth": "x"})


def _router_imports() -> dict[str, set[str]]:
    """Router module -> the router modules it imports, at top level or inside a function."""
    import ast
    from pathlib import Path

    graph = {}
    for path in Path(router.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        graph[path.stem] = {node.module for node in ast.walk(tree)
                            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}
    return graph


def test_router_modules_import_each_other_without_a_cycle():
    from graphlib import TopologicalSorter

    graph = _router_imports()
    assert graph["_ops"] == set() and graph["_benchmark"] == {"_ops"}   # the executor sits above both
    assert {"_ops", "_benchmark"} <= graph["_execute"]
    list(TopologicalSorter(graph).static_order())                    # raises CycleError on any cycle


def test_notebooks_benchmarks_and_widgets_use_public_router_names_only():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    users = [*root.glob("notebooks/*.ipynb"), *root.glob("speed/*.py"), root / "roma_lab/widgets/_router.py"]
    used = {name for path in users for name in re.findall(r"\brouter\.([A-Za-z]\w*)", path.read_text())}
    used |= set(re.findall(r"\w+", re.search(r"from \.\.router import ([^\n]+)",
                                              (root / "roma_lab/widgets/_router.py").read_text()).group(1)))
    assert used and used <= set(router.__all__), sorted(used - set(router.__all__))
    assert all(hasattr(router, name) for name in router.__all__)


def test_other_rooms_import_public_router_names_only_and_the_surface_stays_small():
    """Issue 40: the router's public surface is what other rooms use (at most 35 names); no module of
    the package outside `roma_lab/router/` imports a router name that is not in `__all__`, nor a
    private router module."""
    import ast
    from pathlib import Path

    package = Path(router.__file__).parents[1]
    imported: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        if path.parent.name == "router" and path.parent.parent == package:
            continue
        depth = len(path.relative_to(package).parts) - 1          # levels from the file's package to roma_lab
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                absolute = module if node.level == 0 else ".".join(
                    ["roma_lab", *path.relative_to(package).parts[:depth - node.level + 1], *filter(None, [module])])
                if absolute.startswith("roma_lab.router"):
                    imported.setdefault(absolute, set()).update(a.name for a in node.names)
    assert imported.keys() <= {"roma_lab.router"}, sorted(imported)
    assert imported["roma_lab.router"] <= set(router.__all__), sorted(imported["roma_lab.router"] - set(router.__all__))
    assert len(router.__all__) <= 38  # 35, and the three parts a speed script times (no private import)


def test_route_inspector_record(study):
    info = router.inspect_route(study, "challenge-multi_hop-000")
    assert info["minimum_route"] == "DT" and set(info["probabilities"]) == set(_ops.SUPPORT_OPS)
    assert info["known_features"] == study.model.known_features(info["prompt"]) > 0
    assert info["trace"][-1]["op"] == "A" and info["status"] in _execute.OUTCOMES
    with pytest.raises(KeyError):
        router.inspect_route(study, "nope")


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("prompt, name", [(None, "NoneType"), (b"sum 1, 2", "bytes"), (3, "int"), (2.5, "float"),
                                          (["sum", "1"], "list"), ({"prompt": "x"}, "dict")])
def test_routing_a_non_string_is_a_type_error_naming_it(study, prompt, name):
    for call in (study.model.route, study.model.probability, study.model.known_features, _model.check_prompt):
        with pytest.raises(TypeError, match=f"prompt must be str, got {name}"):
            call(prompt)
    with pytest.raises(TypeError, match="prompt must be str"):
        study.model.probabilities([prompt])
    with pytest.raises(TypeError, match="decode bytes"):
        study.model.route(b"bytes")


@pytest.mark.parametrize("prompt, problem", [
    ("", "no letter or digit"), ("   \n\t ", "no letter or digit"), ("\U0001f600\U0001f389", "no letter or digit"),
    ("?!... --", "no letter or digit"), ("\x00\x07", "control character U\\+0000 at 0"),
    ("Compute the sum\x1b of 1, 2", "control character U\\+001B at 15"), ("sum\x85 1", "control character U\\+0085"),
])
def test_routing_text_without_words_or_with_control_characters_is_a_value_error(study, suite, prompt, problem):
    with pytest.raises(ValueError, match=problem):
        study.model.route(prompt)
    with pytest.raises(ValueError, match=problem):
        study.model.probabilities(["Compute the mean of 1, 2.", prompt])
    for policy in (router.Learned(study.model), router.OneShot(study.model), router.Hybrid(study.model, 0.1),
                   _policies.Keyword()):
        with pytest.raises(ValueError, match=problem):
            policy(replace(suite[0], prompt=prompt))


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=40))
def test_any_text_gets_a_feasible_route_or_a_value_error(study, text):
    try:
        route = study.model.route(text)
    except ValueError as err:
        assert "control character" in str(err) or "no letter or digit" in str(err)
        return
    assert route == _ops.canonical(route) and _ops.is_feasible(route)
    assert route == () or study.model.known_features(text) > 0     # no evidence, no operation


@settings(max_examples=100, deadline=None)
@given(value=st.one_of(st.none(), st.integers(), st.floats(), st.binary(), st.lists(st.text(max_size=3), max_size=3)))
def test_any_non_string_is_a_type_error(study, value):
    with pytest.raises(TypeError, match="prompt must be str"):
        study.model.route(value)


def test_a_batch_must_be_a_sequence_of_prompts(study):
    with pytest.raises(TypeError, match="sequence of prompts, got one str"):
        study.model.probabilities("Compute the mean of 1, 2.")


def test_text_the_model_has_never_seen_gets_the_documented_direct_route(study):
    for text in ("Καλημέρα κόσμε", "zqxj"):
        assert study.model.known_features(text) == 0
        assert study.model.route(text) == ()
        assert study.model.probability(text).tolist() == [0.0] * 5
        np.testing.assert_array_equal(study.model.probabilities([text, "Compute the mean of 1, 2."])[0], np.zeros(5))
    # ordinary text with a single known n-gram is routed by the model as usual, tabs and newlines allowed
    assert study.model.known_features("Compute\tthe mean\nof 1, 2.") > 0
    assert "C" in study.model.route("Compute\tthe mean\nof 1, 2.")


def test_bad_settings_are_rejected_where_they_are_made(study):
    for bad in ({"steps": 0}, {"l2": -1.0}, {"lr0": 0.0}, {"min_df": 0}):
        with pytest.raises(ValueError, match="steps >= 1"):
            router.TrainingConfig(**bad)
    for margin, entropy in ((-0.1, None), (1.5, None), (0.1, -0.2), (0.1, 1.2)):
        with pytest.raises(ValueError, match="margin must lie in"):
            router.Hybrid(study.model, margin, entropy)
