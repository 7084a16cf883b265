"""roma_lab._concurrent.concurrent_map: serial at one worker, overlapping and ordered above it, contextvars
carried, and a failure that stops what has not started while keeping what finished."""

from __future__ import annotations

import contextvars
import threading

import pytest

from roma_lab._concurrent import concurrent_map

SETTING = contextvars.ContextVar("setting", default="unset")


def test_one_worker_is_the_plain_loop_in_the_calling_thread():
    events = []

    def fn(x):
        events.append(("call", x, threading.current_thread().name))
        return x * 10

    results = concurrent_map(fn, [3, 1, 2], workers=1, on_done=lambda i, r: events.append(("done", i, r)))
    main = threading.current_thread().name
    assert results == [30, 10, 20]
    assert events == [("call", 3, main), ("done", 0, 30), ("call", 1, main), ("done", 1, 10), ("call", 2, main),
                      ("done", 2, 20)]


def test_calls_overlap_up_to_the_bound_and_results_keep_input_order():
    lock, in_flight, most = threading.Lock(), [0], [0]
    barrier = threading.Barrier(4, timeout=10)  # four calls must be in flight at once, or this breaks
    token = SETTING.set("caller's")
    seen = []

    def fn(x):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        if x < 4:
            barrier.wait()
        seen.append(SETTING.get())
        with lock:
            in_flight[0] -= 1
        return -x

    done = []
    try:
        results = concurrent_map(fn, list(range(12)), workers=4, on_done=lambda i, r: done.append((i, r)))
    finally:
        SETTING.reset(token)
    assert results == [-x for x in range(12)]
    assert most[0] == 4  # the bound reached, never passed
    assert sorted(done) == [(i, -i) for i in range(12)]  # once each, from the calling thread
    assert seen == ["caller's"] * 12  # each call ran in a copy of the caller's context


def test_a_failure_cancels_what_has_not_started_and_keeps_what_finished():
    failed, release = threading.Event(), threading.Event()
    started, done = [], []

    def fn(x):
        started.append(x)
        if x == 0:
            failed.set()
            raise KeyboardInterrupt  # a BaseException from a call, as from a scripted model in a test
        if x == 1:
            failed.wait(10)
        else:  # these can only be running when the map stops: both workers are busy until then
            release.wait(10)
        return x

    def on_done(index, result):
        done.append(index)
        release.set()

    with pytest.raises(KeyboardInterrupt):
        concurrent_map(fn, list(range(10)), workers=2, on_done=on_done)
    assert set(started) <= {0, 1, 2, 3}  # the rest were cancelled before they started
    assert sorted(done) == sorted(x for x in started if x != 0)  # every call that finished was kept


def test_a_failing_on_done_stops_the_map_like_a_failing_call():
    def on_done(index, result):
        raise RuntimeError(f"cannot record {index}")

    with pytest.raises(RuntimeError, match="cannot record"):
        concurrent_map(lambda x: x, [1, 2, 3], workers=2, on_done=on_done)
    with pytest.raises(RuntimeError, match="cannot record 0"):
        concurrent_map(lambda x: x, [1, 2, 3], workers=1, on_done=on_done)


def test_workers_below_one_are_refused():
    with pytest.raises(ValueError, match="workers must be >= 1"):
        concurrent_map(lambda x: x, [1], workers=0)


def test_the_pool_is_handed_a_few_jobs_at_a_time_so_a_long_map_costs_no_more_per_job(monkeypatch):
    # every job handed over at once would be n futures held, n contexts run late and n to cancel on a
    # failure (issue 53 item 7: SimpleQA's 4,326 items); two per worker are enough to keep each busy
    from concurrent.futures import ThreadPoolExecutor

    import roma_lab._concurrent as module

    done, outstanding = [], []

    class Counted(ThreadPoolExecutor):
        submitted = 0

        def submit(self, *args, **kwargs):
            Counted.submitted += 1
            outstanding.append(Counted.submitted - len(done))  # handed over and not yet done, this one included
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(module, "ThreadPoolExecutor", Counted)
    results = concurrent_map(lambda x: x * 2, list(range(300)), workers=4, on_done=lambda i, r: done.append(i))
    assert results == [2 * x for x in range(300)]
    assert sorted(done) == list(range(300))  # every job once, none lost between the hand-overs
    assert Counted.submitted == 300 and max(outstanding) <= 8  # two per worker at most, however long the map



def test_while_jobs_overlap_full_collections_are_rarer_and_the_setting_is_put_back():
    # a full collection walks the whole heap holding the GIL; a run's heap only grows (issue 53 item 7)
    import gc

    from roma_lab._concurrent import FULL_COLLECTION_EVERY

    before = gc.get_threshold()
    seen = []

    def job(x):
        seen.append(gc.get_threshold())
        if x == 0:  # a map inside a job: the outer map's setting holds until the outer map ends
            concurrent_map(lambda y: seen.append(gc.get_threshold()), [1, 2], workers=2)
            seen.append(gc.get_threshold())
        return x

    try:
        assert concurrent_map(job, list(range(6)), workers=3) == list(range(6))
        assert gc.get_threshold() == before
        assert seen and all(t[:2] == before[:2] and t[2] == max(before[2], FULL_COLLECTION_EVERY) for t in seen)
        assert gc.get_threshold()[2] < FULL_COLLECTION_EVERY  # the test ran on the default, not on ours

        def failing(x):
            raise RuntimeError("no answer")

        with pytest.raises(RuntimeError):
            concurrent_map(failing, [1, 2, 3], workers=2)
        assert gc.get_threshold() == before  # put back after a failure too

        concurrent_map(lambda x: x, [1, 2], workers=1)  # one worker: a plain loop, the setting untouched
        assert gc.get_threshold() == before

        def resetting(x):  # someone sets their own while the map runs: theirs stands after it
            gc.set_threshold(500, 5, 7)
            return x

        concurrent_map(resetting, [1, 2], workers=2)
        assert gc.get_threshold() == (500, 5, 7)
    finally:
        gc.set_threshold(*before)
