"""The recorded web: searches and reads recorded at the provider boundary, replayed bit for bit.

A call's key is the SHA-256 of its kind and canonical request: the provider, the endpoint and the
parameters a reply depends on (the query and k, the body sent; a read's URL), never a header, so
never an API key. A :class:`WebRecorder` over a folder has a mode: ``record`` serves a call from
the folder when it is there and otherwise makes it live and writes it; ``replay`` serves only what
is there and raises :class:`ReplayMissError` for anything else (never a silent live call). A served
entry is marked replayed, and costs nothing now. What is stored is the reply as the room gives it
(the results; the page's whole text, before the size cut), so a replay gives the same bytes
whatever extractor version reads it.

Each entry names its key and carries a digest of everything else, so an edited entry is damaged,
never served: in ``replay`` a :class:`DamagedRecordingError` names it; in ``record`` it is moved
aside (``roma_lab.results.quarantine``) and the call made again. Writes are atomic and the first
writer of a key wins: a second recorder of the same key, in this process or another, serves the
entry on disk, so every caller served what a replay will serve (in this process, identical calls in
flight wait for the first instead of calling too).

:meth:`WebRecorder.export_snapshot` copies the entries a recorder served into a run folder with a
manifest of their SHA-256 hashes; :func:`open_snapshot` opens one for replay after checking every
hash (and checks each entry again as it is read): a tampered, missing or unlisted entry is an error
naming it, so a colleague replays the run offline, bit for bit, or not at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from roma_lab.results import (
    DamagedFileError,
    quarantine,
    read_regular_bytes,
    safe_name,
    write_text_atomic,
)

from ._errors import DamagedRecordingError, ReplayMissError
from ._http import Deadline

__all__ = ["MANIFEST", "MODES", "SNAPSHOT_DIR", "WebRecorder", "open_snapshot", "record_key"]

MODES = ("off", "record", "replay")
RecordMode = Literal["record", "replay"]
Kind = Literal["search", "read"]
#: The folder a snapshot is exported to inside a run folder, and its manifest's name.
SNAPSHOT_DIR = "web_snapshot"
MANIFEST = "manifest.json"
_SNAPSHOT_FORMAT = "roma_lab.web.snapshot/1"
_ENTRY = re.compile(r"^[\w.-]+/[0-9a-f]{2}/[0-9a-f]{64}\.json\Z")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def record_key(kind: str, request: Mapping[str, Any]) -> str:
    """The key of a call: SHA-256 of its kind and canonical request (JSON data, no secret in it)."""
    return _sha256(_canonical({"kind": kind, "request": request}))


class RecordedCall(BaseModel):
    """One recorded call as written (hence pydantic). ``digest``: SHA-256 of every other field."""

    model_config = ConfigDict(extra="forbid")
    key: str
    kind: Kind
    provider: str
    request: dict
    reply: dict
    latency_s: float
    recorded_at: str
    digest: str


class SnapshotManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["roma_lab.web.snapshot/1"]
    created_at: str
    entries: dict[str, str]  # relative path -> SHA-256 of the file's bytes


def _digest(fields: Mapping[str, Any]) -> str:
    return _sha256(_canonical({k: v for k, v in fields.items() if k != "digest"}))


def _read_regular(path: Path) -> bytes | None:
    """The bytes of the regular file at ``path`` (None: nothing there). Opened without following a
    link and without blocking (``roma_lab.results.read_regular_bytes``), so a FIFO or a link planted in an
    entry's place is damage, not a hang."""
    try:
        return read_regular_bytes(path, follow_links=False)
    except FileNotFoundError:
        return None
    except DamagedFileError as err:
        raise DamagedRecordingError(path, err.problem) from None
    except OSError as err:
        raise DamagedRecordingError(path, f"not a regular file ({err.strerror})") from None


