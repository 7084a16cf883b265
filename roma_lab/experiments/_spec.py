"""Experiment specs: one ``experiments/<stem>.toml`` per numbered notebook, validated on load."""

from __future__ import annotations

import ast
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType

from roma_lab.results import read_regular_bytes

NOTEBOOK_NAME = re.compile(r"^\d{2}_.+\.ipynb$")
# Injected by the runner, so a spec may not set it. (A spec may set LM, e.g. a small model for
# the smoke tier; the runner's ``lm`` argument, from --lm or $ROMA_LAB_LM, overrides it.)
INJECTED = ("OUT_DIR",)
# Every numbered notebook's parameters cell declares these.
REQUIRED_PARAMETERS = ("OUT_DIR", "SEED")

_REQUIRED_KEYS = ("notebook", "paper", "table", "description")
_OPTIONAL_KEYS = ("timeout_s", "timeout_per_unit_s", "timeout_units", "measured_s", "measured_sizes", "measured_tps",
                  "measured_runs", "inputs", "outputs", "parameters", "smoke", "plan")
_PLAN_KEYS = ("per", "source", "pilot", "alone")
# Parameters a command line cannot set (--set), and what sets them instead.
RUNNER_OWNED = {"OUT_DIR": "the runner sets it to results/<stem>", "LM": "name the model with --lm (lm=)"}
# A size asked for is a number a notebook can use: an int within 64 bits (numpy's, a seed's), a finite
# float; and no run may ask for a cell timeout past a year (papermill's would overflow long before that).
_INT_BOUND = 2**63
MAX_CELL_TIMEOUT_S = 365 * 24 * 3600

ParamValue = str | int | float | bool | list


class SpecError(ValueError):
    """An experiment spec (or the experiments folder) is invalid; the message names the file."""


@dataclass(frozen=True, slots=True)
class Pilot:
    """One comparison's earlier paired counts, as a spec's ``[plan.pilot]`` declares them (a dev pilot or
    an earlier run, never the scores of the run being planned): ``wins`` and ``losses`` of the first
    system against the second on ``n`` tasks (the rest tied)."""

    name: str
    wins: int
    losses: int
    n: int


@dataclass(frozen=True, slots=True)
class TimedRun:
    """One more whole run a spec's ``measured_runs`` names (besides ``measured_s``): its seconds, the
    sizes it ran at (over the spec's own) and the probe of the machine it ran on (None: not known)."""

    seconds: float
    sizes: Mapping[str, ParamValue]
    tps: tuple[float, float] | None


class OverrideError(ValueError):
    """A size asked for on the command line (``--set``, ``overrides=``) that the notebook does not
    declare, that the runner owns, or of another type than the notebook's default; the message
    names the experiment and lists the parameters its notebook declares, in one line per notebook."""


