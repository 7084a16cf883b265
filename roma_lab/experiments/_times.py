"""The README's run-time table, generated from each ``results/<stem>/provenance.json``.

Run times in the README are this command's output, never typed by hand:
``python -m roma_lab.experiments times``. A folder without a record, or with a damaged one, is a
row that says so; it never stops the table (times without a time zone, or an end before the start,
are damage too: a warning names the file). Beside each run: the threads, load average and
tokens/s of the embedded models its kernel loaded, from ``<results_root>/lm_speed.jsonl`` (written
by ``run``; see roma_lab.lm's ModelSpeed), matched to the run by time: a model loaded and freed
between the run's start and end belongs to it (the runner runs one notebook at a time).

**Predicted against measured** (issue 54): each row shows the time predicted for the run before it
ran (the plan line ``run --budget`` handed it, in its record's ``extra.plan``; else what its spec
predicts at its sizes) and measured / predicted, and how many of its model calls were served from the
completion cache (``extra.model_calls``, which the runner counts in the run's traces; counted from
the folder for older records): a replay takes seconds where the model took an hour (notebook 42
recorded 12 s for a 53-minute study), so its time is no measure of the model's, and the plan does
not price a notebook by it. Only a hit on an entry recorded before the run's batch began counts as a
replay (``earlier``): in a fresh clone's ``make reproduce``, notebooks 22-26 are served the first
tasks' calls that 21 asked minutes before, which every such batch pays the same way.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from roma_lab.lm import ModelSpeed, read_speeds
from roma_lab.results import (
    PROVENANCE_FILE,
    DamagedFileError,
    ProvenanceError,
    read_provenance,
    read_regular_bytes,
)

SPEED_LOG = "lm_speed.jsonl"
#: How near its prediction a run's time should be, either way (issue 54): ``agreement_line`` counts them.
WITHIN = 1.25
#: A run that served more than this share of its model calls from completion cache entries recorded before
#: its batch began is a replay:
#: its time is no cost of the notebook (the model did not run), and ``times`` says so.
REPLAYED_SHARE = 0.1
# an LMExchange of a trace (roma_lab.trace), its fields in their order: whether the cache served it, and when
# the entry it was served was recorded
_NUMBER = rb'(?:null|-?[0-9][0-9.eE+-]*)'
_CACHED = re.compile(rb'"cached"\s*:\s*(true|false)\s*(?:,\s*"recorded_latency_s"\s*:\s*' + _NUMBER
                     + rb'\s*)?(?:,\s*"recorded_at"\s*:\s*(' + _NUMBER + rb'))?')


@dataclass(frozen=True, slots=True)
class ModelCalls:
    """The model requests a run's traces record, how many of them the completion cache served, and how
    many of those it served from entries recorded before the run's batch began (``earlier``: a replay
    of another run; the rest an earlier request of the same batch, a cost the batch pays every time)."""

    requests: int
    cached: int
    earlier: int

    @property
    def replayed(self) -> bool:
        return self.requests > 0 and self.earlier > REPLAYED_SHARE * self.requests

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "cached": self.cached, "earlier": self.earlier}


def count_model_calls(out_dir: str | Path, since: datetime | None = None) -> ModelCalls:
    """The model requests recorded in the JSON files under ``out_dir`` (the traces ``evaluate`` and the
    agents write: one ``"cached": true|false`` per request), how many were served from a cache, and how
    many of those from entries recorded before ``since`` (the batch's start; an entry that recorded no
    time, or any entry when ``since`` is None, counts as earlier). A file that cannot be read counts
    nothing; a run without traces counts 0 of 0."""
    start = since.timestamp() if since is not None else None
    requests = cached = earlier = 0
    for path in Path(out_dir).rglob("*.json"):
        try:
            found = _CACHED.findall(read_regular_bytes(path))
        except (OSError, ValueError):  # gone, unreadable, or no regular file: nothing to count
            continue
        requests += len(found)
        hits = [at for flag, at in found if flag == b"true"]
        cached += len(hits)
        earlier += sum(start is None or at in (b"", b"null") or float(at) < start for at in hits)
    return ModelCalls(requests, cached, earlier)


@dataclass(frozen=True, slots=True)
class RunTime:
    """One experiment's last recorded run, as the table shows it (None: not recorded)."""

    stem: str
    status: str  # the record's status, or "not run" / "unreadable"
    started: datetime | None = None
    finished: datetime | None = None
    model: str | None = None
    smoke: bool | None = None
    overrides: tuple[tuple[str, object], ...] = ()  # the sizes asked with --set, as the record lists them
    speeds: tuple[ModelSpeed, ...] = ()  # the embedded models its kernel loaded
    planned_s: float | None = None  # the seconds the plan predicted before it ran (extra.plan), if any
    planned_drift: float = 1.0  # the factor that plan line's unit costs carried (a run's re-plan: _plan.run_drift)
    calls: ModelCalls | None = None  # its model requests and how many the cache served

    @property
    def threads(self) -> str:
        return ", ".join(str(t) for t in sorted({s.threads for s in self.speeds})) or "—"

    @property
    def load(self) -> str:
        """The highest 1-minute load average seen when one of its models loaded."""
        return f"{max(s.load_avg_1min for s in self.speeds):.2f}" if self.speeds else "—"

    def tokens_per_s(self) -> str:
        """Prompt / generation tokens per second over all its models (llama.cpp's counters)."""
        prompt = sum(s.prompt_seconds for s in self.speeds)
        generation = sum(s.generation_seconds for s in self.speeds)
        if not prompt or not generation:
            return "—"
        return (f"{sum(s.prompt_tokens for s in self.speeds) / prompt:.1f} / "
                f"{sum(s.generated_tokens for s in self.speeds) / generation:.1f}")

    @property
    def seconds(self) -> float | None:
        """Wall time from start to end; None when the run never wrote its end (killed hard: "running")."""
        if self.started is None or self.finished is None or self.status == "running":
            return None
        return (self.finished - self.started).total_seconds()


