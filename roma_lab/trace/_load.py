"""Every saved trace, one loader: where a runner saves a trace, and reading it back by the ``kind`` it
names (a ROMA or single-call ``Run``, an agent ``Trajectory``).

``trace_path`` is the one place a trace's file name is made: ``<out>/traces/<system>/r<run>/<task>.json``,
each part made file-safe by ``roma_lab.results.safe_name``. ``load_trace`` reads any of them; a file
that is not a trace of a known kind is a ``DamagedFileError`` naming it. Files written before a single
call was saved as a one-node run (kind ``single_call``) read back as that one-node run.

A file name made from a long or unsafe task id keeps a hash of it, so two ids could in principle share
a file: a saved trace records the task id it belongs to (``saved_trace_text``; an agent's trajectory
records it itself), and ``load_trace(path, task_id=...)`` refuses a file of another task. Files saved
before they recorded it are read as they are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ._single import single_call_run
from ._trajectory import TRAJECTORY_KIND, Trajectory, TrajectoryFormatError
from ._types import RUN_KIND, InvalidRunError, Run

__all__ = ["TRACE_KINDS", "Trace", "load_trace", "read_trajectories", "saved_trace_text", "trace_path"]

#: The kinds a saved trace names first.
TRACE_KINDS = (RUN_KIND, TRAJECTORY_KIND)
_OLD_SINGLE_CALL = "single_call"  # what evaluate saved for a single call before it was a one-node run

Trace = Run | Trajectory


def trace_path(out: str | os.PathLike[str], system: str, run: int, task_id: str) -> Path:
    """Where a runner saves the trace of ``system``'s run ``run`` on task ``task_id`` under ``out``."""
    from roma_lab.results import safe_name

    return Path(out) / "traces" / safe_name(system) / f"r{run}" / f"{safe_name(str(task_id))}.json"


def saved_trace_text(text: str, task_id: str) -> str:
    """What a runner saves for the trace of task ``task_id`` whose JSON (``to_json``) is ``text``: a run's
    with the task id recorded after its kind; a trajectory's as it is (it records its own)."""
    if not text.startswith(f'{{\n "kind": "{RUN_KIND}",\n'):
        return text
    cut = text.index("\n", 2) + 1  # after the kind's line: the kind stays first
    return f'{text[:cut]} "task_id": {json.dumps(task_id, ensure_ascii=False)},\n{text[cut:]}'


def load_trace(path: str | os.PathLike[str], task_id: str | None = None) -> Trace:
    """The trace saved at ``path``, by the kind it names (files saved before traces named their kind:
    a trajectory by its ``rollouts``, anything else as a run). FileNotFoundError when there is none;
    anything else wrong is a ``roma_lab.results.DamagedFileError`` naming the file, a file that records
    another task than ``task_id`` (when given) included: two ids whose file names collide, or a copy."""
    from roma_lab.results import DamagedFileError, read_json_file

    path = Path(path)
    data = read_json_file(path)  # a DamagedFileError naming it, whatever is wrong with the file
    kind = data.get("kind")
    recorded = data.get("task_id")
    if task_id is not None and recorded is not None and recorded != str(task_id):
        raise DamagedFileError(path, f"is the trace of task {recorded!r}, not of task {str(task_id)!r} (two task ids "
                                     "whose file names collide, or a file copied in)")
    try:
        if kind == TRAJECTORY_KIND or (kind is None and "rollouts" in data):
            return Trajectory.from_json(json.dumps(data))
        if kind == _OLD_SINGLE_CALL:
            return single_call_run(question="", output=data["output"], input_tokens=data["input_tokens"],
                                   output_tokens=data["output_tokens"], cost=data["cost"], model=data["model"])
        if kind not in (RUN_KIND, None):
            raise DamagedFileError(path, f"names the trace kind {kind!r}; traces are {list(TRACE_KINDS)}")
        return Run.from_json(json.dumps(data))
    except KeyError as err:
        raise DamagedFileError(path, f"is a {kind} trace without its {err.args[0]!r} field") from None
    except (InvalidRunError, TrajectoryFormatError) as err:
        raise DamagedFileError(path, f"is not a {kind or 'run'} trace ({err})") from None


def read_trajectories(folder: str | os.PathLike[str]) -> list[Trajectory]:
    """Every agent trajectory a runner saved under ``folder`` (an evaluation's folder, its ``traces/``,
    or a folder of several), sorted by path; traces of other kinds are passed over."""
    from roma_lab.results import open_regular

    found = []
    for path in sorted(Path(folder).rglob("*.json")):
        if path.parent.name[:1] == "r" and path.parent.name[1:].isdigit() and "traces" in path.parts:
            with open_regular(path, "rb") as f:  # a run's trace is read whole only to learn its kind: peek first
                head = f.read(64)
            if TRAJECTORY_KIND.encode() in head or b'"rollouts"' in head:
                trace = load_trace(path)
                if isinstance(trace, Trajectory):
                    found.append(trace)
    return found
