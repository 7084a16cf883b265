"""The settings guard of a ROMA table run (``<benchmark>_run_config.json``), which stops a rerun with
other settings from mixing into earlier results, and the items whose saved trace must be made
again. A damaged file of either kind is moved aside (``roma_lab.results.quarantine``) and its work
done again (design/integrity.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from roma_lab.bench import Item, read_results_df, run_file, saved_run
from roma_lab.results import quarantine, write_text_atomic


class RunConfigMismatchError(ValueError):
    """``out_dir`` holds results made with other settings; resuming would mix them."""


class RunConfig(BaseModel):
    """What must match for a rerun to resume into the same results (``<benchmark>_run_config.json``).

    The sample size and seed are not part of it: rows are keyed by item, so a larger sample
    reuses every finished item.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: str
    model: str
    judge: str
    max_depth: int
    max_concurrency: int
    search_backend: str
    longform_task: str


def check_config(out_dir: Path, config: RunConfig) -> None:
    """Refuse to resume into results made with other settings; record the settings otherwise."""
    path = out_dir / f"{config.benchmark}_run_config.json"
    previous = None
    if path.is_file():
        try:
            previous = RunConfig.model_validate_json(path.read_bytes())
        except ValidationError:
            # The settings the results were made with are unknown, so they cannot be resumed: keep them
            # aside and start this benchmark over.
            for damaged in (path, out_dir / f"{config.benchmark}_results.csv", out_dir / f"{config.benchmark}_runs"):
                if damaged.exists():
                    quarantine(damaged, f"{path.name} is damaged, so the settings of these results are unknown; "
                                        f"{config.benchmark} starts over")
    if previous is not None:
        if previous != config:
            changed = {k: (getattr(previous, k), getattr(config, k)) for k in RunConfig.model_fields
                       if getattr(previous, k) != getattr(config, k)}
            raise RunConfigMismatchError(
                f"{out_dir} holds {config.benchmark} results made with other settings {changed} (old, new); "
                "use a new out_dir or delete the old results")
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, config.model_dump_json(indent=1))


def damaged_traces(runs_dir: Path, results_path: Path, items: Sequence[Item], condition: str) -> set[str]:
    """Items whose saved ROMA trace is damaged (moved aside) or missing although their row for
    ``condition`` is finished: they run again, so every finished item can be shown."""
    finished: set[str] = set()
    if results_path.is_file():
        rows = read_results_df(results_path)
        finished = set(rows.loc[(rows["condition"] == condition) & rows["error"].isna(), "item_id"])
    redo = set()
    for item in items:
        path = run_file(runs_dir, item.item_id)
        if path.is_file() and saved_run(path) is None:
            quarantine(path, "damaged ROMA trace; the item is run again")
            redo.add(item.item_id)
        elif not path.is_file() and item.item_id in finished:
            redo.add(item.item_id)
    return redo
