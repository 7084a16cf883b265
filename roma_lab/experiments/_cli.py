"""Command line: ``list`` the experiments with their status, ``plan`` what a run of them will cost and
can detect, ``run`` some or all of them (``--budget`` sizes them by the plan, ``--budget-usd`` caps each
notebook's dollars), ``times`` prints the run-time table (markdown) from each results folder's provenance.json,
``probe`` times the embedded model on this machine for the plan.

A bad value or a known error is one line on stderr starting ``error:`` and exit code 2, before anything
runs: never a traceback, never the usage (``--help`` shows it)."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from roma_lab._cli import CommandParser
from roma_lab._environment import ENV
from roma_lab.cluster import (
    ClusterConnectError,
    WorkerEnvironmentError,
    resolve_cluster,
)
from roma_lab.lm import SPEED_LOG_ENV
from roma_lab.results import ProvenanceError, default_repo_root, read_provenance

from ._key import experiment_status, run_key
from ._plan import (StudyPlan, check_target_mde, parse_budget, plan_budget, plan_study, predicted_seconds,
                    run_drift, task_sized, timed_seconds, write_plan)
from ._plan_text import plan_lines
from ._probe import PROBE_FILE, PROBE_RUNS, read_probe, run_probe
from ._runner import run_experiments
from ._spec import (
    ExperimentSpec,
    OverrideError,
    ParamValue,
    SpecError,
    check_overrides,
    parse_overrides,
    scan_specs,
)
from ._times import SPEED_LOG, agreement_line, format_seconds, read_run_time, run_times, times_markdown


def _parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m roma_lab.experiments", description=__doc__)
    parser.add_argument(
        "--root",
        type=Path,
        help="project root holding experiments/ and notebooks/ (default: the checkout roma_lab is installed from)",
    )
    where = CommandParser(add_help=False)
    where.add_argument("--smoke", action="store_true", help="apply each spec's [smoke] overrides (small sizes, test models)")
    where.add_argument("--results", type=Path, help="results folder (default: <root>/results, smoke: <root>/results/smoke)")
    shared = CommandParser(add_help=False, parents=[where])
    shared.add_argument(
        "--lm",
        default=os.environ.get(ENV.lm),
        help="model name passed as LM to notebooks that declare it (default: $ROMA_LAB_LM, else the notebook's own)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", parents=[shared], help="show every experiment and its status")
    # times reads what the runs recorded, whatever model they named
    commands.add_parser("times", parents=[where], help="print the run-time table (markdown) from results/*/provenance.json")
    probe = commands.add_parser("probe", parents=[where],
                                help="time a few seconds of the embedded model here; plan scales the specs' figures by it")
    probe.add_argument("--lm", default="local", help="the embedded model to probe (default: local)")
    budget = CommandParser(add_help=False)
    budget.add_argument("--budget", help="a time budget such as 2h or 90min: each sized notebook runs at the n its "
                                         "share buys (the rule: design/planning.md)")
    budget.add_argument("--budget-since", type=float, default=None, metavar="EPOCH_S",
                        help="when --budget's clock started, in seconds since the epoch (default: when this command "
                             "starts): `make reproduce` passes its own start, so its set-up and the speed probe "
                             "count against the budget")
    budget.add_argument("--budget-usd", type=float, default=None,
                        help="a dollar cap per notebook: plan says how many tasks it buys where a price per task is "
                             "known; run hands it to each notebook's evaluations ($ROMA_LAB_BUDGET_USD), which stop "
                             "starting tasks at it (a rerun with a higher cap resumes)")
    budget.add_argument("--concurrency", type=int, default=None,
                        help="units of work a named remote model runs at once (default: its max_concurrency)")
    plan = commands.add_parser("plan", parents=[shared, budget],
                               help="print each notebook's cost per unit, the n a budget buys and its MDE; writes plan.json")
    plan.add_argument("stems", nargs="*", metavar="STEM", help="experiments to plan, by notebook stem")
    plan.add_argument("--all", action="store_true", help="plan every experiment")
    plan.add_argument("--mde", type=float, default=None, help="a target paired difference: the n and cost it needs")
    run = commands.add_parser("run", parents=[shared, budget], help="run experiments, skipping completed ones")
    run.add_argument("stems", nargs="*", metavar="STEM", help="experiments to run, by notebook stem")
    run.add_argument("--all", action="store_true", help="run every experiment")
    run.add_argument("--force", action="store_true", help="re-run even when already completed")
    run.add_argument("--fresh", action="store_true",
                     help="ask the embedded model again instead of replaying its recorded completions (implies --force)")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        dest="assignments",
        metavar="NAME=VALUE",
        help="set a parameter of the notebooks' parameters cell for this run, e.g. --set N_TASKS=100 "
             "(repeatable; a Python literal of the parameter's type, a bare word for a string; "
             "every notebook run must declare it)",
    )
    run.add_argument(
        "--cluster",
        help="Dask cluster to run on: 'in-process', 'local:<workers>' or a scheduler address such as "
             "tcp://host:8786 (default: $ROMA_LAB_CLUSTER, else in-process)",
    )
    run.add_argument(
        "--per",
        choices=("item", "notebook"),
        default="item",
        help="on a cluster, send each benchmark item (notebooks run here in order) or each whole notebook "
             "(items run in its kernel) to a worker (default: item)",
    )
    return parser


def _assignments(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    """``--set NAME=VALUE`` arguments as name -> value text (typed per notebook by parse_overrides)."""
    texts: dict[str, str] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            parser.error(f"run: --set takes NAME=VALUE, got {item!r}")
        if name in texts:
            parser.error(f"run: --set {name} given twice")
        texts[name] = text
    return texts


def _overrides(specs: list[ExperimentSpec], texts: dict[str, str]) -> dict[str, ParamValue]:
    """The ``--set`` values, typed by every selected notebook's parameters cell; OverrideError naming
    each notebook that does not declare them, or gives one of them another type."""
    typed: dict[str, tuple[str, ParamValue]] = {}  # name -> (the first stem that typed it, value)
    refused = []
    for spec in specs:
        try:
            values = parse_overrides(spec, texts)
        except OverrideError as exc:
            refused.append(str(exc))
            continue
        for name, value in values.items():
            if name in typed and (type(typed[name][1]), typed[name][1]) != (type(value), value):
                refused.append(f"{spec.stem}: --set {name}={texts[name]} means {value!r} here but "
                               f"{typed[name][1]!r} in {typed[name][0]}; run them separately")
            typed.setdefault(name, (spec.stem, value))
    if refused:
        raise OverrideError("\n".join(refused))
    return {name: value for name, (_, value) in typed.items()}


def _own_folder(results_root: Path, specs: list[ExperimentSpec], values: dict[str, ParamValue]) -> Path:
    """Where a run goes whose ``--set`` values change what a notebook does (a goal, a task file), not
    only its size: a folder of its own under ``results/own/``, named by those values, so the default
    run is never replaced (and ``list`` and ``times`` keep reading it); sizes alone keep the folder."""
    import hashlib
    import json

    sizes = {name for spec in specs for name in spec.timeout_units}
    content = {name: value for name, value in sorted(values.items()) if name not in sizes}
    if not content:
        return results_root
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, default=repr).encode()).hexdigest()[:10]
    return results_root / "own" / digest


def _list_lines(specs: list[ExperimentSpec], status: dict[str, str]) -> list[str]:
    """``list`` in 100 columns: each notebook's status and the paper artefact it reproduces, under a
    heading naming the paper (one heading per run of notebooks of the same paper)."""
    stem_w = max([len("notebook"), *(len(s.stem) for s in specs)])
    status_w = max([len("status"), *map(len, status.values())])
    lines, paper = [f"  {'notebook'.ljust(stem_w)}  {'status'.ljust(status_w)}  reproduces"], None
    for spec in specs:
        if spec.paper != paper:
            paper = spec.paper
            lines.append(paper)
        lines.append(f"  {spec.stem.ljust(stem_w)}  {status[spec.stem].ljust(status_w)}  {spec.table}".rstrip())
    return lines


def _shown(path: Path) -> str:
    """``path`` as a person types it here: relative to the working folder when inside it."""
    path = Path(path).resolve()
    return path.relative_to(Path.cwd()).as_posix() if path.is_relative_to(Path.cwd()) else str(path)


# jupyter_server's idle culling: a kernel with no browser connected (its notebook closed) and idle 10
# minutes is shut down, checked every minute; one with its notebook open, or busy, never is
# (cull_connected and cull_busy stay False). JupyterLab otherwise keeps every kernel it started.
KERNEL_CULLING = ("--MappingKernelManager.cull_idle_timeout=600", "--MappingKernelManager.cull_interval=60")


def open_command(notebook: Path, root: Path) -> str:
    """The command that opens ``notebook`` in JupyterLab with the file browser at ``root`` (the
    repository root, so notebooks/ and results/ can be reached; ``jupyter lab <file>`` alone roots it
    at the file's folder), shutting down the kernels of closed notebooks (``KERNEL_CULLING``). A
    notebook outside ``root`` (``--results`` elsewhere) roots it at its own results folder instead,
    since JupyterLab opens nothing outside its root."""
    import shlex

    notebook = Path(notebook).resolve()
    if not notebook.is_relative_to(Path(root).resolve()):
        root = notebook.parent.parent
    here = Path(sys.executable).parent / "jupyter"  # the jupyter of this environment, else the one on PATH
    jupyter = _shown(here) if here.exists() else "jupyter"
    words = [jupyter, "lab", f"--ServerApp.root_dir={_shown(root)}", _shown(notebook), *KERNEL_CULLING]
    return shlex.join(words) + (" --allow-root" if os.geteuid() == 0 else "")


def _plan_options(args: argparse.Namespace) -> dict:
    """``plan_study``'s options from the command line (the budget aside)."""
    concurrency = args.concurrency
    if concurrency is None:
        from roma_lab.lm import in_process, max_concurrency

        concurrency = 1 if not args.lm or in_process(args.lm) else max_concurrency(args.lm)
    return {"lm": args.lm, "concurrency": concurrency, "target_mde": getattr(args, "mde", None),
            "budget_usd": args.budget_usd}


@dataclass(frozen=True, slots=True)
class _Kept:
    """A task-sized notebook's run an earlier plan of this budget started: the sizes the plan gave it
    (its n, and its groups where the plan narrowed them), and the seconds it recorded (0 when
    unknown: killed hard)."""

    sizes: dict[str, ParamValue]
    seconds: float


def _kept(selected: list[ExperimentSpec], results_root: Path, args: argparse.Namespace,
          overrides: dict[str, ParamValue]) -> dict[str, _Kept]:
    """Per notebook stem, the run a plan of this ``--budget`` started in its folder (its record's
    ``extra.plan``) that the runner would take as this run at that n: a completed one is skipped, an
    unfinished one resumes its rows. A resumed run keeps that n, whatever a new plan would give it
    (the plan reads results/ and the time left, so it would size it anew and run it again from
    nothing); only the notebooks not yet started are sized. Nothing under ``--force``: it starts over."""
    if args.budget_s is None or getattr(args, "force", False) or getattr(args, "fresh", False):
        return {}
    kept = {}
    for spec in selected:
        out_dir = (results_root if args.results else _own_folder(results_root, [spec], overrides)) / spec.stem
        try:
            record = read_provenance(out_dir)
        except (FileNotFoundError, ProvenanceError):
            continue
        plan = record.extra.get("plan")
        if (not isinstance(plan, dict) or not task_sized(spec) or plan.get("unit") != spec.timeout_units[0]
                or plan.get("run_budget_s", plan.get("budget_s")) != args.budget_s):  # older records: their budget
            continue
        try:
            planned = {spec.timeout_units[0]: plan.get("n"), **dict(plan.get("sets") or [])}
            sizes = check_overrides(spec, {**overrides, **planned})
        except (OverrideError, TypeError, ValueError):  # an edited record: no sizes a run starts with
            continue
        if run_key(spec, out_dir=out_dir, smoke=args.smoke, lm=args.lm, overrides=sizes).matches(record):
            kept[spec.stem] = _Kept({name: sizes[name] for name in planned},
                                    read_run_time(out_dir.parent, spec.stem).seconds or 0.0)
    return kept


def _records(plan: StudyPlan, budget_s: float | None) -> dict[str, dict]:
    """The plan entry each notebook's provenance records, with the budget of the whole run (a re-plan's
    own ``budget_s`` is the time that was left), by which a resumed run finds the runs it started."""
    return {stem: {**entry, "run_budget_s": budget_s} for stem, entry in plan.records().items()}


def _plan(selected: list[ExperimentSpec], results_root: Path, args: argparse.Namespace,
          kept: dict[str, _Kept]) -> StudyPlan:
    """Print the plan (the line of each notebook, then the total) and write plan.json beside the results."""
    options = {"kept": {stem: k.sizes for stem, k in kept.items()}, **_plan_options(args)}
    if args.budget_s is None:
        plan = plan_study(selected, results_root=results_root, budget_s=None, **options)
    else:
        plan, reserve = plan_budget(selected, results_root=results_root, budget_s=args.budget_s,
                                    spent_s=args.before_s, **options)
        went = (f"{format_seconds(args.before_s)} of it went before this command (--budget-since: set-up, the "
                f"speed probe); " if args.before_s else "")
        keeps = (f"{plan.reserve:.0%} of it is kept for the machine's drift in speed" if reserve else
                 f"its {plan.reserve:.0%} reserve for the machine's drift is spent, to pay a comparison a pilot "
                 f"expects to detect")
        print(f"the {format_seconds(args.budget_s)} budget: {went}{keeps}; the plan sizes {format_seconds(plan.budget_s)}")
    for line in plan_lines(plan):
        print(line)
    print(f"plan written to {_shown(write_plan(plan, results_root))}")
    return plan


#: The run's clock (a test replaces it).
_clock = time.monotonic
#: The wall clock --budget-since is read against (a test replaces it).
_now = time.time


def _replan(group: list[ExperimentSpec], rest: list[ExperimentSpec], results_root: Path, args: argparse.Namespace,
            spent_s: float, records: dict[str, dict], kept: dict[str, _Kept], drift: float = 1.0
            ) -> tuple[dict[str, ParamValue], dict[str, dict]]:
    """Before a group of notebooks runs under ``--budget``: the notebooks not yet run (``rest``, the
    group among them, the ``kept`` ones at their n) planned again with what is left of the budget once
    ``spent_s`` went (less the reserve, ``sizable_s``), so what the finished ones did not spend goes to
    the rest (and what they overspent comes out of it), every unit cost times ``drift`` (``run_drift``
    of the notebooks this run finished). The sizes of a sized notebook's group (empty for the notebooks
    that run at their own sizes), and the plan records with the group's new entries; a line says so
    when its n changes."""
    import warnings

    with warnings.catch_warnings():  # the first plan warned of every file it left out
        warnings.simplefilter("ignore")
        plan, _ = plan_budget(rest, results_root=results_root, budget_s=args.budget_s, spent_s=spent_s,
                              kept={stem: k.sizes for stem, k in kept.items()}, drift=drift, **_plan_options(args))
    entries = _records(plan, args.budget_s)
    stem = group[0].stem
    if entries[stem]["n"] != records[stem]["n"]:
        print(f"re-plan with {format_seconds(max(args.budget_s - spent_s, 0.0))} of the budget left: {stem}: "
              f"n = {records[stem]['n']} -> {entries[stem]['n']}", flush=True)
    return plan.overrides().get(stem, {}), {**records, **{s.stem: entries[s.stem] for s in group}}


def _drift_line(finished: list[tuple[float, float]], factor: float) -> str:
    took, priced = (sum(pair[i] for pair in finished) for i in (0, 1))
    return (f"re-plan: the {len(finished)} notebooks this run finished took {format_seconds(took)} where their prices "
            f"said {format_seconds(priced)}: what is left is priced x{factor:.2f}")


def _measured(group: list[ExperimentSpec], ran: list, where: Path, kept: dict[str, _Kept], took: float,
              sizes: Mapping[str, ParamValue]) -> float | None:
    """``took``, the seconds a sized notebook's run took, as a measure of the machine's speed for the
    rest of the run; None when it is none: not one sized notebook run whole (a group of the rest, a kept
    run resumed or skipped), not completed, a replay from the completion cache (seconds for minutes), or
    run at ``sizes`` none of its spec's named runs timed: there a notebook that draws its items by n
    (03, 04) did other items than those runs, and its misprice is mostly theirs (design/planning.md)."""
    if len(group) != 1 or group[0].stem in kept or len(ran) != 1 or ran[0].status != "completed":
        return None
    if timed_seconds(group[0], sizes) is None:
        return None
    calls = read_run_time(where, group[0].stem).calls
    return None if calls is not None and calls.replayed else took


def _check_values(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every flag's value checked before any spec is read: a usage error naming the flag otherwise."""
    if args.results is not None and args.results.exists() and not args.results.is_dir():
        parser.error(f"{args.command}: --results {args.results} is not a folder")
    try:
        if getattr(args, "lm", None):  # the name checks resolve_lm makes, without loading the model
            from roma_lab.lm import check_lm_name

            check_lm_name(args.lm)
        if args.command not in ("run", "plan"):
            return
        args.budget_s = parse_budget(args.budget) if args.budget else None
        args.before_s = _before(args.budget_since, args.budget_s)
        if args.budget_usd is not None:
            from roma_lab.evaluate import check_budget

            check_budget(args.budget_usd, "--budget-usd")
        if args.concurrency is not None and args.concurrency < 1:
            raise ValueError(f"--concurrency is the number of units run at once, >= 1; got {args.concurrency}")
        if getattr(args, "mde", None) is not None:
            args.mde = check_target_mde(args.mde)
        if args.command == "run":  # what every notebook's evaluations read: refused once, before any kernel
            from roma_lab.evaluate import budget_usd_from_env
            from roma_lab.lm import call_deadline_s

            if args.budget_usd is None:  # --budget-usd replaces it in the kernels
                budget_usd_from_env()
            call_deadline_s()
    except (ValueError, FileNotFoundError) as exc:
        parser.error(f"{args.command}: {exc}")


def _before(since: float | None, budget_s: float | None) -> float:
    """Seconds of the budget spent before this command started (``--budget-since``, an epoch time): 0
    without it. ValueError for a time that is no moment of this budget's (not finite, in the future,
    or without a budget to count against)."""
    if since is None:
        return 0.0
    if budget_s is None:
        raise ValueError("--budget-since says when --budget's clock started; give --budget too")
    before = _now() - since
    if not math.isfinite(before) or before < -1:  # a second's leeway: `date +%s` rounds down
        raise ValueError(f"--budget-since is a past moment in seconds since the epoch (date +%s), got {since!r}")
    return max(before, 0.0)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command in ("run", "plan") and bool(args.stems) == args.all:
        parser.error(f"{args.command}: name experiments or pass --all (not both)")
    _check_values(parser, args)
    if args.command == "run":
        texts = _assignments(parser, args.assignments)
        try:
            how = resolve_cluster(args.cluster)
        except ValueError as exc:
            parser.error(f"run: {exc}")
        if args.budget_usd is not None and how.kind != "in-process" and args.per == "item":
            parser.error("run: --budget-usd is kept in each notebook's kernel, which then runs its items itself: "
                         "add --per notebook (or run without --cluster)")
    root = (args.root or default_repo_root()).resolve()
    try:
        specs, bad = scan_specs(root)
    except SpecError as exc:
        hint = "" if args.root else " (install roma_lab editable from its checkout, or pass --root)"
        print(f"error: {exc}{hint}", file=sys.stderr)
        return 2
    for exc in bad:
        print(f"error: {exc}", file=sys.stderr)
    if bad and args.command != "list":  # never run or time a set of experiments with a spec left out
        return 2
    results_root = (args.results or (root / "results" / "smoke" if args.smoke else root / "results")).resolve()

    if args.command == "list":
        status = {s.stem: experiment_status(s, results_root=results_root, smoke=args.smoke, lm=args.lm) for s in specs}
        for line in _list_lines(specs, status):
            print(line)
        print(f"{len(specs)} experiments, each notebooks/<stem>.ipynb; results in {_shown(results_root)}/")
        if bad:  # listed above, each naming its file; the exit code tells scripts the set is incomplete
            print(f"{len(bad)} spec file(s) not valid, not listed: see the errors above", file=sys.stderr)
        return 2 if bad else 0

    if args.command == "probe":
        try:
            probe = run_probe(results_root, lm=args.lm or "local")
        except (ValueError, RuntimeError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"speed probe of {probe.model}: prompt {probe.prompt_tps:.1f} tok/s, generation "
              f"{probe.generation_tps:.1f} tok/s ({probe.threads} threads, load {probe.load_avg_1min:.2f}; fastest of "
              f"{PROBE_RUNS}); written to {_shown(results_root / PROBE_FILE)}")
        if busy := probe.busy():
            print(f"warning: {busy}", file=sys.stderr)
        return 0
    if args.command == "times":
        rows, probe = run_times(results_root, [s.stem for s in specs]), read_probe(results_root)
        by_stem = {s.stem: s for s in specs}
        predicted = {row.stem: guess for row in rows if row.stem in by_stem
                     and (guess := predicted_seconds(by_stem[row.stem], row, probe)) is not None}
        print(times_markdown(rows, predicted))
        if line := agreement_line(rows, predicted):
            print(f"\n{line}")
        # the same count had no re-plan priced by the run's drift: each plan line over its factor
        carried = {row.stem: row.planned_drift for row in rows if row.stem in predicted
                   and predicted[row.stem][1] == "plan" and row.planned_drift != 1.0}
        at_x1 = {stem: (seconds / carried.get(stem, 1.0), source) for stem, (seconds, source) in predicted.items()}
        if carried and (line := agreement_line(rows, at_x1)):
            print(f"without the run's drift (each plan line over its factor): {line}")
        return 0
    known = {s.stem: s for s in specs}
    unknown = [stem for stem in args.stems if stem not in known]
    if unknown:
        print(f"error: unknown experiment(s) {', '.join(unknown)}; known: {', '.join(known) or '(none)'}", file=sys.stderr)
        return 2
    selected = specs if args.all else [known[stem] for stem in dict.fromkeys(args.stems)]
    try:  # every value checked against every notebook before any cell runs
        overrides = _overrides(selected, texts) if args.command == "run" else {}
    except OverrideError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    planned, kept = None, _kept(selected, results_root, args, overrides)
    if args.command == "plan" or args.budget_s is not None:
        try:
            planned = _plan(selected, results_root, args, kept)
        except (ValueError, OSError) as exc:  # OSError: plan.json cannot be written there
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.command == "plan":
            return 0
    # every kernel started below records the threads and tokens/s its embedded model ran with
    os.environ.setdefault(SPEED_LOG_ENV, str(results_root / SPEED_LOG))
    if args.fresh:  # the kernels inherit it: no completion is replayed, each is asked of the model again
        os.environ[ENV.fresh] = "1"
        args.force = True

    sized = planned.overrides() if planned is not None else {}
    if set(overrides) & {name for sizes in sized.values() for name in sizes}:
        print("error: --budget sizes the notebooks; do not --set their size too", file=sys.stderr)
        return 2
    # notebooks the plan sizes run one by one at their own n, those whose comparison it expects to detect
    # first (a re-plan after an overrun never shrinks a finding the plan paid for); the rest together
    funded = {p.stem for p in planned.notebooks if p.expected} if planned is not None else set()
    groups = [([s], {**overrides, **sized[s.stem]})
              for s in sorted((s for s in selected if s.stem in sized), key=lambda s: s.stem not in funded)]
    rest = [s for s in selected if s.stem not in sized]
    if rest:
        groups.append((rest, overrides))
    outcomes, records, started = [], _records(planned, args.budget_s) if planned else None, _clock()
    batch_started_at = datetime.now(UTC)  # what the completion cache recorded since is this batch's, no replay
    finished: list[tuple[float, float]] = []  # (took, priced at x1) of each sized notebook this run finished
    factor = 1.0
    try:
        for i, (group, values) in enumerate(groups):
            # the first ran on the plan just made; a kept one keeps its n
            if i and records is not None and group[0].stem not in kept:
                done = {s.stem for earlier, _ in groups[:i] for s in earlier}
                # spent: what went before this command (--budget-since), this run's time, and what the kept
                # ones it has passed took before it
                spent = (args.before_s + _clock() - started
                         + sum(k.seconds for stem, k in kept.items() if stem in done))
                if (now := run_drift(finished)) != factor:
                    factor = now
                    print(_drift_line(finished, factor), flush=True)
                size, records = _replan(group, [s for s in selected if s.stem not in done], results_root, args,
                                        spent, records,
                                        {stem: k for stem, k in kept.items() if stem not in done}, factor)
                values = {**overrides, **size} if group[0].stem in sized else values
            # by the --set values alone: what the plan sets (27's narrowed LEVELS too) sizes the run
            where = results_root if args.results else _own_folder(results_root, group, overrides)
            if where != results_root:
                print(f"--set changes what the notebook does, not only its size: its run goes to {_shown(where)}/;\n"
                      f"the default run in {_shown(results_root)}/ stays as it is (--results names another folder)")
            began = _clock()
            ran = run_experiments(group, results_root=where, smoke=args.smoke, lm=args.lm,
                                  force=args.force, cluster=args.cluster, per=args.per, overrides=values,
                                  budget_usd=args.budget_usd, plans=records, batch_started_at=batch_started_at)
            outcomes += ran
            if records is not None and (took := _measured(group, ran, where, kept, _clock() - began, values)) is not None:
                entry = records[group[0].stem]
                finished.append((took, entry["seconds"] / entry.get("drift", 1.0)))
    except (ClusterConnectError, WorkerEnvironmentError) as exc:  # no scheduler, or a worker that differs
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: rerun the same command to resume (completed experiments are skipped)", file=sys.stderr)
        return 130
    counts = {status: sum(o.status == status for o in outcomes) for status in ("completed", "skipped", "failed")}
    # the folders this run wrote: one notebook's own, else the results folders they are in
    written = ([o.out_dir for o in outcomes] if len(outcomes) == 1
               else list(dict.fromkeys(o.out_dir.parent for o in outcomes)) or [results_root])
    print(f"{len(outcomes)} experiment{'' if len(outcomes) == 1 else 's'}: "
          + ", ".join(f"{n} {status}" for status, n in counts.items())
          + "; results in " + ", ".join(f"{_shown(w)}/" for w in written))
    for outcome in outcomes:
        if outcome.status == "failed":
            print(f"FAILED {outcome.stem}: {outcome.error}\n  see {_shown(outcome.out_dir)}", file=sys.stderr)
    opened = [o.out_dir / known[o.stem].notebook.name for o in outcomes]
    if len(opened) == 1 and opened[0].is_file():  # one notebook run (a failed one's copy shows its error)
        print(f"open it: {open_command(opened[0], root)}")
    return 1 if counts["failed"] else 0