@dataclass(frozen=True, slots=True)
class ExperimentSpec:
    """One experiment: which notebook reproduces which paper artefact, with which parameters."""

    stem: str
    spec_path: Path
    root: Path  # project root holding experiments/ and notebooks/
    notebook: Path  # absolute
    paper: str
    table: str
    description: str
    timeout_s: int  # per cell, at the spec's own sizes (see cell_timeout_s)
    timeout_per_unit_s: float  # added per unit of work more than at those sizes (0: a fixed timeout)
    timeout_units: tuple[str, ...]  # the parameters whose product is the units of work
    # seconds a run at the spec's own sizes took on a machine like this one (its comment names the run): the
    # plan's cost before this results folder holds a run (None: the timeout over 3, design/planning.md)
    measured_s: float | None
    # the sizes of that measured run where they differ from the spec's own (a run at a budget's n, say):
    # the plan divides measured_s by the units of work at these sizes
    measured_sizes: Mapping[str, ParamValue]
    inputs: tuple[str, ...]  # root-relative files hashed into provenance
    outputs: tuple[str, ...]  # files the notebook must write into OUT_DIR
    parameters: Mapping[str, ParamValue]  # overrides of the notebook's defaults for `make reproduce`
    smoke: Mapping[str, ParamValue]  # overrides applied on top of parameters for the smoke tier
    declared: Mapping[str, str]  # parameters-cell name -> default source text
    defaults: Mapping[str, ParamValue]  # the declared defaults as values
    # [plan]: the list parameter the tasks are split evenly over, each comparison within one of its entries
    # (LEVELS: a comparison per level, its n the tasks over the levels); None: one comparison over all tasks
    per: str | None = None
    pilots: tuple[Pilot, ...] = ()  # [plan.pilot]: what the comparisons did before; the first is the primary
    pilot_source: str = ""  # [plan] source: where the pilot's counts come from
    # [plan.alone]: what else it runs with when a budget runs its primary comparison's group alone (27:
    # SYSTEMS = ["single"], the primary comparison's systems only), and the share of a task's time left
    alone: Mapping[str, ParamValue] = field(default_factory=lambda: MappingProxyType({}))
    alone_share: float = 1.0
    # the prompt and generation tok/s of the machine measured_s was timed on (None: not known): the plan
    # scales measured_s to this machine by its speed probe (experiments/_probe.py)
    measured_tps: tuple[float, float] | None = None
    # more whole runs, at sizes of their own: a run at sizes one of them (or measured_s's) ran at is priced
    # by what those took, since the items a notebook draws depend on its sizes (design/planning.md)
    measured_runs: tuple[TimedRun, ...] = ()

    def timed_runs(self) -> tuple[TimedRun, ...]:
        """Every whole run the spec names: ``measured_s``'s (at ``measured_sizes``), then ``measured_runs``;
        none without ``measured_s``."""
        if self.measured_s is None:
            return ()
        return (TimedRun(self.measured_s, self.measured_sizes, self.measured_tps), *self.measured_runs)

    def strata(self, parameters: Mapping[str, object] | None = None) -> int:
        """How many groups ``per`` splits the tasks into at the spec's sizes (1: no ``per``)."""
        if self.per is None:
            return 1
        value = {**self.defaults, **self.parameters, **(parameters or {})}[self.per]
        return max(1, len(value)) if isinstance(value, list) else 1

    def cell_timeout_s(self, parameters: Mapping[str, object]) -> int:
        """The cell timeout of a run with ``parameters`` on top of the notebook's defaults:
        ``timeout_s`` at the spec's own sizes (defaults and [parameters]), plus
        ``timeout_per_unit_s`` for each unit of work asked beyond them (less for fewer), a unit being
        the product of the ``timeout_units`` parameters (a list counts its length)."""
        if not self.timeout_units:
            return self.timeout_s
        asked = work_units(self.timeout_units, {**self.defaults, **parameters})
        own = work_units(self.timeout_units, {**self.defaults, **self.parameters})
        return math.ceil(self.timeout_s + self.timeout_per_unit_s * (asked - own))


def work_units(names: tuple[str, ...], values: Mapping[str, object]) -> int:
    """The units of work of a run with ``values``: the product of the ``names`` parameters (a list
    counts its length); the cell timeout and the study plan count work in these units."""
    return math.prod(len(v) if isinstance(v, list) else v for v in (values[n] for n in names))


def _shown(value: object) -> str:
    """``value`` as an error message quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _unit_problem(name: str, value: object) -> str | None:
    """Why ``value`` cannot count units of work (None when it can: an int >= 0 or a list)."""
    if isinstance(value, list) or (type(value) is int and value >= 0):
        return None
    return f"{name} = {_shown(value)} counts units of work for the cell timeout (timeout_units): it must be an int >= 0 or a list"


def _is_literal(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(isinstance(v, str | int | float | bool) and _is_literal(v) for v in value)
    return isinstance(value, str | int | bool)


def _relative_file(value: object) -> bool:
    if not isinstance(value, str) or not value:
        return False
    path = PurePosixPath(value)
    return not path.is_absolute() and ".." not in path.parts and "\\" not in value


def declared_parameters(notebook: Path) -> dict[str, str]:
    """Names declared in the notebook's ``parameters`` cell, with their default source text."""
    import papermill  # heavy (~2 s); only needed once specs are actually loaded

    try:
        found = papermill.inspect_notebook(str(notebook))
    except Exception as exc:  # papermill raises plain ValueError/JSON errors on malformed notebooks
        raise SpecError(f"{notebook}: cannot read its parameters cell: {exc}") from None
    return {name: info["default"] for name, info in found.items()}


def parse_literal(source: str) -> object:
    """A Python literal from its source text, as a parameters cell writes it; ValueError when the
    text is not one. The one parser of parameter values: the notebooks' defaults and ``--set``."""
    try:
        return ast.literal_eval(source)
    except (SyntaxError, RecursionError, MemoryError) as exc:  # deep nesting: RecursionError or MemoryError
        raise ValueError(f"not a Python literal: {source!r}") from exc


