"""How a trace names a stored artifact: the hash of its bytes, its size and media type. The store
that keeps the bytes is ``roma_lab.tools.ArtifactStore``."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: How an artifact's SHA-256 is written: 64 lowercase hex digits, nothing else.
SHA256_HEX = re.compile(r"^[0-9a-f]{64}\Z")


@dataclass(frozen=True, slots=True)
class ArtifactRef:
    """A stored artifact: the SHA-256 of its bytes (its key), its size in bytes and its media type."""

    sha256: str
    size: int
    media_type: str = "text/plain"

    @property
    def id(self) -> str:
        """How prompts and tools name it: ``sha256:<hex>``."""
        return f"sha256:{self.sha256}"
