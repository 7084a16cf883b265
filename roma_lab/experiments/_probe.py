"""``python -m roma_lab.experiments probe``: how fast this machine runs the embedded model, in seconds.

A spec's ``measured_s`` was timed on some machine; the plan scales it to this one by a probe of each:
a few seconds of prompt evaluation and generation through ``roma_lab.lm`` (a fixed prompt, no
completion cache), read from llama.cpp's own counters (the model's ``ModelSpeed`` record, written when
the model is freed). The probe runs in a child process so the model is freed, and its record written,
when the child exits; ``results/speed_probe.json`` keeps the result. Other work only slows a probe
down, so it runs three times and keeps the fastest; and it records the share of the machine's CPU that
other processes took meanwhile (``others_cpu_share``, from /proc/stat less the children's own time):
a probe beside a test suite measured 66 / 20 tok/s where the quiet machine gives 86 / 28, scaled
every prediction up by a third, and the 2-hour plan funded nothing. A spec names the speed of the
machine its figure comes from in ``measured_tps`` ([prompt, generation] tok/s of this probe run there,
quiet, beside that run: a notebook's own averages in the ``times`` table mix long and short prompts and
are not the probe's unit); the plan's cost of a unit is then that figure times the ratio of one agent-like
call's seconds here to there (``speed_ratio``). Without either, the figure is not scaled.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

PROBE_FILE = "speed_probe.json"
#: Prompt tokens evaluated per generated token in an agent's model call (the embedded model's counters
#: over notebook 42's agent runs: 9,188 evaluated, 748 generated): the mix a probe's speeds are weighed by.
PROMPT_PER_GENERATED = 12.0
#: The probe's request: ~500 prompt tokens, and a reply that runs to its token limit.
PROBE_PROMPT = (
    "You answer questions about a fictional world from the documents you are given. Read every document, "
    "keep the dates and the names exactly as written, and never guess a value that no document states. "
) * 12 + "Now count from 1 to 300, the numbers separated by commas, and nothing else."
PROBE_MAX_TOKENS = 48
PROBE_RUNS = 3
#: Above this share of the machine's CPU taken by other processes while it was probed, a probe says the
#: machine was busy: its speed is under-measured and every time scaled by it over-estimated.
BUSY_SHARE = 0.1


@dataclass(frozen=True, slots=True)
class SpeedProbe:
    """One probe of this machine: tokens per second of prompt evaluation and of generation."""

    model: str
    prompt_tps: float
    generation_tps: float
    threads: int
    load_avg_1min: float
    measured_at: str  # ISO time, UTC
    others_cpu_share: float | None = None  # of the machine's CPU, other processes' while probing (None: unknown)

    def call_seconds(self) -> float:
        return call_seconds(self.prompt_tps, self.generation_tps)

    def busy(self) -> str:
        """What the machine was doing besides the probe, when that makes it slow ("" when quiet or unknown)."""
        share = self.others_cpu_share
        if share is None or share <= BUSY_SHARE:
            return ""
        return (f"other processes took {share:.0%} of this machine's CPU while it was probed: its speed is "
                f"under-measured and every time the plan scales by it over-estimated; probe again on a quiet machine")


def call_seconds(prompt_tps: float, generation_tps: float) -> float:
    """Seconds of one agent-like model call per generated token at these speeds."""
    return PROMPT_PER_GENERATED / prompt_tps + 1.0 / generation_tps


def speed_ratio(probe: SpeedProbe, measured_tps: Sequence[float]) -> float:
    """How much longer a unit takes here than on the machine that ran at ``measured_tps``."""
    return probe.call_seconds() / call_seconds(*measured_tps)


def run_probe(results_root: str | Path, *, lm: str = "local", command: Sequence[str] | None = None,
              timeout_s: float = 600, runs: int = PROBE_RUNS) -> SpeedProbe:
    """Probe the embedded model ``lm`` in a child process ``runs`` times (``command`` replaces it: a
    test's stand-in that writes a speed record), keep the fastest, and write
    ``<results_root>/speed_probe.json``. RuntimeError naming what went wrong when a child fails or
    writes no usable record."""
    from roma_lab.lm import SPEED_LOG_ENV, in_process, read_speeds
    from roma_lab.results import write_text_atomic

    if command is None and not in_process(lm):
        raise ValueError(f"a probe times the embedded model on this machine; {lm!r} is not one")
    child = list(command or [sys.executable, "-m", "roma_lab.experiments._probe", lm])
    machine, mine = _cpu_ticks(), _children_cpu_s()
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "speed.jsonl"
        for _ in range(runs):
            try:
                done = subprocess.run(child, env={**os.environ, SPEED_LOG_ENV: str(log)}, capture_output=True,
                                      text=True, timeout=timeout_s, check=False)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"the speed probe took more than {timeout_s:g} s") from None
            if done.returncode:
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                raise RuntimeError(f"the speed probe failed (exit {done.returncode}): {last}")
        speeds, _ = read_speeds(log)
    others = _others_share(machine, _cpu_ticks(), _children_cpu_s() - mine)
    usable = [s for s in speeds if s.prompt_tps and s.generation_tps]
    if not usable:
        raise RuntimeError("the speed probe's model recorded no prompt and generation speed")
    speed = min(usable, key=lambda s: call_seconds(s.prompt_tps, s.generation_tps))
    probe = SpeedProbe(model=speed.model, prompt_tps=speed.prompt_tps, generation_tps=speed.generation_tps,
                       threads=speed.threads, load_avg_1min=speed.load_avg_1min,
                       measured_at=speed.closed_at.isoformat(), others_cpu_share=others)
    write_text_atomic(Path(results_root) / PROBE_FILE, json.dumps(asdict(probe), indent=2) + "\n")
    return probe


_STAT = Path("/proc/stat")


def _cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of every CPU since boot, from /proc/stat (None where there is none)."""
    from roma_lab.results import read_regular_bytes

    try:
        ticks = [int(v) for v in read_regular_bytes(_STAT).splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle and iowait
    return sum(ticks) - idle, sum(ticks)


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children (the probes)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _others_share(before: tuple[int, int] | None, after: tuple[int, int] | None, children_s: float) -> float | None:
    """The share of the machine's CPU time between ``before`` and ``after`` that was neither idle nor the
    probes' own (``children_s``); None when /proc/stat could not be read."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    busy, total = after[0] - before[0], after[1] - before[1]
    return min(1.0, max(0.0, (busy - children_s * tick) / total))


def read_probe(results_root: str | Path) -> SpeedProbe | None:
    """The probe of ``<results_root>/speed_probe.json``; None when there is none, or (with a warning
    naming the file) when it is not one a probe wrote."""
    from roma_lab.results import read_regular_bytes

    path = Path(results_root) / PROBE_FILE
    try:
        data = json.loads(read_regular_bytes(path))
        probe = SpeedProbe(**data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, RecursionError) as exc:  # a FIFO, edited, cut short
        warnings.warn(f"{path}: not a speed probe ({exc}); the specs' figures are not scaled", UserWarning,
                      stacklevel=2)
        return None
    speeds = (probe.prompt_tps, probe.generation_tps)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in speeds):
        warnings.warn(f"{path}: its speeds {speeds} are not positive numbers; the specs' figures are not scaled",
                      UserWarning, stacklevel=2)
        return None
    return probe


def _probe_in_this_process(lm: str) -> None:
    """The child: one call of the probe's prompt, then exit (the model's record is written as it is freed)."""
    from roma_lab.lm import resolve_lm

    resolve_lm(lm, cache=False, max_tokens=PROBE_MAX_TOKENS, temperature=0.0)(PROBE_PROMPT)


if __name__ == "__main__":
    _probe_in_this_process(sys.argv[1])
