"""A run's identity and the status of a results folder against it.

A run takes its identity once, when it starts, as one frozen :class:`RunKey` (injected and recorded
parameters, their hash, model, engine, input hashes, package source hash): the status check, the
folder's preparation and both provenance records use it, so the package is hashed once per run
(design/runner.md, "When is an experiment complete?").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from roma_lab.results import (
    Provenance,
    ProvenanceError,
    changed_outputs,
    package_source_hash,
    parameters_hash,
    read_provenance,
    sha256_file,
)

from ._spec import ExperimentSpec, ParamValue, check_overrides


def run_parameters(spec: ExperimentSpec, *, out_dir: Path, smoke: bool, lm: str | None,
                   overrides: Mapping[str, ParamValue] | None = None) -> dict[str, Any]:
    """Parameters papermill injects: the spec's overrides ([parameters], then [smoke] for the smoke
    tier), then the sizes asked for this run (``overrides``, from ``--set``, checked by
    :func:`check_overrides`), OUT_DIR, and ``lm`` as LM when given and the notebook declares LM.
    Everything else keeps the default written in the notebook's parameters cell."""
    params: dict[str, Any] = dict(spec.parameters)
    if smoke:
        params.update(spec.smoke)
    params.update(overrides or {})
    params["OUT_DIR"] = str(Path(out_dir).resolve())
    if lm is not None and "LM" in spec.declared:
        params["LM"] = lm
    return params


def recorded_parameters(spec: ExperimentSpec, injected: dict[str, Any]) -> dict[str, Any]:
    """The parameters a run used: the notebook's defaults with the injected values on top.
    OUT_DIR is the folder the record lives in; keeping it out lets results move with the repo."""
    return {k: v for k, v in (dict(spec.defaults) | injected).items() if k != "OUT_DIR"}


def _inputs(spec: ExperimentSpec) -> list[str]:
    # The notebook is an input too: editing it makes its results stale.
    return [spec.notebook.relative_to(spec.root).as_posix(), *spec.inputs]


def _model(recorded: dict[str, Any]) -> str | None:
    """The run's model as tables label it: with its server's address when $ROMA_LAB_API_BASE sends it
    to one, so pointing LM at another server is another run."""
    from roma_lab.lm import model_label

    lm = recorded.get("LM")
    return model_label(lm) if isinstance(lm, str) else None


def _engine(recorded: dict[str, Any]) -> Mapping[str, Any] | None:
    """The engine and slot count the run's local model runs on ($ROMA_LAB_ENGINE and $ROMA_LAB_SLOTS
    reach the kernel too), None for any other model."""
    from roma_lab.lm import local_engine_settings

    lm = recorded.get("LM")
    settings = local_engine_settings(lm) if isinstance(lm, str) else None
    return MappingProxyType(settings) if settings is not None else None


@dataclass(frozen=True, slots=True)
class RunKey:
    """What makes a run of an experiment this run, taken once when the run starts and handed to
    the status check, the folder's preparation and the record: status and prepare compare it with
    the folder's record, the record writes it."""

    parameters: Mapping[str, Any]  # what papermill injects (run_parameters), OUT_DIR included
    recorded: Mapping[str, Any]  # the notebook's defaults with those on top, OUT_DIR left out
    parameters_hash: str  # of ``recorded``
    model: str | None  # the model as tables label it (_model)
    engine: Mapping[str, Any] | None  # a local model's engine and slot count (outputs depend on them)
    inputs: Mapping[str, str | None]  # the notebook and each declared input -> SHA-256 (None: missing)
    source: str  # package_source_hash(): the code that makes the numbers

    @property
    def missing_inputs(self) -> list[str]:
        return [p for p, digest in self.inputs.items() if digest is None]

    def matches(self, record: Provenance) -> bool:
        """The record was made with these parameters, model, notebook and inputs, by this roma_lab source."""
        return (record.parameters_hash == self.parameters_hash and record.model == self.model
                and record.extra.get("engine") == (dict(self.engine) if self.engine is not None else None)
                and record.roma_lab_source == self.source
                and not self.missing_inputs and record.inputs == dict(self.inputs))


def run_key(spec: ExperimentSpec, *, out_dir: Path, smoke: bool, lm: str | None,
            overrides: Mapping[str, ParamValue] | None = None) -> RunKey:
    """The run's identity, hashing the package source and each input once. The sizes asked
    (``overrides``) are among its parameters, so a run at other sizes is another run."""
    params = run_parameters(spec, out_dir=out_dir, smoke=smoke, lm=lm, overrides=overrides)
    recorded = recorded_parameters(spec, params)
    inputs = {p: sha256_file(spec.root / p) if (spec.root / p).is_file() else None for p in _inputs(spec)}
    return RunKey(MappingProxyType(params), MappingProxyType(recorded), parameters_hash(recorded), _model(recorded),
                  _engine(recorded), MappingProxyType(inputs), package_source_hash())


def experiment_status(spec: ExperimentSpec, *, results_root: Path, smoke: bool = False, lm: str | None = None,
                      overrides: Mapping[str, ParamValue] | None = None) -> str:
    """"completed" only if a completed record matches today's parameters (``overrides`` included), notebook, inputs and
    roma_lab source, every declared output exists and every recorded output still has its recorded
    SHA-256. Otherwise "not run", "stale", "incomplete" (a declared output is missing), "modified"
    (an output was edited or emptied since), "failed", "interrupted", "running" (a run killed
    hard) or "unreadable" (provenance.json is damaged)."""
    out_dir = Path(results_root) / spec.stem
    overrides = check_overrides(spec, overrides or {})
    return run_status(spec, out_dir, lambda: run_key(spec, out_dir=out_dir, smoke=smoke, lm=lm, overrides=overrides))


def run_status(spec: ExperimentSpec, out_dir: Path, key: Callable[[], RunKey]) -> str:
    """:func:`experiment_status` against the run key ``key()``, asked for only when a completed record
    has to be compared (listing experiments that never ran hashes nothing)."""
    try:
        record = read_provenance(out_dir)
    except FileNotFoundError:
        return "not run"
    except ProvenanceError:
        return "unreadable"
    if record.status != "completed":
        return record.status
    if not key().matches(record):
        return "stale"
    if any(not (out_dir / name).is_file() for name in spec.outputs):
        return "incomplete"
    if changed_outputs(out_dir, record):
        return "modified"
    return "completed"

