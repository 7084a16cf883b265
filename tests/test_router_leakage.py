"""No test or challenge prompt or label reaches fitting, calibration or any selection.

Every test and challenge task of the suite gets a tripwire prompt (a str that records `.lower()`,
which all featurisation goes through) and tripwire labels (a tuple that records every read). The
study is then built, and every refit and selection run, with the wires armed. Scoring is allowed
to read them, so `evaluate` (routing + grading) and the suite hash run disarmed."""

from contextlib import contextmanager
from dataclasses import replace

import pytest

from roma_lab import router
from roma_lab.papers import routing
from roma_lab.papers.routing import _tables
from roma_lab.router import _benchmark
from roma_lab.stats import StatsSettings

HELD_OUT = ("test", "challenge")


class Tripwire:
    def __init__(self):
        self.armed, self.reads = False, []
        wire = self

        class Prompt(str):
            def lower(self):
                wire.note("prompt", self)
                return str.lower(self)

        class Labels(tuple):
            def __iter__(self):
                wire.note("labels", self)
                return tuple.__iter__(self)

            def __contains__(self, item):
                wire.note("labels", self)
                return tuple.__contains__(self, item)

            def __getitem__(self, index):
                wire.note("labels", self)
                return tuple.__getitem__(self, index)

            def __len__(self):
                wire.note("labels", self)
                return tuple.__len__(self)

        self.Prompt, self.Labels = Prompt, Labels

    def note(self, what, value):
        if self.armed:
            self.reads.append((what, str.__str__(value) if isinstance(value, str) else tuple(tuple.__iter__(value))))

    def plant(self, tasks):
        return tuple(replace(t, prompt=self.Prompt(t.prompt), labels=self.Labels(t.labels)) if t.split in HELD_OUT
                     else t for t in tasks)

    @contextmanager
    def armed_(self):
        self.armed = True
        try:
            yield self
        finally:
            self.armed = False

    def disarmed(self, fn):
        def call(*args, **kwargs):
            armed, self.armed = self.armed, False
            try:
                return fn(*args, **kwargs)
            finally:
                self.armed = armed
        return call


@pytest.fixture(scope="module")
def planted():
    wire = Tripwire()
    tasks = wire.plant(router.generate_suite())
    with wire.armed_():
        study = routing.RouterStudy.fit(tasks, suite_seed=_benchmark.DEFAULT_SEED)
    return wire, study, list(wire.reads)   # reads during the build, kept before any test clears them


@pytest.fixture
def wire(planted, monkeypatch):
    wire = planted[0]
    wire.reads.clear()
    # scoring and identity may read held-out tasks; fitting and selection may not
    monkeypatch.setattr(_tables, "evaluate", wire.disarmed(_tables.evaluate))
    monkeypatch.setattr(_tables, "hash_tasks", wire.disarmed(_tables.hash_tasks))
    return wire


def test_the_tripwires_fire_on_a_held_out_read(planted, wire):
    study = planted[1]
    with wire.armed_():
        study.model.probabilities([t.prompt for t in study.split("test")[:2]])
        router.labels_matrix(study.split("challenge")[:1])
    assert [what for what, _ in wire.reads] == ["prompt", "prompt"] + ["labels"] * 5
    wire.reads.clear()
    with wire.armed_():                      # train and dev are not wired
        router.labels_matrix(study.split("dev"))
        study.model.probabilities([t.prompt for t in study.split("train")])
    assert wire.reads == []


def test_build_fits_calibrates_and_selects_tau_without_held_out_tasks(planted):
    _, study, build_reads = planted
    assert build_reads == []
    # and the planted study is the ordinary one: same weights, temperatures, tau
    plain = routing.RouterStudy.build()
    assert study.model.tau == plain.model.tau
    assert (study.model.temperatures == plain.model.temperatures).all()
    assert (study.model.weights == plain.model.weights).all()


@pytest.mark.parametrize("refit", [{"training": router.TrainingConfig(chars=False)}, {"n_train": 36},
                                   {"n_train": 108, "selection_seed": 3}])
def test_every_refit_reads_train_and_dev_only(planted, wire, refit):
    study = planted[1]
    with wire.armed_():
        study.refit(**refit)
    assert wire.reads == []


def test_ablation_models_read_no_held_out_task(planted, wire):
    study = planted[1]
    with wire.armed_():
        models = _tables.ablation_models(study)
    assert wire.reads == [] and set(models) == {"full", "no_char_features", "no_calibration", "no_budget"}


