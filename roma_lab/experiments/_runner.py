"""Run experiments through papermill into ``results/<stem>/``, skipping what is complete."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from roma_lab.results import package_source_hash, parameters_hash, read_provenance, sha256_file, write_provenance

from ._spec import ExperimentSpec

Outcome = Literal["completed", "skipped", "failed"]


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What happened to one experiment in a run."""

    stem: str
    status: Outcome
    out_dir: Path
    error: str | None = None
    seconds: float = 0.0


def run_parameters(spec: ExperimentSpec, *, out_dir: Path, smoke: bool, lm: str | None) -> dict[str, Any]:
    """Parameters papermill injects: the spec's, smoke overrides, OUT_DIR, SMOKE, and ``lm`` as LM
    when given and the notebook declares LM."""
    params: dict[str, Any] = dict(spec.parameters)
    if smoke:
        params.update(spec.smoke)
    params["OUT_DIR"] = str(Path(out_dir).resolve())
    params["SMOKE"] = smoke
    if lm is not None and "LM" in spec.declared:
        params["LM"] = lm
    return params


def _recorded(params: dict[str, Any]) -> dict[str, Any]:
    # OUT_DIR is the folder the record lives in; keeping it out lets results move with the repo.
    return {k: v for k, v in params.items() if k != "OUT_DIR"}


def _inputs(spec: ExperimentSpec) -> list[str]:
    # The notebook is an input too: editing it makes its results stale.
    return [spec.notebook.relative_to(spec.root).as_posix(), *spec.inputs]


def experiment_status(spec: ExperimentSpec, *, results_root: Path, smoke: bool = False, lm: str | None = None) -> str:
    """"completed" only if a completed record matches today's parameters, notebook, inputs and
    roma_lab source, and every declared output exists; otherwise "not run", "stale", "incomplete", "failed",
    "interrupted", "running" (a run killed hard) or "unreadable"."""
    out_dir = Path(results_root) / spec.stem
    try:
        record = read_provenance(out_dir)
    except FileNotFoundError:
        return "not run"
    except ValueError:  # pydantic's ValidationError: a record from another tool or version
        return "unreadable"
    if record.status != "completed":
        return record.status
    params = _recorded(run_parameters(spec, out_dir=out_dir, smoke=smoke, lm=lm))
    inputs = _inputs(spec)
    if record.parameters_hash != parameters_hash(params) or set(record.inputs) != set(inputs):
        return "stale"
    if record.roma_lab_source != package_source_hash():  # the code that made the numbers changed
        return "stale"
    if any(not (spec.root / p).is_file() or sha256_file(spec.root / p) != record.inputs[p] for p in inputs):
        return "stale"
    if any(not (out_dir / name).is_file() for name in spec.outputs):
        return "incomplete"
    return "completed"


