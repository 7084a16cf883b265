"""Which rollout a request belongs to, so repeats of one request are asked again, not replayed.

At temperature 0 two runs of one task send identical requests: without an id, the completion
cache (local models) and DSPy's request cache (remote models) served run 2..R run 1's reply, and
run-to-run variance was 0 even on a server that is not deterministic. ``with rollout(id):`` marks
every request made inside (this thread, its asyncio tasks and ``asyncio.to_thread`` calls, threads
started with ``contextvars.copy_context().run``): the id enters the local completion-cache key and
DSPy's request key, and a remote ``openai/`` model is sent :func:`rollout_seed` as ``seed`` when the
caller gave none. See design/online.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
from collections.abc import Iterator

__all__ = ["current_rollout", "rollout", "rollout_seed"]

_ROLLOUT: contextvars.ContextVar[str | None] = contextvars.ContextVar("roma_lab_rollout", default=None)


@contextlib.contextmanager
def rollout(rollout_id: str | int) -> Iterator[str]:
    """Mark the requests made inside as rollout ``rollout_id`` (e.g. ``f"{run}:{rollout_index}"``).

    The innermost ``with`` wins: ids replace each other, they do not compose, so name the whole
    rollout (run and index) in one id. A plain ``ThreadPoolExecutor`` does not copy context
    variables into its workers: enter ``rollout`` inside the worker function.
    """
    text = str(rollout_id)
    if isinstance(rollout_id, bool) or not isinstance(rollout_id, (str, int)) or not text.strip():
        raise ValueError(f"a rollout id is a non-empty string or an integer, got {rollout_id!r}")
    token = _ROLLOUT.set(text)
    try:
        yield text
    finally:
        _ROLLOUT.reset(token)


def current_rollout() -> str | None:
    """The id of the rollout the current request belongs to; None outside every ``rollout``."""
    return _ROLLOUT.get()


def rollout_seed(rollout_id: str) -> int:
    """The ``seed`` a remote model is sent for a rollout: the first 31 bits of the id's SHA-256, so
    the same id always samples the same way and any server's seed type (int32, uint32) holds it."""
    return int.from_bytes(hashlib.sha256(rollout_id.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF
