"""Atomic file writes and quarantine: a reader, or a rerun after an interruption, never sees half a
file, and a damaged file is moved aside (never deleted) so the work it held can be redone. Reading:
a regular file's bytes, a JSONL file's objects."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import threading
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


#: The longest file name ``safe_name`` gives, in UTF-8 bytes: under every common file system's 255,
#: with room for a suffix (``.json``, ``.quarantined-<time>``) and a folder's own prefix.
MAX_NAME_BYTES = 120
_UNSAFE = re.compile(r"[^\w.-]")
#: Hex characters of a name's SHA-256 that ``safe_name`` keeps (8 before issue 53: a 1.2% chance of a
#: collision among 10,000 ids sharing a long prefix).
HASH_HEX = 16

QUARANTINED = ".quarantined-"  # marks a kept damaged file: evidence, not a result


class QuarantineWarning(UserWarning):
    """A damaged file (or part of one) was moved aside; the work it held is redone."""


def safe_name(name: str, *, max_bytes: int = MAX_NAME_BYTES, hash_hex: int = HASH_HEX) -> str:
    """``name`` (a task id, a label) as one file name: the one rule of every room that writes a file
    from a name. A name that is already safe and short is kept as it is; any other is cleaned
    (characters outside ``[\\w.-]`` become ``_``), cut to fit ``max_bytes`` and given the first
    :data:`HASH_HEX` hex of its SHA-256 (64 bits: a collision among a million ids is about one chance in
    37 million), so two names do not share a file (``q/1`` and ``q_1``) and none is too long. A file so
    named records the name it belongs to, so a collision is still caught when read (a trace: its task id).
    ``hash_hex``: only to find files named before issue 53, with 8."""
    clean = _UNSAFE.sub("_", name)
    if clean == name and clean not in ("", ".", "..") and len(clean.encode()) <= max_bytes:
        return name
    tail = "-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:hash_hex]
    cut = clean.encode()[: max_bytes - len(tail)].decode("utf-8", "ignore")  # never half a character
    return f"{cut}{tail}"


def _kind(mode: int) -> str:
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a symbolic link" if stat.S_ISLNK(mode)
            else "not a regular file")


_MODES = {"r": os.O_RDONLY, "rb": os.O_RDONLY, "a": os.O_WRONLY | os.O_APPEND | os.O_CREAT}


def open_regular(path: str | os.PathLike[str], mode: str = "r", *, follow_links: bool = True):
    """The file at ``path`` opened for reading (``"r"``: UTF-8 text, ``"rb"``: bytes) or appending
    (``"a"``: UTF-8 text, created if missing), checked to be a regular file once open: the one way the
    package opens a file it reads back or appends to (a run folder's logs, traces, records, tables, a
    snapshot's entries, a cache's). It is opened without blocking, so a FIFO, device, socket or folder
    in the file's place (or, with ``follow_links=False``, a symbolic link) is a :class:`DamagedFileError`
    naming it, never a hang; FileNotFoundError and other OSErrors as ``open`` raises them."""
    flags = _MODES[mode] | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as err:
        # ENXIO: a FIFO with no reader opened to write, or a socket; ELOOP: a link, not followed; EISDIR
        if err.errno in (errno.ENXIO, errno.ELOOP, errno.EISDIR):
            try:
                kind = _kind(os.lstat(path).st_mode)
            except OSError:
                raise err from None
            raise DamagedFileError(path, f"is {kind}, not a regular file") from None
        raise
    try:
        mode_bits = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode_bits):
            raise DamagedFileError(path, f"is {_kind(mode_bits)}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    if mode == "rb":
        return os.fdopen(fd, "rb")
    return os.fdopen(fd, mode, encoding="utf-8", newline="")


def read_regular_bytes(path: str | os.PathLike[str], *, max_bytes: int | None = None,
                       follow_links: bool = True) -> bytes:
    """The bytes of the regular file at ``path``, opened by :func:`open_regular` (anything else in its
    place: a :class:`DamagedFileError` naming it). A file longer than ``max_bytes`` raises ValueError
    once ``max_bytes + 1`` bytes are read, never read whole (it may grow after a stat)."""
    with open_regular(path, "rb", follow_links=follow_links) as f:
        if max_bytes is None:
            return f.read()
        data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ValueError(f"{path} holds more than {max_bytes:,} bytes")
        return data


class JsonlLineError(ValueError):
    """A line of a JSONL file is not a JSON object; the message names the file and the line."""

    def __init__(self, path: str | os.PathLike[str], line: int, problem: str) -> None:
        super().__init__(f"{path}: line {line} {problem}")
        self.path, self.line = Path(path), line


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number from 1, object) for each non-blank line of the UTF-8 JSONL file at ``path``
    (read as :func:`read_regular_bytes` reads it); a line that is not UTF-8, not JSON (or nested too
    deep to read) or not an object raises :class:`JsonlLineError` naming the file and the line."""
    # split on "\n" alone, not splitlines(): a JSON string may hold a raw U+2028 and the like
    for number, raw in enumerate(read_regular_bytes(path).split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise JsonlLineError(path, number, f"is not UTF-8 (at byte {err.start + 1})") from None
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise JsonlLineError(path, number, f"is not JSON ({err.msg} at column {err.colno})") from None
        except RecursionError:  # nested deeper than json can read
            raise JsonlLineError(path, number, "is nested too deep to read") from None
        except ValueError as err:  # e.g. an integer of more than 4,300 digits (Python's int limit)
            raise JsonlLineError(path, number, f"cannot be read ({err})") from None
        if not isinstance(record, dict):
            raise JsonlLineError(path, number, f"is a JSON {type(record).__name__}, not an object")
        yield number, record


class DamagedFileError(ValueError):
    """A file roma_lab wrote and reads back (records, rows, traces, usage, provenance, caches, plans)
    is not what it wrote: not JSON, the wrong shape, nested too deep, or a folder in its place. The
    message names the file, what is wrong and what to do; ``path`` is the file."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(f"{path}: {problem}. It is one of roma_lab's own files: move it aside (or delete it) "
                         "and run again; what it recorded is then redone")
        self.path, self.problem = Path(path), problem


def read_json_file(path: str | os.PathLike[str], kind: type | tuple[type, ...] = dict) -> Any:
    """The JSON value roma_lab saved at ``path``, checked to be a ``kind`` (a dict unless told): the one
    checked loader for what the package reads back from its own folders. FileNotFoundError when there
    is no file; anything else wrong with it is a :class:`DamagedFileError` naming it (a folder or
    FIFO in its place, not UTF-8 JSON, nested deeper than JSON can be read, another type)."""
    path = Path(path)
    data = read_regular_bytes(path)
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise DamagedFileError(path, f"is not UTF-8 (at byte {err.start + 1})") from None
    except json.JSONDecodeError as err:
        raise DamagedFileError(path, f"is not JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except RecursionError:
        raise DamagedFileError(path, "is nested deeper than JSON can be read") from None
    if not isinstance(value, kind):
        wanted = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise DamagedFileError(path, f"holds a JSON {type(value).__name__} where a {wanted} belongs")
    return value


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to a temporary file beside ``path`` and rename it over ``path``.

    The temporary name is unique per process and thread, so concurrent writers of the same path
    (e.g. two role calls caching one completion) never collide; the last rename wins whole.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():  # os.replace would raise a bare IsADirectoryError
        raise DamagedFileError(path, "is a folder where a file is written")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def quarantine(path: str | os.PathLike[str], reason: str, *, data: bytes | None = None) -> Path:
    """Keep damaged content as ``<name>.quarantined-<UTC time>`` beside ``path`` and warn, naming both.

    Without ``data`` the file (or folder) at ``path`` itself is moved there; with ``data`` only those
    bytes are written there (bad rows cut out of a file that stays). ``reason`` says what was wrong
    and what happens next. Returns the quarantine path.
    """
    path = Path(path)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}{QUARANTINED}{stamp}")
    n = 1
    while target.exists():  # two quarantines within one microsecond must not overwrite each other
        target, n = path.with_name(f"{path.name}{QUARANTINED}{stamp}-{n}"), n + 1
    if data is None:
        os.replace(path, target)
    else:
        target.write_bytes(data)
    warnings.warn(f"{path}: {reason}; kept as {target.name}", QuarantineWarning, stacklevel=2)
    return target


def quarantined_files(folder: str | os.PathLike[str]) -> list[str]:
    """Paths (relative to ``folder``, sorted) of the files and folders :func:`quarantine` kept in it."""
    folder = Path(folder)
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob(f"*{QUARANTINED}*"))


class FolderBusyError(RuntimeError):
    """Another process is writing the folder now; the message says which one (``holder``: what it wrote
    of itself in the lock: what it is, its process id and since when)."""

    def __init__(self, message: str, holder: str = "") -> None:
        super().__init__(message)
        self.holder = holder


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str], lock_name: str, what: str) -> Iterator[None]:
    """Hold ``folder/lock_name`` exclusively while the block runs (the OS drops it when the process dies,
    even by kill -9). A second holder gets :class:`FolderBusyError` naming the first (its process id,
    what it is and since when), never a second writer of the same files. ``what`` says what this
    holder is (e.g. "evaluate")."""
    import fcntl

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / lock_name
    with open_regular(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_regular_bytes(lock).decode("utf-8", "replace").strip() or "a process that names itself not"
            raise FolderBusyError(f"{folder} is being written by another process ({holder}); wait for it to finish, "
                                  "or stop it and run again", holder) from None
        os.truncate(lock, 0)
        handle.write(f"{what}, process {os.getpid()}, since {datetime.now(UTC).isoformat(timespec='seconds')}\n")
        handle.flush()
        try:
            yield
        finally:
            os.truncate(lock, 0)
