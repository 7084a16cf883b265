"""Dollar budgets (issue 43 item 2): ``evaluate(..., budget_usd=)`` stops starting tasks at its cap,
tasks in flight finish, the tasks not run are rows of their own (not in the mean), a rerun with the
same cap spends nothing and one with a higher cap completes the rows of a run without a cap; an
unknown cost is never 0; the cap reaches notebooks through $ROMA_LAB_BUDGET_USD. Every model is
the simulated provider on 127.0.0.1, priced."""

import json
from pathlib import Path

import pytest
from online_server import online_isolation  # noqa: F401 - autouse fixture: a fresh DSPy cache per test

from roma_lab.evaluate import (
    BUDGET_ENV,
    NOT_RUN,
    BudgetUnknownCostError,
    evaluate,
    function,
    single_call,
    tasks_from,
)
from roma_lab.evaluate.__main__ import main as evaluate_shell
from roma_lab.experiments import load_spec
from roma_lab.lm import LIMIT_ENV, resolve_lm
from roma_lab.simulator import SimLatency, SimModel, simulated_provider

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = load_spec(REPO / "experiments" / "40_evaluate_your_tasks.toml")
PRICED = SimModel(0.6, usd_per_1k_input=0.5, usd_per_1k_output=2.0)
KEEP = ["condition", "run", "task_id", "prediction", "score", "cost"]


def tasks(n):
    # questions of different lengths, so tasks cost different amounts
    return tasks_from([{"id": f"t{i}", "question": f"Question {i}: what is the value asked for in case {i}?"
                        + " Please answer." * (i % 5),
                        "answer": str(i % 7)} for i in range(n)], name="synthetic")


@pytest.fixture
def sim(monkeypatch):
    """A simulated provider of a priced model ("m") and an unpriced one ("free") named by $ROMA_LAB_API_BASE."""
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    with simulated_provider(tasks(24), {"m": PRICED, "free": 0.6}, seed=2, latency=SimLatency(0.05)) as provider:
        monkeypatch.setenv("ROMA_LAB_API_BASE", provider.base_url)
        yield provider


def run(out, task_set, budget_usd=None, model="m", runs=1):
    # no request cache: a cached reply costs nothing, and each run here must pay for its calls
    return evaluate([single_call(resolve_lm(f"openai/{model}", cache=False), label=model)], task_set, "quasi-exact",
                    runs=runs, out=out, progress=False, budget_usd=budget_usd)


