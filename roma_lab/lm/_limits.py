"""How many requests may be in flight to one model at once, process-wide.

Independent work (benchmark items, agent tasks x runs, best-of-N rollouts, judge calls) runs on
threads; what bounds it is the model, not the caller: one limit per model name, shared by every
caller in the process. The embedded engine's limit is its slot count (``slots``, 1 for the
in-process llama.cpp engine, which serves one sequence at a time); a remote model's is
``DEFAULT_REMOTE_CONCURRENCY`` unless set for its name with :func:`set_max_concurrency` or
``$ROMA_LAB_MAX_CONCURRENCY`` (``"8"`` for every remote model, or ``"openai/qwen=4,gpt-4o=16"``).
"""

from __future__ import annotations

import os
import threading
from typing import Any

__all__ = ["DEFAULT_REMOTE_CONCURRENCY", "LIMIT_ENV", "max_concurrency", "set_max_concurrency"]

DEFAULT_REMOTE_CONCURRENCY = 8
LIMIT_ENV = "ROMA_LAB_MAX_CONCURRENCY"
_overrides: dict[str, int] = {}
_lock = threading.Lock()


def _name(lm: Any) -> str:
    return lm if isinstance(lm, str) else str(getattr(lm, "model", type(lm).__name__))


def _positive(value: Any, where: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: a concurrency limit is a whole number >= 1, got {value!r}") from None
    if n < 1 or str(value).strip() not in (str(n), f"+{n}"):
        raise ValueError(f"{where}: a concurrency limit is a whole number >= 1, got {value!r}")
    return n


def _from_env() -> tuple[int | None, dict[str, int]]:
    """($ROMA_LAB_MAX_CONCURRENCY's default for remote models, its per-name limits)."""
    text = os.environ.get(LIMIT_ENV, "").strip()
    if not text:
        return None, {}
    if "=" not in text:
        return _positive(text, f"${LIMIT_ENV}"), {}
    named = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.rpartition("=")
        if not sep or not name.strip():
            raise ValueError(f"${LIMIT_ENV}: expected name=N pairs separated by commas, got {part!r}")
        named[name.strip()] = _positive(value, f"${LIMIT_ENV} ({name.strip()})")
    return None, named


def set_max_concurrency(model: str, n: int | None) -> None:
    """Allow ``n`` requests in flight to the model named ``model`` (``None``: back to the default)."""
    with _lock:
        if n is None:
            _overrides.pop(model, None)
        else:
            _overrides[model] = _positive(n, f"set_max_concurrency({model!r})")


def max_concurrency(lm: Any) -> int:
    """The limit for a model (a ``dspy.LM`` or its name): set for its name, else from
    ``$ROMA_LAB_MAX_CONCURRENCY``, else an in-process engine's ``slots`` (1 without one), else
    ``DEFAULT_REMOTE_CONCURRENCY``."""
    name = _name(lm)
    with _lock:
        if name in _overrides:
            return _overrides[name]
    default, named = _from_env()
    if name in named:
        return named[name]
    engine = getattr(lm, "engine", None)
    if engine is not None:  # in-process: the engine says how many sequences it serves at once
        return _positive(getattr(engine, "slots", 1), f"{name}'s engine slots")
    return default or DEFAULT_REMOTE_CONCURRENCY
