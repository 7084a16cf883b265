"""``python -m roma_lab.experiments plan``: what each notebook's run will cost and can detect, before it runs.

Per notebook: the cost of one unit of its work (a task, for the notebooks sized by ``N_TASKS``), the n
a time budget buys, the minimum detectable effect (MDE) of a paired comparison of two of its
conditions at that n (``roma_lab.stats.plan_paired``), and, for a target MDE, the n it needs and what
that n costs in time and dollars.

**Where a cost comes from**, in this order: the notebook's last completed full-size run here (its
wall time over its units of work, so fixed costs count against the units: an over-estimate) unless it
was a replay from the completion cache (``_times.ModelCalls``), else the spec's ``measured_s`` (a run
on a machine of this kind; scaled to this one by its speed probe where the spec names that machine's
``measured_tps``, ``_probe.py``; at sizes the spec's ``measured_s`` or ``measured_runs`` ran at, the
mean of what those runs took, :func:`timed_seconds`; elsewhere the mean of their prices per unit), else the spec's per-unit timeout over 3 (each spec's timeout is 3x
a measured run, design/runner.md), and it is labelled with its source. A named remote model runs
``concurrency`` units at once; its dollars are its tokens per unit (the embedded model's counted
tokens on the measured run) at ``roma_lab.lm.token_price`` (LiteLLM's list price; unknown stays
unknown, never 0). A dollar cap (``--budget-usd``, per notebook) is reported as the n it buys at that
price per task; where no price per task is known the line says so (the cap itself is kept at run
time by ``roma_lab.evaluate``, whatever the plan predicted). A run's re-plans multiply every unit cost
by how long the notebooks it finished took against their prices (:func:`run_drift`, ``drift``), those
of the notebooks that call the model run at sizes a run their spec names timed (``_cli._measured``).

**The budget rule** (never from a score): notebooks without a size cost their measured or estimated
time, and every sized notebook its first 2 tasks a comparison; then the comparisons a spec's pilot
expects to detect are paid for, each sized for the end of its pilot's interval nearer 0, cheapest
first and only whole (:func:`expectation`); what is left is split equally among the sized notebooks,
each adding the tasks its share buys, never beyond the notebook's own size, its protocol's (a budget
shrinks a study to what it can pay for; it never makes one larger than its protocol). Share a
notebook cannot use goes back to the others, round after round. A notebook whose n can detect nothing
useful says so in one line; one the budget shrinks is priced at its own size, here and with a named
remote model (``PRICED_MODEL`` unless ``--lm`` names one). A notebook whose run an earlier plan of the
same budget started keeps that run's n (``kept``: a resumed run skips it or resumes its rows), paid
for at that n; only the others are sized.

**A comparison's n** is the notebook's n, or its n over the groups its spec's ``[plan] per`` splits
its tasks into (27: a comparison per level). A budget that cannot pay the notebook's own size in
every group, but can pay the n its pilot's primary comparison needs in that comparison's group (the one its name ends with,
"agent - single, L1"), runs that group alone (``NotebookPlan.sets``: 27's ``LEVELS = ["L1"]``).
**The discordance** (share of tasks on which two conditions disagree) is its primary comparison's pilot's (the spec's ``[plan.pilot]``), else read
from the notebook's earlier paired tables (``wins + losses`` over ``n`` in any ``*comparisons*.csv``
/ ``*paired*.csv``), and is labelled; without either the plan is the no-pilot worst case
(discordance 1).

**Nothing read is trusted.** A results file the plan cannot use as it stands (a record without time
zones or ending before it starts, sizes that count no work, a paired table whose counts are not
counts, a file that is no regular file) is left out with a warning naming it, and the plan goes on
from the next source: never a negative time, never a crash.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from roma_lab.results import PROVENANCE_FILE, open_regular
from roma_lab.stats import DEFAULT_STATS, n_for_mde, plan_paired

from ._probe import SpeedProbe, read_probe, speed_ratio
from ._spec import ExperimentSpec, ParamValue, Pilot, TimedRun, work_units
from ._times import RunTime, read_run_time, read_speed_log

__all__ = ["NotebookPlan", "StudyPlan", "check_target_mde", "parse_budget", "plan_budget", "plan_study",
           "run_drift", "sizable_s"]

PLAN_FILE = "plan.json"
#: The share of a time budget no plan sizes: the machine's speed drifts within a run, which a probe at
#: its start cannot see (two timed 2-hour runs here ended x0.91 and x1.11 of their plans); the
#: notebooks that run last at their own sizes have no re-plan to absorb it (design/planning.md).
RESERVE = 0.08
#: A run prices what is left by how long its finished notebooks took against their prices (``run_drift``), once
#: they were priced at this many seconds together: less is mostly one notebook's own items (design/planning.md).
DRIFT_EVIDENCE_S = 600.0
#: The factor a run's drift is held within: a notebook that hangs to its timeout prices no others at x10.
DRIFT_BOUNDS = (0.5, 2.0)
#: Each spec's timeouts are 3x a measured run (design/runner.md): their per-unit part over this is that rate.
SPEC_MARGIN = 3.0
MIN_N = 2
#: The size parameters that count tasks (items): a paired comparison's n. A notebook sized by anything
#: else (repeats, benchmarks, studies, metric calls) runs at its spec's sizes and costs what they cost.
TASK_UNITS = ("N_TASKS", "N_ITEMS")
#: The difference a line that can detect nothing names the n for (issue 42's 30-point difference).
UNDETECTABLE_TARGET = 0.30
#: The remote model a plan names the time and dollars of a study it cannot afford with, when ``--lm``
#: names none (the README's example of a priced model; its price: roma_lab.lm's one price rule).
PRICED_MODEL = "openai/gpt-4.1"
#: Where a cost comes from, after a run here (``measured (<date>, <model>)``): the spec's own figures.
SPEC_RUN = "estimate (the spec's measured run)"
SPEC_TIMEOUT = "estimate (spec timeout / 3)"
SPEC_PROBED = "estimate (the spec's measured run, scaled by this machine's speed probe)"
#: What a plan line says of an n kept from a run an earlier plan of the same budget started.
KEPT = " (kept: its run under this budget)"


def parse_budget(text: str) -> float:
    """A time budget as seconds: ``2h``, ``90min``, ``45m``, ``300s`` or a bare number of seconds."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(h|hours?|min|m|minutes?|s|sec|seconds?)?\s*", text)
    if not match:
        raise ValueError(f"a budget is a time such as 2h, 90min or 300s, got {text!r}")
    value, unit = float(match.group(1)), (match.group(2) or "s")
    seconds = value * (3600 if unit.startswith("h") else 60 if unit.startswith("m") else 1)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a budget must be a positive time, got {text!r}")
    return seconds