def spent(result):
    return float(result.rows.loc[result.rows["status"] != NOT_RUN, "cost"].sum())


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_run_stops_at_its_cap_keeps_its_rows_says_why_and_a_higher_cap_completes_it(sim, tmp_path, monkeypatch,
                                                                                        concurrency):
    monkeypatch.setenv(LIMIT_ENV, str(concurrency))
    task_set = tasks(24)
    clean = run(tmp_path / "clean", task_set, runs=2)
    costs = clean.rows["cost"].astype(float)
    assert clean.budget is None and (costs > 0).all()
    cap = 0.4 * costs.sum()

    sim.calls.clear()
    capped = run(tmp_path / "capped", task_set, cap, runs=2)
    done = capped.rows[capped.rows["status"] != NOT_RUN]
    kept_back = capped.rows[capped.rows["status"] == NOT_RUN]
    # spent <= cap + what was in flight at the last start (at most `concurrency` tasks)
    assert cap - concurrency * costs.max() < spent(capped) <= cap + concurrency * costs.max()
    if concurrency == 1:  # nothing in flight: the last task started under the cap, and the cap was reached
        assert spent(capped) - done["cost"].iloc[-1] < cap <= spent(capped)
    assert len(sim.calls) == len(done)  # every call made is a row; the tasks kept back called nothing
    assert len(done) + len(kept_back) == len(clean.rows) and len(kept_back) > 0
    assert kept_back["score"].isna().all() and (kept_back["cost"] == 0).all()
    # the finished rows are the clean run's rows
    merged = done[KEEP].merge(clean.rows[KEEP], on=["condition", "run", "task_id"], suffixes=("", "_clean"))
    assert len(merged) == len(done) and (merged["prediction"] == merged["prediction_clean"]).all()
    assert merged["cost"].to_numpy() == pytest.approx(merged["cost_clean"].to_numpy())
    # the summary: the mean of the rows run only, the rows kept back counted, what they cost
    summary = capped.summary().iloc[0]
    per_task = done.groupby("task_id")["score"].mean()
    assert summary["value"] == pytest.approx(per_task.mean()) and summary["n"] == len(per_task)
    assert summary["n_missing"] == 0  # a task kept back is neither a wrong answer nor an unscored one
    assert summary["n_not_run"] == len(kept_back) and summary["cost_usd"] == pytest.approx(spent(capped))
    assert capped.budget.stopped and capped.budget.n_not_run == len(kept_back)
    written = json.loads((tmp_path / "capped" / "provenance.json").read_text())
    assert written["extra"]["budget"]["stopped"] and written["parameters"]["budget_usd"] == cap
    assert json.loads((tmp_path / "capped" / "evaluation.json").read_text())["budget"]["n_not_run"] == len(kept_back)

    sim.calls.clear()  # the same cap again: the folder's rows have spent it, nothing starts
    again = run(tmp_path / "capped", task_set, cap, runs=2)
    assert sim.calls == [] and again.budget.stopped and again.rows[KEEP].equals(capped.rows[KEEP])

    sim.calls.clear()
    resumed = run(tmp_path / "capped", task_set, 10 * costs.sum(), runs=2)
    assert len(sim.calls) == len(kept_back) and not resumed.budget.stopped and resumed.budget.n_not_run == 0
    assert resumed.rows[KEEP[:-1]].equals(clean.rows[KEEP[:-1]])
    assert resumed.rows["cost"].to_numpy() == pytest.approx(clean.rows["cost"].to_numpy())
    assert resumed.summary()["cost_usd"].iloc[0] == pytest.approx(costs.sum())


def test_an_unknown_cost_is_never_0_the_run_stops_after_one_call_and_a_rerun_is_refused(sim, tmp_path, monkeypatch):
    monkeypatch.setenv(LIMIT_ENV, "4")
    with pytest.raises(BudgetUnknownCostError, match="unknown"):
        run(tmp_path, tasks(24), 100.0, model="free")
    assert len(sim.calls) == 1  # until a system's price is seen its tasks run one at a time
    assert len((tmp_path / "attempts.csv").read_text().splitlines()) == 2  # the header and that task's row, kept
    sim.calls.clear()
    with pytest.raises(BudgetUnknownCostError, match="1 row"):
        run(tmp_path, tasks(24), 100.0, model="m")  # the folder's spending so far is unknown
    assert sim.calls == []
    # a system that reports no usage cannot be kept under a cap either
    with pytest.raises(BudgetUnknownCostError):
        evaluate([function(lambda q: "1", label="fn")], tasks(3), out=tmp_path / "fn", progress=False, budget_usd=1.0)


def test_the_cap_comes_from_the_environment_when_none_is_given_and_is_recorded(sim, tmp_path, monkeypatch):
    monkeypatch.setenv(BUDGET_ENV, "1e-9")  # less than one call: one task runs (its price unseen), then none
    result = run(tmp_path, tasks(6))
    assert result.budget.source == f"${BUDGET_ENV}" and result.budget.cap_usd == 1e-9
    assert (result.rows["status"] == NOT_RUN).sum() == 5
    monkeypatch.setenv(BUDGET_ENV, "lots")
    with pytest.raises(ValueError, match=BUDGET_ENV):
        run(tmp_path / "other", tasks(6))


def test_a_system_the_cap_kept_from_every_task_is_in_the_summary_with_n_0_and_has_no_pair(sim, tmp_path):
    systems = [single_call(resolve_lm("openai/m", cache=False), label=label) for label in ("a", "b")]
    result = evaluate(systems, tasks(4), "quasi-exact", out=tmp_path, progress=False, budget_usd=1e-9)
    summary = result.summary().set_index("condition")
    assert summary.loc["a", "n"] == 1 and summary.loc["a", "n_not_run"] == 3
    assert summary.loc["b", "n"] == 0 and summary.loc["b", "n_not_run"] == 4 and summary.loc["b", "cost_usd"] == 0
    assert not result.can_pair() and not (tmp_path / "paired.csv").exists()


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True])
def test_a_cap_that_is_no_amount_of_dollars_is_refused(tmp_path, bad):
    with pytest.raises(ValueError, match="budget_usd"):
        evaluate([function(str, label="fn")], tasks(2), out=tmp_path, progress=False, budget_usd=bad)


