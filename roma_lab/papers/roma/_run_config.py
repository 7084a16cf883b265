"""The settings guard of a ROMA table run (``<benchmark>_run_config.json``), which stops a rerun with
other settings from mixing into earlier results. A damaged guard is moved aside
(``roma_lab.results.quarantine``) with the results it guarded, and that work done again
(design/integrity.md)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

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
    web: str = ""  # the web search's provider spec ("": none); configs written before it read as none
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
