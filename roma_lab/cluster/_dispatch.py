"""Run one function over many inputs on a cluster; the caller gets each result as it completes.

Workers only compute: they return values and never write a caller's files, so the caller writes
each result once, as it arrives (``roma_lab.evaluate`` appends its row). A worker that
dies mid-task has its task run again elsewhere by the scheduler (up to Dask's
``distributed.scheduler.allowed-failures``, then ``KilledWorker``, handed to the caller as that
input's error); a client that dies loses only the results not yet handed over, which a resumable
caller computes again on its next run.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ._cluster import CONNECT_TIMEOUT_S, ClusterConnectError, Session, open_session, resolve_cluster, session
from ._environment import Environment, WorkerEnvironmentError, check_workers, expected_environment, require

__all__ = ["Dispatch", "Done", "describe", "dispatch", "limit_name"]

# After this long without a finished task, the client looks whether the cluster still has workers.
_POLL_S = 5.0


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Where a batch runs, and the model its items call.

    ``cluster``: a cluster name (``roma_lab.cluster.resolve_cluster``; None = $ROMA_LAB_CLUSTER, else
    in-process). ``model``: the model name the items call; every worker must load the same weights
    for it (local models). ``max_concurrent``: at most this many items calling ``model`` run at
    once on the whole cluster (a Dask semaphore named after the model, shared by every run on that
    scheduler): the provider's rate limit, not the cluster's size, bounds a remote model. Retries
    with back-off stay DSPy's (``resolve_lm(..., num_retries=)``, design/online.md).
    """

    cluster: str | None = None
    model: str | None = None
    max_concurrent: int | None = None

    def __post_init__(self) -> None:
        if self.max_concurrent is not None and (self.max_concurrent < 1 or not self.model):
            raise ValueError(f"max_concurrent must be >= 1 and name its model, got {self.max_concurrent} "
                             f"for model {self.model!r}")
        resolve_cluster(self.cluster)  # a bad name fails here, not at the first item

    @property
    def in_process(self) -> bool:
        return resolve_cluster(self.cluster).kind == "in-process"

    @classmethod
    def of(cls, value: str | Dispatch | None) -> Dispatch:
        return value if isinstance(value, Dispatch) else cls(cluster=value)


def limit_name(model: str) -> str:
    """The cluster-wide semaphore of a model: named by its label, so two servers are two limits."""
    from roma_lab.lm import model_label

    return f"roma_lab model {model_label(model)}"


@dataclass(frozen=True, slots=True)
class Done:
    """One input's outcome: ``value`` from the worker, or ``error`` when no worker could finish it."""

    index: int
    value: Any = None
    error: BaseException | None = None
    worker: str | None = None


def _hold(shared: tuple) -> tuple:
    """The payload every task shares, sent once and recomputed from the graph if its holder dies."""
    return shared


def _task(work: Callable[..., Any], shared: tuple, item: Any, expected: Environment,
          limit: tuple[str, int] | None) -> tuple[Any, str]:
    from distributed import Semaphore, get_worker

    worker = get_worker().address
    require(expected, worker)
    lease = Semaphore(max_leases=limit[1], name=limit[0]) if limit else contextlib.nullcontext()
    with lease:
        return work(*shared, item), worker


def _checked(s: Session, how: Dispatch) -> Environment:
    expected = expected_environment([how.model] if how.model else [])
    if expected not in s.checked:  # once per session and models; later workers are checked per task
        s.checked[expected] = check_workers(s.client, expected)
    return expected


def dispatch(work: Callable[..., Any], inputs: Sequence[Any], *, how: Dispatch, shared: tuple = (),
             label: str = "roma_lab") -> Iterator[Done]:
    """``work(*shared, x)`` for each x in ``inputs`` on the cluster ``how`` names, yielding a ``Done``
    per input in completion order.

    Before anything runs, every worker's environment is compared with the client's
    (``WorkerEnvironmentError`` lists the workers that differ); each task checks its worker again.
    A ``WorkerEnvironmentError`` from a task stops the run; any other failure to get a result is
    that input's ``Done.error``. Closing the iterator (an interrupt, an exception in the caller)
    cancels what has not finished.
    """
    from distributed import as_completed

    s = session(how.cluster)
    expected = _checked(s, how)
    limit = (limit_name(how.model), how.max_concurrent) if how.max_concurrent else None
    client = s.client
    payload = client.submit(_hold, shared, pure=False, key=f"{label}-shared-{uuid.uuid4().hex}")
    run = uuid.uuid4().hex[:8]
    futures = {client.submit(_task, work, payload, x, expected, limit, pure=False, key=f"{label}-{run}-{i}"): i
               for i, x in enumerate(inputs)}
    completed = as_completed(futures, loop=client.loop)
    quiet_since, no_workers_since = time.monotonic(), None
    try:
        while not completed.is_empty():
            finished = completed.next_batch(block=False)
            if not finished:
                if time.monotonic() - quiet_since > _POLL_S:  # a while without news: is anyone still working?
                    quiet_since, no_workers_since = time.monotonic(), _still_served(s, no_workers_since)
                time.sleep(0.05)
                continue
            quiet_since, no_workers_since = time.monotonic(), None
            for future in finished:
                try:
                    value, worker = future.result()
                except WorkerEnvironmentError:
                    raise
                except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: this input's outcome, the run goes on
                    yield Done(futures[future], error=exc)
                else:
                    yield Done(futures[future], value, worker=worker)
    finally:
        client.cancel([*futures, payload])


def _still_served(s: Session, since: float | None) -> float | None:
    """Raise ClusterConnectError when the client lost its scheduler, or the cluster has had no
    worker for CONNECT_TIMEOUT_S; otherwise when the workers went missing (None while there are some)."""
    if s.client.status != "running":
        raise ClusterConnectError(f"lost the connection to the scheduler of {s.spec.name}; finished results are "
                                  "kept, rerun to resume")
    if s.client.scheduler_info(n_workers=-1)["workers"]:
        return None
    now = time.monotonic()
    if since is not None and now - since > CONNECT_TIMEOUT_S:
        raise ClusterConnectError(f"cluster {s.spec.name} has had no workers for {CONNECT_TIMEOUT_S} s; finished "
                                  "results are kept, rerun to resume")
    return since or now


def describe(how: Dispatch, items_by_worker: dict[str, list[str]]) -> dict[str, Any]:
    """A JSON record of where a batch ran: the cluster, its scheduler and dashboard, the model limit,
    and per worker its host, name, threads, environment (package versions, Python, roma_lab
    source, model weights) and the items it computed."""
    s = open_session(how.cluster)  # never restarted just to be described (the record may follow a lost scheduler)
    expected = expected_environment([how.model] if how.model else [])
    checked = s.checked.get(expected, {}) if s else {}
    workers = s.workers() if s else {}
    record = {}
    for address in sorted(set(checked) | set(items_by_worker)):
        env = checked.get(address)
        record[address] = {**workers.get(address, {"host": None, "name": None, "nthreads": None}),
                           # a worker that joined after the start check matched the client's, checked per task
                           "environment": (env or expected).as_json(), "checked": "at start" if env else "per task",
                           "items": items_by_worker.get(address, [])}
    return {"cluster": resolve_cluster(how.cluster).name, "scheduler": s.scheduler if s else None,
            "dashboard": s.dashboard if s else None, "model": how.model,
            "max_concurrent": how.max_concurrent, "workers": record}
