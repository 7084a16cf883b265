"""The speed an embedded model actually ran at: one JSON line per loaded model, appended when the
model is freed, to the file named by $ROMA_LAB_LM_LOG (nothing is written when it is unset).

``python -m roma_lab.experiments run`` sets it, so every notebook kernel it starts records its
threads, the load average when the model loaded and llama.cpp's own token counters, and
``python -m roma_lab.experiments times`` shows them beside each run's time. Pydantic because the
line crosses a boundary (written by a kernel, read back by the times table).
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from roma_lab._environment import ENV

LOG_ENV = ENV.speed_log


class ModelSpeed(BaseModel):
    """One model's life in one process: how it was set up and what it did."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str  # the GGUF file name
    pid: int
    threads: int
    cpus: int  # CPUs in the process's affinity mask
    load_avg_1min: float  # when the model loaded
    loaded_at: datetime
    closed_at: datetime
    calls: int  # generations (a JSON retry under the grammar counts as its own)
    call_seconds: float  # wall time inside generations, waiting for the machine's turn excluded
    prompt_tokens: int  # evaluated (a prefix reused from the KV cache is not evaluated again)
    prompt_seconds: float
    generated_tokens: int
    generation_seconds: float
    # which engine served the model, and on how many slots (records older than the server are in-process)
    engine: str = "llama-cpp-python"
    slots: int = 1

    @property
    def prompt_tps(self) -> float | None:
        return self.prompt_tokens / self.prompt_seconds if self.prompt_seconds > 0 else None

    @property
    def generation_tps(self) -> float | None:
        return self.generated_tokens / self.generation_seconds if self.generation_seconds > 0 else None


def append_speed(record: ModelSpeed) -> Path | None:
    """Append ``record`` to $ROMA_LAB_LM_LOG (one line, one write: lines of processes that close
    at the same moment do not interleave). Returns the file, or None when the variable is unset."""
    target = os.environ.get(LOG_ENV)
    if not target:
        return None
    from roma_lab.results import open_regular

    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_regular(path, "a") as f:  # a FIFO in its place: DamagedFileError, never a wait for a reader
        f.write(record.model_dump_json() + "\n")  # shorter than the buffer: written by close in one write
    return path


def read_speeds(path: str | os.PathLike[str]) -> tuple[list[ModelSpeed], int]:
    """(valid records, number of damaged lines) of a speed log; a missing file is ([], 0), anything but a
    regular file in its place a ``roma_lab.results.DamagedFileError``."""
    from roma_lab.results import read_regular_bytes

    try:
        lines = read_regular_bytes(path).decode(errors="replace").splitlines()
    except FileNotFoundError:
        return [], 0
    records, damaged = [], 0
    for line in filter(str.strip, lines):
        try:
            records.append(ModelSpeed.model_validate(json.loads(line)))
        except (ValueError, ValidationError, RecursionError):  # cut short by a kill, edited, nested too deep
            damaged += 1
    return records, damaged