def check_target_mde(mde: float) -> float:
    """``mde`` as a target paired difference: a finite number in (0, 1] (scores lie in [0, 1]) that
    some n detects (``roma_lab.stats.n_for_mde`` at the no-pilot worst case, which needs the most
    tasks: at most its ``MAX_N``). ValueError naming the value otherwise."""
    if isinstance(mde, bool) or not isinstance(mde, int | float) or not (math.isfinite(mde) and 0 < mde <= 1):
        raise ValueError(f"a target MDE is a paired difference in (0, 1], such as 0.10; got {mde!r}")
    try:
        n_for_mde(mde)
    except ValueError as exc:
        raise ValueError(f"a target MDE of {mde:g} cannot be planned: {exc}") from None
    return float(mde)


@dataclass(frozen=True, slots=True)
class NotebookPlan:
    """One notebook's plan. ``unit``: the size parameter planned (None: a fixed-size notebook);
    ``seconds_per_unit`` and ``cost_source`` say what one unit costs and how that is known; ``n`` is
    what the budget buys (None: no budget given), ``mde`` the paired MDE at n, ``target_n`` the n a
    target MDE needs, ``dollars_n`` the n a dollar cap buys; seconds and dollars are predictions
    (dollars None: no price known). ``detects``: what n can detect, in words (the MDE, or "nothing"
    and the n a 0.30 difference needs), then what a target and a dollar cap need or buy; ``line``: the
    notebook's plan as one sentence (the runner prints it before the notebook runs)."""

    stem: str
    unit: str | None
    default_n: int | None
    seconds_per_unit: float
    cost_source: str
    n: int | None
    seconds: float
    dollars: float | None
    mde: float | None
    mde_worst: float | None
    discordance: float | None
    discordance_source: str
    target_mde: float | None
    target_n: int | None
    target_seconds: float | None
    target_dollars: float | None
    dollars_n: int | None  # the tasks the dollar cap buys (None: no cap, or no price per task known)
    detects: str
    line: str
    strata: int = 1  # the groups its comparisons are within ([plan] per): n is strata x comparison_n
    stratum: str = ""  # what one group is called ("level" for LEVELS)
    comparison_n: int | None = None  # the n of each comparison
    dollars_per_task: float | None = None  # None: no price per task known
    expected: tuple[Expectation, ...] = ()  # the pilot's comparisons n is expected to detect
    pilots: tuple[Expectation, ...] = ()  # every comparison its spec's pilot declares
    own_seconds: float | None = None  # at its own (protocol) size, here
    quote_seconds: float | None = None  # at its own size with the plan's quote model (StudyPlan.quote_lm)
    quote_dollars: float | None = None  # the same in dollars (None: unknown)
    replay: str = ""  # why its last run here is no cost: a replay from the completion cache ("" if none)
    kept: bool = False  # n is that of its run an earlier plan of this budget started (``plan_study``'s kept)
    sets: tuple[tuple[str, ParamValue], ...] = ()  # what it runs with besides n (27 narrowed: its LEVELS)
    drift: float = 1.0  # the factor its unit cost carries: its run's finished notebooks' time over their prices


