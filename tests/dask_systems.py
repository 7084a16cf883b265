"""Systems for the Dask tests, importable by name on worker processes (tests/ is on their path).

Each one leaves evidence in files, since it runs in another process: which process answered which
question, how many ran at once, which worker it killed. Nothing here measures speed.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from roma_lab.bench import Item


def toy_items(n: int, benchmark: str = "toy") -> list[Item]:
    return [Item(benchmark=benchmark, item_id=str(i), question=f"q{i}", answer=f"a{i}") for i in range(n)]


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:  # one short O_APPEND write per line: whole lines
        f.write(line + "\n")


def calls(log: str | Path) -> list[tuple[int, str]]:
    """(pid, question) of every call logged by ``Echo``, in order."""
    path = Path(log)
    lines = path.read_text().splitlines() if path.exists() else []
    return [(int(pid), question) for pid, question in (line.split() for line in lines)]


@dataclass(frozen=True)
class Echo:
    """Answers q<i> with a<i> when i is even (else "no idea") after ``delay_s``; logs (pid, question)."""

    log: str
    delay_s: float = 0.0

    def __call__(self, question: str) -> str:
        _append(self.log, f"{os.getpid()} {question}")
        time.sleep(self.delay_s)
        i = int(question[1:])
        return f"a{i}" if i % 2 == 0 else "no idea"


@dataclass(frozen=True)
class KillsItsWorker:
    """Echo, except that on ``question`` it SIGKILLs the process it runs in: the first time only
    (a marker file remembers), or every time with ``always``."""

    echo: Echo
    question: str
    marker: str
    always: bool = False

    def __call__(self, question: str) -> str:
        if question == self.question and (self.always or not os.path.exists(self.marker)):
            _append(self.marker, str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return self.echo(question)


@dataclass(frozen=True)
class CountsAtOnce:
    """Holds each item ``hold_s`` seconds and records how many items were inside at once
    (a counter file under an flock, shared by every worker process on this machine)."""

    path: str
    hold_s: float

    def _update(self, step: int) -> None:
        with open(self.path, "a+", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            now, most = (int(x) for x in (f.read().split() or ["0", "0"]))
            now += step
            f.seek(0)
            f.truncate()
            f.write(f"{now} {max(most, now)}")

    def __call__(self, question: str) -> str:
        self._update(+1)
        try:
            time.sleep(self.hold_s)
        finally:
            self._update(-1)
        return "a" + question[1:]


def most_at_once(path: str | Path) -> int:
    return int(Path(path).read_text().split()[1])


@dataclass(frozen=True)
class LocalGenerations:
    """Asks a local model ``n_calls`` questions per item; each generation's (pid, start, end) on
    the machine's monotonic clock (shared by every process) is logged from inside the engine,
    i.e. inside whatever serialises generations."""

    model: str
    log: str
    n_calls: int = 2

    def __call__(self, question: str) -> str:
        from roma_lab.lm import resolve_lm
        from roma_lab.lm._engine import LlamaEngine

        if not getattr(LlamaEngine._generate, "logged", False):
            generate = LlamaEngine._generate

            def logged(engine, *args, **kwargs):
                start = time.monotonic_ns()
                try:
                    return generate(engine, *args, **kwargs)
                finally:
                    _append(self.log, f"{os.getpid()} {start} {time.monotonic_ns()}")

            logged.logged = True
            LlamaEngine._generate = logged
        lm = resolve_lm(self.model, cache=False, max_tokens=8)
        return " ".join(lm(f"{question}: say a word ({k})")[0] for k in range(self.n_calls))


def generations(log: str | Path) -> list[tuple[int, int, int]]:
    return [tuple(int(x) for x in line.split()) for line in Path(log).read_text().splitlines()]