def _defaults(declared: Mapping[str, str], problems: list[str]) -> dict[str, ParamValue]:
    values = {}
    for name, source in declared.items():
        try:
            values[name] = parse_literal(source)
        except ValueError:
            problems.append(f"parameter {name} = {source} is not a plain literal")
    return values


def _type_name(default: object) -> str:
    return "any literal" if default is None else type(default).__name__


def _typed(value: object, default: object) -> object:
    """``value`` as a value of the default's type (an int where a float is declared becomes a float);
    ValueError naming the expected type when it is not one."""
    if default is None and (value is None or _is_literal(value)):
        return value
    if isinstance(default, float) and type(value) in (int, float) and _is_literal(value):
        return float(value)
    if isinstance(default, list) and isinstance(value, list) and _is_literal(value):
        kinds = {type(v) for v in default}
        widen = float in kinds and int not in kinds  # ints in a list of floats become floats
        if not default or all(type(v) in kinds or (widen and type(v) is int) for v in value):
            return [float(v) if widen and type(v) is int else v for v in value]
        raise ValueError(f"a list of {' or '.join(sorted(k.__name__ for k in kinds))}")
    if default is not None and type(value) is type(default) and _is_literal(value):
        return value
    raise ValueError(_type_name(default))


def _declares(spec: ExperimentSpec) -> str:
    return ", ".join(f"{name} ({_type_name(value)}, default {spec.declared[name]})"
                     for name, value in spec.defaults.items() if name not in RUNNER_OWNED)


def _range_problem(value: object) -> str | None:
    """Why ``value`` is no number a notebook can use (None when it is one, or no number)."""
    for v in value if isinstance(value, list) else (value,):
        if isinstance(v, float) and not math.isfinite(v):
            return "not a finite number"
        if type(v) is int and not -_INT_BOUND <= v < _INT_BOUND:
            return "outside the 64-bit integer range (-2**63 .. 2**63 - 1)"
    return None


def check_overrides(spec: ExperimentSpec, overrides: Mapping[str, object], *,
                    given: Mapping[str, str] | None = None) -> dict[str, ParamValue]:
    """The sizes asked for a run of ``spec`` (``--set``, ``overrides=``) as values of the types its
    notebook's parameters cell gives them; one :class:`OverrideError` listing every problem.
    ``given``: the text each value was typed as (``--set``), shown in place of the value."""
    values, problems = {}, []
    for name, value in overrides.items():
        if name in RUNNER_OWNED:
            problems.append(f"{name} cannot be set: {RUNNER_OWNED[name]}")
        elif name not in spec.defaults:
            problems.append(f"{name} is not a parameter of {spec.notebook.name}")
        elif problem := _range_problem(value):
            shown = given[name] if given and name in given else _shown(value)
            problems.append(f"{name} = {shown if len(shown) <= 80 else shown[:77] + '...'}: {problem}")
        else:
            try:
                values[name] = _typed(value, spec.defaults[name])
            except ValueError as exc:
                problems.append(f"{name} = {_shown(value)}: expected {exc} (its default is {spec.declared[name]})")
                continue
            if name in spec.timeout_units and (problem := _unit_problem(name, values[name])):
                problems.append(problem)
    if not problems and any(name in spec.timeout_units for name in values):
        asked = spec.cell_timeout_s(values)
        if asked > MAX_CELL_TIMEOUT_S:
            problems.append(f"{', '.join(n for n in spec.timeout_units if n in values)} asks for a cell timeout of "
                            f"{asked:.3g} s, more than the {MAX_CELL_TIMEOUT_S:,} s (a year) a run may have: ask for fewer")
    if problems:
        # one line per notebook: the CLI reports each notebook that refuses a value as one error line
        raise OverrideError(f"{spec.stem}: " + "; ".join(problems) + f"; {spec.notebook.name} declares: {_declares(spec)}")
    return values


def parse_overrides(spec: ExperimentSpec, texts: Mapping[str, str]) -> dict[str, ParamValue]:
    """Command-line values (``--set NAME=TEXT``) for ``spec``: each text is a Python literal as in
    the parameters cell (``100``, ``0.5``, ``True``, ``["a", "b"]``); for a parameter declared as a
    string (or None) a text that is not a string literal is the string itself (``--set SPLIT=dev``).
    Checked as :func:`check_overrides` checks them."""
    values: dict[str, object] = {}
    for name, text in texts.items():
        try:
            value = parse_literal(text)
        except ValueError:
            value = text  # a bare word: a string, or the wrong type for the check below to name
        values[name] = text if isinstance(spec.defaults.get(name), str) and not isinstance(value, str) else value
    return check_overrides(spec, values, given=texts)


