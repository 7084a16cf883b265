"""provenance.json: what produced a results folder, written once per run and read back.

Pydantic is used here because this record crosses a boundary (it is written to disk and
validated when read back); everything else in memory stays plain.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError, model_validator

import roma_lab

from ._files import (
    QUARANTINED,
    DamagedFileError,
    open_regular,
    quarantine,
    read_regular_bytes,
    write_text_atomic,
)

if TYPE_CHECKING:
    from roma_lab.stats import StatsSettings

PROVENANCE_FILE = "provenance.json"
#: Where a paper's tables, computed in the notebook's kernel, leave the statistics settings they used
#: for the record the runner writes afterwards in its own process. Hidden: bookkeeping, not an output.
STATS_FILE = ".stats.json"

# Distribution names whose versions shape results; looked up in package metadata, never
# imported (importing dspy or llama_cpp would cost seconds). Missing ones are recorded as None.
TRACKED_PACKAGES = (
    "roma_lab",
    "numpy",
    "scipy",
    "pandas",
    "pyarrow",
    "pydantic",
    "matplotlib",
    "papermill",
    "ipywidgets",
    "dspy",
    "gepa",
    "bm25s",
    "llama-cpp-python",
    "xllamacpp",
)

Status = Literal["running", "completed", "failed", "interrupted"]


class ProvenanceError(ValueError):
    """A provenance.json exists but is not a valid record (damaged, edited, or from another tool)."""


class StatsRecord(BaseModel):
    """The ``roma_lab.stats.StatsSettings`` a folder's tables were computed with, as recorded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_resamples: int
    seed: int
    level: float
    alpha: float
    power: float
    # records written before the setting existed were computed with the percentile bootstrap
    paired_ci: str = "percentile"


