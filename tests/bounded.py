"""A call that must return: a test of a FIFO in place of a file fails after a bounded wait, never hangs CI."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

HANG_GUARD_S = 60  # bounded wait only: a reader blocked on a FIFO never returns by itself


def bounded(call, fifo: Path | None = None):
    """``call()``'s value, or the exception it raised, raised here; the test fails if ``call`` has not
    returned within HANG_GUARD_S, after a reader or writer blocked on ``fifo`` is released."""
    box = {}

    def target():
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread below
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(HANG_GUARD_S)
    if worker.is_alive():
        if fifo is not None:
            for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                try:
                    os.close(os.open(fifo, flags))  # end-of-file for a blocked reader, a reader for a writer
                except OSError:
                    pass
            worker.join(HANG_GUARD_S)
        pytest.fail(f"blocked on {fifo}")
    if "error" in box:
        raise box["error"]
    return box["value"]