def test_table4_and_the_training_size_curve_read_held_out_tasks_only_to_score(planted, wire):
    study = planted[1]
    with wire.armed_():
        routing.ablation_table(study, stats=StatsSettings(n_resamples=20))
        routing.training_size_curve(study, sizes=(36, 216))
    assert wire.reads == []


def test_hybrid_gate_selection_reads_no_held_out_task(planted, wire):
    study = planted[1]
    with wire.armed_():
        _tables.select_hybrid_gate(study, margins=(0.0, 0.1), entropies=(None, 0.5))
    assert wire.reads == []


# ----------------------------------------------------------------------------- issue 12: semantic variants
class RecordingEncoder:
    """Hashed-word vectors; notes (through the wire) every held-out prompt it is asked to encode, and
    keeps every text it saw, so a test can also check that no natural prompt reached a fit."""

    identity = "recording@test"
    dim = 32

    def __init__(self, wire):
        self.wire, self.seen = wire, []

    def encode(self, texts):
        import hashlib

        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            if isinstance(text, self.wire.Prompt):
                self.wire.note("prompt", text)
            self.seen.append(str.__str__(text))
            for word in str.lower(text).split():
                out[i, hashlib.md5(word.encode()).digest()[0] % self.dim] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture
def semantic_wire(planted, wire, monkeypatch, tmp_path):
    from roma_lab.router import _semantic

    encoder = RecordingEncoder(wire)
    monkeypatch.setattr(_semantic, "ENCODERS", {"recording": encoder})
    monkeypatch.setenv("ROMA_LAB_CACHE", str(tmp_path))     # a fresh disk cache: every encode is seen
    monkeypatch.setattr(_tables, "route_natural", wire.disarmed(_tables.route_natural))
    # the back-off rate on test and challenge is a score of the chosen gate, reported after the choice
    monkeypatch.setattr(_tables, "_backoff_rate", wire.disarmed(_tables._backoff_rate))
    return wire, encoder


def test_semantic_variants_fit_choose_scale_and_encoder_on_train_and_dev_only(planted, semantic_wire, monkeypatch):
    from roma_lab.router import _semantic

    wire, encoder = semantic_wire
    study = planted[1]

    def no_natural(*args, **kwargs):
        raise AssertionError("a fit read the natural prompts")

    monkeypatch.setattr(_semantic, "natural_prompts", no_natural)
    with wire.armed_():
        sem = router.SemanticStudy.build(study, encoders=("recording",))
    assert wire.reads == []
    fitted_on = {t.prompt for t in study.split("train") + study.split("dev")}
    assert set(encoder.seen) <= fitted_on and set(sem.models) == {"lexical", "semantic", "lexical+semantic"}


def test_semantic_tables_and_hybrid_read_held_out_tasks_only_to_score(planted, semantic_wire):
    wire, _ = semantic_wire
    study = planted[1]
    sem = router.SemanticStudy.build(study, encoders=("recording",))
    with wire.armed_():
        routing.semantic_table(sem, stats=StatsSettings(n_resamples=20))
        routing.semantic_hybrid_table(sem, stats=StatsSettings(n_resamples=20))
        _tables.select_hybrid_gate(study, margins=(0.0, 0.1), entropies=(None,), model=sem.models["semantic"])
    assert wire.reads == []


def test_the_semantic_tripwire_fires_on_a_held_out_encode(planted, semantic_wire):
    wire, _ = semantic_wire
    study = planted[1]
    sem = router.SemanticStudy.build(study, encoders=("recording",))
    with wire.armed_():
        sem.models["semantic"].probabilities([t.prompt for t in study.split("challenge")[:1]])
    assert [what for what, _ in wire.reads] == ["prompt"]


# ----------------------------------------------------------------------------- issue 52: the robust router
def test_the_robust_router_fits_on_train_its_paraphrases_and_dev_only(planted, wire, monkeypatch, tmp_path):
    from roma_lab.papers.routing import _paraphrase
    from roma_lab.router import _semantic

    encoder = RecordingEncoder(wire)
    monkeypatch.setitem(_semantic.ENCODERS, "minilm", encoder)   # MiniLM, as `resolve_router` finds it
    monkeypatch.setenv("ROMA_LAB_CACHE", str(tmp_path))
    study = planted[1]
    with wire.armed_():
        robust = study.refit(router="robust")
    assert wire.reads == [] and robust.router == "robust"
    fitted_on = {t.prompt for t in study.split("train") + study.split("dev")}
    assert set(encoder.seen) <= fitted_on | set(_paraphrase.read_paraphrases(study.split("train"))[0])