def read_run_time(results_root: str | Path, stem: str, speeds: Sequence[ModelSpeed] = ()) -> RunTime:
    """The run recorded in ``<results_root>/<stem>/provenance.json``, with the ``speeds`` of models
    loaded and freed within it."""
    try:
        record = read_provenance(Path(results_root) / stem)
    except FileNotFoundError:
        return RunTime(stem, "not run")
    except ProvenanceError:
        return RunTime(stem, "unreadable")
    except DamagedFileError as exc:  # a FIFO or folder in its place: never waited on
        warnings.warn(f"{exc.path}: {exc.problem}; its run time is not used", UserWarning, stacklevel=2)
        return RunTime(stem, "unreadable")
    if problem := _times_problem(record.started_at, record.finished_at):
        warnings.warn(f"{Path(results_root) / stem / PROVENANCE_FILE}: {problem}; its run time is not used",
                      UserWarning, stacklevel=2)
        return RunTime(stem, "unreadable")
    smoke = record.extra.get("smoke")
    overrides = record.extra.get("overrides")
    ran = RunTime(stem, record.status, record.started_at, record.finished_at, record.model,
                  smoke if isinstance(smoke, bool) else None,
                  tuple(overrides.items()) if isinstance(overrides, dict) else (),
                  planned_s=_planned(record.extra.get("plan")), planned_drift=_planned_drift(record.extra.get("plan")),
                  calls=_calls(record.extra.get("model_calls")) or count_model_calls(Path(results_root) / stem))
    # a run killed hard ("running") recorded no end: its window is empty, so nothing is attributed to it
    within = tuple(s for s in speeds if ran.started <= s.loaded_at and s.closed_at <= ran.finished)
    return replace(ran, speeds=within)


def _planned(plan: object) -> float | None:
    """The seconds a record's plan line predicted (None: no plan, or no finite positive time in it)."""
    seconds = plan.get("seconds") if isinstance(plan, Mapping) else None
    ok = isinstance(seconds, int | float) and not isinstance(seconds, bool) and 0 < seconds < float("inf")
    return float(seconds) if ok else None


def _planned_drift(plan: object) -> float:
    """The drift a record's plan line carried (1: none recorded, or no finite positive factor)."""
    drift = plan.get("drift") if isinstance(plan, Mapping) else None
    ok = isinstance(drift, int | float) and not isinstance(drift, bool) and 0 < drift < float("inf")
    return float(drift) if ok else 1.0


def _calls(counted: object) -> ModelCalls | None:
    """A record's ``model_calls`` as the runner wrote it; None when absent or not its counts. A record
    written before ``earlier`` was counted takes every hit as earlier."""
    if not isinstance(counted, Mapping):
        return None
    requests, cached = counted.get("requests"), counted.get("cached")
    earlier = counted.get("earlier", cached)
    if (all(type(n) is int for n in (requests, cached, earlier)) and 0 <= earlier <= cached <= requests):
        return ModelCalls(requests, cached, earlier)
    return None


def _times_problem(start: datetime, end: datetime) -> str | None:
    """Why a record's start and end give no run time (None when they do): both are written in UTC,
    the end after the start; anything else was edited or damaged after the run."""
    if start.utcoffset() is None or end.utcoffset() is None:
        return f"a time without a time zone (started {start.isoformat()}, finished {end.isoformat()})"
    if end < start:
        return f"it finished ({end.isoformat()}) before it started ({start.isoformat()})"
    return None


