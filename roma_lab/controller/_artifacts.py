"""Artifacts by reference (ROMA paper §2.1, "Artifacts, tools, and safe execution").

A node output longer than ``RomaSettings.artifact_chars`` is written to a content-addressed store
and reaches its dependents and parent as an :class:`ArtifactRef` plus a bounded summary, instead
of being pasted whole into their prompts. The store is any fsspec URL (a local folder by default,
``memory://`` in tests, an object store for a user who has one); an artifact's key is the SHA-256
of its bytes, so writing the same content twice stores it once and every read can check it. The
store outlives the run. A role that needs the full text calls :func:`read_artifact` (or the
executor's ``read_artifact`` tool). See design/artifacts.md.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import re
import threading
from dataclasses import dataclass
from os import PathLike

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_ID = re.compile(r"^sha256:([0-9a-f]{64})$")


class ArtifactError(RuntimeError):
    """An artifact could not be written or read; the message names the artifact and the store."""


class ArtifactMissingError(ArtifactError):
    """The store has no artifact under this hash."""


class ArtifactCorruptedError(ArtifactError):
    """The bytes stored under this hash have another hash: the artifact was changed or truncated."""


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


def artifact_sha256(ref: ArtifactRef | str) -> str:
    """The hash an artifact is stored under, from a ref or an id string (``sha256:<hex>`` or the hex)."""
    if isinstance(ref, ArtifactRef):
        return ref.sha256
    if isinstance(ref, str):
        text = ref.strip()
        match = _ID.match(text)
        if match or _SHA256.match(text):
            return match.group(1) if match else text
    raise ArtifactError(f"not an artifact id: {ref!r} (expected 'sha256:' and 64 hex digits)")


class ArtifactStore:
    """A content-addressed artifact store under one fsspec URL (or local path)."""

    def __init__(self, url: str | PathLike[str]):
        import fsspec

        self.url = os.fspath(url)
        self._fs, self._root = fsspec.core.url_to_fs(self.url)

    def __repr__(self) -> str:
        return f"ArtifactStore({self.url!r})"

    def _path(self, sha256: str) -> str:
        return f"{self._root.rstrip('/')}/{sha256[:2]}/{sha256}"

    def put(self, content: str | bytes, media_type: str = "text/plain") -> ArtifactRef:
        """Store ``content`` (text as UTF-8) and return its reference. Content already stored intact
        is not written again; a damaged copy under the same hash is replaced."""
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        sha256 = hashlib.sha256(data).hexdigest()
        ref = ArtifactRef(sha256, len(data), media_type)
        path = self._path(sha256)
        try:
            if self._stored_intact(path, sha256):
                return ref
            self._fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            # write beside, then move: a reader never sees half an artifact
            tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
            self._fs.pipe_file(tmp, data)
            self._fs.mv(tmp, path)
        except OSError as err:
            raise ArtifactError(f"could not write artifact {ref.id} to store {self.url}: {err}") from err
        return ref

    def _stored_intact(self, path: str, sha256: str) -> bool:
        try:
            return hashlib.sha256(self._fs.cat_file(path)).hexdigest() == sha256
        except FileNotFoundError:
            return False

    def read_bytes(self, ref: ArtifactRef | str) -> bytes:
        """The artifact's bytes, checked against its hash (:class:`ArtifactMissingError`,
        :class:`ArtifactCorruptedError`)."""
        sha256 = artifact_sha256(ref)
        path = self._path(sha256)
        try:
            data = self._fs.cat_file(path)
        except FileNotFoundError:
            raise ArtifactMissingError(f"artifact sha256:{sha256} is missing from store {self.url} "
                                       f"(expected at {path})") from None
        except OSError as err:
            raise ArtifactError(f"could not read artifact sha256:{sha256} from store {self.url}: {err}") from err
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise ArtifactCorruptedError(f"artifact sha256:{sha256} in store {self.url} is corrupted: its "
                                         f"{len(data)} bytes hash to {actual} ({path})")
        return data

    def read_text(self, ref: ArtifactRef | str) -> str:
        """The artifact as text (UTF-8), checked against its hash."""
        data = self.read_bytes(ref)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ArtifactError(f"artifact sha256:{artifact_sha256(ref)} is not UTF-8 text ({err})") from None


# The store of the run a role call belongs to: set by the controller for the whole run, read by
# read_artifact (a ContextVar, so concurrent runs in one process never see each other's store).
_RUN_STORE: contextvars.ContextVar[ArtifactStore | None] = contextvars.ContextVar("roma_artifact_store", default=None)


def read_artifact(ref: ArtifactRef | str) -> str:
    """The full text of an artifact of the current ROMA run: the typed accessor for roles that need
    more than the summary in their context. Only inside a role call of a run with a store."""
    from ._tools import traced_sync

    store = _RUN_STORE.get()
    if store is None:
        raise ArtifactError("read_artifact works inside a role call of a ROMA run that has an artifact store")
    name = ref.id if isinstance(ref, ArtifactRef) else ref
    return traced_sync("read_artifact", None, {"ref": name}, lambda: store.read_text(ref))
