"""Experiment specs: one ``experiments/<stem>.toml`` per numbered notebook, validated on load."""

from __future__ import annotations

import ast
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import MappingProxyType

from roma_lab.results._files import read_regular_bytes

NOTEBOOK_NAME = re.compile(r"^\d{2}_.+\.ipynb$")
# Injected by the runner, so a spec may not set it. (A spec may set LM, e.g. a small model for
# the smoke tier; the runner's ``lm`` argument, from --lm or $ROMA_LAB_LM, overrides it.)
INJECTED = ("OUT_DIR",)
# Every numbered notebook's parameters cell declares these.
REQUIRED_PARAMETERS = ("OUT_DIR", "SEED")

_REQUIRED_KEYS = ("notebook", "paper", "table", "description")
_OPTIONAL_KEYS = ("timeout_s", "inputs", "outputs", "parameters", "smoke")

ParamValue = str | int | float | bool | list


class SpecError(ValueError):
    """An experiment spec (or the experiments folder) is invalid; the message names the file."""


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
    timeout_s: int
    inputs: tuple[str, ...]  # root-relative files hashed into provenance
    outputs: tuple[str, ...]  # files the notebook must write into OUT_DIR
    parameters: Mapping[str, ParamValue]  # overrides of the notebook's defaults for `make reproduce`
    smoke: Mapping[str, ParamValue]  # overrides applied on top of parameters for the smoke tier
    declared: Mapping[str, str]  # parameters-cell name -> default source text
    defaults: Mapping[str, ParamValue]  # the declared defaults as values


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


def _defaults(declared: Mapping[str, str], problems: list[str]) -> dict[str, ParamValue]:
    values = {}
    for name, source in declared.items():
        try:
            values[name] = ast.literal_eval(source)
        except (ValueError, SyntaxError):
            problems.append(f"parameter {name} = {source} is not a plain literal")
    return values


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
        inputs=file_lists["inputs"],
        outputs=file_lists["outputs"],
        parameters=MappingProxyType(dict(parameters)),
        smoke=MappingProxyType(dict(smoke)),
        declared=MappingProxyType(declared),
        defaults=MappingProxyType(defaults),
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
