"""A plan that buys findings (issue 54 items 2 and 3): comparisons planned within the groups they are
made in (notebook 27 per level), a pilot's counts declared in a spec as what the plan expects."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from roma_lab.experiments import SpecError, load_spec
from roma_lab.experiments._plan import RESERVE, expectation, plan_budget, plan_study, sizable_s, timed_seconds
from roma_lab.experiments._spec import Pilot, TimedRun
from roma_lab.stats import n_for_mde, paired_ci, plan_paired

REPO = Path(__file__).resolve().parents[1]
LEVELS = load_spec(REPO / "experiments" / "27_measure_levels_table1.toml")


def copy_of_27(tmp_path: Path, plan_table: str) -> Path:
    """Notebook 27's spec in a project of its own, its ``[plan]`` table replaced by ``plan_table``."""
    root = tmp_path / "project"
    for name in ("experiments/27_measure_levels_table1.toml", "notebooks/27_measure_levels_table1.ipynb",
                 *LEVELS.inputs):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, root / name)
    spec = root / "experiments" / "27_measure_levels_table1.toml"
    text = spec.read_text()
    head, rest = text.split("\n[plan]\n", 1)
    spec.write_text(head + "\n" + plan_table + "\n[smoke]\n" + rest.split("\n[smoke]\n", 1)[1])
    return spec


def test_27_declares_its_comparisons_per_level_and_its_earlier_run_as_its_pilot():
    assert LEVELS.per == "LEVELS" and LEVELS.strata() == 2  # 60 tasks, 30 a level
    primary = LEVELS.pilots[0]
    assert (primary.name, primary.wins, primary.losses, primary.n) == ("agent - single, L1", 22, 0, 30)
    assert "findings/27_measure_levels_table1" in LEVELS.pilot_source


def test_27_is_planned_per_level_not_as_one_comparison_of_60(tmp_path):
    (own,) = plan_study([LEVELS], results_root=tmp_path).notebooks
    psi = 22 / 30  # the primary comparison's discordance in its earlier run
    assert (own.n, own.strata, own.comparison_n) == (60, 2, 30)
    assert own.mde == pytest.approx(plan_paired(30, discordance=psi).mde)
    assert own.detects == f"{own.mde:.2f} at n = 30 a level" and own.discordance_source.startswith("pilot: ")
    # planned as one comparison over all 60 tasks it claimed to detect far less than its comparisons can
    (pooled,) = plan_study([dataclasses.replace(LEVELS, per=None)], results_root=tmp_path).notebooks
    assert pooled.comparison_n == 60 and pooled.mde < own.mde - 0.1
    # a budget buys a task in every level at a time, never fewer than 2 a level (one that cannot pay its
    # primary comparison in every level but can in its level: the test below)
    for budget in (60, 3601, 4000):
        (planned,) = plan_study([LEVELS], results_root=tmp_path, budget_s=budget).notebooks
        assert planned.n % 2 == 0 and planned.comparison_n == planned.n // 2 >= 2 and planned.sets == ()


def test_27_runs_its_primary_comparison_s_level_alone_when_the_budget_cannot_pay_its_own_size_in_every_level(
        tmp_path):
    from roma_lab.experiments._plan_text import plan_lines

    need = expectation(LEVELS.pilots[0]).needs  # 18 a level: 36 tasks in both, 18 in L1 alone
    per_task = LEVELS.measured_s / 60
    assert dict(LEVELS.alone) == {"SYSTEMS": ["single"]} and 0 < LEVELS.alone_share < 1  # [plan.alone]
    budget = 1.5 * need * per_task  # pays its need in L1, not in both levels
    (alone,) = (planned := plan_study([LEVELS], results_root=tmp_path, budget_s=budget)).notebooks
    assert alone.sets == (("LEVELS", ["L1"]), ("SYSTEMS", ["single"])) and alone.strata == 1
    assert alone.comparison_n == alone.n >= need and alone.seconds == pytest.approx(
        alone.n * per_task * LEVELS.alone_share)  # the primary comparison's systems alone: their share of a task
    assert planned.overrides()[LEVELS.stem] == {"N_TASKS": alone.n, "LEVELS": ["L1"], "SYSTEMS": ["single"]}
    assert [e.name for e in alone.expected] == ["agent - single, L1"]
    assert alone.line.startswith(f"{LEVELS.stem}: n = {alone.n}, ") and alone.detects.endswith(" in L1 alone") and (
        alone.line.endswith(f"in L1 alone; agent - single, L1 needs n = {need} a level, its own 60 not paid"))
    lines = plan_lines(planned)
    said = " ".join(line.strip() for line in lines)  # wrapped in 100 columns
    assert max(map(len, lines)) <= 100 and (f"{LEVELS.stem} runs in L1 alone, SYSTEMS = ['single']: its own "
                                            "size is not paid in every level") in said
    # the share is what pays it: a budget between its need with and without ROMA
    tight = need * per_task * (LEVELS.alone_share + 1) / 2
    assert plan_study([LEVELS], results_root=tmp_path, budget_s=tight).notebooks[0].comparison_n >= need
    every = dataclasses.replace(LEVELS, alone={}, alone_share=1.0)
    (whole_systems,) = plan_study([every], results_root=tmp_path, budget_s=tight).notebooks
    assert whole_systems.comparison_n < need and whole_systems.sets == ()
    # never beyond its protocol's size in that level, 30
    below_both = 2 * need * per_task - 1  # pays 30 in L1 alone, not its need in both levels
    assert plan_study([LEVELS], results_root=tmp_path, budget_s=below_both).notebooks[0].n == 30
    # a budget that pays its need in every level but not its own 30 a level still runs L1 alone, at more:
    # never a weaker finding for a bigger budget (before 2026-12-07: both levels at 18, all three systems)
    sizes = [plan_study([LEVELS], results_root=tmp_path, budget_s=b * need * per_task).notebooks[0]
             for b in (1.0, 1.5, 2.0, 2.5, 3.0, 3.3)]
    assert all(p.sets == (("LEVELS", ["L1"]), ("SYSTEMS", ["single"])) for p in sizes)
    assert [p.comparison_n for p in sizes] == sorted(p.comparison_n for p in sizes) and sizes[-1].comparison_n == 30
    # a budget that pays its own size runs every level and system; one that pays it in none, every level at 2
    assert plan_study([LEVELS], results_root=tmp_path, budget_s=60 * per_task + 1).notebooks[0].sets == ()
    assert plan_study([LEVELS], results_root=tmp_path, budget_s=60 * per_task - 1).notebooks[0].sets != ()
    assert plan_study([LEVELS], results_root=tmp_path, budget_s=60).notebooks[0].sets == ()
    # a primary comparison that names no level of LEVELS is never narrowed
    unnamed = dataclasses.replace(LEVELS, pilots=(dataclasses.replace(LEVELS.pilots[0], name="agent - single"),
                                                  *LEVELS.pilots[1:]))
    (whole,) = plan_study([unnamed], results_root=tmp_path, budget_s=budget).notebooks
    assert whole.sets == () and whole.comparison_n < need
    # a resumed run keeps it in its level at its n, whatever the budget now buys
    narrowed = {"N_TASKS": 23, "LEVELS": ["L1"], "SYSTEMS": ["single"]}
    (kept,) = plan_study([LEVELS], results_root=tmp_path, budget_s=4000, kept={LEVELS.stem: narrowed}).notebooks
    assert (kept.n, dict(kept.sets), kept.kept) == (23, {"LEVELS": ["L1"], "SYSTEMS": ["single"]}, True)


