"""No test or challenge prompt or label reaches fitting, calibration or any selection.

Every test and challenge task of the suite gets a tripwire prompt (a str that records `.lower()`,
which all featurisation goes through) and tripwire labels (a tuple that records every read). The
study is then built, and every refit and selection run, with the wires armed. Scoring is allowed
to read them, so `evaluate` (routing + grading) and the suite hash run disarmed."""

from contextlib import contextmanager
from dataclasses import replace

import pytest

from roma_lab import router
from roma_lab.router import _reproduce, _suite

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
        study = router.RouterStudy.fit(tasks, suite_seed=_suite.DEFAULT_SEED)
    return wire, study, list(wire.reads)   # reads during the build, kept before any test clears them


@pytest.fixture
def wire(planted, monkeypatch):
    wire = planted[0]
    wire.reads.clear()
    # scoring and identity may read held-out tasks; fitting and selection may not
    monkeypatch.setattr(_reproduce, "evaluate", wire.disarmed(_reproduce.evaluate))
    monkeypatch.setattr(_reproduce, "hash_tasks", wire.disarmed(_reproduce.hash_tasks))
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
    plain = router.RouterStudy.build()
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
        models = _reproduce.ablation_models(study)
    assert wire.reads == [] and set(models) == {"full", "no_char_features", "no_calibration", "no_budget"}


def test_table4_and_the_training_size_curve_read_held_out_tasks_only_to_score(planted, wire):
    study = planted[1]
    with wire.armed_():
        router.table4(study, n_resamples=20)
        router.training_size_curve(study, sizes=(36, 216))
    assert wire.reads == []


def test_hybrid_gate_selection_reads_no_held_out_task(planted, wire):
    study = planted[1]
    with wire.armed_():
        _reproduce.select_hybrid_gate(study, margins=(0.0, 0.1), entropies=(None, 0.5))
    assert wire.reads == []