class WebRecorder:
    """The recording in ``directory`` in ``mode`` ("record" or "replay"). ``served`` holds the keys of
    every entry it served or wrote, in order: what :meth:`export_snapshot` exports."""

    def __init__(self, directory: str | os.PathLike[str], mode: RecordMode = "record", *,
                 _manifest: Mapping[str, str] | None = None):
        if mode not in ("record", "replay"):
            raise ValueError(f"a recorder's mode is 'record' or 'replay', got {mode!r} (mode 'off' needs no recorder)")
        if _manifest is not None and mode != "replay":
            raise ValueError("a snapshot is opened for replay only")
        self.directory = Path(directory)
        self.mode = mode
        self._manifest = dict(_manifest) if _manifest is not None else None
        self._served: dict[str, str] = {}  # key -> entry path relative to the folder
        self._lock = threading.Lock()
        self._flights: dict[str, Future] = {}

    def __repr__(self) -> str:
        return f"WebRecorder({str(self.directory)!r}, mode={self.mode!r}{', snapshot' if self._manifest else ''})"

    @property
    def served(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._served)

    def _relative(self, provider: str, key: str) -> str:
        return f"{safe_name(provider)}/{key[:2]}/{key}.json"

    def call(self, kind: Kind, provider: str, request: Mapping[str, Any], live: Callable[[], dict], *,
             deadline: Deadline, describe: str) -> tuple[dict, bool, str]:
        """(the reply, whether it was served without a request, the key) of the call ``request``:
        recorded, or ``live()`` recorded first (record mode). ``describe`` names it in a miss."""
        request = json.loads(_canonical(request))  # as it will read back
        key = record_key(kind, request)
        relative = self._relative(provider, key)
        entry = self._lookup(relative, key)
        if entry is not None:
            self._serve(key, relative)
            return entry.reply, True, key
        if self.mode == "replay":
            raise ReplayMissError(f"{describe} was never recorded in {self.directory} (key {key[:12]}); record it by "
                                  "running once with recording='record', or replay the recording the run was made with")
        with self._lock:
            flight = self._flights.get(key)
            leading = flight is None
            if leading:
                flight = self._flights[key] = Future()
        if not leading:
            try:
                reply = flight.result(timeout=deadline.remaining())  # the leader's error is this call's too
            except FutureTimeout:
                raise deadline.error(f"{describe}: waiting for the same call in flight") from None
            self._serve(key, relative)
            return reply, True, key
        try:
            started = time.monotonic()
            reply = live()
            fields = {"key": key, "kind": kind, "provider": provider, "request": request,
                      "reply": json.loads(_canonical(reply)), "latency_s": time.monotonic() - started,
                      "recorded_at": datetime.now(UTC).isoformat(timespec="seconds")}
            stored = self._publish(relative, RecordedCall(**fields, digest=_digest(fields)))
            flight.set_result(stored.reply)
        except BaseException as err:
            flight.set_exception(err)
            raise
        finally:
            with self._lock:
                del self._flights[key]
        self._serve(key, relative)
        return stored.reply, False, key

    def carry(self, snapshot: str | os.PathLike[str]) -> None:
        """Count a snapshot's entries (checked by hash) among what this recorder served, copying into
        its folder any it lacks: so a resumed run's export still holds the calls of the rows it finished
        before (and now made no call for)."""
        earlier = open_snapshot(snapshot)
        for relative in earlier._manifest or {}:
            target = self.directory / relative
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(_read_regular(earlier.directory / relative))  # checked by open_snapshot
            self._serve(Path(relative).stem, relative)

    def _serve(self, key: str, relative: str) -> None:
        with self._lock:
            self._served.setdefault(key, relative)

    def _lookup(self, relative: str, key: str) -> RecordedCall | None:
        path = self.directory / relative
        try:
            return self._read(path, relative, key)
        except DamagedRecordingError as err:
            if self.mode == "replay":
                raise
            try:
                quarantine(path, f"damaged web recording ({err}); the call is made again")
            except FileNotFoundError:  # another recorder moved it aside first
                pass
            return None

    def _read(self, path: Path, relative: str, key: str) -> RecordedCall | None:
        data = _read_regular(path)
        if self._manifest is not None:
            listed = self._manifest.get(relative)
            if data is None:
                if listed is not None:
                    raise DamagedRecordingError(path, "listed in the snapshot's manifest but missing")
                return None
            if listed is None:
                raise DamagedRecordingError(path, "not listed in the snapshot's manifest (added after export)")
            if _sha256(data) != listed:
                raise DamagedRecordingError(path, "its SHA-256 does not match the snapshot's manifest (edited after export)")
        if data is None:
            return None
        try:
            entry = RecordedCall.model_validate_json(data)
        except ValidationError as err:
            raise DamagedRecordingError(path, f"not a recorded call ({err.errors()[0]['msg']})") from None
        if entry.key != key or record_key(entry.kind, entry.request) != key:
            raise DamagedRecordingError(path, "recorded for another call (its key does not match its request)")
        if _digest(entry.model_dump()) != entry.digest:
            raise DamagedRecordingError(path, "its digest does not match its content (edited)")
        return entry

    def _publish(self, relative: str, entry: RecordedCall) -> RecordedCall:
        """Write ``entry`` unless an entry for its key is already there; the entry on disk after."""
        path = self.directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        tmp.write_text(entry.model_dump_json(indent=1), encoding="utf-8")
        try:
            os.link(tmp, path)  # atomic, and fails if a writer got there first: the first one wins
        except FileExistsError:
            existing = self._lookup(relative, entry.key)  # a damaged one is moved aside
            if existing is not None:
                return existing
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return entry

    def export_snapshot(self, run_dir: str | os.PathLike[str]) -> Path:
        """Copy the entries this recorder served into ``run_dir``/web_snapshot with a manifest of
        their SHA-256 hashes (replacing a snapshot there); its path. Each entry is checked as it is
        copied, so a damaged one is never exported."""
        final = Path(run_dir) / SNAPSHOT_DIR
        staging = final.with_name(f".{SNAPSHOT_DIR}.tmp-{os.getpid()}-{threading.get_ident()}")
        shutil.rmtree(staging, ignore_errors=True)
        hashes = {}
        for key in self.served:
            relative = self._served[key]
            source = self.directory / relative
            if self._read(source, relative, key) is None:
                raise DamagedRecordingError(source, "served by this recorder but gone since")
            data = _read_regular(source)
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            hashes[relative] = _sha256(data)
        manifest = SnapshotManifest(format=_SNAPSHOT_FORMAT, created_at=datetime.now(UTC).isoformat(timespec="seconds"),
                                    entries=dict(sorted(hashes.items())))
        write_text_atomic(staging / MANIFEST, manifest.model_dump_json(indent=1))
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
        return final