def test_a_pilot_expects_what_its_interval_rules_out_and_is_sized_for_the_end_nearer_0():
    agent = expectation(Pilot("agent - single, L1", 20, 0, 30))
    ci = paired_ci([1] * 20 + [0] * 10, [0] * 30)  # the tables' own interval: +.667 [.488, .846]
    assert (round(agent.estimate, 3), round(agent.low, 3), round(agent.high, 3)) == (0.667, 0.488, 0.846)
    assert (agent.low, agent.high) == (ci.low, ci.high)
    assert agent.needs == n_for_mde(ci.low, discordance=20 / 30).n
    assert plan_paired(agent.needs, discordance=20 / 30).mde <= ci.low < plan_paired(agent.needs - 1,
                                                                                     discordance=20 / 30).mde
    losing = expectation(Pilot("b - a", 1, 12, 30))  # a loss is a difference too, whatever its sign
    assert losing.estimate < 0 and losing.needs == n_for_mde(-losing.high, discordance=13 / 30).n
    assert expectation(Pilot("tied", 0, 0, 30)).needs is None  # no discordance: nothing to detect
    assert expectation(Pilot("weak", 3, 1, 5)).needs is None  # its interval holds 0


@pytest.mark.parametrize(("table", "message"), [
    ('[plan]\nper = "N_TASKS"\n', "per = 'N_TASKS' must be a non-empty list"),
    ('[plan]\nper = "NO_SUCH"\n', "per = 'NO_SUCH' is not a parameter"),
    ('[plan]\nsplit = "LEVELS"\n', "unknown keys \\['split'\\]"),
    ('[plan]\nsource = "x"\n[plan.pilot]\n"a - b" = [20, 11, 30]\n', "wins \\+ losses <= n"),
    ('[plan]\nsource = "x"\n[plan.pilot]\n"a - b" = [2, 1]\n', "expected \\[wins, losses, n\\]"),
    ('[plan]\nsource = "x"\n[plan.pilot]\n"a - b" = [2.0, 1, 5]\n', "whole counts"),
    ('[plan]\n[plan.pilot]\n"a - b" = [2, 1, 5]\n', "needs \\[plan\\] source"),
    ('[plan]\nper = "LEVELS"\nsource = "x"\n[plan.pilot]\n"a - b, L1" = [9, 0, 10]\n[plan.alone]\nSYSTEMS = ["single"]\n', "share must be the share of a task's time"),
    ('[plan]\nper = "LEVELS"\nsource = "x"\n[plan.pilot]\n"a - b, L1" = [9, 0, 10]\n[plan.alone]\nSYSTEMS = ["single"]\nshare = 0\n', "in \\(0, 1\\], got 0"),
    ('[plan]\nper = "LEVELS"\nsource = "x"\n[plan.pilot]\n"a - b, L1" = [9, 0, 10]\n[plan.alone]\nSYSTEMS = ["single"]\nshare = 1.5\n', "in \\(0, 1\\], got 1.5"),
    ('[plan]\nper = "LEVELS"\nsource = "x"\n[plan.pilot]\n"a - b, L1" = [9, 0, 10]\n[plan.alone]\nSYSTEMS = ["single"]\nshare = true\n', "got True"),
    ('[plan]\nper = "LEVELS"\nsource = "x"\n[plan.pilot]\n"a - b, L1" = [9, 0, 10]\n[plan.alone]\nNO_SUCH = 1\nshare = 0.5\n', "\\['NO_SUCH'\\] are not parameters"),
    ('[plan]\nper = "LEVELS"\nsource = "x"\n[plan.pilot]\n"a - b, L1" = [9, 0, 10]\n[plan.alone]\nLEVELS = ["L1"]\nshare = 0.5\n', "\\['LEVELS'\\] are not parameters"),
    ('[plan]\nper = "LEVELS"\nsource = "x"\n[plan.pilot]\n"a - b, L1" = [9, 0, 10]\n[plan.alone]\nSYSTEMS = "single"\nshare = 0.5\n', "SYSTEMS = 'single' must be a list"),
    ('[plan]\n[plan.alone]\nSYSTEMS = ["single"]\nshare = 0.5\n', "it needs \\[plan\\] per and \\[plan.pilot\\]"),
])
def test_a_plan_table_that_says_nothing_usable_is_refused_naming_the_file(tmp_path, table, message):
    with pytest.raises(SpecError, match=message) as info:
        load_spec(copy_of_27(tmp_path, table))
    assert "27_measure_levels_table1.toml" in str(info.value)


# --- each study's own size is its protocol size; a budget shrinks it and says what it would need ---

STUDIES_21_26 = sorted((REPO / "experiments").glob("2[1-6]_*.toml"))
TIMEOUT_AT_2 = {"21": 5760, "22": 6960, "23": 4680, "24": 6450, "25": 7500, "26": 4710}  # their specs' before


def test_21_to_26_run_at_the_n_a_030_difference_needs_unless_a_budget_shrinks_them():
    assert len(STUDIES_21_26) == 6
    for path in STUDIES_21_26:
        spec = load_spec(path)
        assert {**spec.defaults, **spec.parameters}["N_TASKS"] == n_for_mde(0.30).n == 90, spec.stem
        # at 2 tasks their cell timeout is what it was before
        assert spec.cell_timeout_s({"N_TASKS": 2}) == TIMEOUT_AT_2[spec.stem[:2]]


def plan_at(budget, tmp_path, **kw):
    from roma_lab.experiments import load_specs

    return plan_study(load_specs(REPO), results_root=tmp_path, budget_s=budget, **kw)


def test_a_bigger_budget_buys_more_and_the_plan_names_the_hours_each_study_it_cannot_afford_needs(tmp_path):
    from roma_lab.experiments._plan_text import plan_lines

    plans = {hours: plan_at(hours * 3600, tmp_path) for hours in (2, 8, 24)}
    sizes = {hours: {p.stem: p.n for p in plan.notebooks} for hours, plan in plans.items()}
    assert sizes[2] != sizes[8] != sizes[24]
    for stem in sizes[2]:  # never fewer with more, never more than its own size
        own = next(p.default_n for p in plans[2].notebooks if p.stem == stem)
        assert sizes[2][stem] is None or sizes[2][stem] <= sizes[8][stem] <= sizes[24][stem] <= own
    for hours, plan in plans.items():
        assert plan.seconds <= hours * 3600  # 2 h too, at this machine's figures (the README's reproduce test)
        lines = plan_lines(plan)
        short = {p.stem: p for p in plan.not_afforded()}
        if hours < 24:  # 4.3 h alone here at its spec's figure
            assert "22_compare_planning_table7" in short
        for stem, p in short.items():
            (line,) = [x for x in lines if x.startswith(f"  {stem} ") and " here; " in x]
            assert f"n = {p.default_n}" in line and f"{format_seconds(p.own_seconds)} here" in line
        assert len(short) < 2 or any(x.startswith("  all of them ") for x in lines)  # a total when more than one
    everything = plan_at(10_000 * 3600, tmp_path)
    assert not everything.not_afforded() and all(p.n == p.default_n for p in everything.notebooks if p.unit)
    assert not any(x.startswith("not affordable") for x in plan_lines(everything))


