"""Run independent jobs on a bounded pool of threads: the one way the runners (agent tasks x runs,
best-of-N rollouts, judge calls, benchmark items) overlap their model calls. Below every room,
so any package may use it.

The bound is the caller's (usually ``roma_lab.lm.max_concurrency`` of the model the jobs call);
``workers=1`` runs the jobs in the calling thread, one after the other, exactly as a plain loop.
Each job runs in a copy of the caller's ``contextvars`` context, taken when the map starts:
DSPy's settings (``dspy.context(lm=...)``, usage trackers) live in contextvars.
``on_done`` runs in the calling thread, so whatever it writes is written by one thread only.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextvars import copy_context
from typing import TypeVar

__all__ = ["concurrent_map"]

X = TypeVar("X")
T = TypeVar("T")


def concurrent_map(fn: Callable[[X], T], items: Sequence[X], *, workers: int,
                   on_done: Callable[[int, T], None] | None = None) -> list[T]:
    """``[fn(x) for x in items]`` with up to ``workers`` calls in flight, calling ``on_done(index,
    result)`` as each call finishes (in completion order; in input order when ``workers=1``).

    A failure (a call raising, ``on_done`` raising, or KeyboardInterrupt while waiting) stops the
    map: calls not yet started are cancelled, calls already running are waited for and their
    ``on_done`` still runs (finished work is kept), then the first failure is raised. A second
    KeyboardInterrupt stops that wait (threads cannot be killed: the running calls then finish in
    the background, and their ``on_done`` never runs)."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    done = on_done or (lambda index, result: None)
    if workers == 1 or len(items) <= 1:
        results = []
        for index, item in enumerate(items):
            results.append(fn(item))
            done(index, results[-1])
        return results
    results: dict[int, T] = {}
    failure: BaseException | None = None
    contexts = [copy_context() for _ in items]  # each job's copy, taken now (a job may start later)
    pool = ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="roma_lab")
    # Jobs are handed to the pool a few at a time, not all at once: wait() walks every future it is
    # given, so a map of n jobs all submitted would cost O(n) per completion, O(n^2) in all (seconds of
    # CPU at a few thousand jobs). One more queued job per worker starts the moment a worker frees.
    ahead = 2 * workers
    futures: dict[Future, int] = {}
    upcoming = iter(enumerate(items))

    def submit(count: int) -> set[Future]:
        started = set()
        for index, item in itertools.islice(upcoming, count):
            future = pool.submit(contexts[index].run, fn, item)
            futures[future] = index
            started.add(future)
        return started

    try:
        pending = submit(ahead)
        while pending:
            try:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            except BaseException as exc:  # KeyboardInterrupt in the caller: stop, keep what finishes
                if failure is not None:  # the second one: stop waiting
                    raise
                failure, finished = exc, set()
            for future in sorted(finished, key=futures.__getitem__):
                index = futures.pop(future)
                try:
                    results[index] = future.result()
                    done(index, results[index])
                except BaseException as exc:  # noqa: BLE001 - raised once the running calls are in
                    failure = failure or exc
            if failure is not None:
                pending = {f for f in pending if not f.cancel()}  # cancel() is False once a call runs
            else:
                pending |= submit(ahead - len(pending))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # a second interrupt: leave the running calls behind
        raise
    pool.shutdown(wait=True)
    if failure is not None:
        raise failure
    return [results[i] for i in range(len(items))]
