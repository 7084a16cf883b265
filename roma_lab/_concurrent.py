"""Run independent jobs on a bounded pool of threads: the one way the runners (agent tasks x runs,
best-of-N rollouts, judge calls, benchmark items) overlap their model calls. Below every room,
so any package may use it.

The bound is the caller's (usually ``roma_lab.lm.max_concurrency`` of the model the jobs call);
``workers=1`` runs the jobs in the calling thread, one after the other, exactly as a plain loop.
Each job runs in a copy of the caller's ``contextvars`` context, taken when the map starts:
DSPy's settings (``dspy.context(lm=...)``, usage trackers) live in contextvars.
``on_done`` runs in the calling thread, so whatever it writes is written by one thread only.

While jobs overlap, the garbage collector walks its oldest generation (the whole heap) at most a tenth
as often as by default: a run keeps most of what it allocates (cached replies, rows, the LM's history),
so each full collection walks a heap that only grows, holding the GIL every thread needs to take in its
reply. At 4,326 single calls in flight 64 at a time, full collections cost about 2 ms of CPU a call and
6-7% of the run's wall (``speed/bench_harness.py``; design/evaluate.md). The young generations are
collected as always, so short-lived cycles go as soon as ever.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import copy_context
from typing import TypeVar

__all__ = ["concurrent_map", "fewer_full_collections"]

X = TypeVar("X")
T = TypeVar("T")

#: Collections of the middle generation between two full ones while a map overlaps jobs (CPython's: 10).
FULL_COLLECTION_EVERY = 100

_collector_lock = threading.Lock()
_collector_users = 0
_collector_saved: tuple[int, ...] = ()


@contextlib.contextmanager
def fewer_full_collections():
    """A full collection at most every :data:`FULL_COLLECTION_EVERY` middle ones while any map (or run:
    ``evaluate`` holds it through its tables too) is inside; they nest and overlap: the first in sets it,
    the last out puts back what it found, unless the setting was changed meanwhile by someone else,
    whose setting then stands."""
    global _collector_users, _collector_saved
    with _collector_lock:
        if _collector_users == 0:
            _collector_saved = gc.get_threshold()
            young, middle, full = _collector_saved
            gc.set_threshold(young, middle, max(full, FULL_COLLECTION_EVERY))
        _collector_users += 1
        ours = gc.get_threshold()
    try:
        yield
    finally:
        with _collector_lock:
            _collector_users -= 1
            if _collector_users == 0 and gc.get_threshold() == ours:
                gc.set_threshold(*_collector_saved)


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
    # Each job, once finished (or cancelled), puts itself on one queue the calling thread reads: O(1) per
    # completion (wait() over the jobs in flight would walk them all, twice, at every completion). Jobs are
    # handed to the pool a few at a time, not all at once: one more queued job per worker starts the moment
    # a worker frees, and a failure has few to cancel.
    ahead = 2 * workers
    futures: dict[Future, int] = {}
    finished: queue.SimpleQueue[Future] = queue.SimpleQueue()
    upcoming = iter(enumerate(items))

    def submit(count: int) -> None:
        for index, item in itertools.islice(upcoming, count):
            future = pool.submit(contexts[index].run, fn, item)
            futures[future] = index
            future.add_done_callback(finished.put)

    with fewer_full_collections():
        try:
            submit(ahead)
            cancelled = False
            while futures:
                try:
                    ended = [finished.get()]
                except BaseException as exc:  # KeyboardInterrupt in the caller: stop, keep what finishes
                    if failure is not None:  # the second one: stop waiting
                        raise
                    failure, ended = exc, []
                while not finished.empty():
                    ended.append(finished.get())
                for future in sorted(ended, key=futures.__getitem__):
                    index = futures.pop(future)
                    if future.cancelled():
                        continue
                    try:
                        results[index] = future.result()
                        done(index, results[index])
                    except BaseException as exc:  # noqa: BLE001 - raised once the running calls are in
                        failure = failure or exc
                if failure is None:
                    submit(ahead - len(futures))
                elif not cancelled:  # cancel() is False once a call runs; a cancelled job comes off the queue too
                    cancelled = True
                    for future in list(futures):
                        future.cancel()
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)  # a second interrupt: leave the running calls behind
            raise
        pool.shutdown(wait=True)
    if failure is not None:
        raise failure
    return [results[i] for i in range(len(items))]