def test_a_study_it_cannot_afford_is_priced_with_a_named_model_by_the_one_price_rule(tmp_path, monkeypatch):
    from roma_lab.experiments import _plan
    from roma_lab.experiments._plan_text import plan_lines
    from roma_lab.lm import max_concurrency

    study = load_spec(STUDIES_21_26[0])
    tokens = 5000.0  # a task-run's tokens, as a measured run here counts them
    monkeypatch.setattr(_plan, "_cost", lambda spec, *_: (60.0, "measured (test)", tokens))
    prices = []
    monkeypatch.setattr(_plan, "_price", lambda lm: prices.append(lm) or (None if lm is None else 1e-6))
    (p,) = plan_study([study], results_root=tmp_path, budget_s=3600).notebooks
    runs = {**study.defaults, **study.parameters}["RUNS"]
    assert prices == [None, _plan.PRICED_MODEL]  # the plan's own model (each notebook's), then the named one
    assert p.own_seconds == 90 * runs * 60.0
    assert p.quote_seconds == pytest.approx(p.own_seconds / max_concurrency(_plan.PRICED_MODEL))
    assert p.quote_dollars == pytest.approx(90 * runs * tokens * 1e-6)
    (line,) = [x for x in plan_lines(plan_study([study], results_root=tmp_path, budget_s=3600))
               if x.startswith(f"  {study.stem}")]
    assert line.endswith(f"{format_seconds(p.own_seconds)} here; {format_seconds(p.quote_seconds)}, "
                         f"${p.quote_dollars:,.2f}")
    # planned with a remote model: its own time and dollars, no "here"
    remote = plan_study([study], results_root=tmp_path, budget_s=600, lm="openai/other", concurrency=4)
    (line,) = [x for x in plan_lines(remote) if x.startswith(f"  {study.stem}")]
    assert remote.quote_lm == "openai/other" and " here" not in line
    assert remote.notebooks[0].quote_seconds == pytest.approx(90 * runs * 60.0 / 4)


def format_seconds(seconds):
    from roma_lab.experiments._times import format_seconds as shown

    return shown(seconds)


# --- the budget goes first to the comparisons a pilot expects to detect, sized to detect them ---

def test_the_allocation_pays_what_a_pilot_expects_first_whole_cheapest_first_then_shares_the_rest():
    from roma_lab.experiments._plan import _allocate

    sizes = {"a": (100, 10.0), "b": (90, 100.0), "c": (90, 100.0)}
    floors = 2 * 10 + 2 * 100 + 2 * 100
    # b's expected comparison needs 30: paid first (2800 s), the 200 s left shared (only a's tasks fit it)
    assert _allocate(sizes, floors + 3000, first={"b": 30}) == {"a": 20, "b": 30, "c": 2}
    assert _allocate(sizes, floors + 3000) == {"a": 100, "b": 12, "c": 12}  # without it: an equal split
    # a need the budget cannot pay whole is not paid first (a size that detects nothing buys nothing first)
    assert _allocate(sizes, floors + 2000, first={"b": 30}) == _allocate(sizes, floors + 2000)
    # two needs: the cheaper first (c: 300 s), the other only if it still fits whole (b: 2800 s does not)
    both = _allocate(sizes, floors + 3000, first={"b": 30, "c": 5})
    assert both["c"] >= 5 and both["b"] < 30
    assert _allocate({"one": (10, 1.0)}, 1e6, first={"one": 50}) == {"one": 10}  # never beyond its own size


def test_with_needs_first_the_budget_is_still_never_overspent():
    import numpy as np

    from roma_lab.experiments._plan import _allocate

    rng = np.random.default_rng(1)
    for _ in range(300):
        k = int(rng.integers(1, 8))
        sizes = {f"s{i}": (int(rng.integers(1, 80)), float(rng.uniform(1, 500))) for i in range(k)}
        first = {s: int(rng.integers(1, 100)) for s in sizes if rng.random() < 0.5}
        floor = sum(min(2, own) * cost for own, cost in sizes.values())
        budget = floor + float(rng.uniform(0, 20000))
        n = _allocate(sizes, budget, first=first)
        assert sum(n[s] * cost for s, (_, cost) in sizes.items()) <= budget + 1e-6
        assert all(min(2, own) <= n[s] <= own for s, (own, _) in sizes.items())


def test_27_s_primary_comparison_is_funded_first_and_counted(tmp_path):
    from roma_lab.experiments._plan_text import plan_lines

    others = [load_spec(path) for path in STUDIES_21_26[:2]]
    need = expectation(LEVELS.pilots[0]).needs  # 18 a level
    per_level_task = LEVELS.measured_s / 60 * 2
    floors = plan_study([LEVELS, *others], results_root=tmp_path, budget_s=1).seconds
    budget = floors + (need - 2) * per_level_task + 60  # pays 27's need, little besides
    planned = plan_study([LEVELS, *others], results_root=tmp_path, budget_s=budget)
    levels = planned.notebooks[0]
    # it pays 18 a level, not 27's own 30 a level: the primary comparison's level alone, at more than its need
    assert levels.comparison_n >= need and [e.name for e in levels.expected] == ["agent - single, L1"]
    assert dict(levels.sets) == {"LEVELS": ["L1"], "SYSTEMS": ["single"]}
    assert plan_paired(need, discordance=22 / 30).mde <= expectation(LEVELS.pilots[0]).low
    lines = plan_lines(planned)
    assert "comparisons expected to be detectable: 1 of the 4 a pilot declares (1 at their own sizes)" in lines
    assert any(x.startswith(f"  {LEVELS.stem}  agent - single, L1: pilot +.73 [.57, .90], needs n = {need}, "
                            "funded") for x in lines)
    # without the pilot the same budget is split equally, and 27 gets less than its comparison needs
    blind = plan_study([dataclasses.replace(LEVELS, pilots=()), *others], results_root=tmp_path, budget_s=budget)
    assert blind.notebooks[0].comparison_n < need
    assert not any(x.startswith("comparisons expected") for x in plan_lines(blind))
    # a budget that cannot pay it whole: not funded, and the line says what it has
    short = plan_study([LEVELS, *others], results_root=tmp_path, budget_s=floors + per_level_task * 2)
    assert not short.notebooks[0].expected
    assert any(x.endswith(f"needs n = {need} a level, has {short.notebooks[0].comparison_n}")
               for x in plan_lines(short))


# --- predictions checked out of sample; a replay from the completion cache is no cost ---

def record_run(results: Path, stem: str, *, minutes: float, extra: dict, n_tasks=None) -> Path:
    from datetime import UTC, datetime, timedelta

    from roma_lab.results import write_provenance

    out = results / stem
    out.mkdir(parents=True, exist_ok=True)
    extra = {"smoke": False, **extra, **({"overrides": {"N_TASKS": n_tasks}} if n_tasks else {})}
    write_provenance(out, parameters={} if n_tasks is None else {"N_TASKS": n_tasks}, model="local", extra=extra,
                     started_at=datetime.now(UTC) - timedelta(minutes=minutes))
    return out