def narrowed(sets: Sequence[tuple[str, ParamValue]]) -> tuple[list[ParamValue], tuple[tuple[str, ParamValue], ...]]:
    """What a narrowed plan's ``sets`` hold, in the one order ``_Sized.of`` writes them: the groups it runs
    in (its ``[plan] per`` parameter's value, 27's ``LEVELS = ["L1"]``), then what else ``[plan.alone]``
    sets (27's ``SYSTEMS``). ([], ()) when it is not narrowed."""
    if not sets:
        return [], ()
    (_, groups), *also = sets
    return list(groups), tuple(also)


@dataclass(frozen=True, slots=True)
class StudyPlan:
    budget_s: float | None
    lm: str | None
    concurrency: int
    notebooks: tuple[NotebookPlan, ...]
    budget_usd: float | None = None
    quote_lm: str = PRICED_MODEL  # the remote model its studies' own sizes are also priced with
    quote_concurrency: int = 1  # the units it runs at once
    busy_probe: str = ""  # what else ran while the probe it scaled by was taken ("" when quiet or unknown)
    reserve: float = 0.0  # the share of its budget ``plan_budget`` keeps back (0: no budget rule applied)

    def not_afforded(self) -> tuple[NotebookPlan, ...]:
        """The task-sized notebooks the budget shrinks below their own (protocol) size."""
        return tuple(p for p in self.notebooks if p.n is not None and p.default_n is not None and p.n < p.default_n)

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.notebooks)

    def to_json(self) -> str:
        def clean(value):  # NaN is not JSON: null
            return None if isinstance(value, float) and not math.isfinite(value) else value

        data = {"budget_s": self.budget_s, "budget_usd": self.budget_usd, "lm": self.lm, "concurrency": self.concurrency, "seconds": self.seconds,
                "notebooks": [{k: clean(v) for k, v in asdict(p).items()} for p in self.notebooks]}
        return json.dumps(data, indent=2) + "\n"

    def records(self) -> dict[str, dict]:
        """Per notebook stem, its plan as provenance records it (JSON values: NaN as null)."""
        plan = json.loads(self.to_json())
        return {p["stem"]: {**p, "budget_s": plan["budget_s"], "budget_usd": plan["budget_usd"], "lm": plan["lm"]}
                for p in plan["notebooks"]}

    def overrides(self) -> dict[str, dict[str, int]]:
        """Per notebook, the ``--set`` sizes this plan runs it at (only where the budget sets an n): its n,
        and its groups where the plan runs it in its primary comparison's alone."""
        return {p.stem: {p.unit: p.n, **dict(p.sets)} for p in self.notebooks if p.unit is not None and p.n is not None}


def _cost(spec: ExperimentSpec, ran: RunTime, record: Path, probe: SpeedProbe | None = None
          ) -> tuple[float, str, float | None]:
    """(seconds per unit of ``spec.timeout_units`` -- or of the whole run for a fixed notebook --, where
    that comes from, prompt + generated tokens per unit or None), ``ran`` being its last run here,
    recorded in ``record``; ``probe``: this machine's speed probe."""
    if ran.status == "completed" and ran.smoke is False and ran.seconds and not _replay(ran):
        units = _units_run(spec, dict(ran.overrides))
        if units is not None:
            tokens = sum(s.prompt_tokens + s.generated_tokens for s in ran.speeds) / units if ran.speeds else None
            return ran.seconds / units, f"measured ({ran.finished:%Y-%m-%d}, {ran.model})", tokens
        warnings.warn(f"{record}: its sizes {dict(ran.overrides)} count no work "
                      f"({', '.join(spec.timeout_units)} must be whole numbers >= 1 or non-empty lists); "
                      "its run time is not used", UserWarning, stacklevel=2)
    return _spec_cost(spec, probe)


def _replay(ran: RunTime) -> str:
    """Why ``ran``'s time is no cost of its notebook ("" when it is one): a replay from the completion
    cache took seconds where the model took minutes."""
    calls = ran.calls
    return "" if calls is None or not calls.replayed else f"{calls.earlier} of {calls.requests} calls from the cache, recorded before its batch"


def _here(run: TimedRun, probe: SpeedProbe | None) -> float:
    """A run a spec names, in seconds on this machine: scaled by its probe and this one's when both are known."""
    return run.seconds * (speed_ratio(probe, run.tps) if probe is not None and run.tps is not None else 1.0)


def _spec_cost(spec: ExperimentSpec, probe: SpeedProbe | None = None) -> tuple[float, str, None]:
    """The spec's figure for a unit: the mean over its whole runs (``measured_s``, ``measured_runs``:
    at a size none ran at, each one's items are as like those drawn) of a run's seconds over its units,
    each scaled to this machine when a probe of it and its own are known; else its timeout over 3."""
    if spec.measured_s is not None:  # what runs took on a machine like this one, at the sizes they name
        own = {**spec.defaults, **spec.parameters}
        prices = [_here(r, probe) / (work_units(spec.timeout_units, {**own, **r.sizes}) if spec.timeout_units else 1)
                  for r in spec.timed_runs()]
        return sum(prices) / len(prices), SPEC_PROBED if probe and spec.measured_tps is not None else SPEC_RUN, None
    base = spec.timeout_per_unit_s if spec.timeout_units else spec.timeout_s
    return base / SPEC_MARGIN, SPEC_TIMEOUT, None


