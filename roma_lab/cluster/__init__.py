"""Batch runs on a Dask cluster: a cluster named once, like a model, and work sent to its workers.

``resolve_cluster`` reads a cluster name (``--cluster``, $ROMA_LAB_CLUSTER): ``in-process`` (the
default; Dask is not imported), ``local:N`` (a LocalCluster of N worker processes) or a scheduler
address (``tcp://host:8786``). ``dispatch`` runs a function over inputs on it and hands each result
back as it completes, after checking that every worker shares the client's environment
(``WorkerEnvironmentError`` otherwise). ``roma_lab.evaluate`` (its attempts, ``cluster=``) and
``roma_lab.experiments`` (notebooks) dispatch through it. See design/cluster.md.
"""

from ._cluster import (
    ENV_VAR,
    IN_PROCESS,
    ClusterConnectError,
    ClusterSpec,
    Session,
    describe_cluster_name,
    resolve_cluster,
    session,
    shutdown,
)
from ._dispatch import Dispatch, Done, describe, dispatch, limit_name
from ._environment import Environment, WorkerEnvironmentError, check_workers, environment, expected_environment

__all__ = [
    "ENV_VAR",
    "IN_PROCESS",
    "ClusterConnectError",
    "ClusterSpec",
    "Dispatch",
    "Done",
    "Environment",
    "Session",
    "WorkerEnvironmentError",
    "check_workers",
    "describe",
    "describe_cluster_name",
    "dispatch",
    "environment",
    "expected_environment",
    "limit_name",
    "resolve_cluster",
    "session",
    "shutdown",
]