def _parameter_table(data: dict, key: str, problems: list[str]) -> dict[str, ParamValue]:
    table = data.get(key, {})
    if not isinstance(table, dict):
        problems.append(f"[{key}] must be a table")
        return {}
    for name, value in table.items():
        if not name.isidentifier():
            problems.append(f"[{key}] {name!r} is not a valid Python name")
        if name in INJECTED:
            problems.append(f"[{key}] {name} is injected by the runner and cannot be set in a spec")
        if not _is_literal(value):
            problems.append(
                f"[{key}] {name} = {value!r} is not a plain literal (str, int, finite float, bool, or a list of them)"
            )
    return table


def _tps(value: object) -> bool:
    """Whether ``value`` is a probe's [prompt, generation] tokens per second: two positive numbers."""
    return isinstance(value, list) and len(value) == 2 and all(
        isinstance(v, int | float) and not isinstance(v, bool) and _is_literal(v) and v > 0 for v in value)


def _measured_runs(data: dict, measured_s: object, units: list[str], problems: list[str]) -> tuple[TimedRun, ...]:
    """``measured_runs``: a list of {s = seconds, sizes = {unit = value}, tps = [prompt, generation]}
    (sizes and tps optional), each a whole run besides ``measured_s``, which they need (it prices
    the sizes none of them ran at)."""
    entries = data.get("measured_runs", [])
    if not entries:
        return ()
    if measured_s is None:
        problems.append("'measured_runs' are runs besides the one 'measured_s' times: it needs 'measured_s'")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        problems.append(f"'measured_runs' must be a list of {{ s = seconds, sizes = {{...}}, tps = [...] }}, got {entries!r}")
        return ()
    runs = []
    for i, entry in enumerate(entries):
        where = f"'measured_runs' entry {i + 1}"
        seconds, sizes, tps = entry.get("s"), entry.get("sizes", {}), entry.get("tps")
        unknown = sorted(set(entry) - {"s", "sizes", "tps"})
        if unknown:
            problems.append(f"{where}: unknown keys {unknown}; allowed: ['s', 'sizes', 'tps']")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not _is_literal(seconds) or seconds <= 0:
            problems.append(f"{where}: 's' must be a positive number of seconds (a measured run), got {seconds!r}")
            continue
        if not isinstance(sizes, dict) or not all(_is_literal(v) for v in sizes.values()):
            problems.append(f"{where}: 'sizes' must be a table of plain literals, got {sizes!r}")
            continue
        if strange := sorted(set(sizes) - set(units)):
            problems.append(f"{where}: sizes {strange} are not 'timeout_units': only the units of work set a run's size")
            continue
        if tps is not None and not _tps(tps):
            problems.append(f"{where}: 'tps' must be [prompt, generation] tokens per second, two positive numbers, "
                            f"got {tps!r}")
            continue
        runs.append(TimedRun(float(seconds), MappingProxyType(dict(sizes)),
                             None if tps is None else (float(tps[0]), float(tps[1]))))
    return tuple(runs)


def _timeout_problems(timeout_s: object, per_unit_s: float, units: list[str], defaults: Mapping[str, ParamValue],
                      parameters: Mapping[str, ParamValue], smoke: Mapping[str, ParamValue],
                      measured_sizes: Mapping[str, ParamValue], *timed: Mapping[str, ParamValue]) -> list[str]:
    """The timeout units must be declared parameters counting work at every size the spec names, and
    ``timeout_s`` must leave a positive timeout for no work at all (it holds the units at the spec's
    own sizes)."""
    undeclared = [u for u in units if u not in defaults]
    if undeclared:
        return [f"'timeout_units' {undeclared} are not declared in the notebook's 'parameters' cell"]
    problems = [problem for values in (defaults, parameters, smoke, measured_sizes, *timed) for name, value in values.items()
                if name in units and (problem := _unit_problem(name, value))]
    if units and not problems and isinstance(timeout_s, int):
        own = work_units(tuple(units), {**defaults, **parameters})
        if timeout_s - per_unit_s * own <= 0:
            problems.append(f"'timeout_s' ({timeout_s}) is the cell timeout at the spec's own sizes, "
                            f"{own} units of work: it must exceed timeout_per_unit_s x {own} = {per_unit_s * own:g}")
        if measured_sizes and not work_units(tuple(units), {**defaults, **parameters, **measured_sizes}):
            problems.append("'measured_sizes' gives no units of work: a measured run did some")
        if any(not work_units(tuple(units), {**defaults, **parameters, **sizes}) for sizes in timed):
            problems.append("a 'measured_runs' entry's sizes give no units of work: a measured run did some")
    return problems


