"""The study planner's command (issue 42): the n a budget buys, its MDE, the n a target needs, from
measured or estimated costs, and ``run --budget`` running each notebook at its planned n."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from types import MappingProxyType

import pytest

from roma_lab.experiments import load_spec
from roma_lab.experiments._cli import main
from roma_lab.experiments._plan import parse_budget, plan_study, sizable_s
from roma_lab.stats import n_for_mde, plan_paired

REPO = Path(__file__).resolve().parents[1]
LEVELS = load_spec(REPO / "experiments" / "27_measure_levels_table1.toml")
# its measured_s alone (the mean with its measured_runs: tests/test_experiments_plan_findings.py)
QUICKSTART = dataclasses.replace(load_spec(REPO / "experiments" / "01_run_quickstart.toml"), measured_runs=())


@pytest.mark.parametrize("text, seconds", [("2h", 7200), ("90min", 5400), ("45m", 2700), ("300s", 300), ("12", 12),
                                           ("1.5 hours", 5400)])
def test_a_budget_reads_as_seconds(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "two hours", "-1h", "0s", "1e400h"])
def test_a_budget_that_is_no_time_is_refused(text):
    with pytest.raises(ValueError, match="budget"):
        parse_budget(text)


def test_the_budget_buys_n_at_the_estimated_cost_and_the_mde_is_the_planner_s(tmp_path):
    # one comparison over all its tasks, no pilot (27 itself: per level, tests/test_experiments_plan_findings.py)
    unmeasured = dataclasses.replace(LEVELS, measured_s=None, measured_sizes=MappingProxyType({}), per=None, pilots=())
    per_task = LEVELS.timeout_per_unit_s / 3  # no run here and none in the spec: the timeout's rate
    plan = plan_study([unmeasured], results_root=tmp_path, budget_s=3600, target_mde=0.3)
    (notebook,) = plan.notebooks
    assert notebook.unit == "N_TASKS" and notebook.seconds_per_unit == per_task
    assert notebook.n == int(3600 // per_task) and "estimate" in notebook.cost_source
    assert notebook.mde == pytest.approx(plan_paired(notebook.n).mde)
    assert notebook.target_n == n_for_mde(0.3).n and notebook.target_seconds == notebook.target_n * per_task
    assert plan.overrides() == {LEVELS.stem: {"N_TASKS": notebook.n}}


def test_fixed_costs_come_first_and_a_notebook_that_can_detect_nothing_says_so_in_one_line(tmp_path):
    tight = plan_study([QUICKSTART, LEVELS], results_root=tmp_path, budget_s=60)
    quick, levels = tight.notebooks
    assert quick.unit is None and levels.n == 4  # the floor: never fewer than two tasks a level
    assert "detects nothing; needs n = " in levels.line and "\n" not in levels.line
    assert tight.seconds > 60  # over budget, and the total says so


def test_the_budget_pays_each_notebook_two_tasks_first_then_shares_the_rest_up_to_its_own_size():
    from roma_lab.experiments._plan import _allocate

    # (own n, seconds a task): after 2 tasks each, 3000 s split three ways; b stops at its own 5 and a at
    # its 100, and what they leave cannot buy c (1000 s a task) another task alone in the next round
    sizes = {"a": (100, 10.0), "b": (5, 100.0), "c": (60, 1000.0)}
    assert _allocate(sizes, 2 * 10 + 2 * 100 + 2 * 1000 + 3000) == {"a": 100, "b": 5, "c": 3}
    assert _allocate(sizes, 10) == {"a": 2, "b": 2, "c": 2}  # over budget: the floor, and the total says so
    assert _allocate({"one": (1, 50.0)}, 1e6) == {"one": 1}  # never more than the notebook's own size


def test_the_budget_is_never_overspent_when_two_tasks_each_fit():
    import numpy as np

    from roma_lab.experiments._plan import _allocate

    rng = np.random.default_rng(0)
    for _ in range(300):
        k = int(rng.integers(1, 8))
        sizes = {f"s{i}": (int(rng.integers(1, 80)), float(rng.uniform(1, 500))) for i in range(k)}
        floor = sum(min(2, own) * cost for own, cost in sizes.values())
        budget = floor + float(rng.uniform(0, 20000))
        n = _allocate(sizes, budget)
        assert sum(n[s] * cost for s, (_, cost) in sizes.items()) <= budget + 1e-6
        assert all(min(2, own) <= n[s] <= own for s, (own, _) in sizes.items())
        # what is left could not buy any open notebook's next task from an equal share
        left = budget - sum(n[s] * cost for s, (_, cost) in sizes.items())
        open_ = [s for s, (own, _) in sizes.items() if n[s] < own]
        assert all(left / len(open_) < sizes[s][1] for s in open_) if open_ else True


def test_a_spec_s_measured_run_is_the_cost_before_this_machine_has_one(tmp_path):
    assert QUICKSTART.measured_s is not None
    (quick,) = plan_study([QUICKSTART], results_root=tmp_path).notebooks
    assert quick.seconds == QUICKSTART.measured_s and quick.cost_source == "estimate (the spec's measured run)"


def test_a_measured_run_at_another_size_is_divided_by_its_own_units_of_work(tmp_path):
    # 27's spec times its own 60 tasks; the same seconds timed at 2 tasks are 30x the cost of a task
    (own,) = plan_study([LEVELS], results_root=tmp_path).notebooks
    assert own.seconds_per_unit == LEVELS.measured_s / 60
    at_two = dataclasses.replace(LEVELS, measured_sizes=MappingProxyType({"N_TASKS": 2}))
    (two,) = plan_study([at_two], results_root=tmp_path).notebooks
    assert two.seconds_per_unit == LEVELS.measured_s / 2 and two.cost_source == "estimate (the spec's measured run)"


def test_make_reproduce_plans_first_and_keeps_to_two_hours_unless_told_otherwise():
    import shutil
    import subprocess

    if not shutil.which("make"):
        pytest.skip("no make")

    def dry(*args):
        out = subprocess.run(["make", "-n", "-C", str(REPO), "reproduce", *args], capture_output=True, text=True,
                             check=True).stdout
        return [line for line in out.splitlines() if "roma_lab.experiments" in line]

    probe = [".venv/bin/python", "-m", "roma_lab.experiments", "probe"]  # the embedded model: this machine's speed
    before = int(time.time())
    (_, budgeted) = [line.split() for line in dry()]  # run --budget prints the plan first itself
    assert budgeted[:-2] == [".venv/bin/python", "-m", "roma_lab.experiments", "run", "--all", "--budget", "2h"]
    # the budget's clock starts with make: set-up and the probe count against the 2 hours
    assert budgeted[-2] == "--budget-since" and before <= int(budgeted[-1]) <= time.time()
    assert [line.split() for line in dry("BUDGET=none")] == [probe,
        [".venv/bin/python", "-m", "roma_lab.experiments", "plan", "--all"],
        [".venv/bin/python", "-m", "roma_lab.experiments", "run", "--all"]]
    remote = dry("BUDGET=90min", "LM=openai/x")  # a remote model: no probe of the embedded one
    assert len(remote) == 1 and remote[0].split()[-6:-2] == ["--budget", "90min", "--budget-since", remote[0].split()[-3]]
    assert remote[0].split()[-2:] == ["--lm", "openai/x"]
    assert dry("LM=local:qwen2.5-coder-0.5b")[0].split()[-3:] == ["probe", "--lm", "local:qwen2.5-coder-0.5b"]


def test_a_measured_run_sets_the_cost_and_a_pilot_s_discordance_the_mde(tmp_path):
    from datetime import UTC, datetime, timedelta

    from roma_lab.results import write_provenance

    levels = dataclasses.replace(LEVELS, per=None, pilots=())  # no pilot declared: earlier rows give it
    out = tmp_path / LEVELS.stem
    out.mkdir()
    n = {**LEVELS.defaults, **LEVELS.parameters}["N_TASKS"]  # a run at the notebook's own size
    write_provenance(out, parameters={"N_TASKS": n}, model="local", extra={"smoke": False},
                     started_at=datetime.now(UTC) - timedelta(minutes=30))  # finished now: 30 min for n tasks
    (out / "levels_comparisons.csv").write_text("condition,n,wins,losses,ties\na - b,10,3,1,6\n")
    plan = plan_study([levels], results_root=tmp_path, budget_s=3600)
    (notebook,) = plan.notebooks
    assert notebook.cost_source.startswith("measured") and notebook.seconds_per_unit == pytest.approx(1800 / n, rel=0.01)
    assert notebook.discordance == pytest.approx(0.4)
    assert notebook.mde == pytest.approx(plan_paired(notebook.n, discordance=0.4).mde)


def test_plan_prints_every_notebook_and_writes_plan_json(tmp_path, capsys):
    assert main(["--root", str(REPO), "plan", "--all", "--budget", "2h", "--mde", "0.3", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "27_measure_levels_table1" in out and "total: " in out and "0.30 needs n = " in out
    written = json.loads((tmp_path / "plan.json").read_text())
    assert written["budget_s"] == sizable_s(7200, 0) < 7200 and len(written["notebooks"]) == len(list((REPO / "experiments").glob("*.toml")))


def test_run_with_a_budget_runs_each_sized_notebook_at_its_planned_n(tmp_path, monkeypatch, capsys):
    seen = []

    def fake_run(specs, **kwargs):
        seen.append(([s.stem for s in specs], kwargs["overrides"]))
        plans.update(kwargs["plans"])
        return []

    plans = {}

    monkeypatch.setattr("roma_lab.experiments._cli.run_experiments", fake_run)
    assert main(["--root", str(REPO), "run", LEVELS.stem, QUICKSTART.stem, "--budget", "2h",
                 "--results", str(tmp_path)]) == 0
    planned = json.loads((tmp_path / "plan.json").read_text())["notebooks"]
    n = next(p["n"] for p in planned if p["stem"] == LEVELS.stem)
    assert ([LEVELS.stem], {"N_TASKS": n}) in seen and ([QUICKSTART.stem], {}) in seen
    # each notebook is handed its own line of the plan, for its provenance
    assert plans[LEVELS.stem]["n"] == n and plans[LEVELS.stem]["line"].startswith(f"{LEVELS.stem}: n = {n}, ")
    assert plans[LEVELS.stem]["budget_s"] == sizable_s(7200, 0) and plans[QUICKSTART.stem]["unit"] is None
    assert main(["--root", str(REPO), "run", LEVELS.stem, "--budget", "2h", "--set", "N_TASKS=3",
                 "--results", str(tmp_path)]) == 2


def test_a_set_that_changes_what_a_notebook_does_runs_into_a_folder_of_its_own(tmp_path, monkeypatch, capsys):
    """Issue 44: --set GOAL= no longer replaces the default quickstart run; sizes alone keep the folder."""
    seen = []

    def fake_run(specs, **kwargs):
        seen.append((kwargs["results_root"], kwargs["overrides"]))
        return []

    monkeypatch.setattr("roma_lab.experiments._cli.run_experiments", fake_run)
    goal = '"Find the population of Canada and of Australia, then say which is larger."'
    assert main(["--root", str(REPO), "run", QUICKSTART.stem, "--set", f"GOAL={goal}"]) == 0
    (where, values), = seen
    assert where.parent == (REPO / "results" / "own").resolve() and values["GOAL"].startswith("Find the population")
    assert "the default run in" in capsys.readouterr().out
    seen.clear()
    assert main(["--root", str(REPO), "run", LEVELS.stem, "--set", "N_TASKS=3"]) == 0
    assert seen == [((REPO / "results").resolve(), {"N_TASKS": 3})]  # a size: the same folder
    seen.clear()
    assert main(["--root", str(REPO), "run", QUICKSTART.stem, "--set", f"GOAL={goal}", "--results", str(tmp_path)]) == 0
    assert seen[0][0] == tmp_path.resolve()  # a folder named by the user is used as named


def test_a_run_prints_its_plan_line_first_and_records_the_plan_in_provenance(tmp_path, monkeypatch, capsys):
    from roma_lab.experiments import _runner

    def fake_execute(spec, out_dir, params, kernel_env):
        print("notebook ran")
        for name in spec.outputs:
            (out_dir / name).write_text("x\n")

    monkeypatch.setattr(_runner, "_execute", fake_execute)
    monkeypatch.setattr(_runner, "finish_notebook", lambda *a, **k: True)
    plan = plan_study([QUICKSTART], results_root=tmp_path, budget_s=3600).records()[QUICKSTART.stem]
    assert _runner.run_experiment(QUICKSTART, results_root=tmp_path, plan=plan).status == "completed"
    out = capsys.readouterr().out
    assert out.index(f"plan: {QUICKSTART.stem}: at its own sizes") < out.index("notebook ran")
    record = json.loads((tmp_path / QUICKSTART.stem / "provenance.json").read_text())
    assert record["extra"]["plan"] == plan and record["extra"]["plan"]["budget_s"] == 3600
    assert "plan" not in json.loads(json.dumps(record["parameters"]))  # a plan is no parameter of the run


def test_a_token_s_price_comes_from_roma_lab_lm():
    from roma_lab.lm import TokenPrice, token_price

    assert token_price("local") == token_price("scripted") == TokenPrice(0.0, 0.0)  # in process: no bill
    assert token_price("no-such-provider/no-such-model") is None  # unknown, never 0
    litellm = pytest.importorskip("litellm")
    listed = litellm.model_cost["gpt-4o-mini"]
    expected = TokenPrice(listed["input_cost_per_token"], listed["output_cost_per_token"])
    assert token_price("gpt-4o-mini") == token_price("openai/gpt-4o-mini") == expected  # provider prefix dropped


def test_the_plan_prices_a_measured_task_s_tokens_at_roma_lab_lm_s_price(tmp_path, monkeypatch):
    from datetime import UTC, datetime, timedelta

    import roma_lab.lm
    from roma_lab.lm import ModelSpeed, TokenPrice
    from roma_lab.results import write_provenance

    out = tmp_path / LEVELS.stem
    out.mkdir()
    n = {**LEVELS.defaults, **LEVELS.parameters}["N_TASKS"]
    start = datetime.now(UTC) - timedelta(minutes=30)
    write_provenance(out, parameters={"N_TASKS": n}, model="local", extra={"smoke": False}, started_at=start)
    speed = ModelSpeed(model="qwen.gguf", pid=1, threads=2, cpus=2, load_avg_1min=0.5,
                       loaded_at=start + timedelta(minutes=1), closed_at=start + timedelta(minutes=2), calls=n,
                       call_seconds=60.0, prompt_tokens=900 * n, prompt_seconds=30.0, generated_tokens=100 * n,
                       generation_seconds=30.0)
    (tmp_path / "lm_speed.jsonl").write_text(speed.model_dump_json() + "\n")
    monkeypatch.setattr(roma_lab.lm, "token_price", lambda model: TokenPrice(1e-6, 3e-6))
    (notebook,) = plan_study([LEVELS], results_root=tmp_path, lm="openai/some-model").notebooks
    assert notebook.dollars == pytest.approx(n * 1000 * 2e-6)  # 1,000 tokens a task at the mean of the two prices


def test_only_roma_lab_lm_s_price_rule_knows_prices():
    package = REPO / "roma_lab"
    knowing = sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py")
                     if "cost_per_token" in p.read_text(encoding="utf-8") or "model_cost" in p.read_text(encoding="utf-8"))
    assert knowing == ["lm/_price.py"]