def predicted_seconds(spec: ExperimentSpec, ran: RunTime, probe: SpeedProbe | None = None
                      ) -> tuple[float, str] | None:
    """What was predicted for ``ran`` before it ran, and by what: the plan line ``run --budget`` handed
    it ("plan"), else the spec's figure at its sizes ("spec"); None for a smoke run (scripted models,
    no prediction) or sizes that count no work. Never the run itself: a check out of sample."""
    if ran.planned_s is not None:
        return ran.planned_s, "plan"
    units = _units_run(spec, dict(ran.overrides))
    if ran.smoke is not False or units is None:
        return None
    per_unit, source, _ = _spec_cost(spec, probe)
    at = timed_seconds(spec, dict(ran.overrides), probe)
    return per_unit * units if at is None else at, "probe" if source == SPEC_PROBED else "spec"


def timed_seconds(spec: ExperimentSpec, asked: Mapping[str, ParamValue], probe: SpeedProbe | None = None
                  ) -> float | None:
    """The mean of what the spec's whole runs at the very units of a run with ``asked`` on top of its
    sizes took (``measured_s`` and each of ``measured_runs``; each scaled to this machine when a probe
    of it and its own are known); None when none ran there. The items a notebook draws depend on its
    sizes, so a run at another n did other items: only the runs' mean price per unit speaks for it."""
    own = {**spec.defaults, **spec.parameters}

    def units(sizes: Mapping[str, ParamValue]) -> dict[str, ParamValue]:
        return {name: {**own, **sizes}[name] for name in spec.timeout_units}

    there = [_here(r, probe) for r in spec.timed_runs() if units(r.sizes) == units(asked)]
    return sum(there) / len(there) if there else None


def _units_run(spec: ExperimentSpec, asked: Mapping[str, ParamValue]) -> int | None:
    """The units of work of a run at the spec's sizes with ``asked`` (its record's ``--set`` sizes) on
    top; None when a unit parameter there counts no work (not a whole number >= 1 or a non-empty list:
    an edited record, which would give a negative, infinite or meaningless cost)."""
    if not spec.timeout_units:
        return 1
    sizes = {**spec.defaults, **spec.parameters, **asked}
    if not all((isinstance(v, list) and v) or (type(v) is int and v >= 1) for v in (sizes[n] for n in spec.timeout_units)):
        return None
    return work_units(spec.timeout_units, sizes)


def _discordance(results_root: Path, stem: str) -> tuple[float | None, str]:
    """The median discordance of the notebook's earlier paired rows, and where it comes from."""
    import pandas as pd

    seen = []
    folder = results_root / stem
    for path in sorted([*folder.glob("*comparisons*.csv"), *folder.glob("*paired*.csv")]):
        try:
            with open_regular(path, "rb") as f:  # a folder or FIFO: DamagedFileError, never waited on
                table = pd.read_csv(f)
            if not {"wins", "losses", "n"} <= set(table.columns):
                continue
            counts = _paired_counts(table)
        except (OSError, ValueError) as exc:
            warnings.warn(f"{path}: cannot be used ({exc}); its discordance is left out", UserWarning, stacklevel=2)
            continue
        rows = counts[counts["n"] > 0]
        seen += list((rows["wins"] + rows["losses"]) / rows["n"])
    if not seen:
        return None, "no pilot: worst case (discordance 1)"
    value = float(pd.Series(seen).median())
    if value <= 0:
        return None, f"earlier rows disagreed on no task ({len(seen)} comparisons): worst case"
    return value, f"earlier rows (median of {len(seen)} comparisons)"


def _paired_counts(table):
    """The ``wins``, ``losses`` and ``n`` of a paired table as floats, rows missing one of them left
    out; ValueError when a count is text, negative or infinite, or wins and losses outnumber n."""
    import numpy as np
    import pandas as pd

    columns = table[["wins", "losses", "n"]]
    counts = columns.apply(pd.to_numeric, errors="coerce")
    text = counts.isna() & columns.notna()
    if text.any(axis=None):
        name = text.any().idxmax()
        raise ValueError(f"its {name} column holds {columns[name][text[name]].iloc[0]!r}, not a count")
    counts = counts.dropna().astype(float)
    if not np.isfinite(counts.to_numpy()).all() or (counts < 0).any(axis=None):
        raise ValueError("a count is negative or infinite")
    if (counts["wins"] + counts["losses"] > counts["n"]).any():
        raise ValueError("more wins and losses than tasks (n)")
    return counts


def _price(lm: str | None) -> float | None:
    """Dollars per token of ``lm`` (roma_lab.lm's ``token_price``), the mean of its input and output
    prices: a unit's tokens are counted together; None: unknown."""
    if not lm:
        return None
    from roma_lab.lm import token_price

    price = token_price(lm)
    return None if price is None else (price.input_usd + price.output_usd) / 2


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a spec's pilot (``[plan.pilot]``) says of one comparison: its paired difference over the
    pilot's tasks with the tables' 95% t-interval, its discordance, and the n a comparison needs to
    detect the interval's end nearer 0 (None: the interval holds 0, nothing is expected of it)."""

    name: str
    estimate: float
    low: float
    high: float
    discordance: float
    needs: int | None