def _plan_table(data: dict, defaults: Mapping[str, ParamValue], sizes: tuple[Mapping[str, ParamValue], ...],
                units: list[str], problems: list[str]
                ) -> tuple[str | None, tuple[Pilot, ...], str, dict[str, ParamValue], float]:
    """``[plan]``: ``per`` (a declared list parameter, when the spec is task-sized), ``source``,
    ``[plan.pilot]`` (name = [wins, losses, n], whole counts, wins + losses <= n >= 1; a source names
    where they come from) and ``[plan.alone]`` (declared parameters of the notebook and ``share``, in
    (0, 1]: what else a run of the primary comparison's group alone sets, and its share of a task's time)."""
    table = data.get("plan", {})
    if not isinstance(table, dict):
        problems.append("[plan] must be a table")
        return None, (), "", {}, 1.0
    if unknown := sorted(set(table) - set(_PLAN_KEYS)):
        problems.append(f"[plan] unknown keys {unknown}; allowed: {list(_PLAN_KEYS)}")
    per, source, raw = table.get("per"), table.get("source", ""), table.get("pilot", {})
    if per is not None:
        if not units:
            problems.append("[plan] per splits a task-sized notebook's tasks: it needs 'timeout_units'")
        elif not isinstance(per, str) or per not in defaults:
            problems.append(f"[plan] per = {per!r} is not a parameter of the notebook")
        elif not all(isinstance({**defaults, **values}[per], list) and {**defaults, **values}[per]
                     for values in sizes):
            problems.append(f"[plan] per = {per!r} must be a non-empty list at every size the spec names")
    if not isinstance(source, str):
        problems.append(f"[plan] source must be a string, got {source!r}")
        source = ""
    if not isinstance(raw, dict):
        problems.append("[plan.pilot] must be a table of name = [wins, losses, n]")
        raw = {}
    pilots = []
    for name, counts in raw.items():
        if not (isinstance(counts, list) and len(counts) == 3 and all(type(c) is int and c >= 0 for c in counts)
                and counts[2] >= 1 and counts[0] + counts[1] <= counts[2]):
            problems.append(f"[plan.pilot] {name!r} = {counts!r}: expected [wins, losses, n], whole counts, "
                            "wins + losses <= n, n >= 1")
            continue
        pilots.append(Pilot(name, *counts))
    if raw and not source.strip():
        problems.append("[plan.pilot] needs [plan] source: where its counts come from")
    alone, share = _plan_alone(table.get("alone", {}), defaults, per, pilots, problems)
    return per if isinstance(per, str) else None, tuple(pilots), source, alone, share


def _plan_alone(raw: object, defaults: Mapping[str, ParamValue], per: object, pilots: list[Pilot],
                problems: list[str]) -> tuple[dict[str, ParamValue], float]:
    if not isinstance(raw, dict):
        problems.append("[plan.alone] must be a table of notebook parameters and share")
        return {}, 1.0
    if not raw:
        return {}, 1.0
    if per is None or not pilots:
        problems.append("[plan.alone] applies when a budget runs the primary comparison's group alone: "
                        "it needs [plan] per and [plan.pilot]")
    values = {k: v for k, v in raw.items() if k != "share"}
    share = raw.get("share")
    if not (isinstance(share, int | float) and not isinstance(share, bool) and 0 < share <= 1):
        problems.append(f"[plan.alone] share must be the share of a task's time such a run takes, in (0, 1], "
                        f"got {share!r}")
        share = 1.0
    if unknown := sorted(k for k in values if k not in defaults or k == per):
        problems.append(f"[plan.alone] {unknown} are not parameters of the notebook it may set")
    for name, value in values.items():
        if name in defaults and type(value) is not type(defaults[name]):
            problems.append(f"[plan.alone] {name} = {value!r} must be a {type(defaults[name]).__name__}, "
                            "as its default")
    return values, float(share)


