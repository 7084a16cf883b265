"""Artifacts by reference (ROMA paper §2.1, "Artifacts, tools, and safe execution").

A node output longer than ``RomaSettings.artifact_chars`` is written to a content-addressed store
and reaches its dependents and parent as an :class:`ArtifactRef` plus a bounded summary, instead
of being pasted whole into their prompts. The store is any fsspec URL (a local folder by default,
``memory://`` in tests, an object store for a user who has one); an artifact's key is the SHA-256
of its bytes, so writing the same content twice stores it once and every read can check it. The
store outlives the run. A role that needs the full text calls :func:`read_artifact` (or the
executor's ``read_artifact`` tool). See design/artifacts.md.

The store is a trust boundary: an artifact's path is made only from a checked hash (64 hex digits),
so no reference, built in code or read from a run file, names a path outside the store; a local
store reads and writes through descriptors that never follow a symbolic link, and writes beside
the final name under an unpredictable temporary name created exclusively.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import os
import re
import secrets
import stat
from os import PathLike

from roma_lab.trace import SHA256_HEX, ArtifactRef

_ID = re.compile(r"^sha256:([0-9a-f]{64})\Z")
# A store's folders and files as this module writes them: a link or a FIFO there was planted.
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_LINKED = (errno.ELOOP, errno.ENOTDIR)


class ArtifactError(RuntimeError):
    """An artifact could not be written or read; the message names the artifact and the store."""


class ArtifactMissingError(ArtifactError):
    """The store has no artifact under this hash."""


class ArtifactCorruptedError(ArtifactError):
    """The bytes stored under this hash have another hash: the artifact was changed or truncated."""


class UntrustedStoreError(ArtifactError):
    """A run file names an artifact store the caller did not name: it is never opened, since a run
    file can name any URL (another machine, a server that records what it is sent)."""


def artifact_sha256(ref: ArtifactRef | str) -> str:
    """The hash an artifact is stored under, from a ref or an id string (``sha256:<hex>`` or the hex).
    Anything but 64 lowercase hex digits is refused, so a reference names a file in the store or nothing."""
    if isinstance(ref, ArtifactRef):
        if isinstance(ref.sha256, str) and SHA256_HEX.match(ref.sha256):
            return ref.sha256
    elif isinstance(ref, str):
        text = ref.strip()
        match = _ID.match(text)
        if match or SHA256_HEX.match(text):
            return match.group(1) if match else text
    shown = repr(ref)  # bounded: a crafted reference may be long
    raise ArtifactError(f"not an artifact id: {shown if len(shown) <= 120 else shown[:117] + '...'} "
                        "(expected 'sha256:' and 64 hex digits)")


def _url_key(url: str) -> str:
    """``url`` in one spelling per store, from the text alone (nothing is opened): local paths made
    absolute, trailing slashes dropped."""
    import fsspec

    protocol, path = fsspec.core.split_protocol(url)
    if protocol in (None, "file", "local"):
        return "file://" + os.path.abspath(path)
    return f"{protocol}://{path.rstrip('/')}"


class _PlantedFileError(ArtifactError):
    """A link, FIFO or other non-regular file where the store keeps an artifact: writing the
    artifact replaces it (a rename never follows it), reading refuses it."""


class ArtifactStore:
    """A content-addressed artifact store under one fsspec URL (or local path)."""

    def __init__(self, url: str | PathLike[str]):
        import fsspec
        from fsspec.implementations.local import LocalFileSystem

        self.url = os.fspath(url)
        self._fs, self._root = fsspec.core.url_to_fs(self.url)
        self._local = isinstance(self._fs, LocalFileSystem)

    def __repr__(self) -> str:
        return f"ArtifactStore({self.url!r})"

    def is_at(self, url: str) -> bool:
        """Whether ``url`` (as a run file names a store) is this store's; decided from the text."""
        return isinstance(url, str) and _url_key(url) == _url_key(self.url)

    def _path(self, sha256: str) -> str:
        return f"{self._root.rstrip('/')}/{sha256[:2]}/{sha256}"

    def put(self, content: str | bytes, media_type: str = "text/plain") -> ArtifactRef:
        """Store ``content`` (text as UTF-8) and return its reference. Content already stored intact
        is not written again; a damaged copy under the same hash is replaced."""
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        sha256 = hashlib.sha256(data).hexdigest()
        ref = ArtifactRef(sha256, len(data), media_type)
        try:
            if self._stored_intact(sha256):
                return ref
            if self._local:
                self._write_local(sha256, data)
            else:
                self._write_fs(sha256, data)
        except NotImplementedError as err:  # fsspec's way of saying a protocol cannot do this
            raise ArtifactError(f"could not write artifact {ref.id}: store {self.url} cannot be written "
                                f"({type(self._fs).__name__} cannot write and move files{_detail(err)}); use a "
                                "local folder or a writable fsspec URL (memory://, an object store)") from None
        except OSError as err:
            raise ArtifactError(f"could not write artifact {ref.id} to store {self.url}: {err}") from err
        return ref

    def _write_fs(self, sha256: str, data: bytes) -> None:
        path = self._path(sha256)
        self._fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        # write beside, then move: a reader never sees half an artifact
        tmp = f"{path}.tmp-{secrets.token_hex(8)}"
        self._fs.pipe_file(tmp, data)
        try:
            self._fs.mv(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError, NotImplementedError):
                self._fs.rm_file(tmp)
            raise

    def _write_local(self, sha256: str, data: bytes) -> None:
        """Write beside under an unpredictable name created exclusively (``O_EXCL|O_NOFOLLOW``: a
        file or link planted there is never written through), then rename within the shard folder
        (a rename replaces a link at the final name, it never follows it)."""
        os.makedirs(self._root, exist_ok=True)
        shard = self._open_shard(sha256, create=True)
        tmp = f".{sha256}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=shard)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, sha256, src_dir_fd=shard, dst_dir_fd=shard)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=shard)
                raise
        finally:
            os.close(shard)

    def _open_shard(self, sha256: str, *, create: bool = False) -> int:
        """A descriptor of the folder ``<root>/<sha[:2]>``, refusing a link or a file there (a link
        could lead anywhere); the root is the caller's and may be a link."""
        root = os.open(self._root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(sha256[:2], dir_fd=root)
            return os.open(sha256[:2], os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=root)
        except OSError as err:
            if err.errno in _LINKED:
                raise ArtifactError(self._planted(sha256, f"{sha256[:2]} is not a folder (a link, a file?)")) from None
            raise
        finally:
            os.close(root)

    def _planted(self, sha256: str, what: str) -> str:
        return (f"artifact sha256:{sha256} cannot be used: in store {self.url}, {what}; a store holds "
                "real folders and regular files only: remove it, then write the artifact again")

    def _stored_intact(self, sha256: str) -> bool:
        try:
            return hashlib.sha256(self._read(sha256)).hexdigest() == sha256
        except (FileNotFoundError, _PlantedFileError):  # a planted file is replaced by the write
            return False

    def _read(self, sha256: str) -> bytes:
        if not self._local:
            return self._fs.cat_file(self._path(sha256))
        shard = self._open_shard(sha256)
        try:  # O_NONBLOCK: opening a planted FIFO must not wait for a writer
            fd = os.open(sha256, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=shard)
        except OSError as err:
            if err.errno in _LINKED:
                raise _PlantedFileError(self._planted(sha256, "its file is a symbolic link")) from None
            raise
        finally:
            os.close(shard)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise _PlantedFileError(self._planted(sha256, "its file is not a regular file"))
            return f.read()

    def read_bytes(self, ref: ArtifactRef | str) -> bytes:
        """The artifact's bytes, checked against its hash (:class:`ArtifactMissingError`,
        :class:`ArtifactCorruptedError`)."""
        sha256 = artifact_sha256(ref)
        path = self._path(sha256)
        try:
            data = self._read(sha256)
        except FileNotFoundError:
            raise ArtifactMissingError(f"artifact sha256:{sha256} is missing from store {self.url} "
                                       f"(expected at {path})") from None
        except (OSError, NotImplementedError) as err:
            raise ArtifactError(f"could not read artifact sha256:{sha256} from store {self.url}: "
                                f"{type(err).__name__}{_detail(err)}") from err
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


def _detail(err: BaseException) -> str:
    return f": {err}" if str(err) else ""


# The store of the run a role call belongs to: set by the controller for the whole run, read by
# read_artifact (_tools.py; a ContextVar, so concurrent runs in one process never see each other's store).
RUN_STORE: contextvars.ContextVar[ArtifactStore | None] = contextvars.ContextVar("roma_artifact_store", default=None)
