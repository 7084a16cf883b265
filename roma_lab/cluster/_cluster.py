"""Naming a cluster, and the one Dask client a process keeps per cluster name."""

from __future__ import annotations

import atexit
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from roma_lab._environment import ENV

__all__ = ["ENV_VAR", "IN_PROCESS", "ClusterConnectError", "ClusterSpec", "Session", "describe_cluster_name",
           "resolve_cluster", "session", "shutdown"]

ENV_VAR = ENV.cluster
IN_PROCESS = "in-process"
# A scheduler that does not answer within this many seconds is reported, not waited for.
CONNECT_TIMEOUT_S = 20
_LOCAL = re.compile(r"^local(?::(\d+))?$")
_ADDRESS = re.compile(r"^(tcp|tls)://[^\s/:]+:\d+$")


class ClusterConnectError(ConnectionError):
    """The named scheduler cannot be reached, or a local cluster could not start."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """A cluster as named: ``in-process`` (no Dask at all), ``local:N`` (a LocalCluster of N worker
    processes on this machine, one thread each) or a scheduler address (``tcp://host:8786``)."""

    name: str
    kind: Literal["in-process", "local", "scheduler"]
    n_workers: int = 0


def describe_cluster_name(name: str | None = None) -> str:
    """The effective name: ``name``, else $ROMA_LAB_CLUSTER, else ``in-process``."""
    return name or os.environ.get(ENV_VAR) or IN_PROCESS


def resolve_cluster(name: str | ClusterSpec | None = None) -> ClusterSpec:
    """The cluster a name denotes; the only place that reads a cluster name (like ``resolve_lm`` for models).

    - None: $ROMA_LAB_CLUSTER, else ``in-process``.
    - ``in-process``: items and notebooks run in this process, one after the other; Dask is never imported.
    - ``local`` / ``local:N``: a ``LocalCluster`` of N worker processes (default: this process's CPUs).
    - ``tcp://host:port`` / ``tls://host:port``: an existing scheduler (``dask scheduler`` and workers
      started by the user, on machines sharing this checkout's paths).
    """
    if isinstance(name, ClusterSpec):
        return name
    text = describe_cluster_name(name).strip()
    if text == IN_PROCESS:
        return ClusterSpec(text, "in-process")
    local = _LOCAL.match(text)
    if local:
        n = int(local.group(1)) if local.group(1) else len(os.sched_getaffinity(0))
        if n < 1:
            raise ValueError(f"cluster {text!r}: a local cluster needs at least one worker")
        return ClusterSpec(f"local:{n}", "local", n)
    if _ADDRESS.match(text):
        return ClusterSpec(text, "scheduler")
    raise ValueError(f"unknown cluster name {text!r}; use '{IN_PROCESS}', 'local', 'local:<workers>' or a scheduler "
                     "address such as 'tcp://host:8786' (from --cluster or $ROMA_LAB_CLUSTER)")


@dataclass(slots=True)
class Session:
    """A live connection to a cluster: its client, and the LocalCluster when this process started it."""

    spec: ClusterSpec
    client: Any
    local: Any = None
    checked: dict = field(default_factory=dict)  # models -> workers' environments already checked

    @property
    def scheduler(self) -> str:
        return self.client.scheduler.address

    @property
    def dashboard(self) -> str | None:
        return self.client.dashboard_link

    def workers(self) -> dict[str, dict[str, Any]]:
        """Scheduler's view of each worker: address -> {host, name, nthreads}."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return {address: {"host": w.get("host"), "name": str(w.get("name")), "nthreads": w.get("nthreads")}
                for address, w in sorted(info.items())}

    def close(self) -> None:
        self.client.close()
        if self.local is not None:
            self.local.close()


def _start(spec: ClusterSpec) -> Session:
    import logging

    import dask
    from distributed import Client, LocalCluster

    if spec.kind == "local":
        # Port 0 everywhere: several sessions (tests, notebooks) on one machine never collide.
        # Workers run their items in-process: a task that dispatched again would hold a worker
        # while waiting for others, and a cluster whose workers all wait deadlocks.
        # Saturation 1.0: in a sweep of more items than twice the workers, the scheduler queues the
        # items and hands each worker one at a time (items are long model calls: nothing to gain from
        # holding more), so a worker that dies charges fewer waiting items with its death.
        try:
            with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}):  # read by the scheduler it starts
                local = LocalCluster(n_workers=spec.n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                     scheduler_port=0, dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR,
                                     env={ENV_VAR: IN_PROCESS})
        except Exception as exc:
            raise ClusterConnectError(f"cluster {spec.name}: the local cluster did not start: {exc}") from exc
        return Session(spec, Client(local, set_as_default=False), local)
    try:
        client = Client(spec.name, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except OSError as exc:  # distributed raises OSError (a TimeoutError among them) when nobody answers
        raise ClusterConnectError(f"no Dask scheduler answers at {spec.name} within {CONNECT_TIMEOUT_S} s ({exc}); "
                                  "start one with `dask scheduler` and `dask worker <address>`, or name another "
                                  "cluster with --cluster / $ROMA_LAB_CLUSTER") from exc
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
    except TimeoutError as exc:  # a scheduler without workers would hold every item forever
        client.close()
        raise ClusterConnectError(f"the Dask scheduler at {spec.name} has no workers after {CONNECT_TIMEOUT_S} s; "
                                  f"start some with `dask worker {spec.name}`") from exc
    return Session(spec, client)


# One session per cluster name for the life of the process, like the one loaded model
# (lm._engine): a LocalCluster costs seconds to start, and a study calls roma_lab.evaluate once per
# system and task set. shutdown() closes them (atexit, and tests between modules).
_SESSIONS: dict[str, Session] = {}
_LOCK = threading.Lock()


def session(name: str | ClusterSpec | None = None) -> Session:
    """This process's session on the named cluster, started (or connected) on first use; prints
    the scheduler and the dashboard link once, so a notebook shows where to watch the sweep."""
    spec = resolve_cluster(name)
    if spec.kind == "in-process":
        raise ValueError("the in-process 'cluster' has no session: run the work directly")
    with _LOCK:
        if spec.name in _SESSIONS and _SESSIONS[spec.name].client.status == "running":
            return _SESSIONS[spec.name]
        started = _start(spec)
        _SESSIONS[spec.name] = started
    print(f"roma_lab: Dask cluster {spec.name}: scheduler {started.scheduler}, {len(started.workers())} workers; "
          f"dashboard {started.dashboard}", flush=True)
    return started


def open_session(name: str | ClusterSpec | None) -> Session | None:
    """The session already open on this cluster, if it is still connected; never starts one."""
    s = _SESSIONS.get(resolve_cluster(name).name)
    return s if s is not None and s.client.status == "running" else None


def shutdown() -> None:
    """Close every session this process opened (and the local clusters it started)."""
    with _LOCK:
        sessions = list(_SESSIONS.values())
        _SESSIONS.clear()
    for s in sessions:
        s.close()


atexit.register(shutdown)