def _usable(speed: ModelSpeed) -> bool:
    """A record its model could have written: times in UTC, freed after it loaded, no negative count."""
    return (_times_problem(speed.loaded_at, speed.closed_at) is None
            and min(speed.calls, speed.call_seconds, speed.prompt_tokens, speed.prompt_seconds,
                    speed.generated_tokens, speed.generation_seconds) >= 0)


def read_speed_log(results_root: str | Path) -> list[ModelSpeed]:
    """The records of ``<results_root>/lm_speed.jsonl`` that a run could have written; a warning names
    the file and counts the lines left out (cut short, edited, impossible values)."""
    path = Path(results_root) / SPEED_LOG
    try:
        speeds, damaged = read_speeds(path)
    except (OSError, DamagedFileError) as exc:  # DamagedFileError: a folder or FIFO in its place
        warnings.warn(f"{path} cannot be read ({exc}); no model speeds are used", UserWarning, stacklevel=2)
        return []
    usable = [s for s in speeds if _usable(s)]
    if damaged or len(usable) < len(speeds):
        warnings.warn(f"{damaged + len(speeds) - len(usable)} damaged line(s) of {path} ignored", UserWarning,
                      stacklevel=2)
    return usable


def run_times(results_root: str | Path, stems: Sequence[str] = ()) -> list[RunTime]:
    """``stems`` in order (missing ones as "not run"), then any other folder of ``results_root``
    that holds a provenance.json, sorted by name; speeds from ``<results_root>/lm_speed.jsonl``."""
    root = Path(results_root)
    speeds = read_speed_log(root)
    extra = sorted(p.parent.name for p in root.glob("*/provenance.json") if p.parent.name not in stems)
    return [read_run_time(root, stem, speeds) for stem in [*dict.fromkeys(stems), *extra]]


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment is not None else "—"


def times_markdown(rows: Sequence[RunTime], predicted: Mapping[str, tuple[float, str]] | None = None) -> str:
    """A markdown table, one row per experiment, times in UTC; ``predicted``: per stem, the seconds
    predicted for its recorded run and where that comes from ("plan", "spec")."""
    header = ["notebook", "status", "tier", "model", "started (UTC)", "finished (UTC)", "run time", "threads",
              "load (1 min) at model load", "tok/s prompt / generation", "predicted", "measured / predicted",
              "model calls from cache"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        tier = {True: "smoke", False: "default", None: "—"}[row.smoke]
        if row.overrides:  # a run at other sizes than the tier's says which
            tier += ", --set " + " ".join(f"{name}={value!r}" for name, value in row.overrides)
        guess, source = (predicted or {}).get(row.stem, (None, ""))
        ratio = "—" if guess is None or row.seconds is None else f"{row.seconds / guess:.2f}"
        if ratio != "—" and row.calls is not None and row.calls.replayed:
            ratio += " (a replay)"
        calls = ("—" if row.calls is None or not row.calls.requests
                 else f"{row.calls.cached} of {row.calls.requests}, {row.calls.earlier} recorded before its batch")
        cells = [f"`{row.stem}`", row.status, tier, row.model or "—", _when(row.started), _when(row.finished),
                 format_seconds(row.seconds), row.threads, row.load, row.tokens_per_s(),
                 "—" if guess is None else f"{format_seconds(guess)} ({source})", ratio, calls]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def agreement_line(rows: Sequence[RunTime], predicted: Mapping[str, tuple[float, str]]) -> str | None:
    """How many runs took within ``WITHIN`` of their prediction either way, the median ratio, and the runs
    outside, faster and slower, each with its ratio and seconds; None when no run has a prediction. A
    replay is left out: its time is the cache's, no measure of its prediction."""
    import statistics

    ratios = {row.stem: (row.seconds / predicted[row.stem][0], row.seconds) for row in rows
              if row.stem in predicted and row.seconds is not None and predicted[row.stem][0] > 0
              and not (row.calls is not None and row.calls.replayed)}
    if not ratios:
        return None
    inside = sum(1 / WITHIN <= r <= WITHIN for r, _ in ratios.values())

    def outside(beyond) -> str:
        return ", ".join(f"{stem} x{r:.2f} ({format_seconds(s)})" for stem, (r, s) in ratios.items() if beyond(r)) or "none"

    return (f"measured / predicted within x{WITHIN:g} either way: {inside} of {len(ratios)} runs, median "
            f"x{statistics.median(r for r, _ in ratios.values()):.2f}; faster: {outside(lambda r: r < 1 / WITHIN)}; "
            f"slower: {outside(lambda r: r > WITHIN)}")
