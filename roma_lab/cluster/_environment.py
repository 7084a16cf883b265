"""What a worker must share with the client: Python, roma_lab's source, package versions, model weights."""

from __future__ import annotations

import functools
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roma_lab.results import TRACKED_PACKAGES, package_source_hash, package_versions, sha256_file

__all__ = ["Environment", "WorkerEnvironmentError", "check_workers", "environment", "require"]

# Besides the packages provenance tracks, the ones that carry work between client and workers.
PACKAGES = (*TRACKED_PACKAGES, "dask", "distributed", "cloudpickle", "litellm")


class WorkerEnvironmentError(RuntimeError):
    """A worker's Python, roma_lab source, package versions or model weights differ from the client's:
    its results would not be the client's, so nothing it computed is written."""


@dataclass(frozen=True, slots=True)
class Environment:
    """One process's environment, as far as results depend on it."""

    python: str
    roma_lab_source: str  # SHA-256 over roma_lab's source files (results.package_source_hash)
    packages: tuple[tuple[str, str | None], ...]
    weights: tuple[tuple[str, str], ...]  # local model name -> SHA-256 of the weights it loads here

    def differences(self, other: Environment) -> list[str]:
        """Each way ``other`` (a worker's) differs from this one (the client's), worded for a person."""
        found = []
        if other.python != self.python:
            found.append(f"Python {other.python} (client {self.python})")
        if other.roma_lab_source != self.roma_lab_source:
            found.append("roma_lab source differs from the client's (another checkout or edited files)")
        theirs_packages = dict(other.packages)
        for name, mine in self.packages:
            theirs = theirs_packages.get(name)
            if mine != theirs:
                found.append(f"{name} {theirs or 'not installed'} (client {mine or 'not installed'})")
        theirs_weights = dict(other.weights)
        for name, mine in self.weights:
            if theirs_weights.get(name) != mine:
                found.append(f"weights of {name}: {theirs_weights.get(name)} (client {mine})")
        return found

    def as_json(self) -> dict[str, Any]:
        return {"python": self.python, "roma_lab_source": self.roma_lab_source, "packages": dict(self.packages),
                "weights": dict(self.weights)}


def _is_local(name: str) -> bool:
    return name == "local" or name.startswith("local:") or name.endswith(".gguf")


def _weights(name: str) -> str:
    """SHA-256 of the weights a local model name loads here, or why there are none to load."""
    from roma_lab.lm import DEFAULT_VARIANT, MODELS, ModelChecksumError, ModelNotInstalledError, model_file

    if name.endswith(".gguf"):
        path = Path(name).expanduser()
        return sha256_file(path) if path.is_file() else f"no file {path}"
    spec = MODELS.get(name.partition(":")[2] or DEFAULT_VARIANT)
    if spec is None:
        return f"unknown local model {name!r}"
    try:
        model_file(spec)  # verifies the SHA-256 against the pinned one (cached per file after the first time)
    except ModelNotInstalledError as exc:
        return f"not installed ({exc})"
    except ModelChecksumError as exc:
        return f"other weights ({exc})"
    return spec.sha256


@functools.lru_cache(maxsize=16)
def environment(models: tuple[str, ...] = ()) -> Environment:
    """This process's environment, with the weights of the local models among ``models`` (computed
    once per process: hashing a model file costs seconds)."""
    return Environment(
        python=platform.python_version(),
        roma_lab_source=package_source_hash(),
        packages=tuple(package_versions(PACKAGES).items()),
        weights=tuple((name, _weights(name)) for name in sorted(set(models)) if _is_local(name)),
    )


def _models(expected: Environment) -> tuple[str, ...]:
    return tuple(name for name, _ in expected.weights)


def require(expected: Environment, worker: str) -> None:
    """On a worker, before any work: raise WorkerEnvironmentError unless this process matches ``expected``
    (a worker that joins after the run started is checked here too)."""
    problems = expected.differences(environment(_models(expected)))
    if problems:
        raise WorkerEnvironmentError(f"worker {worker} differs from the client: {'; '.join(problems)}")


def check_workers(client: Any, expected: Environment) -> dict[str, Environment]:
    """Every worker's environment, or WorkerEnvironmentError naming each worker that differs and how."""
    found = client.run(environment, _models(expected))
    problems = {address: expected.differences(env) for address, env in sorted(found.items())}
    problems = {address: p for address, p in problems.items() if p}
    if problems:
        listing = "\n".join(f"  {address}: {'; '.join(p)}" for address, p in problems.items())
        raise WorkerEnvironmentError(f"{len(problems)} of {len(found)} workers differ from the client; their results "
                                     f"would not be this environment's, so nothing runs:\n{listing}\n"
                                     "Install the same packages, roma_lab checkout and model files on every worker.")
    return found


def expected_environment(models: Sequence[str]) -> Environment:
    """The client's environment for a run on these models (the one every worker must match)."""
    return environment(tuple(sorted(set(models))))
