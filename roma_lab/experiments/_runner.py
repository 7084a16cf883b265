"""Run experiments through papermill into ``results/<stem>/``, skipping what is complete.

Reading order: the two entry points (:func:`run_experiment`, :func:`run_experiments`), what they
return, the one request a run is built from (:class:`RunRequest`, with the provenance ``extra`` it
records), then the run's steps. The run's identity and status (``_key.py``), the lock and the
kernel (``_kernel.py``), the folder's preparation (``_folder.py``), the executed notebook's banner
and signature (``_finish.py``) and the running cell's heartbeat (``_heartbeat.py``) are files of
their own.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from roma_lab._environment import ENV
from roma_lab.results import ProvenanceError, git_state, quarantined_files, read_provenance, write_provenance

from ._finish import finish_notebook
from ._folder import prepare_folder
from ._heartbeat import Announce
from ._kernel import RunnerStateError, hold_experiment, kernel_manager_class, stop_kernel
from ._key import RunKey, recorded_parameters, run_key, run_parameters, run_status
from ._spec import ExperimentSpec, OverrideError, ParamValue, check_overrides
from ._times import count_model_calls

Outcome = Literal["completed", "skipped", "failed"]
Per = Literal["item", "notebook"]


def run_experiment(
    spec: ExperimentSpec,
    *,
    results_root: str | Path,
    smoke: bool = False,
    lm: str | None = None,
    force: bool = False,
    kernel_env: Mapping[str, str] | None = None,
    cluster: Mapping[str, Any] | None = None,
    overrides: Mapping[str, ParamValue] | None = None,
    budget_usd: float | None = None,
    plan: Mapping[str, Any] | None = None,
    batch_started_at: datetime | None = None,
) -> RunOutcome:
    """Execute one experiment into ``<results_root>/<stem>/`` and write its provenance.json.

    Skipped when already completed with the same parameters, notebook and inputs and unchanged
    outputs (unless ``force``). One runner at a time per experiment (a lock beside the folder); a
    kernel left running by a killed runner is stopped before the folder is touched. Work of
    the same run is kept so item-level results resume (see ``prepare_folder``); otherwise the folder is
    emptied first. A failing notebook gives a "failed" outcome with its error, never an exception,
    so a batch keeps going. On KeyboardInterrupt the record says "interrupted" and the interrupt
    propagates; the next run redoes this experiment.

    ``kernel_env``: environment variables set for the notebook's kernel (the runner names the
    cluster its items go to, $ROMA_LAB_CLUSTER). ``cluster``: the JSON record of the cluster this
    run used, kept in provenance under ``extra.cluster``. ``overrides``: sizes asked for this run
    (``--set N_TASKS=100``), on top of the spec's; a name the notebook does not declare, one the
    runner owns or a value of another type raises :class:`OverrideError` before anything runs.
    They are parameters of the run (its identity and provenance's ``parameters``), listed again
    under ``extra.overrides``, and scale the cell timeout (``extra.cell_timeout_s``).
    ``budget_usd``: a dollar cap handed to the kernel as $ROMA_LAB_BUDGET_USD (``roma_lab.evaluate``
    keeps it when a notebook names none) and recorded under ``extra.budget_usd``. It is not part of the
    run's identity, so another cap resumes the same rows; but a completed run is skipped only when it
    ran under the cap asked now (one stopped at a lower cap runs again, resuming).
    ``plan``: the study plan's line for this notebook (``experiments plan``: its n, predicted time and
    MDE), printed before it runs and recorded under ``extra.plan``. ``batch_started_at``: when the batch
    this run belongs to began (None: this run alone): a model call the completion cache served from
    an entry recorded before it is a replay (``extra.model_calls.earlier``), one recorded since is a
    request an earlier notebook of the batch asked first.
    """
    start = time.perf_counter()
    request = _request(spec, results_root=results_root, smoke=smoke, lm=lm, force=force, kernel_env=kernel_env,
                       cluster=cluster, overrides=overrides, budget_usd=budget_usd, plan=plan,
                       batch_started_at=batch_started_at)
    out_dir = request.out_dir
    if (not force and run_status(spec, out_dir, lambda: request.key) == "completed"
            and _budget_of(out_dir) == budget_usd):
        return RunOutcome(spec.stem, "skipped", out_dir)
    try:
        with hold_experiment(out_dir):
            if plan is not None:
                print(f"plan: {plan['line']}", flush=True)
            error = _run(request)
    except RunnerStateError as exc:
        error = str(exc)
    return RunOutcome(spec.stem, "failed" if error else "completed", out_dir, error, time.perf_counter() - start)


def run_experiments(
    specs: Sequence[ExperimentSpec],
    *,
    results_root: str | Path,
    smoke: bool = False,
    lm: str | None = None,
    force: bool = False,
    progress: bool = True,
    cluster: str | None = None,
    per: Per = "item",
    overrides: Mapping[str, ParamValue] | None = None,
    budget_usd: float | None = None,
    plans: Mapping[str, Mapping[str, Any]] | None = None,
    batch_started_at: datetime | None = None,
) -> list[RunOutcome]:
    """Run specs with a tqdm bar; one failure does not stop the rest.

    ``cluster`` (a ``roma_lab.cluster`` cluster name; None = $ROMA_LAB_CLUSTER, else in-process):
    with ``per="item"`` the notebooks run here one after the other and send their benchmark items
    to the cluster (their kernels get the scheduler's address as $ROMA_LAB_CLUSTER, so a local
    cluster starts once for the whole sweep); with ``per="notebook"`` whole notebooks run on the
    workers, as many at once as there are workers, and their items run in their kernels. Either
    way the workers' environments are checked first (packages, Python, roma_lab source, and the
    weights of the local models the notebooks name), and each provenance.json records the
    cluster, its workers with their package versions, and (per notebook) the worker that ran it.

    ``overrides`` (``--set``) apply to every spec and must suit each: they are checked against all
    of them (one :class:`OverrideError` naming each that refuses them) before any notebook runs.
    ``budget_usd``: each notebook's dollar cap (:func:`run_experiment`); its items then run in its own
    kernel, so not with ``per="item"`` on a cluster (a ValueError). ``plans``: per notebook stem, its
    line of the study plan (:func:`run_experiment`'s ``plan``). ``batch_started_at``: when the batch
    began (None: now), as :func:`run_experiment` takes it.
    """
    from tqdm.auto import tqdm

    from roma_lab import cluster as batch

    if per not in ("item", "notebook"):
        raise ValueError(f"per must be 'item' or 'notebook', got {per!r}")
    how = batch.resolve_cluster(cluster)
    if budget_usd is not None and how.kind != "in-process" and per == "item":
        raise ValueError("a dollar cap is kept in each notebook's kernel, which then runs its items itself: "
                         "use --per notebook (or no cluster) with --budget-usd")
    overrides, plans = dict(overrides or {}), dict(plans or {})
    refused = []
    for spec in specs:
        try:
            check_overrides(spec, overrides)
        except OverrideError as exc:
            refused.append(str(exc))
    if refused:
        raise OverrideError("\n".join(refused))
    kwargs = {"results_root": results_root, "smoke": smoke, "lm": lm, "force": force, "overrides": overrides,
              "budget_usd": budget_usd, "batch_started_at": batch_started_at or datetime.now(UTC)}
    outcomes = []
    with tqdm(total=len(specs), desc="experiments", unit="exp", disable=not progress) as bar:

        def report(outcome: RunOutcome) -> None:
            bar.update(1)
            bar.write(f"{outcome.status:>9}  {outcome.stem}" + (f"  ({outcome.error})" if outcome.error else ""))
            outcomes.append(outcome)

        if how.kind == "in-process":
            for spec in specs:
                bar.set_postfix_str(spec.stem)
                report(run_experiment(spec, plan=plans.get(spec.stem), **kwargs))
            return outcomes
        record = _cluster_record(how, specs, smoke=smoke, lm=lm, per=per, overrides=overrides)
        if per == "item":
            kernel_env = {batch.ENV_VAR: record["scheduler"]}
            for spec in specs:
                bar.set_postfix_str(spec.stem)
                report(run_experiment(spec, kernel_env=kernel_env, cluster=record, plan=plans.get(spec.stem),
                                      **kwargs))
            return outcomes
        # per notebook: the kernels on the workers run their items in-process (nested dispatch could
        # hold every worker waiting for work that has no worker left to run it)
        work = _Experiment(kwargs, record, plans)
        for done in batch.dispatch(work, list(specs), how=batch.Dispatch(cluster=how.name), label="notebook"):
            spec = specs[done.index]
            report(done.value if done.error is None else RunOutcome(
                spec.stem, "failed", (Path(results_root) / spec.stem).resolve(),
                f"{type(done.error).__name__}: {done.error}"))
    order = {spec.stem: i for i, spec in enumerate(specs)}
    return sorted(outcomes, key=lambda o: order[o.stem])


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What happened to one experiment in a run."""

    stem: str
    status: Outcome
    out_dir: Path
    error: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One experiment's run as asked, built once (:func:`_request`) and handed to every step: the
    status check, the folder's preparation, the execution and both records."""

    spec: ExperimentSpec
    out_dir: Path  # <results_root>/<stem>, resolved
    key: RunKey  # the run's identity, taken once: the model and the sizes asked are among its parameters
    smoke: bool
    force: bool
    overrides: Mapping[str, ParamValue]  # the sizes asked (--set), checked against the notebook
    kernel_env: Mapping[str, str]  # set for the notebook's kernel, the dollar cap included
    cluster: Mapping[str, Any] | None  # the cluster's record (run_experiments), None in-process
    budget_usd: float | None
    plan: Mapping[str, Any] | None  # the study plan's line for this notebook
    batch_started_at: datetime | None  # when its batch began (None: this run alone)

    def provenance_extra(self, *, recovered: str | None, quarantined: list[str],
                         model_calls: Mapping[str, int] | None = None) -> dict[str, Any]:
        """``extra`` of the run's provenance.json: experiment, paper, table, tier and cell timeout; the
        engine of a local model; the sizes asked, what the folder's preparation had to repair
        (``recovered``), the cluster, the dollar cap, the plan line, the damaged files moved aside
        so far (``quarantined``) and, once it ended, its traces' model requests and how many the
        completion cache served (``model_calls``: a replay's time is not the model's), each when there
        is one."""
        spec, key = self.spec, self.key
        extra = {"experiment": spec.stem, "paper": spec.paper, "table": spec.table, "smoke": self.smoke,
                 "cell_timeout_s": spec.cell_timeout_s(dict(key.recorded))}
        if key.engine is not None:
            extra["engine"] = dict(key.engine)
        if self.overrides:  # which of the parameters were asked on the command line
            extra["overrides"] = dict(self.overrides)
        if recovered:
            extra["recovered"] = recovered
        if self.cluster:
            extra["cluster"] = dict(self.cluster)
        if self.budget_usd is not None:
            extra["budget_usd"] = self.budget_usd
        if self.plan is not None:
            extra["plan"] = dict(self.plan)
        if quarantined:
            extra["quarantined"] = quarantined
        if model_calls is not None:
            extra["model_calls"] = dict(model_calls)
        return extra


def _request(spec: ExperimentSpec, *, results_root: str | Path, smoke: bool, lm: str | None, force: bool,
             kernel_env: Mapping[str, str] | None, cluster: Mapping[str, Any] | None,
             overrides: Mapping[str, ParamValue] | None, budget_usd: float | None,
             plan: Mapping[str, Any] | None, batch_started_at: datetime | None) -> RunRequest:
    """:func:`run_experiment`'s arguments as one request; :class:`OverrideError` for sizes the notebook refuses."""
    out_dir = (Path(results_root) / spec.stem).resolve()
    overrides = check_overrides(spec, overrides or {})
    env = dict(kernel_env or {})
    if budget_usd is not None:
        env[ENV.budget_usd] = repr(budget_usd)  # roma_lab.evaluate reads it
    key = run_key(spec, out_dir=out_dir, smoke=smoke, lm=lm, overrides=overrides)  # the one identity of this run
    return RunRequest(spec=spec, out_dir=out_dir, key=key, smoke=smoke, force=force,
                      overrides=MappingProxyType(overrides), kernel_env=MappingProxyType(env), cluster=cluster,
                      budget_usd=budget_usd, plan=plan, batch_started_at=batch_started_at)


def _run(request: RunRequest) -> str | None:
    """Prepare the folder, execute, write the record; returns the error (None when completed)."""
    spec, out_dir, key = request.spec, request.out_dir, request.key
    recovered = prepare_folder(spec, out_dir, key, request.force)
    recorded = dict(key.recorded)
    missing_inputs = key.missing_inputs
    started_at = datetime.now(UTC)
    git = git_state(spec.root)  # the code it starts from: a commit made while it runs is not its code

    def record(status: str, error: str | None = None, model_calls: Mapping[str, int] | None = None) -> None:
        write_provenance(
            out_dir,
            parameters=recorded,
            seeds={k: v for k, v in recorded.items() if (k == "SEED" or k.endswith("_SEED")) and type(v) is int},
            model=key.model,
            inputs=[p for p in key.inputs if p not in missing_inputs],
            # quarantined: the damaged files moved aside so far, by the runner or the notebook
            extra=request.provenance_extra(recovered=recovered, quarantined=quarantined_files(out_dir),
                                           model_calls=model_calls),
            status=status,
            started_at=started_at,
            error=error,
            root=spec.root,
            roma_lab_source=key.source,
            git=git,
        )

    record("running")  # a run killed hard leaves "running", which is never taken as complete
    error = None
    if missing_inputs:
        error = f"input files missing: {', '.join(missing_inputs)}"
    else:
        try:
            _execute(spec, out_dir, dict(key.parameters), request.kernel_env)
        except KeyboardInterrupt:
            record("interrupted")
            raise
        except Exception as exc:  # any failure of this notebook is recorded; the batch goes on
            error = _describe(exc)
        else:
            # the folder holds only this run's files (fresh, or kept from this same run): existence suffices
            missing = [name for name in spec.outputs if not (out_dir / name).is_file()]
            if missing:
                error = f"notebook finished without writing declared outputs: {', '.join(missing)}"
        if (out_dir / spec.notebook.name).is_file():  # a failed run's copy too: its traceback and outputs so far
            finish_notebook(out_dir / spec.notebook.name,
                            {k: key.parameters[k] for k in spec.smoke if k in key.parameters} if request.smoke else None)
    since = request.batch_started_at or started_at  # a cache entry recorded since is this batch's own request
    record("failed" if error else "completed", error, count_model_calls(out_dir, since).as_dict())
    return error


def _execute(spec: ExperimentSpec, out_dir: Path, params: dict[str, Any], kernel_env: Mapping[str, str]) -> None:
    import nbformat
    import papermill

    n_cells = len(nbformat.read(spec.notebook, as_version=4).cells) + 1  # papermill adds the injected parameters
    announce = Announce(spec.stem, n_cells, out_dir)
    try:
        papermill.execute_notebook(
            str(spec.notebook),
            str(out_dir / spec.notebook.name),  # executed copy beside the results, never in place
            parameters=params,
            cwd=str(spec.notebook.parent),
            execution_timeout=spec.cell_timeout_s(params),  # follows the sizes asked (design/runner.md)
            kernel_name="python3",
            progress_bar=False,
            kernel_manager_class=kernel_manager_class(out_dir, kernel_env),
            on_cell_execute=announce,
        )
    finally:
        announce.stop()
        stop_kernel(out_dir)  # papermill shuts its kernel down; this only clears the record


def _describe(exc: Exception) -> str:
    from papermill.exceptions import PapermillExecutionError

    if isinstance(exc, PapermillExecutionError):  # the full traceback stays in the executed notebook
        return f"{exc.ename}: {exc.evalue} (cell In [{exc.exec_count}])"
    return f"{type(exc).__name__}: {exc}"


def _budget_of(out_dir: Path) -> float | None:
    """The dollar cap the folder's recorded run was given (None: none, or no readable record)."""
    try:
        return read_provenance(out_dir).extra.get("budget_usd")
    except (FileNotFoundError, ProvenanceError):
        return None


def _cluster_record(how, specs: Sequence[ExperimentSpec], *, smoke: bool, lm: str | None, per: Per,
                    overrides: Mapping[str, ParamValue]) -> dict[str, Any]:
    """Check every worker against this process for the models the notebooks will load; the record
    provenance keeps: cluster, scheduler, dashboard, and each worker with its environment."""
    from roma_lab import cluster as batch

    models = set()
    for spec in specs:
        recorded = recorded_parameters(spec, run_parameters(spec, out_dir=Path("."), smoke=smoke, lm=lm,
                                                            overrides=check_overrides(spec, overrides)))
        models |= {v for k, v in recorded.items() if k in ("LM", "JUDGE_LM") and isinstance(v, str) and v}
    s = batch.session(how)
    expected = batch.expected_environment(sorted(models))
    workers = batch.check_workers(s.client, expected)
    info = s.workers()
    return {"name": how.name, "per": per, "scheduler": s.scheduler, "dashboard": s.dashboard,
            "workers": {address: {**info.get(address, {}), "environment": env.as_json()}
                        for address, env in sorted(workers.items())}}


@dataclass(frozen=True, slots=True)
class _Experiment:
    """One notebook on a worker: ``run_experiment`` there (its lock, orphan-kernel stop and resume
    work as here: the workers share this checkout's paths), its kernel told to run items in-process."""

    kwargs: Mapping[str, Any]
    record: Mapping[str, Any]
    plans: Mapping[str, Mapping[str, Any]]

    def __call__(self, spec: ExperimentSpec) -> RunOutcome:
        from distributed import get_worker

        from roma_lab import cluster as batch

        cluster = {**self.record, "worker": get_worker().address}
        return run_experiment(spec, kernel_env={batch.ENV_VAR: batch.IN_PROCESS}, cluster=cluster,
                              plan=self.plans.get(spec.stem), **self.kwargs)