def expectation(pilot: Pilot, *, alpha: float = DEFAULT_STATS.alpha,
                power: float = DEFAULT_STATS.power) -> Expectation:
    """The comparison a pilot's counts expect. A pilot's difference is an estimate: sized for the end
    of its interval nearer 0, the comparison keeps its power over the differences the pilot cannot
    rule out (sized for the estimate itself it would have it only if the estimate were the truth)."""
    from roma_lab.stats import paired_ci

    ties = pilot.n - pilot.wins - pilot.losses
    psi = (pilot.wins + pilot.losses) / pilot.n
    if pilot.n < 2 or psi == 0:
        d = (pilot.wins - pilot.losses) / pilot.n
        return Expectation(pilot.name, d, d, d, psi, None)
    ci = paired_ci([1] * pilot.wins + [0] * (pilot.losses + ties), [0] * pilot.wins + [1] * pilot.losses + [0] * ties)
    near = min(abs(ci.low), abs(ci.high)) if ci.low * ci.high > 0 else 0.0
    needs = None
    if near > 0:
        try:
            needs = n_for_mde(near, discordance=psi, alpha=alpha, power=power).n
        except ValueError:  # more tasks than any study runs
            needs = None
    return Expectation(pilot.name, ci.estimate, ci.low, ci.high, psi, needs)


def run_drift(finished: Sequence[tuple[float, float]]) -> float:
    """The factor that prices the rest of a run: the seconds its finished notebooks took over the seconds
    their prices said (``finished``: (measured, priced) each, priced without a drift), to two decimals,
    within ``DRIFT_BOUNDS``; 1 until they were priced at ``DRIFT_EVIDENCE_S`` together. A probe at the
    start of a run sees the model alone, and the machine's speed moves within a run (design/planning.md):
    these are the run's own notebooks, on this machine, now."""
    measured, priced = (sum(pair[i] for pair in finished) for i in (0, 1))
    if priced < DRIFT_EVIDENCE_S or not math.isfinite(measured):
        return 1.0
    low, high = DRIFT_BOUNDS
    return round(min(max(measured / priced, low), high), 2)


def sizable_s(budget_s: float, spent_s: float) -> float:
    """What a plan sizes of ``budget_s`` once ``spent_s`` of it went: the rest, less the reserve (never < 0)."""
    return max(budget_s * (1 - RESERVE) - spent_s, 0.0)


def plan_budget(specs: Sequence[ExperimentSpec], *, results_root: str | Path, budget_s: float, spent_s: float,
                **options) -> tuple[StudyPlan, bool]:
    """The plan of ``budget_s`` once ``spent_s`` of it went, less the reserve (``sizable_s``); unless the
    reserve is what keeps the budget from paying a comparison a pilot expects to detect: then the plan
    of all that is left, so a reserve never costs a finding the budget can pay (a probe that reads the
    machine slow had priced notebook 27 out of the 2-hour plan, design/planning.md). The plan (its
    ``reserve`` the share), and whether it keeps the reserve."""
    kept = replace(plan_study(specs, results_root=results_root, budget_s=sizable_s(budget_s, spent_s), **options),
                   reserve=RESERVE)
    whole = max(budget_s - spent_s, 0.0)
    funded = sum(len(p.expected) for p in kept.notebooks)
    if whole <= kept.budget_s or funded == sum(len(p.pilots) for p in kept.notebooks):
        return kept, True
    with warnings.catch_warnings():  # the first plan warned of every file it left out
        warnings.simplefilter("ignore")
        all_in = plan_study(specs, results_root=results_root, budget_s=whole, **options)
    if sum(len(p.expected) for p in all_in.notebooks) > funded:
        return replace(all_in, reserve=RESERVE), False
    return kept, True