def open_snapshot(path: str | os.PathLike[str]) -> WebRecorder:
    """A replaying recorder over the snapshot at ``path`` (its folder, or the run folder holding
    it), after checking every entry the manifest lists against its hash: DamagedRecordingError
    naming the first one missing, edited or unlisted (or a manifest that cannot be read)."""
    folder = Path(path)
    if not (folder / MANIFEST).exists() and (folder / SNAPSHOT_DIR / MANIFEST).exists():
        folder = folder / SNAPSHOT_DIR
    raw = _read_regular(folder / MANIFEST)
    if raw is None:
        raise DamagedRecordingError(folder / MANIFEST, "no snapshot manifest here")
    try:
        manifest = SnapshotManifest.model_validate_json(raw)
    except ValidationError as err:
        raise DamagedRecordingError(folder / MANIFEST, f"not a snapshot manifest ({err.errors()[0]['msg']})") from None
    for relative, digest in manifest.entries.items():
        if not _ENTRY.match(relative):
            raise DamagedRecordingError(folder / MANIFEST, f"lists {relative!r}, which is not an entry's path")
        data = _read_regular(folder / relative)
        if data is None:
            raise DamagedRecordingError(folder / relative, "listed in the snapshot's manifest but missing")
        if _sha256(data) != digest:
            raise DamagedRecordingError(folder / relative, "its SHA-256 does not match the snapshot's manifest "
                                                           "(edited after export)")
    for file in sorted(folder.rglob("*.json")):
        relative = file.relative_to(folder).as_posix()
        if relative != MANIFEST and relative not in manifest.entries:
            raise DamagedRecordingError(file, "not listed in the snapshot's manifest (added after export)")
    return WebRecorder(folder, "replay", _manifest=manifest.entries)