def _signature(path: Path) -> tuple[int, int, int] | None:
    """Identity of a file's current contents (inode, size, mtime): any write changes it."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _resumable(spec: ExperimentSpec, out_dir: Path, recorded: dict[str, Any]) -> bool:
    """True when out_dir holds an unfinished run with these parameters, notebook, inputs and
    package source: only then may its per-item rows be continued."""
    try:
        record = read_provenance(out_dir)
    except (FileNotFoundError, ValueError):
        return False
    current = {p: sha256_file(spec.root / p) for p in _inputs(spec) if (spec.root / p).is_file()}
    return (record.status != "completed" and record.parameters_hash == parameters_hash(recorded)
            and record.roma_lab_source == package_source_hash() and record.inputs == current)


def _describe(exc: Exception) -> str:
    from papermill.exceptions import PapermillExecutionError

    if isinstance(exc, PapermillExecutionError):  # the full traceback stays in the executed notebook
        return f"{exc.ename}: {exc.evalue} (cell In [{exc.exec_count}])"
    return f"{type(exc).__name__}: {exc}"


def _execute(spec: ExperimentSpec, out_dir: Path, params: dict[str, Any]) -> None:
    import papermill

    papermill.execute_notebook(
        str(spec.notebook),
        str(out_dir / spec.notebook.name),  # executed copy beside the results, never in place
        parameters=params,
        cwd=str(spec.notebook.parent),
        execution_timeout=spec.timeout_s,
        kernel_name="python3",
        progress_bar=False,
    )


def run_experiment(
    spec: ExperimentSpec,
    *,
    results_root: str | Path,
    smoke: bool = False,
    lm: str | None = None,
    force: bool = False,
) -> RunOutcome:
    """Execute one experiment into ``<results_root>/<stem>/`` and write its provenance.json.

    Skipped when already completed with the same parameters, notebook and inputs (unless
    ``force``). An unfinished earlier run with the same parameters and code keeps its folder, so
    item-level results resume; otherwise the folder is emptied first. A failing notebook gives a "failed" outcome with its error, never an
    exception, so a batch keeps going. On KeyboardInterrupt the record says "interrupted"
    and the interrupt propagates; the next run redoes this experiment.
    """
    start = time.perf_counter()
    out_dir = (Path(results_root) / spec.stem).resolve()
    params = run_parameters(spec, out_dir=out_dir, smoke=smoke, lm=lm)
    if not force and experiment_status(spec, results_root=out_dir.parent, smoke=smoke, lm=lm) == "completed":
        return RunOutcome(spec.stem, "skipped", out_dir)

    recorded = _recorded(params)
    # An unfinished run of the same parameters and code keeps its folder, so package functions that
    # append per-item rows (roma_lab.bench) resume instead of starting over; anything else starts clean.
    if not _resumable(spec, out_dir, recorded):
        shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    inputs = _inputs(spec)
    missing_inputs = [p for p in inputs if not (spec.root / p).is_file()]
    lm_default = spec.declared.get("LM")  # source text such as '"local"'
    model = params.get("LM", lm_default.strip("'\"") if lm_default else None)
    started_at = datetime.now(UTC)
    before = {name: _signature(out_dir / name) for name in spec.outputs}

    def record(status: str, error: str | None = None) -> None:
        write_provenance(
            out_dir,
            parameters=recorded,
            seeds={k: v for k, v in recorded.items() if (k == "SEED" or k.endswith("_SEED")) and type(v) is int},
            model=model,
            inputs=[p for p in inputs if p not in missing_inputs],
            extra={"experiment": spec.stem, "paper": spec.paper, "table": spec.table, "smoke": smoke},
            status=status,
            started_at=started_at,
            error=error,
            root=spec.root,
        )

    record("running")  # a run killed hard leaves "running", which is never taken as complete
    error = None
    if missing_inputs:
        error = f"input files missing: {', '.join(missing_inputs)}"
    else:
        try:
            _execute(spec, out_dir, params)
        except KeyboardInterrupt:
            record("interrupted")
            raise
        except Exception as exc:  # any failure of this notebook is recorded; the batch goes on
            error = _describe(exc)
        else:
            # an output left by an earlier attempt does not count: it must be written by this run
            missing = [name for name in spec.outputs
                       if not (out_dir / name).is_file() or _signature(out_dir / name) == before[name]]
            if missing:
                error = f"notebook finished without writing declared outputs: {', '.join(missing)}"
    record("failed" if error else "completed", error)
    return RunOutcome(spec.stem, "failed" if error else "completed", out_dir, error, time.perf_counter() - start)


def run_experiments(
    specs: Sequence[ExperimentSpec],
    *,
    results_root: str | Path,
    smoke: bool = False,
    lm: str | None = None,
    force: bool = False,
    progress: bool = True,
) -> list[RunOutcome]:
    """Run specs in order with a tqdm bar; one failure does not stop the rest."""
    from tqdm.auto import tqdm

    outcomes = []
    with tqdm(specs, desc="experiments", unit="exp", disable=not progress) as bar:
        for spec in bar:
            bar.set_postfix_str(spec.stem)
            outcome = run_experiment(spec, results_root=results_root, smoke=smoke, lm=lm, force=force)
            bar.write(f"{outcome.status:>9}  {spec.stem}" + (f"  ({outcome.error})" if outcome.error else ""))
            outcomes.append(outcome)
    return outcomes