def plan_study(specs: Sequence[ExperimentSpec], *, results_root: str | Path, budget_s: float | None = None,
               target_mde: float | None = None, lm: str | None = None, concurrency: int = 1,
               alpha: float = DEFAULT_STATS.alpha, power: float = DEFAULT_STATS.power, budget_usd: float | None = None,
               kept: Mapping[str, Mapping[str, ParamValue]] | None = None, drift: float = 1.0) -> StudyPlan:
    """The plan of ``specs`` under the budget rule of the module docstring. ``kept``: per task-sized
    notebook, the sizes its run under an earlier plan of this budget started with (its n, and its
    groups when the plan narrowed them; a resumed run skips it, or resumes its rows, at them): the
    budget pays for it at them and sizes only the others. ``drift``: the factor the unit cost of every
    notebook that calls the model (its spec names ``measured_tps``) is multiplied by (a run's re-plan:
    :func:`run_drift`)."""
    if not (math.isfinite(drift) and drift > 0):
        raise ValueError(f"drift is a positive factor, got {drift!r}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if target_mde is not None:
        target_mde = check_target_mde(target_mde)
    root = Path(results_root)
    price = _price(lm)
    from roma_lab.lm import in_process, max_concurrency

    remote = bool(lm) and not in_process(lm)  # the plan's own model is a priced one: it is the quote
    quote_lm = lm if remote else PRICED_MODEL
    quote_concurrency, quote_price = (concurrency, price) if remote else (max_concurrency(quote_lm), _price(quote_lm))
    speeds = read_speed_log(root)  # once for every notebook
    runs = {s.stem: read_run_time(root, s.stem, speeds) for s in specs}  # a record with impossible times: "unreadable"
    probe = read_probe(root)
    costs = {s.stem: _cost(s, runs[s.stem], root / s.stem / PROVENANCE_FILE, probe) for s in specs}
    # the drift corrects the model's speed as the probe read it: a notebook that calls no model (its spec
    # names no model speed) keeps its price (design/planning.md)
    drifts = {s.stem: drift if s.measured_tps is not None else 1.0 for s in specs}
    costs = {stem: (per_unit * drifts[stem], *rest) for stem, (per_unit, *rest) in costs.items()}

    def timed(spec: ExperimentSpec, asked: Mapping[str, ParamValue]) -> float | None:
        """What its spec's runs at these very sizes took (when its price is the spec's): the items it
        draws depend on its sizes, so a price per unit from other sizes is a guess where these are known."""
        at = timed_seconds(spec, asked, probe) if costs[spec.stem][1] in (SPEC_PROBED, SPEC_RUN) else None
        return None if at is None else at * drifts[spec.stem] / concurrency

    def sized_seconds(spec: ExperimentSpec, run: _Sized, n: int) -> float:
        """A sized notebook's seconds at ``n`` as it runs: its spec's runs at that n, else n tasks' price
        (narrowed to a group, per task: its spec's runs name no groups)."""
        at = None if run.sets else timed(spec, {run.unit: n})
        return n * run.per_task_s if at is None else at

    def fixed_seconds(spec: ExperimentSpec) -> float:  # at the spec's own sizes
        units = work_units(spec.timeout_units, {**spec.defaults, **spec.parameters}) if spec.timeout_units else 1
        at = timed(spec, {})
        return costs[spec.stem][0] * units / concurrency if at is None else at

    sized = {s.stem: _Sized.of(s, costs[s.stem][0] / concurrency, alpha, power) for s in specs if task_sized(s)}
    fixed_s = sum(fixed_seconds(s) for s in specs if not task_sized(s))
    kept = {stem: sizes for stem, sizes in (kept or {}).items() if stem in sized} if budget_s is not None else {}
    chosen = {stem: z for stem, z in sized.items()}  # each as it runs: whole, or in one group (z.narrow)
    for stem, sizes in kept.items():
        narrow = sized[stem].narrow
        if narrow is not None and all(sizes.get(name) == value for name, value in narrow.sets):
            chosen[stem] = narrow
    budget_n = None
    if budget_s is not None:  # the kept notebooks paid for at their n, the others sized by what is left
        kept_n = {stem: sizes[sized[stem].unit] for stem, sizes in kept.items()}
        by_stem = {s.stem: s for s in specs}
        left = budget_s - fixed_s - sum(sized_seconds(by_stem[stem], chosen[stem], n) for stem, n in kept_n.items())

        def allocate(runs: Mapping[str, _Sized]) -> dict[str, int]:
            return _allocate({stem: (z.own_k, z.step_s) for stem, z in runs.items()}, left,
                             first={stem: z.first_k for stem, z in runs.items() if z.first_k is not None})

        free = {stem: z for stem, z in sized.items() if stem not in kept}
        k = allocate(free)
        # one the budget cannot pay at its own size in every group runs its primary comparison's group
        # alone, when that pays for it there: the rest of its groups and systems detect nothing at the n
        # its share buys, and a budget paying every group at the pilot's n would size the finding at its
        # least (design/planning.md)
        narrow = {stem: z.narrow for stem, z in free.items() if z.narrow is not None and z.narrow.first_k
                  is not None and z.first_k is not None and k[stem] < z.own_k}
        if narrow:
            trial = allocate({**free, **narrow})
            free.update({stem: z for stem, z in narrow.items() if trial[stem] >= z.first_k})
            k = allocate(free)
        chosen.update(free)
        budget_n = {**kept_n, **{stem: k[stem] * z.strata for stem, z in free.items()}}
    plans = []
    for spec in specs:
        per_unit, source, tokens = costs[spec.stem]
        dollars_per_unit = None if price is None or tokens is None else price * tokens
        if spec.stem not in sized:
            seconds = fixed_seconds(spec)
            plans.append(NotebookPlan(
                stem=spec.stem, unit=None, default_n=None, seconds_per_unit=seconds, cost_source=source, n=None,
                seconds=seconds, dollars=None, mde=None, mde_worst=None, discordance=None, discordance_source="",
                target_mde=None, target_n=None, target_seconds=None, target_dollars=None, dollars_n=None,
                detects="", line=f"{spec.stem}: at its own sizes, {_time(seconds)}", replay=_replay(runs[spec.stem]),
                drift=drifts[spec.stem]))
            continue
        z, run = sized[spec.stem], chosen[spec.stem]  # z: its own; run: as it runs (in one group, or whole)
        n = z.own_n if budget_n is None else budget_n[spec.stem]
        k = n // run.strata  # the n of each comparison
        seconds = sized_seconds(spec, run, n)
        psi, psi_source = z.discordance if z.discordance[0] is not None else _discordance(root, spec.stem)
        at_n = plan_paired(max(k, 1), discordance=psi, alpha=alpha, power=power)
        target = None if target_mde is None else n_for_mde(target_mde, discordance=psi, alpha=alpha, power=power)
        money = None if dollars_per_unit is None else dollars_per_unit * z.others
        each = "" if run.strata == 1 else f" at n = {k} a {run.stratum}"
        if run.sets:  # narrowed: the groups it runs in
            each = f" in {', '.join(map(str, narrowed(run.sets)[0]))} alone"
        funded = tuple(e for e in run.expected if e.needs is not None and e.needs <= k)
        if not math.isfinite(at_n.mde):
            detects = "nothing"
        elif at_n.mde >= 0.5 and not funded:  # only differences no paper reports (a funded pilot's are larger)
            detects = f"{at_n.mde:.2f} only{each}"
        else:
            detects = f"{at_n.mde:.2f}{each}"
        # what it would take, unless the n is sized for a pilot's effect (the comparisons after the total say so)
        if target is None and not funded and (not math.isfinite(at_n.mde) or at_n.mde >= 0.5):
            try:
                needs = n_for_mde(UNDETECTABLE_TARGET, discordance=psi, alpha=alpha, power=power).n
            except ValueError:  # the conditions disagree too seldom for any n
                detects += f"; no n detects {UNDETECTABLE_TARGET:.2f}"
            else:
                if needs * run.strata > run.own_n:  # beyond its protocol; within it, the plan's total names the time
                    detects += f"; needs n = {needs * run.strata}, ≈ {_time(needs * run.strata * z.per_task_s)} here"
        # why it runs in one group (the table says it after the total, in its 100 columns)
        why = (f"; {run.expected[0].name} needs n = {run.first_k} a {z.stratum}, its own {z.own_n} not paid"
               if run.sets else "")
        if target is not None:
            detects += f"; {target_mde:.2f} needs n = {target.n * run.strata}, ≈ {_time(target.n * run.strata * z.per_task_s)}"
            # no --lm: each notebook's own model, the embedded one by the notebook contract, bills nothing
            detects += (f", ${target.n * run.strata * money:,.2f}" if money is not None
                        else ", $ unknown" if lm and price != 0.0 else "")
        dollars_n = None
        if budget_usd is not None:
            if money is None:
                detects += f"; ${budget_usd:,.2f} buys an unknown n"
            elif money == 0:
                detects += f"; ${budget_usd:,.2f}: its model costs no dollars"
            else:
                dollars_n = math.floor(round(budget_usd / money, 9))  # 1.0 // 0.002 is 499.0 in floats
                detects += f"; ${budget_usd:,.2f} buys n = {dollars_n} (${money:,.4f} a task)"
        plans.append(NotebookPlan(
            stem=spec.stem, unit=z.unit, default_n=z.own_n, seconds_per_unit=run.per_task_s, cost_source=source, n=n,
            seconds=seconds, dollars=None if money is None else n * money, mde=at_n.mde,
            mde_worst=at_n.mde_worst, discordance=psi, discordance_source=psi_source, target_mde=target_mde,
            target_n=None if target is None else target.n * run.strata,
            target_seconds=None if target is None else target.n * run.strata * z.per_task_s,
            target_dollars=None if target is None or money is None else target.n * run.strata * money,
            dollars_n=dollars_n, detects=detects,
            line=f"{spec.stem}: n = {n}{KEPT if spec.stem in kept else ''}, {_time(seconds)}; detects {detects}{why}",
            strata=run.strata, stratum=run.stratum, comparison_n=k, dollars_per_task=money,
            expected=funded,
            pilots=z.expected, own_seconds=z.own_n * z.per_task_s,
            # a remote model runs its units quote_concurrency at once, each as long as here (the --lm rule)
            quote_seconds=z.own_n * z.per_task_s * (1 if remote else concurrency / quote_concurrency),
            quote_dollars=(None if quote_price is None or tokens is None
                           else z.own_n * z.others * tokens * quote_price), replay=_replay(runs[spec.stem]),
            kept=spec.stem in kept, drift=drifts[spec.stem], sets=run.sets))
    return StudyPlan(budget_s, lm, concurrency, tuple(plans), budget_usd, quote_lm, quote_concurrency,
                     busy_probe=probe.busy() if probe is not None else "")


def task_sized(spec: ExperimentSpec) -> bool:
    """Whether the plan sizes ``spec`` by its task count (its first unit is ``N_TASKS`` or ``N_ITEMS``)."""
    return bool(spec.timeout_units) and spec.timeout_units[0] in TASK_UNITS


@dataclass(frozen=True, slots=True)
class _Sized:
    """A task-sized notebook as the budget sees it: its own n, what a task costs, the groups its
    comparisons are within (``strata``; the budget buys a task in each at a time: a ``step``), and
    the comparisons its pilot expects to detect."""

    unit: str
    own_n: int
    per_task_s: float  # a task with its other units (runs, models...) at the spec's sizes
    others: int
    strata: int
    stratum: str  # what one group is called ("level" for LEVELS)
    expected: tuple[Expectation, ...]
    discordance: tuple[float | None, str]  # the primary comparison's, from its pilot (None: none declared)
    sets: tuple[tuple[str, ParamValue], ...] = ()  # what it runs with besides its n (its narrowed groups)
    narrow: _Sized | None = None  # it in its primary comparison's group alone (27: L1), when its pilot names one

    @property
    def own_k(self) -> int:
        return max(1, self.own_n // self.strata)

    @property
    def step_s(self) -> float:
        return self.per_task_s * self.strata

    @property
    def first_k(self) -> int | None:
        """The n a comparison needs to detect every comparison its pilot expects within its own size."""
        needs = [e.needs for e in self.expected if e.needs is not None and e.needs <= self.own_k]
        return max(needs) if needs else None

    @classmethod
    def of(cls, spec: ExperimentSpec, per_unit_s: float, alpha: float, power: float) -> _Sized:
        sizes = {**spec.defaults, **spec.parameters}
        own = sizes[spec.timeout_units[0]]
        others = work_units(spec.timeout_units[1:], sizes) if spec.timeout_units[1:] else 1
        expected = tuple(expectation(p, alpha=alpha, power=power) for p in spec.pilots)
        primary = expected[0] if expected else None
        psi = ((primary.discordance, f"pilot: {spec.pilot_source}") if primary is not None and primary.discordance > 0
               else (None, ""))
        whole = cls(unit=spec.timeout_units[0], own_n=len(own) if isinstance(own, list) else int(own),
                    per_task_s=per_unit_s * others, others=others, strata=spec.strata(),
                    stratum=(spec.per or "").lower().removesuffix("s"), expected=expected, discordance=psi)
        groups = sizes[spec.per] if spec.per else []
        group = _group(spec.pilots[0].name, groups) if spec.pilots and whole.strata > 1 else None
        if group is None or primary.needs is None:
            return whole
        # its own size in that group is its protocol's there: own_n over its groups; with [plan.alone], the
        # primary comparison alone (27: its systems only), at that share of a task's time
        mine = (primary,) if spec.alone else tuple(
            e for e, pilot in zip(expected, spec.pilots, strict=True) if _group(pilot.name, groups) == group)
        return replace(whole, narrow=replace(
            whole, own_n=whole.own_k, strata=1, expected=mine, sets=((spec.per, [group]), *spec.alone.items()),
            per_task_s=whole.per_task_s * spec.alone_share))


def _group(name: str, groups: Sequence[object]) -> str | None:
    """The group of ``[plan] per`` a pilot's comparison is within: the one its name ends with after a
    comma ("agent - single, L1": L1); None when it names none."""
    last = name.rsplit(",", 1)[-1].strip() if "," in name else None
    return last if last is not None and last in groups else None


def _allocate(sizes: dict[str, tuple[int, float]], seconds: float, first: Mapping[str, int] | None = None
              ) -> dict[str, int]:
    """The budget rule's n per notebook: (own n, seconds a step) each, ``seconds`` left after the fixed
    notebooks. Each starts at ``MIN_N`` (or its own n, if smaller); then each in ``first`` is raised to
    the n given there, the cheapest first, when the rest of the budget pays for all of it (a size that
    does not detect what it is raised for buys nothing first); the rest is split equally, round after
    round, among the notebooks still below their own n."""
    n = {stem: min(MIN_N, own) for stem, (own, _) in sizes.items()}
    left = seconds - sum(n[stem] * cost for stem, (_, cost) in sizes.items())
    wanted = {stem: min(k, sizes[stem][0]) for stem, k in (first or {}).items() if stem in sizes}
    for stem in sorted(wanted, key=lambda s: ((wanted[s] - n[s]) * sizes[s][1], s)):
        extra = (wanted[stem] - n[stem]) * sizes[stem][1]
        if wanted[stem] > n[stem] and extra <= left:
            n[stem], left = wanted[stem], left - extra
    while left > 0:
        open_ = [stem for stem, (own, _) in sizes.items() if n[stem] < own]
        if not open_:
            break
        share, spent = left / len(open_), 0.0
        for stem in open_:
            own, cost = sizes[stem]
            more = min(own - n[stem], int(share // cost) if cost > 0 else own - n[stem])
            n[stem] += more
            spent += more * cost
        if spent == 0:  # no share buys another task: the rest of the budget stays unspent
            break
        left -= spent
    return n


def write_plan(plan: StudyPlan, results_root: str | Path) -> Path:
    from roma_lab.results import write_text_atomic

    return write_text_atomic(Path(results_root) / PLAN_FILE, plan.to_json())


def _time(seconds: float) -> str:
    from ._times import format_seconds

    return format_seconds(seconds)