class Provenance(BaseModel):
    """The record stored as ``provenance.json`` in every results folder."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    status: Status
    error: str | None = None
    roma_lab_version: str
    roma_lab_source: str  # SHA-256 over the package's source files: code changes make results stale
    git_commit: str | None
    git_dirty: bool | None
    python: str
    platform: str
    packages: dict[str, str | None]
    parameters: dict[str, JsonValue]
    parameters_hash: str
    seeds: dict[str, int]
    model: str | None
    inputs: dict[str, str]  # path as given -> SHA-256
    outputs: dict[str, str]  # path relative to the results folder -> SHA-256
    extra: dict[str, JsonValue]
    stats: StatsRecord | None = None  # None: no table of the folder used statistics (or a record older than it)
    started_at: datetime
    finished_at: datetime

    @model_validator(mode="after")
    def _error_matches_status(self) -> Provenance:
        if self.status == "failed" and not self.error:
            raise ValueError("a failed run must record its error")
        if self.status == "completed" and self.error is not None:
            raise ValueError("a completed run cannot carry an error")
        return self


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a regular file's bytes, read in chunks so large data files are fine (anything else
    in its place: ``DamagedFileError``)."""
    digest = hashlib.sha256()
    with open_regular(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _text(value: Any) -> Any:
    """A notebook's multi-line string as one string, whether stored as one or as a list of lines."""
    return "".join(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else value


def _recorded_output(output: dict) -> dict:
    return {key: ({k: _text(v) for k, v in value.items()} if key == "data" and isinstance(value, dict) else _text(value))
            for key, value in output.items() if key != "metadata"}  # an output's metadata is a display hint


def output_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 a run records for one of its outputs: a file's bytes, but for an executed notebook
    what it recorded (each cell's type, source, execution count and outputs), not the metadata an
    editor rewrites on opening it (JupyterLab's kernelspec, cell ids, widget state, trust) nor how
    it lays out the JSON. Viewing results never changes their status (design/runner.md)."""
    path = Path(path)
    if path.suffix != ".ipynb":
        return sha256_file(path)
    try:
        cells = json.loads(read_regular_bytes(path)).get("cells")
    except DamagedFileError:
        raise
    except (ValueError, AttributeError, RecursionError):  # not a notebook any more: its bytes say so
        return sha256_file(path)
    if not isinstance(cells, list):
        return sha256_file(path)
    recorded = [[c.get("cell_type"), _text(c.get("source")), c.get("execution_count"),
                 [_recorded_output(o) for o in c.get("outputs", []) if isinstance(o, dict)]]
                for c in cells if isinstance(c, dict)]
    return hashlib.sha256(json.dumps(recorded, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def package_source_hash() -> str:
    """SHA-256 over roma_lab's own source and data files (relative path + bytes, in path order)."""
    package = Path(roma_lab.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in {".py", ".csv"} and p.is_file()):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def parameters_hash(parameters: Mapping[str, Any]) -> str:
    """SHA-256 of the parameters as canonical JSON: equal parameters, equal hash."""
    try:
        canonical = json.dumps(dict(parameters), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"parameters must be JSON literals (str, int, float, bool, lists): {exc}") from None
    return hashlib.sha256(canonical.encode()).hexdigest()


def _git(repo_root: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", "-C", str(repo_root), *args], capture_output=True, text=True, timeout=30, check=False
        )
    except (FileNotFoundError, subprocess.TimeoutExpired):  # no git binary, or a stuck repository
        return None


def git_state(
    repo_root: str | os.PathLike[str], exclude: Sequence[str] = ("results",)
) -> tuple[str | None, bool | None]:
    """(HEAD commit, dirty) of the git work tree at ``repo_root``; (None, None) outside a repo.

    ``exclude`` lists repo-relative paths ignored by the dirty check: results written by a
    run must not mark the code that produced the next run as modified.
    """
    root = Path(repo_root)
    inside = _git(root, "rev-parse", "--is-inside-work-tree")
    if inside is None or inside.returncode != 0 or inside.stdout.strip() != "true":
        return None, None
    head = _git(root, "rev-parse", "--verify", "--quiet", "HEAD")
    commit = head.stdout.strip() if head is not None and head.returncode == 0 else None  # None: no commit yet
    status = _git(root, "status", "--porcelain", "--", ".", *(f":(exclude){p}" for p in exclude))
    dirty = bool(status.stdout.strip()) if status is not None and status.returncode == 0 else None
    return commit, dirty


def package_versions(names: Sequence[str] = TRACKED_PACKAGES) -> dict[str, str | None]:
    """Installed versions from package metadata (None when not installed)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def default_repo_root() -> Path:
    """The directory holding the ``roma_lab`` package: the repository in an editable install."""
    return Path(roma_lab.__file__).resolve().parent.parent


def _is_output(out_dir: Path, path: Path) -> bool:
    # Hidden names are bookkeeping, not results: temporary files of atomic writes, the runner's
    # kernel record (hashing a temporary file would make the record depend on a write in flight).
    # Quarantined files are kept as evidence; deleting one must not make a run look modified.
    relative = path.relative_to(out_dir)
    return path.is_file() and relative.as_posix() != PROVENANCE_FILE and not any(
        part.startswith(".") or QUARANTINED in part for part in relative.parts)


def _hash_outputs(out_dir: Path) -> dict[str, str]:
    return {p.relative_to(out_dir).as_posix(): output_sha256(p) for p in sorted(out_dir.rglob("*"))
            if _is_output(out_dir, p)}


def changed_outputs(out_dir: str | os.PathLike[str], record: Provenance) -> list[str]:
    """Outputs the record lists that are now missing or whose content differs from the recorded
    SHA-256 (:func:`output_sha256`: a notebook's recorded cells, any other file's bytes)."""
    out = Path(out_dir)
    return [name for name, digest in record.outputs.items()
            if not (out / name).is_file() or output_sha256(out / name) != digest]


def record_stats(out_dir: str | os.PathLike[str], stats: StatsSettings) -> Path:
    """Leave the statistics settings a folder's tables were computed with for its provenance record
    (:func:`write_provenance` reads them). The last call wins: one folder, one notebook's settings."""
    return write_text_atomic(Path(out_dir) / STATS_FILE, StatsRecord(**stats.as_dict()).model_dump_json() + "\n")


def _recorded_stats(out: Path) -> StatsRecord | None:
    path = out / STATS_FILE
    try:
        return StatsRecord.model_validate_json(read_regular_bytes(path))
    except FileNotFoundError:
        return None
    except (ValidationError, DamagedFileError):
        quarantine(path, "not a statistics settings record; provenance records no stats")
        return None


def write_provenance(
    out_dir: str | os.PathLike[str],
    *,
    parameters: Mapping[str, Any],
    seeds: Mapping[str, int] | None = None,
    model: str | None = None,
    inputs: Sequence[str | os.PathLike[str]] = (),
    extra: Mapping[str, Any] | None = None,
    status: Status = "completed",
    started_at: datetime | None = None,
    error: str | None = None,
    root: str | os.PathLike[str] | None = None,
    roma_lab_source: str | None = None,
    git: tuple[str | None, bool | None] | None = None,
    stats: StatsSettings | None = None,
) -> Path:
    """Write ``<out_dir>/provenance.json`` and return its path.

    Relative ``inputs`` are resolved against ``root`` (default: the repository holding
    roma_lab), which is also where the git state is read. Every file already in ``out_dir``
    (except provenance.json itself) is hashed, so write the tables first. ``roma_lab_source``: the
    :func:`package_source_hash` the caller took at the start of its run (default: taken now); ``git``:
    the :func:`git_state` it took then (default: read now; a run's record names the commit it started
    from, not one committed while it ran).
    ``stats``: the statistics settings the tables used (default: those :func:`record_stats` left in
    ``out_dir``, if any).
    """
    out = Path(out_dir)
    repo = Path(root) if root is not None else default_repo_root()
    input_hashes = {}
    for item in inputs:
        path = Path(item) if Path(item).is_absolute() else repo / item
        if not path.is_file():
            raise FileNotFoundError(f"provenance input {str(item)!r} not found (looked for {path})")
        input_hashes[Path(item).as_posix()] = sha256_file(path)
    commit, dirty = git_state(repo) if git is None else git
    now = datetime.now(UTC)
    record = Provenance(
        status=status,
        error=error,
        roma_lab_version=roma_lab.__version__,
        roma_lab_source=package_source_hash() if roma_lab_source is None else roma_lab_source,
        git_commit=commit,
        git_dirty=dirty,
        python=sys.version.split()[0],
        platform=platform.platform(),
        packages=package_versions(),
        parameters=dict(parameters),
        parameters_hash=parameters_hash(parameters),
        seeds=dict(seeds or {}),
        model=model,
        inputs=input_hashes,
        outputs=_hash_outputs(out) if out.is_dir() else {},
        extra=dict(extra or {}),
        stats=StatsRecord(**stats.as_dict()) if stats is not None else _recorded_stats(out),
        started_at=started_at or now,
        finished_at=now,
    )
    return write_text_atomic(out / PROVENANCE_FILE, record.model_dump_json(indent=2) + "\n")


def read_provenance(out_dir: str | os.PathLike[str]) -> Provenance:
    """Read and validate ``<out_dir>/provenance.json``: FileNotFoundError when there is none,
    :class:`ProvenanceError` (naming the file) when its content is not a valid record."""
    path = Path(out_dir) / PROVENANCE_FILE
    try:
        data = read_regular_bytes(path)  # a FIFO or folder in its place: DamagedFileError naming it
    except FileNotFoundError:
        raise FileNotFoundError(f"no {PROVENANCE_FILE} in {Path(out_dir)}") from None
    try:
        return Provenance.model_validate_json(data)  # bytes: invalid UTF-8 is a validation error too
    except ValidationError as exc:
        raise ProvenanceError(f"{path} is not a valid provenance record: {exc}") from exc