def trace(cached: int, fresh: int) -> str:
    """A trace's JSON as roma_lab.trace writes its model exchanges (one ``cached`` flag each)."""
    import json

    calls = [{"exchanges": [{"messages": [{"role": "user", "content": 'say "cached": true'}], "completions": ["x"],
                             "cached": flag, "recorded_latency_s": 1.0}]} for flag in [True] * cached + [False] * fresh]
    return json.dumps({"rollouts": [{"steps": [{"calls": calls}]}]}, indent=1)


def test_model_calls_are_counted_in_a_run_s_traces_and_a_fifo_is_never_waited_on(tmp_path):
    import os

    from roma_lab.experiments._times import count_model_calls

    (tmp_path / "traces" / "agent").mkdir(parents=True)
    (tmp_path / "traces" / "agent" / "a.json").write_text(trace(3, 1))
    (tmp_path / "traces" / "b.json").write_text(trace(0, 2))
    (tmp_path / "rows.csv").write_text('"cached": true\n')  # not a JSON file: not a trace
    os.mkfifo(tmp_path / "traces" / "fifo.json")
    calls = count_model_calls(tmp_path)
    assert (calls.requests, calls.cached, calls.earlier) == (6, 3, 3) and calls.replayed
    assert not count_model_calls(tmp_path / "traces" / "agent" / "none").replayed  # no folder: 0 of 0


def test_the_runner_records_how_many_model_calls_the_cache_served(tmp_path, monkeypatch):
    import json

    from roma_lab.experiments import _runner

    quick = load_spec(REPO / "experiments" / "01_run_quickstart.toml")

    def fake_execute(spec, out_dir, params, kernel_env):
        (out_dir / "traces").mkdir()
        (out_dir / "traces" / "t.json").write_text(trace(5, 2))
        for name in spec.outputs:
            (out_dir / name).write_text("x\n")

    monkeypatch.setattr(_runner, "_execute", fake_execute)
    monkeypatch.setattr(_runner, "finish_notebook", lambda *a, **k: True)
    assert _runner.run_experiment(quick, results_root=tmp_path).status == "completed"
    record = json.loads((tmp_path / quick.stem / "provenance.json").read_text())
    # the helper's entries recorded no time: taken as recorded before the run
    assert record["extra"]["model_calls"] == {"requests": 7, "cached": 5, "earlier": 5}


def exchanges(*recorded_at: float | None) -> tuple:
    """One model exchange per time: a cache hit on an entry recorded then (None: a live request)."""
    from roma_lab.trace import LMExchange

    return tuple(LMExchange(messages=({"role": "user", "content": "q"},), completions=("a",), cached=at is not None,
                            recorded_latency_s=None if at is None else 2.5, recorded_at=at) for at in recorded_at)


def test_only_a_hit_on_an_entry_recorded_before_the_batch_is_a_replay(tmp_path):
    """A fresh clone's make reproduce: notebook 22 is served the calls 21 asked minutes before in the
    same batch (35 of 56 at n = 2), which the old count called a replay. Both trace writers (a run's,
    and an agent trajectory's dataclass dump) are read."""
    from datetime import UTC, datetime

    from pydantic import TypeAdapter

    from roma_lab.experiments._times import count_model_calls
    from roma_lab.trace import RoleCall, single_call_run

    batch = datetime(2026, 12, 6, 21, 0, tzinfo=UTC)
    before, within = batch.timestamp() - 3600, batch.timestamp() + 60
    run = single_call_run(question="q", output="a", input_tokens=1, output_tokens=1, cost=0.0, model="m",
                          exchanges=exchanges(before, *[within] * 4, *[None] * 6))
    (tmp_path / "run.json").write_text(run.to_json())
    call = RoleCall(role="actor", inputs={}, outputs={}, context_chars=1, input_tokens=1, output_tokens=1, cost=0.0,
                    latency_s=0.0, started_s=0.0, model="m", queued_s=0.0, exchanges=exchanges(within, within, None))
    (tmp_path / "agent.json").write_bytes(TypeAdapter(RoleCall).dump_json(call, indent=1))
    calls = count_model_calls(tmp_path, since=batch)
    assert (calls.requests, calls.cached, calls.earlier) == (14, 7, 1) and not calls.replayed
    assert count_model_calls(tmp_path, since=datetime.fromtimestamp(within + 1, UTC)).earlier == 7
    assert count_model_calls(tmp_path).earlier == 7  # no batch known: every hit taken as a replay
    assert count_model_calls(tmp_path, since=batch).as_dict() == {"requests": 14, "cached": 7, "earlier": 1}


def test_a_batch_s_own_cache_entries_make_no_replay_in_its_record(tmp_path, monkeypatch):
    import json
    import time
    from datetime import UTC, datetime, timedelta

    from roma_lab.experiments import _runner
    from roma_lab.trace import single_call_run

    quick = load_spec(REPO / "experiments" / "01_run_quickstart.toml")

    def fake_execute(spec, out_dir, params, kernel_env):  # hits on entries recorded a minute ago
        run = single_call_run(question="q", output="a", input_tokens=1, output_tokens=1, cost=0.0, model="m",
                              exchanges=exchanges(*[time.time() - 60] * 4))
        (out_dir / "traces").mkdir()
        (out_dir / "traces" / "t.json").write_text(run.to_json())
        for name in spec.outputs:
            (out_dir / name).write_text("x\n")

    monkeypatch.setattr(_runner, "_execute", fake_execute)
    monkeypatch.setattr(_runner, "finish_notebook", lambda *a, **k: True)
    root = tmp_path / "alone"
    assert _runner.run_experiment(quick, results_root=root).status == "completed"  # the run alone: a replay
    assert json.loads((root / quick.stem / "provenance.json").read_text())["extra"]["model_calls"]["earlier"] == 4
    root = tmp_path / "batch"
    (outcome,) = _runner.run_experiments([quick], results_root=root, progress=False,
                                         batch_started_at=datetime.now(UTC) - timedelta(minutes=5))
    assert outcome.status == "completed"
    assert json.loads((root / quick.stem / "provenance.json").read_text())["extra"]["model_calls"] == {
        "requests": 4, "cached": 4, "earlier": 0}


