"""``evaluation.json``: what the rows of an evaluation folder were made with, so a rerun under another
protocol never mixes its rows into them (new systems and new tasks may join)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["RECORD_FILE", "EvaluationMismatchError", "check_record", "record_budget"]

RECORD_FILE = "evaluation.json"


class EvaluationMismatchError(ValueError):
    """``out`` holds rows made with other tasks, another grader or other settings under a label."""


def _task_hashes(tasks: Any) -> dict[str, str]:
    """Per task id, a hash of what its rows depend on (question and gold answer)."""
    return {it.item_id: hashlib.sha256(json.dumps([it.question, str(it.answer)], ensure_ascii=False).encode())
            .hexdigest()[:16] for it in tasks.items}


def check_record(out: Path, tasks: Any, grader_name: str, systems: Sequence[Any]) -> dict[str, Any]:
    """The record of this call, merged into ``out``'s and written; refuses another protocol's folder."""
    from roma_lab.results import read_json_file, write_text_atomic

    record = {"tasks": tasks.name, "source": tasks.source, "task_hashes": _task_hashes(tasks), "grader": grader_name,
              "web": None if tasks.web is None else tasks.web.provider.spec,
              "systems": {s.label: s.describe() for s in systems}}
    path = out / RECORD_FILE
    if path.exists():
        old = read_json_file(path)  # a DamagedFileError naming it, whatever is wrong with it
        for key, what in (("tasks", "tasks"), ("grader", "grader"), ("web", "web search")):
            if old.get(key) != record[key]:
                raise EvaluationMismatchError(
                    f"{out} holds rows made with other {what} ({old.get(key)!r}, now {record[key]!r}); "
                    "use another out folder to compare under a different protocol")
        # tasks may join (a larger n reuses the rows of a smaller one); a task that changed may not
        changed = sorted(i for i, h in record["task_hashes"].items() if old.get("task_hashes", {}).get(i, h) != h)
        if changed:
            raise EvaluationMismatchError(
                f"{out} holds rows for tasks {changed[:5]} with another question or gold answer; "
                "use another out folder (or other ids) for the changed tasks")
        for label, settings in record["systems"].items():
            if label in old.get("systems", {}) and old["systems"][label] != settings:
                raise EvaluationMismatchError(
                    f"{out}: system {label!r} was run with {old['systems'][label]}, now {settings}; "
                    "give the changed system another label")
        record = {**record, "systems": {**old.get("systems", {}), **record["systems"]},
                  "task_hashes": {**old.get("task_hashes", {}), **record["task_hashes"]}}
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


def record_budget(out: Path, report: Any) -> None:
    """The last call's cap and where it stopped, in evaluation.json (``budget``; gone without a cap)."""
    from roma_lab.results import read_json_file, write_text_atomic

    path = out / RECORD_FILE
    data = read_json_file(path)
    data.pop("budget", None)
    if report is not None:
        data["budget"] = report.as_json()
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