def _spec_text(path: Path) -> str:
    """The text of a spec file; :class:`SpecError` naming it when it is not a regular UTF-8 file (a
    FIFO or a device among the specs is refused, never waited on)."""
    try:
        data = read_regular_bytes(path)
    except OSError as exc:
        raise SpecError(f"{path}: cannot be read: {exc.strerror}") from None
    except ValueError:
        raise SpecError(f"{path}: not a regular file; a spec is a TOML text file (remove or replace it)") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte {exc.start} is {data[exc.start:exc.start + 1]!r}); "
                        "TOML is UTF-8, save the spec as UTF-8") from None


def load_spec(spec_path: str | Path) -> ExperimentSpec:
    """Load and validate one spec; every problem found is listed in a single :class:`SpecError`."""
    path = Path(spec_path).resolve()
    try:
        data = tomllib.loads(_spec_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise SpecError(f"{path}: arrays or tables nested too deep to parse; a spec holds lists of values at most"
                        ) from None
    root = path.parent.parent
    problems: list[str] = []
    unknown = sorted(set(data) - set(_REQUIRED_KEYS) - set(_OPTIONAL_KEYS))
    if unknown:
        problems.append(f"unknown keys {unknown}; allowed: {sorted(_REQUIRED_KEYS + _OPTIONAL_KEYS)}")
    for key in _REQUIRED_KEYS:
        if not isinstance(data.get(key), str) or not data.get(key, "").strip():
            problems.append(f"{key!r} must be a non-empty string")
    timeout_s = data.get("timeout_s", 900)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int) or timeout_s <= 0:
        problems.append(f"'timeout_s' must be a positive integer (seconds per cell), got {timeout_s!r}")
    per_unit_s = data.get("timeout_per_unit_s", 0)
    units = data.get("timeout_units", [])
    if isinstance(per_unit_s, bool) or not isinstance(per_unit_s, int | float) or not _is_literal(per_unit_s) \
            or per_unit_s < 0:
        problems.append(f"'timeout_per_unit_s' must be a number >= 0 (seconds per unit of work), got {per_unit_s!r}")
        per_unit_s = 0
    if not isinstance(units, list) or not all(isinstance(u, str) and u for u in units):
        problems.append(f"'timeout_units' must be a list of parameter names, got {units!r}")
        units = []
    if bool(units) != bool(per_unit_s):
        problems.append("'timeout_per_unit_s' and 'timeout_units' go together: the seconds per unit and the "
                        "parameters whose product counts the units")
    measured_s = data.get("measured_s")
    if measured_s is not None and (isinstance(measured_s, bool) or not isinstance(measured_s, int | float)
                                   or not _is_literal(measured_s) or measured_s <= 0):
        problems.append(f"'measured_s' must be a positive number of seconds (a measured run), got {measured_s!r}")
        measured_s = None
    measured_tps = data.get("measured_tps")
    if measured_tps is not None:
        if not _tps(measured_tps):
            problems.append(f"'measured_tps' must be [prompt, generation] tokens per second, two positive numbers, "
                            f"got {measured_tps!r}")
            measured_tps = None
        elif measured_s is None:
            problems.append("'measured_tps' is the speed of the machine 'measured_s' was timed on: it needs 'measured_s'")
    measured_sizes = _parameter_table(data, "measured_sizes", problems)
    if measured_sizes and measured_s is None:
        problems.append("'measured_sizes' names the sizes of the run 'measured_s' times: it needs 'measured_s'")
    strange = sorted(set(measured_sizes) - set(units if isinstance(units, list) else []))
    if strange:
        problems.append(f"'measured_sizes' {strange} are not 'timeout_units': only the units of work set a run's size")
    measured_runs = _measured_runs(data, measured_s, units if isinstance(units, list) else [], problems)
    file_lists = {}
    for key in ("inputs", "outputs"):
        items = data.get(key, [])
        if not isinstance(items, list) or not all(_relative_file(i) for i in items):
            problems.append(f"{key!r} must be a list of relative file paths without '..', got {items!r}")
            items = []
        file_lists[key] = tuple(items)
    if not file_lists["outputs"]:
        problems.append("'outputs' must name at least one file the notebook writes into OUT_DIR")
    if "provenance.json" in file_lists["outputs"]:
        problems.append("'outputs' cannot include provenance.json (the runner writes it)")
    missing_inputs = [i for i in file_lists["inputs"] if not (root / i).is_file()]
    if missing_inputs:
        problems.append(f"input files not found under {root}: {missing_inputs}")
    parameters = _parameter_table(data, "parameters", problems)
    smoke = _parameter_table(data, "smoke", problems)

    notebook = root / data["notebook"] if _relative_file(data.get("notebook")) else None
    if notebook is None and "notebook" in data:
        problems.append(f"'notebook' must be a path relative to {root}, got {data['notebook']!r}")
    declared: dict[str, str] = {}
    defaults: dict[str, ParamValue] = {}
    per, pilots, pilot_source, alone, alone_share = None, (), "", {}, 1.0
    if notebook is not None:
        if not NOTEBOOK_NAME.match(notebook.name):
            problems.append(f"notebook name {notebook.name!r} must match {NOTEBOOK_NAME.pattern}")
        if notebook.stem != path.stem:
            problems.append(f"spec stem {path.stem!r} must equal the notebook stem {notebook.stem!r}")
        if not notebook.is_file():
            problems.append(f"notebook {data['notebook']!r} not found under {root}")
        else:
            declared = declared_parameters(notebook)
            missing = [p for p in REQUIRED_PARAMETERS if p not in declared]
            if missing:
                problems.append(f"the notebook's 'parameters' cell must declare {missing}")
            undeclared = sorted((set(parameters) | set(smoke)) - set(declared))
            if undeclared:
                problems.append(f"parameters {undeclared} are not declared in the notebook's 'parameters' cell")
            defaults = _defaults(declared, problems)
            # The notebook's parameters cell is the one place a default is written; a spec holds
            # overrides only, so the two can never drift apart.
            repeated = sorted(k for k, v in parameters.items() if k in defaults and defaults[k] == v)
            if repeated:
                problems.append(f"[parameters] {repeated} repeat the notebook's defaults; a spec holds overrides only")
            problems += _timeout_problems(timeout_s, per_unit_s, units, defaults, parameters, smoke, measured_sizes,
                                          *(r.sizes for r in measured_runs))
            per, pilots, pilot_source, alone, alone_share = _plan_table(
                data, defaults, (parameters, {**parameters, **smoke}), units, problems)
    if problems:
        raise SpecError(f"{path}:\n  " + "\n  ".join(problems))
    return ExperimentSpec(
        stem=path.stem,
        spec_path=path,
        root=root,
        notebook=notebook.resolve(),
        paper=data["paper"],
        table=data["table"],
        description=data["description"],
        timeout_s=timeout_s,
        timeout_per_unit_s=per_unit_s,
        timeout_units=tuple(units),
        measured_s=None if measured_s is None else float(measured_s),
        measured_sizes=MappingProxyType(dict(measured_sizes)),
        inputs=file_lists["inputs"],
        outputs=file_lists["outputs"],
        parameters=MappingProxyType(dict(parameters)),
        smoke=MappingProxyType(dict(smoke)),
        declared=MappingProxyType(declared),
        defaults=MappingProxyType(defaults),
        per=per,
        pilots=pilots,
        pilot_source=pilot_source,
        alone=MappingProxyType(dict(alone)),
        alone_share=alone_share,
        measured_tps=None if measured_tps is None else (float(measured_tps[0]), float(measured_tps[1])),
        measured_runs=measured_runs,
    )


def scan_specs(root: str | Path) -> tuple[list[ExperimentSpec], list[SpecError]]:
    """The valid specs under ``<root>/experiments`` sorted by stem, and one :class:`SpecError` per bad
    file (each naming it), so a listing can show the good ones and the bad ones by name."""
    spec_dir = Path(root) / "experiments"
    if not spec_dir.is_dir():
        raise SpecError(f"no experiments/ folder under {Path(root).resolve()}")
    specs, errors = [], []
    for path in sorted(spec_dir.glob("*.toml")):
        try:
            specs.append(load_spec(path))
        except SpecError as exc:
            errors.append(exc)
    return sorted(specs, key=lambda s: s.stem), errors


def load_specs(root: str | Path) -> list[ExperimentSpec]:
    """All specs under ``<root>/experiments``, sorted by stem; bad ones are reported together."""
    specs, errors = scan_specs(root)
    if errors:
        raise SpecError("\n".join(map(str, errors)))
    return specs