def test_a_replay_from_the_cache_is_no_cost_and_the_plan_says_so(tmp_path):
    """Notebook 42 recorded 12 s for a 53-minute study (every call served from the cache), and the plan
    priced it by those 12 s."""
    from roma_lab.experiments._plan_text import plan_lines

    web = load_spec(REPO / "experiments" / "42_measure_offline_web.toml")
    record_run(tmp_path, web.stem, minutes=0.2, extra={"model_calls": {"requests": 400, "cached": 400}}, n_tasks=30)
    (replayed,) = plan_study([web], results_root=tmp_path).notebooks
    assert replayed.cost_source == "estimate (the spec's measured run)"
    assert replayed.replay == "400 of 400 calls from the cache, recorded before its batch"
    assert f"  not priced by their runs here, replays from the completion cache: {web.stem}" in plan_lines(
        plan_study([web], results_root=tmp_path))
    # an older record without the count: counted from its folder's traces
    shutil.rmtree(tmp_path / web.stem)
    out = record_run(tmp_path, web.stem, minutes=0.2, extra={}, n_tasks=30)
    (out / "t.json").write_text(trace(40, 0))
    assert plan_study([web], results_root=tmp_path).notebooks[0].replay == \
        "40 of 40 calls from the cache, recorded before its batch"
    # a run that asked its model (a few calls from the cache, as a resumed run has) is a cost
    shutil.rmtree(tmp_path / web.stem)
    record_run(tmp_path, web.stem, minutes=50, extra={"model_calls": {"requests": 400, "cached": 30}}, n_tasks=30)
    (fresh,) = plan_study([web], results_root=tmp_path).notebooks
    assert fresh.cost_source.startswith("measured") and not fresh.replay
    assert fresh.seconds_per_unit == pytest.approx(50 * 60 / 30, rel=0.01)
    # most calls from the cache, but from entries its own batch recorded: a cost, as a fresh clone pays it
    shutil.rmtree(tmp_path / web.stem)
    record_run(tmp_path, web.stem, minutes=50, extra={"model_calls": {"requests": 400, "cached": 300, "earlier": 10}},
               n_tasks=30)
    assert not plan_study([web], results_root=tmp_path).notebooks[0].replay
    for damaged in ({"requests": 400, "cached": 300, "earlier": 301}, {"requests": 400, "cached": 300, "earlier": -1}):
        shutil.rmtree(tmp_path / web.stem)  # counts that cannot be: the folder's traces are counted instead
        out = record_run(tmp_path, web.stem, minutes=50, extra={"model_calls": damaged}, n_tasks=30)
        (out / "t.json").write_text(trace(40, 0))
        assert plan_study([web], results_root=tmp_path).notebooks[0].replay


