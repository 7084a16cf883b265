"""The notebook contract over the real repository, and the smoke tier that executes every
numbered notebook through the runner with its spec's [smoke] overrides."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from roma_lab.experiments import contract_problems, load_spec, run_experiment
from roma_lab.results import read_provenance

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "project"
SPECS = sorted((REPO / "experiments").glob("*.toml"))


def test_repository_notebooks_meet_the_contract():
    problems = contract_problems(REPO)
    assert not problems, "notebook contract broken:\n" + "\n".join(problems)


def test_contract_catches_each_violation(tmp_path):
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    assert contract_problems(root) == []
    nb = json.loads((root / "notebooks" / "00_fixture.ipynb").read_text())
    nb["cells"][0]["source"] = ["# Some other title"]
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["hi"]}]
    nb["cells"][1]["source"] = ["f = lambda x: x\n"]
    params = ['OUT_DIR = "out"\n', "SEED = 0.5\n", 'LM = "openai/gpt-4o"\n', "N_ROWS = 3\n",
              "FAIL = False\n", "WRITE = True\n", "SLEEP_S = 0\n"]
    nb["cells"][2]["source"] = params
    (root / "notebooks" / "00_fixture.ipynb").write_text(json.dumps(nb))
    nb["cells"][2]["source"] = [p for p in params if not p.startswith("SEED")]
    (root / "notebooks" / "05_orphan.ipynb").write_text(json.dumps(nb))
    (root / "notebooks" / "scratch.ipynb").write_text(json.dumps(nb))
    text = "\n".join(contract_problems(root))
    for expected in [
        "05_orphan.ipynb: no spec experiments/05_orphan.toml",
        "scratch.ipynb: notebook names must match",
        "00_fixture.ipynb: cell 1 has stored outputs",
        "00_fixture.ipynb: cell 1 defines a function, class or lambda",
        "05_orphan.ipynb: the parameters cell must declare SEED",
        "00_fixture.ipynb: parameter SEED must default to int, got 0.5",
        '00_fixture.ipynb: parameter LM must default to "local"',
        "00_fixture.ipynb: the markdown header must name the artefact 'Fixture table'",
    ]:
        assert expected in text, f"missing {expected!r} in:\n{text}"


@pytest.mark.smoke
@pytest.mark.parametrize("spec_path", SPECS, ids=[p.stem for p in SPECS])
def test_smoke_tier(spec_path, tmp_path):
    spec = load_spec(spec_path)
    outcome = run_experiment(spec, results_root=tmp_path, smoke=True)
    assert outcome.status == "completed", outcome.error
    for name in spec.outputs:
        path = outcome.out_dir / name
        assert path.stat().st_size > 0, f"{name} is empty"
        if path.suffix == ".csv":
            assert len(pd.read_csv(path)) > 0, f"{name} has a header but no rows"
        if path.suffix == ".json":
            assert json.loads(path.read_text()), f"{name} is an empty JSON document"
    record = read_provenance(outcome.out_dir)
    assert record.status == "completed" and record.extra["smoke"] is True
    assert set(spec.outputs) <= set(record.outputs)