def test_the_shell_takes_budget_usd_and_says_where_it_stopped(sim, tmp_path, capsys):
    path = tmp_path / "tasks.csv"
    path.write_text("id,question,answer\n" + "".join(f"t{i},\"{it.question}\",{it.answer}\n"
                                                     for i, it in enumerate(tasks(6).items)))
    assert evaluate_shell([str(path), "--system", "single", "--lm", "openai/m", "--out", str(tmp_path / "out"),
                           "--budget-usd", "1e-9"]) == 0
    out = capsys.readouterr().out
    assert "stopped at its dollar cap" in out and "5 task(s) not run" in out


# --- the runner and the planner -------------------------------------------------------------------


def test_experiments_run_hands_the_cap_to_each_kernel_records_it_and_reruns_a_run_made_under_another(
        tmp_path, monkeypatch):
    from roma_lab.experiments import _runner
    from roma_lab.experiments._cli import main as experiments_shell

    seen = []

    def fake_run(specs, **kwargs):
        seen.append(kwargs["budget_usd"])
        return []

    monkeypatch.setattr("roma_lab.experiments._cli.run_experiments", fake_run)
    assert experiments_shell(["--root", str(REPO), "run", NOTEBOOK.stem, "--budget-usd", "2.5",
                              "--results", str(tmp_path)]) == 0
    assert seen == [2.5]
    with pytest.raises(SystemExit):  # not an amount of dollars
        experiments_shell(["--root", str(REPO), "run", NOTEBOOK.stem, "--budget-usd", "-1", "--results", str(tmp_path)])

    kernels = []

    def fake_execute(spec, out_dir, params, kernel_env):
        kernels.append(dict(kernel_env))
        for name in spec.outputs:
            (out_dir / name).write_text("x\n")

    monkeypatch.setattr(_runner, "_execute", fake_execute)
    monkeypatch.setattr(_runner, "finish_notebook", lambda *a, **k: True)
    assert _runner.run_experiment(NOTEBOOK, results_root=tmp_path, budget_usd=2.5).status == "completed"
    assert kernels[-1][BUDGET_ENV] == "2.5"
    record = json.loads((tmp_path / NOTEBOOK.stem / "provenance.json").read_text())
    assert record["extra"]["budget_usd"] == 2.5
    assert _runner.run_experiment(NOTEBOOK, results_root=tmp_path, budget_usd=2.5).status == "skipped"
    # a higher cap runs it again in the same folder (evaluate resumes the rows), and without one too
    assert _runner.run_experiment(NOTEBOOK, results_root=tmp_path, budget_usd=10.0).status == "completed"
    assert _runner.run_experiment(NOTEBOOK, results_root=tmp_path).status == "completed"
    assert BUDGET_ENV not in kernels[-1] and len(kernels) == 3


def test_the_planner_says_how_many_tasks_the_dollars_buy_where_a_price_per_task_is_known(tmp_path, monkeypatch):
    from roma_lab.experiments import _plan

    per_task_tokens = 2_000.0  # as a measured run's tokens per unit would give
    monkeypatch.setattr(_plan, "_cost", lambda spec, *_: (60.0, "measured (test)", per_task_tokens))
    monkeypatch.setattr(_plan, "_price", lambda lm: 1e-6)  # dollars per token
    (notebook,) = _plan.plan_study([NOTEBOOK], results_root=tmp_path, lm="openai/m", budget_usd=1.0).notebooks
    assert notebook.dollars_n == 500 and "$1.00 buys n = 500" in notebook.line
    monkeypatch.setattr(_plan, "_price", lambda lm: None)
    (unknown,) = _plan.plan_study([NOTEBOOK], results_root=tmp_path, lm="openai/m", budget_usd=1.0).notebooks
    assert unknown.dollars_n is None and "unknown n" in unknown.line