def test_times_prints_predicted_against_measured_per_notebook(tmp_path, capsys):
    from roma_lab.experiments._cli import main

    web = load_spec(REPO / "experiments" / "42_measure_offline_web.toml")
    guard = load_spec(REPO / "experiments" / "44_compare_repeat_guard.toml")
    # 42 ran under a budget: its plan line predicted 40 min, it took 48; 44 ran without a plan: its spec predicts
    record_run(tmp_path, web.stem, minutes=48, extra={"plan": {"seconds": 2400.0, "n": 30},
                                                      "model_calls": {"requests": 400, "cached": 0}}, n_tasks=30)
    record_run(tmp_path, guard.stem, minutes=0.2, extra={"model_calls": {"requests": 300, "cached": 300}}, n_tasks=30)
    assert main(["--root", str(REPO), "times", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(" `"): [c.strip() for c in line.strip("|").split("|")[1:]]
            for line in out.splitlines()[2:] if line.startswith("| `")}
    assert rows[web.stem][-3:] == ["40.0 min (plan)", "1.20", "0 of 400, 0 recorded before its batch"]
    # the count the x1.25 is judged by: 42 is within; 44, a replay, is no measure of its prediction
    assert out.splitlines()[-1] == ("measured / predicted within x1.25 either way: 1 of 1 runs, median x1.20; "
                                    "faster: none; slower: none")
    runs = [(guard.measured_s, guard.measured_sizes), *((r.seconds, r.sizes) for r in guard.measured_runs)]
    spec_guess = sum(s / sizes["N_TASKS"] for s, sizes in runs) / len(runs) * 30  # its spec's runs' price at 30 tasks
    assert rows[guard.stem][-3] == f"{format_seconds(spec_guess)} (spec)"
    assert rows[guard.stem][-2] == f"{12 / spec_guess:.2f} (a replay)"
    assert rows[guard.stem][-1] == "300 of 300, 300 recorded before its batch"
    assert rows["01_run_quickstart"][-3:] == ["—", "—", "—"]  # not run
    record_run(tmp_path, "01_run_quickstart", minutes=1, extra={"plan": {"seconds": 100.0}})
    record_run(tmp_path, "02_measure_structure", minutes=1, extra={"plan": {"seconds": 40.0}})
    assert main(["--root", str(REPO), "times", "--results", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "measured / predicted within x1.25 either way: 1 of 3 runs, median x1.20; faster: 01_run_quickstart x0.60 "
        "(60 s); slower: 02_measure_structure x1.50 (60 s)")
    # a re-plan priced 02 at half its unit cost (drift 0.5): the count as predicted, then had it not been
    record_run(tmp_path, "02_measure_structure", minutes=1, extra={"plan": {"seconds": 40.0, "drift": 0.5}})
    assert main(["--root", str(REPO), "times", "--results", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "measured / predicted within x1.25 either way: 1 of 3 runs, median x1.20; faster: 01_run_quickstart x0.60 "
        "(60 s); slower: 02_measure_structure x1.50 (60 s)",
        "without the run's drift (each plan line over its factor): measured / predicted within x1.25 either way: "
        "1 of 3 runs, median x0.75; faster: 01_run_quickstart x0.60 (60 s), 02_measure_structure x0.75 (60 s); "
        "slower: none"]


# --- re-planned as the run goes ---

def test_a_budgeted_run_gives_what_the_finished_notebooks_did_not_spend_to_the_rest(tmp_path, monkeypatch, capsys):
    import json

    from roma_lab.experiments import _cli

    first, second = (load_spec(path) for path in STUDIES_21_26[:2])  # no pilot: they run in stem order
    runs, clock = [], [0.0]

    def fake_run(specs, **kwargs):
        runs.append((specs[0].stem, dict(kwargs["overrides"]), kwargs["plans"][specs[0].stem]))
        clock[0] += took.get(specs[0].stem, 0.0)
        return []

    monkeypatch.setattr(_cli, "run_experiments", fake_run)
    monkeypatch.setattr(_cli, "_clock", lambda: clock[0])
    planned = plan_study([first, second], results_root=tmp_path, budget_s=sizable_s(4200, 0))  # less the reserve
    one, two = planned.notebooks
    took = {first.stem: one.seconds / 4}  # it finished in a quarter of its predicted time
    assert _cli.main(["--root", str(REPO), "run", first.stem, second.stem, "--budget", "70min",
                      "--results", str(tmp_path)]) == 0
    (stem1, sizes1, plan1), (stem2, sizes2, plan2) = runs
    assert (stem1, sizes1["N_TASKS"], plan1["n"]) == (first.stem, one.n, one.n)  # the plan printed first
    left = sizable_s(4200, one.seconds / 4)
    again = plan_study([second], results_root=tmp_path, budget_s=left).notebooks[0]
    assert (stem2, sizes2["N_TASKS"]) == (second.stem, again.n) and again.n > two.n
    assert plan2["n"] == again.n and plan2["budget_s"] == pytest.approx(left)  # its provenance's plan entry
    assert f"{second.stem}: n = {two.n} -> {again.n}" in capsys.readouterr().out
    assert json.loads((tmp_path / "plan.json").read_text())["budget_s"] == sizable_s(4200, 0)  # as printed

    # a notebook that overran takes it out of the rest, never below the floor
    runs.clear()
    took = {first.stem: 10 * 3600.0}
    assert _cli.main(["--root", str(REPO), "run", first.stem, second.stem, "--budget", "70min",
                      "--results", str(tmp_path)]) == 0
    assert runs[1][1]["N_TASKS"] == 2 and runs[1][2]["budget_s"] == 0


def test_a_run_prices_what_is_left_by_how_long_its_finished_notebooks_took_against_their_prices(
        tmp_path, monkeypatch, capsys):
    """Twice a probe at a run's start read the machine 9-10% off the speed its notebooks then ran at: a
    re-plan prices what is left by the run's own notebooks (``run_drift``), once they were priced at 10
    minutes together. 21 finishing at 0.6 of its price makes 22 cheaper (a larger n) and 43, which runs
    at its own sizes last, predicted at 0.6 of its spec; its record says the factor. 20 calls no model:
    the model's speed misread is no measure of it, and it keeps its price. Only a notebook run at sizes
    a run its spec names timed measures the machine: elsewhere its items are others (03, 04 draw by n)."""
    from roma_lab.experiments import _cli
    from roma_lab.experiments._plan import DRIFT_EVIDENCE_S
    from roma_lab.experiments._runner import RunOutcome

    first, second = (load_spec(path) for path in STUDIES_21_26[:2])
    audit = load_spec(REPO / "experiments" / "20_audit_paper_numbers.toml")
    flags = load_spec(REPO / "experiments" / "43_measure_evidence_flags.toml")
    runs, clock, status, pace = [], [0.0], {}, 1.0

    def fake_run(specs, **kwargs):  # each takes ``pace`` of its price at x1
        entries = {s.stem: kwargs["plans"][s.stem] for s in specs}
        runs.append((entries, dict(kwargs["overrides"])))
        clock[0] += sum(pace * e["seconds"] / e["drift"] for e in entries.values())
        return [RunOutcome(s.stem, status.get(s.stem, "completed"), tmp_path / s.stem) for s in specs]

    monkeypatch.setattr(_cli, "run_experiments", fake_run)
    monkeypatch.setattr(_cli, "_clock", lambda: clock[0])
    specs = [first, second, audit, flags]
    monkeypatch.setattr(_cli, "scan_specs", lambda root: (specs, []))

    def run_all() -> list[dict]:
        runs.clear()
        code = _cli.main(["--root", str(REPO), "run", first.stem, second.stem, audit.stem, flags.stem, "--budget", "3h",
                          "--results", str(tmp_path)])
        assert code == (1 if status else 0)
        return [entries for entries, _ in runs]

    plan = plan_study([first, second, audit, flags], results_root=tmp_path, budget_s=sizable_s(3 * 3600, 0))
    one = plan.notebooks[0]
    assert one.seconds >= DRIFT_EVIDENCE_S and one.drift == 1.0
    pace = 0.6
    assert timed_seconds(first, {"N_TASKS": one.n}) is None  # no run of 21's timed it at this n
    assert run_all()[1][second.stem]["drift"] == 1.0
    # a run at that n, at its price there: the plan is the same, and 21's time now measures the machine
    specs[0] = dataclasses.replace(first, measured_runs=(*first.measured_runs, TimedRun(
        one.seconds, {"N_TASKS": one.n}, first.measured_tps)))
    again = plan_study(specs, results_root=tmp_path, budget_s=sizable_s(3 * 3600, 0)).notebooks[0]
    assert again.n == one.n and again.seconds == pytest.approx(one.seconds)
    plans = run_all()
    assert plans[0][first.stem]["drift"] == 1.0
    assert plans[1][second.stem]["drift"] == plans[2][flags.stem]["drift"] == 0.6
    left = sizable_s(3 * 3600, 0.6 * one.seconds)
    at_x1 = plan_study([second, audit, flags], results_root=tmp_path, budget_s=left).notebooks
    at_drift = plan_study([second, audit, flags], results_root=tmp_path, budget_s=left, drift=0.6).notebooks
    assert plans[1][second.stem]["n"] == at_drift[0].n > at_x1[0].n
    assert plans[2][flags.stem]["seconds"] == pytest.approx(0.6 * timed_seconds(flags, {}))
    assert plans[2][audit.stem]["drift"] == 1.0 and plans[2][audit.stem]["seconds"] == pytest.approx(timed_seconds(audit, {}))
    out = capsys.readouterr().out
    assert "re-plan: the 1 notebooks this run finished took" in out and "what is left is priced x0.60" in out

    # a run that failed, or one priced at less than the evidence a drift needs, prices nothing
    status[first.stem] = "failed"
    assert run_all()[1][second.stem]["drift"] == 1.0
    status.clear()
    monkeypatch.setattr("roma_lab.experiments._plan.DRIFT_EVIDENCE_S", one.seconds + 1)
    assert run_all()[1][second.stem]["drift"] == 1.0


def test_a_drift_is_the_run_s_own_ratio_once_there_is_evidence_and_within_its_bounds():
    from roma_lab.experiments._plan import DRIFT_BOUNDS, DRIFT_EVIDENCE_S, run_drift

    assert run_drift([]) == 1.0
    assert run_drift([(0.5 * DRIFT_EVIDENCE_S, DRIFT_EVIDENCE_S - 1)]) == 1.0  # too little priced to say
    assert run_drift([(300.0, 400.0), (250.0, 300.0)]) == 0.79  # pooled by time: 550 / 700, not a mean of ratios
    assert run_drift([(10 * 3600.0, 700.0)]) == DRIFT_BOUNDS[1]  # one that hung to its timeout
    assert run_drift([(1.0, 700.0)]) == DRIFT_BOUNDS[0]
    with pytest.raises(ValueError, match="positive factor"):
        plan_study([LEVELS], results_root=Path("/nonexistent"), drift=0.0)
    plan = plan_study([LEVELS], results_root=Path("/nonexistent"), budget_s=1800).notebooks[0]
    halved = plan_study([LEVELS], results_root=Path("/nonexistent"), budget_s=1800, drift=0.5).notebooks[0]
    assert halved.own_seconds == pytest.approx(plan.own_seconds / 2) and halved.drift == 0.5 and plan.drift == 1.0


def test_a_notebook_whose_finding_the_plan_pays_for_runs_first_so_no_overrun_shrinks_it(tmp_path, monkeypatch):
    """A fresh clone's 2-hour run re-planned 27 from n = 30 to 22 after the notebooks before it ran long;
    with a tenth of the budget kept back it starts at the 18 it needs, which a re-plan would shrink."""
    from roma_lab.experiments import _cli

    first = load_spec(STUDIES_21_26[0])
    runs = []

    def fake_run(specs, **kwargs):
        runs.append((specs[0].stem, dict(kwargs["overrides"])))
        return []

    monkeypatch.setattr(_cli, "run_experiments", fake_run)
    monkeypatch.setattr(_cli, "_clock", lambda: 10 * 3600.0 * len(runs))  # each overruns the whole budget
    (one, levels) = plan_study([first, LEVELS], results_root=tmp_path, budget_s=sizable_s(4200, 0)).notebooks
    assert levels.expected and not one.expected
    assert _cli.main(["--root", str(REPO), "run", first.stem, LEVELS.stem, "--budget", "70min",
                      "--results", str(tmp_path)]) == 0
    assert [stem for stem, _ in runs] == [LEVELS.stem, first.stem]
    assert runs[0][1]["N_TASKS"] == levels.n >= levels.pilots[0].needs and runs[1][1]["N_TASKS"] == 2


# --- a spec's figure scaled to this machine by a speed probe (a scripted probe: no model runs here) ---

def fake_probe(prompt=(600, 10.0), generated=(48, 2.0)) -> list[str]:
    """A stand-in for the probe's child: writes the speed record a model would, to the log it is named."""
    import sys

    from roma_lab.lm import SPEED_LOG_ENV

    script = (
        "import os\nfrom datetime import UTC, datetime, timedelta\nfrom roma_lab.lm import ModelSpeed\n"
        "now = datetime.now(UTC)\n"
        "s = ModelSpeed(model='fake.gguf', pid=1, threads=2, cpus=2, load_avg_1min=0.3, "
        "loaded_at=now - timedelta(seconds=5), closed_at=now, calls=1, call_seconds=4.0, "
        f"prompt_tokens={prompt[0]}, prompt_seconds={prompt[1]}, generated_tokens={generated[0]}, "
        f"generation_seconds={generated[1]})\n"
        f"open(os.environ[{SPEED_LOG_ENV!r}], 'a').write(s.model_dump_json() + '\\n')\n")
    return [sys.executable, "-c", script]


def test_a_probe_reads_the_model_s_own_counters_and_says_what_went_wrong(tmp_path):
    import sys

    from roma_lab.experiments._probe import PROBE_FILE, read_probe, run_probe

    probe = run_probe(tmp_path, command=fake_probe())
    assert (probe.prompt_tps, probe.generation_tps, probe.model) == (60.0, 24.0, "fake.gguf")
    assert read_probe(tmp_path) == probe and (tmp_path / PROBE_FILE).is_file()
    with pytest.raises(RuntimeError, match=r"failed \(exit 3\): no model here"):
        run_probe(tmp_path, command=[sys.executable, "-c", "import sys; sys.exit('no model here') if 0 else "
                                     "(print('no model here', file=sys.stderr), sys.exit(3))"])
    with pytest.raises(RuntimeError, match="recorded no prompt and generation speed"):
        run_probe(tmp_path, command=[sys.executable, "-c", "pass"])
    with pytest.raises(ValueError, match="is not one"):
        run_probe(tmp_path, lm="openai/gpt-4.1")  # a remote model is no speed of this machine
    assert read_probe(tmp_path) == probe  # a failed probe leaves the last good one


def test_a_probe_keeps_the_fastest_of_its_runs_and_says_when_the_machine_was_busy(tmp_path, capsys, monkeypatch):
    """A probe beside a test suite measured 66 / 20 tok/s where the quiet machine gives 86 / 28, and the
    2-hour plan it scaled funded nothing."""
    import json
    import os
    import subprocess
    import sys

    from roma_lab.experiments import _cli
    from roma_lab.experiments._probe import BUSY_SHARE, PROBE_FILE, _others_share, run_probe

    # each run of the child slower than the one before: the first, fastest, is kept
    counter = tmp_path / "runs"
    slower = fake_probe()
    slower[-1] = ("import pathlib\nc = pathlib.Path(%r)\nn = int(c.read_text()) if c.exists() else 0\n"
                  "c.write_text(str(n + 1))\nimport sys\n" % str(counter)) + slower[-1].replace(
                      "prompt_seconds=10.0", "prompt_seconds=10.0 * (n + 1)")
    probe = run_probe(tmp_path, command=slower)
    assert counter.read_text() == "3" and probe.prompt_tps == 60.0
    # other work beside it: every core burnt while the probe sleeps
    burners = [subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 20: pass"])
               for _ in range(os.cpu_count() or 1)]
    try:
        idle = fake_probe()
        idle[-1] = "import time\ntime.sleep(0.4)\n" + idle[-1]
        monkeypatch.setattr(_cli, "run_probe", lambda root, lm: run_probe(root, lm=lm, command=idle))
        assert _cli.main(["--root", str(REPO), "probe", "--results", str(tmp_path)]) == 0
    finally:
        for b in burners:
            b.kill()
            b.wait()
    err = capsys.readouterr().err
    assert "of this machine's CPU while it was probed: its speed is under-measured" in err
    assert json.loads((tmp_path / PROBE_FILE).read_text())["others_cpu_share"] > BUSY_SHARE
    # and the plan it scales says so, under its line of scaled times; a quiet probe's plan does not
    from roma_lab.experiments._plan_text import plan_lines

    named = dataclasses.replace(load_spec(REPO / "experiments" / "01_run_quickstart.toml"), measured_tps=(120.0, 48.0))
    warned = [line for line in plan_lines(plan_study([named], results_root=tmp_path)) if "warning:" in line]
    assert warned and warned[0].startswith("  warning: other processes took")
    quiet = {**json.loads((tmp_path / PROBE_FILE).read_text()), "others_cpu_share": 0.02}
    (tmp_path / PROBE_FILE).write_text(json.dumps(quiet))
    assert not [line for line in plan_lines(plan_study([named], results_root=tmp_path)) if "warning:" in line]
    # the arithmetic: busy ticks less the probes' own seconds, over all ticks
    tick = os.sysconf("SC_CLK_TCK")
    assert _others_share((100, 1000), (100 + 3 * tick, 1000 + 4 * tick), 1.0) == pytest.approx(0.5)
    assert _others_share((100, 1000), (100 + tick, 1000 + 4 * tick), 2.0) == 0.0  # never negative
    assert _others_share(None, (1, 2), 0.0) is None


def test_the_plan_scales_a_spec_s_figure_by_the_probe_and_only_where_the_spec_names_its_machine(tmp_path):
    from roma_lab.experiments._plan_text import plan_lines
    from roma_lab.experiments._probe import PROBE_FILE, run_probe, speed_ratio

    quick = dataclasses.replace(load_spec(REPO / "experiments" / "01_run_quickstart.toml"), measured_runs=())
    named = dataclasses.replace(quick, measured_tps=(120.0, 48.0))  # a machine twice as fast as the probe's
    run_probe(tmp_path, command=fake_probe())  # 60 / 24 tok/s
    quick = dataclasses.replace(quick, measured_tps=None)  # a spec that names no machine
    (scaled,), (plain,) = (plan_study([spec], results_root=tmp_path).notebooks for spec in (named, quick))
    assert scaled.seconds == pytest.approx(quick.measured_s * 2) and plain.seconds == quick.measured_s
    assert scaled.cost_source == "estimate (the spec's measured run, scaled by this machine's speed probe)"
    assert plain.cost_source == "estimate (the spec's measured run)"
    lines = plan_lines(plan_study([named], results_root=tmp_path))
    assert lines[2].split()[-1] == "probe" and "  1 of them scaled to this machine by its speed probe" in lines
    # the mix: an agent's call evaluates ~12 prompt tokens per generated one; prompt speed weighs most
    probe = run_probe(tmp_path, command=fake_probe(prompt=(600, 20.0)))  # prompt half as fast
    assert speed_ratio(probe, (60.0, 24.0)) == pytest.approx((12 / 30 + 1 / 24) / (12 / 60 + 1 / 24))
    (tmp_path / PROBE_FILE).write_text('{"model": "x", "prompt_tps": -1}')
    with pytest.warns(UserWarning, match="not a speed probe"):
        assert plan_study([named], results_root=tmp_path).notebooks[0].seconds == quick.measured_s


def test_a_run_at_sizes_its_spec_timed_is_priced_by_those_runs_and_other_sizes_by_the_price_per_unit(tmp_path):
    # the items a notebook draws depend on its n, so at an n its spec's runs ran at, what they took is
    # the price (their mean, each scaled by its own machine's probe); elsewhere the mean of every run's
    # price per unit (measured_s's and each named run's, each scaled by its own probe)
    from types import MappingProxyType

    from roma_lab.experiments._plan import predicted_seconds
    from roma_lab.experiments._probe import run_probe
    from roma_lab.experiments._spec import TimedRun
    from roma_lab.experiments._times import read_run_time, read_speed_log

    base = load_spec(REPO / "experiments" / "29_evaluate_browsecomp_table8.toml")
    unit = base.timeout_units[0]

    def at(n, runs, tps=None, **kw):
        spec = dataclasses.replace(base, parameters=MappingProxyType({unit: n}), measured_s=100.0,
                                   measured_sizes=MappingProxyType({unit: 2}), measured_tps=tps, measured_runs=runs)
        return spec, plan_study([spec], results_root=tmp_path, **kw).notebooks[0]

    three = (TimedRun(60.0, MappingProxyType({unit: 3}), None), TimedRun(90.0, MappingProxyType({unit: 3}), None))
    per_unit = (100.0 / 2 + 60.0 / 3 + 90.0 / 3) / 3  # every run's price per unit, not measured_s's 50 alone
    for n, seconds in ((3, 75.0), (2, 100.0), (4, 4 * per_unit)):  # 3: their mean; 2: measured_s itself
        spec, entry = at(n, three)
        assert (entry.n, entry.seconds, entry.seconds_per_unit) == (n, pytest.approx(seconds), pytest.approx(per_unit))
        assert f"n = {n}, {format_seconds(seconds)};" in entry.line
    # a notebook that calls the model (its spec names that machine's speed; no probe here yet) carries the drift
    assert at(3, (), tps=(60.0, 24.0), drift=0.5)[1].seconds == 75.0  # no run at 3: 3 x 50, the drift applied
    assert at(3, three, tps=(60.0, 24.0), drift=0.5)[1].seconds == 37.5
    assert at(3, three, drift=0.5)[1].seconds == 75.0  # one that calls none keeps its price
    # each run scaled by its own machine's probe: this one twice as fast as the probe (60 / 24 tok/s)
    run_probe(tmp_path, command=fake_probe())
    fast = (TimedRun(60.0, MappingProxyType({unit: 3}), (120.0, 48.0)), TimedRun(90.0, MappingProxyType({unit: 3}), None))
    assert at(3, fast)[1].seconds == pytest.approx((120.0 + 90.0) / 2)
    assert at(4, fast)[1].seconds == pytest.approx(4 * (100.0 / 2 + 120.0 / 3 + 90.0 / 3) / 3)  # per unit, scaled
    # a record without a plan line is predicted the same way; a run of its own here is its price, not the spec's
    spec, _ = at(3, three)
    record_run(tmp_path, spec.stem, minutes=3, extra={"overrides": {unit: 3}})
    ran = read_run_time(tmp_path, spec.stem, read_speed_log(tmp_path))
    own = plan_study([spec], results_root=tmp_path).notebooks[0]
    assert own.seconds == pytest.approx(180, abs=2) and own.cost_source.startswith("measured")
    assert predicted_seconds(spec, dataclasses.replace(ran, planned_s=None), None) == (75.0, "spec")


@pytest.mark.parametrize(("line", "message"), [
    ("measured_tps = [52.1]", "two positive numbers"),
    ("measured_tps = [52.1, 0]", "two positive numbers"),
    ('measured_tps = ["fast", 17.8]', "two positive numbers"),
])
def test_a_spec_names_its_machine_s_speed_as_two_positive_tok_s(tmp_path, line, message):
    path = copy_of_27(tmp_path, "")
    measured = f"measured_s = {LEVELS.measured_s:g}\n"
    text = re.sub(r"(?m)^measured_tps = .*\n", "", path.read_text())  # 27's own, replaced below
    path.write_text(text.replace(measured, f"{measured}{line}\n"))
    with pytest.raises(SpecError, match=message):
        load_spec(path)
    path.write_text(path.read_text().replace(line, "measured_tps = [52.1, 17.8]"))
    assert load_spec(path).measured_tps == (52.1, 17.8)
    path.write_text(path.read_text().replace(measured, ""))
    with pytest.raises(SpecError, match="it needs 'measured_s'"):
        load_spec(path)


def test_probe_on_the_command_line(tmp_path, monkeypatch, capsys):
    from roma_lab.experiments import _cli
    from roma_lab.experiments._probe import run_probe

    monkeypatch.setattr(_cli, "run_probe", lambda root, lm: run_probe(root, lm=lm, command=fake_probe()))
    assert _cli.main(["--root", str(REPO), "probe", "--results", str(tmp_path)]) == 0
    assert "prompt 60.0 tok/s, generation 24.0 tok/s" in capsys.readouterr().out
    monkeypatch.undo()
    assert _cli.main(["--root", str(REPO), "probe", "--lm", "openai/gpt-4.1", "--results", str(tmp_path)]) == 2
    (error,) = capsys.readouterr().err.strip().splitlines()
    assert error.startswith("error: a probe times the embedded model")


def test_the_reserve_is_spent_only_to_pay_a_finding_the_budget_can_pay(tmp_path, monkeypatch, capsys):
    """A probe that read the machine 10% slow priced 27's 18 L1 tasks out of a 2-hour plan kept 8% short:
    the reserve never costs a comparison a pilot expects to detect. At the least budget that pays 27's,
    the plan spends the reserve (and says so); at a budget whose share without the reserve pays it, it
    keeps it."""
    from roma_lab.experiments import _cli

    def funds(budget_s):
        return bool(plan_study([LEVELS], results_root=tmp_path, budget_s=budget_s).notebooks[0].expected)

    low, high = 60, 3 * 3600  # the least budget that pays it, by bisection
    while high - low > 1:
        low, high = (low, (low + high) // 2) if funds((low + high) // 2) else ((low + high) // 2, high)
    assert not funds(sizable_s(high, 0)) and funds(high)
    plan, kept = plan_budget([LEVELS], results_root=tmp_path, budget_s=high, spent_s=0)
    assert not kept and plan.budget_s == high and plan.notebooks[0].expected
    plan, kept = plan_budget([LEVELS], results_root=tmp_path, budget_s=high + 1000, spent_s=1000)
    assert not kept and plan.budget_s == high  # what went before comes out first
    roomy = high / (1 - RESERVE) + 60
    plan, kept = plan_budget([LEVELS], results_root=tmp_path, budget_s=roomy, spent_s=0)
    assert kept and plan.budget_s == sizable_s(roomy, 0) and plan.notebooks[0].expected
    # nothing a pilot expects, nothing to pay: the reserve is kept however short the budget
    plan, kept = plan_budget([LEVELS], results_root=tmp_path, budget_s=low / 2, spent_s=0)
    assert kept and not plan.notebooks[0].expected
    monkeypatch.setattr(_cli, "run_experiments", lambda specs, **kwargs: [])
    assert _cli.main(["--root", str(REPO), "run", LEVELS.stem, "--budget", f"{high}s",
                      "--results", str(tmp_path)]) == 0
    assert f"its {RESERVE:.0%} reserve for the machine's drift is spent, to pay a comparison" in capsys.readouterr().out
