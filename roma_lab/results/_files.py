"""Atomic file writes: a reader, or a rerun after an interruption, never sees half a file."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to a temporary file beside ``path`` and rename it over ``path``.

    The temporary name is unique per process and thread, so concurrent writers of the same path
    (e.g. two role calls caching one completion) never collide; the last rename wins whole.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
