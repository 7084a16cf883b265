"""The harness's own cost per model call (issue 53, item 7): SimpleQA's 4,326 items through ``evaluate``
with ``single_call`` at concurrency 64 against a plain loopback server answering every call in 1 s.

    python speed/bench_harness.py                                   # the issue's run: 4,326 calls, 64, 1 s
    python speed/bench_harness.py --items 800                       # a quick look
    python speed/bench_harness.py --items 800 --profile /tmp/h.prof # where the runner's CPU goes (cProfile)
    python speed/bench_harness.py --items 800 --sample              # ... sampled, no profiler in the way
    python speed/bench_harness.py --ladder --items 100 --latency 0  # each layer's CPU ms per call, serially
    PYTHONPATH=/path/to/other/checkout python speed/bench_harness.py  # another commit's roma_lab, same bench

The server is ``tests/stub_openai.StubServer`` (the tests' loopback server, one server, not a copy) in a
process of its own, so the runner's CPU is its own: every chat completion is held exactly ``--latency``
seconds, then answered ``{"answer": ...}`` (the single call's JSON reply) with a usage block; it holds
as many requests at once as come (a thread each, a listen backlog large enough for a burst). The
runner is this process: the items (``--items``, SimpleQA's 4,326 by default) through
``roma_lab.evaluate.evaluate([single_call(lm)], ...)`` with the StringMatch grader, on
``resolve_lm("openai/loopback", api_base=<the server>)`` (DSPy's request cache on, as a run's is, in a
fresh folder; ``--no-dspy-cache`` turns it off) at ``--concurrency`` (64) requests in flight, into a
fresh out folder, with fresh DSPy and roma_lab caches; dspy and litellm are imported before the clock starts.

It prints ONE line per run: the commit of the roma_lab imported (``+dirty`` with changes), the calls the
server answered, the wall of the ``evaluate`` call, the serving span (first request's arrival to last
reply, server side, and where it falls in the wall: the set-up before the first request, the work after
the last reply), the concurrency bound (calls x latency / concurrency: no schedule on that many
slots is faster), span/bound and wall/bound (issue 53 asks wall/bound <= 1.15 for 4,326 calls on 2
cores), the most requests the server held at once, the runner's CPU ms per call (process CPU during
``evaluate`` / calls: the harness's cost, robust to a loaded machine where wall times are not), the
server's, the runner's peak RSS, the files written (out folder and caches) and the load average before
and after. Compare commits by CPU ms per call on a loaded machine; judge the wall ratio on a quiet one.

``--profile FILE`` runs the same under cProfile, one profiler per thread timed by that thread's CPU
(``time.thread_time``: the waits for the server cost nothing, as they cost the machine nothing), merged
and saved to FILE (``python -m pstats FILE``); it prints the CPU ms per call of each layer (each
function's own time, a C function's split among its callers: deadline, usage, the remote LM, evaluate's
rows and trace writing, the caches, DSPy, LiteLLM, httpx...), then the top functions by cumulative and
by own time. Profiling slows the run (its wall is not the harness's), and slows pure-Python code more
than C: read its proportions. ``--sample`` charges each thread's CPU, every 4 ms, to the stack it is in
(no cost per call; a short burst lands where the thread then waits). ``--ladder`` asks the same kind of
question ``--items`` times through each layer in turn, serially and unprofiled: raw HTTP, the openai SDK,
LiteLLM, ``dspy.LM``, roma_lab's ``ServerLM``, ``single_call``, ``evaluate`` (its marginal cost per row);
each step's excess over the one below is that layer's CPU ms per call.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MODEL = "openai/loopback"
REPLY = {"answer": "I do not know"}  # the single call's JSON reply; graded wrong, which costs the grader its work


# --- the server (a process of its own) -------------------------------------------------------------

class Held:
    """Holds each request ``latency_s`` seconds; counts them, the seconds held, the most held at once and
    the first arrival and last reply (monotonic clock)."""

    def __init__(self, latency_s: float):
        self.latency_s = latency_s
        self._lock = threading.Lock()
        self.calls, self.in_flight, self.most, self.held_s, self.connections = 0, 0, 0, 0.0, 0
        self.first, self.last = None, None

    def hold(self) -> None:
        arrived = time.monotonic()
        with self._lock:
            self.calls += 1
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.first = arrived if self.first is None else self.first
        time.sleep(self.latency_s)
        ended = time.monotonic()
        with self._lock:
            self.in_flight -= 1
            self.held_s += ended - arrived
            self.last = ended if self.last is None else max(self.last, ended)

    def stats(self) -> dict:
        with self._lock:
            return {"calls": self.calls, "most": self.most, "connections": self.connections, "held_s": self.held_s,
                    "span_s": (self.last - self.first) if self.calls else 0.0, "cpu_s": time.process_time(),
                    "first": self.first, "last": self.last}


def serve(latency_s: float) -> None:
    """The loopback server: prints its address, then one JSON line of stats per line read on stdin."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from stub_openai import StubServer

    # 64 connections opened at once: the default backlog (5) would drop SYNs, each then retried after 1 s
    ThreadingHTTPServer.request_queue_size = 1024
    # headers and body leave in two writes: without TCP_NODELAY the body waits for the client's delayed
    # ACK (40 ms on Linux), which a real server (llama.cpp, vLLM) does not make its clients wait
    BaseHTTPRequestHandler.disable_nagle_algorithm = True
    held = Held(latency_s)
    accept = ThreadingHTTPServer.process_request

    def counted(server, request, address) -> None:  # one per connection: does the client reuse them?
        with held._lock:
            held.connections += 1
        accept(server, request, address)

    ThreadingHTTPServer.process_request = counted
    # a client closing a kept-alive connection it no longer needs is no error of the run: not printed
    ThreadingHTTPServer.handle_error = lambda server, request, address: None
    models = [{"id": MODEL.split("/", 1)[1], "object": "model", "owned_by": "bench_harness"}]
    with StubServer([json.dumps(REPLY)], models=models, hold=held.hold) as server:
        print(server.api_base, flush=True)
        for _ in sys.stdin:
            print(json.dumps(held.stats()), flush=True)


# --- the runner (this process) ---------------------------------------------------------------------

def commit_of(package_dir: Path) -> str:
    """The short commit of the checkout ``package_dir`` is in, ``+dirty`` when it has changes."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(package_dir), *args], capture_output=True, text=True,
                              check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def files_under(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file())


class ThreadProfiles:
    """One cProfile profiler per thread (Python 3.11's profiler hooks only the thread that enables it),
    each timed by its thread's CPU clock (waits cost nothing); ``stats()`` merges them, those of threads still alive (idle
    workers kept for later calls) included."""

    def __init__(self) -> None:
        import cProfile

        # the timer reads the profiled thread's own CPU clock, whichever thread asks: the stats of a
        # thread still alive are taken from the main thread
        self._profile = lambda: cProfile.Profile(functools.partial(
            time.clock_gettime, time.pthread_getcpuclockid(threading.get_ident())))
        self._all: list = []
        self._lock = threading.Lock()
        self._run = threading.Thread.run

    def __enter__(self) -> ThreadProfiles:
        profiles, run = self, self._run

        def profiled_run(thread: threading.Thread) -> None:
            profile = profiles._profile()
            with profiles._lock:
                profiles._all.append(profile)
            profile.enable()
            try:
                run(thread)
            finally:
                profile.disable()

        threading.Thread.run = profiled_run
        self._main = self._profile()
        self._main.enable()
        return self

    def __exit__(self, *exc) -> None:
        self._main.disable()
        threading.Thread.run = self._run

    def stats(self):
        import pstats

        with self._lock:
            return pstats.Stats(self._main, *self._all)


class CPUSampler:
    """Every ``interval`` seconds, each thread's CPU spent since the last look (its own CPU clock) is
    charged to the stack it is in now: a C function's time lands on the Python function that called it.
    Unlike a profiler it adds no cost per Python call, so its proportions are those of an unprofiled run."""

    def __init__(self, interval_s: float = 0.004) -> None:
        from collections import Counter

        self.interval_s, self.own, self.inside, self.total_s = interval_s, Counter(), Counter(), 0.0
        self._stop, self._last = threading.Event(), {}

    def _look(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval_s):
            for ident, frame in sys._current_frames().items():
                try:
                    cpu = time.clock_gettime(time.pthread_getcpuclockid(ident))
                except OSError:  # the thread ended
                    continue
                spent, self._last[ident] = cpu - self._last.get(ident, cpu), cpu
                if ident == me or spent <= 0:
                    continue
                stack = []
                while frame is not None:
                    stack.append((frame.f_code.co_filename, frame.f_code.co_firstlineno, frame.f_code.co_name))
                    frame = frame.f_back
                self.total_s += spent
                self.own[stack[0]] += spent
                for where in set(stack):
                    self.inside[where] += spent

    def __enter__(self) -> CPUSampler:
        self._thread = threading.Thread(target=self._look, name="bench-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


# (group, what its path holds), first match wins; a C function's time goes to its callers' groups
GROUPS = (
    ("roma_lab lm: call deadline", "roma_lab/lm/_deadline.py"),
    ("roma_lab lm: usage and cost", ("roma_lab/lm/_usage.py", "roma_lab/lm/_price.py")),
    ("roma_lab lm: remote LM (key, slot, reply cut, parse watch)",
     ("roma_lab/lm/_server.py", "roma_lab/lm/_limits.py", "roma_lab/lm/_rollout.py", "roma_lab/lm/_unparsed.py",
      "roma_lab/lm/_calls.py", "roma_lab/lm/_remote.py")),
    ("roma_lab evaluate: attempt, row, log append", ("roma_lab/evaluate/_schedule.py", "roma_lab/evaluate/_log.py")),
    ("roma_lab evaluate: system (single call)", "roma_lab/evaluate/_systems.py"),
    ("roma_lab evaluate: start and tables", "roma_lab/evaluate/"),
    ("roma_lab results: file writes and reads", "roma_lab/results/"),
    ("roma_lab trace: build and JSON", "roma_lab/trace/"),
    ("roma_lab bench: grading", "roma_lab/bench/"),
    ("roma_lab: other", "roma_lab/"),
    ("concurrent_map and threads", ("concurrent/futures/", "/threading.py", "/contextvars")),
    ("DSPy request cache (diskcache, sqlite, pickle)", ("dspy/clients/cache.py", "diskcache/", "cachetools/",
                                                        "/sqlite3/", "/pickle.py", "cloudpickle/")),
    ("DSPy", "dspy/"),
    ("LiteLLM", "litellm/"),
    ("openai SDK", "openai/"),
    ("httpx, httpcore, h11", ("httpx/", "httpcore/", "h11/", "anyio/", "sniffio/")),
    ("pydantic", ("pydantic/", "pydantic_core/")),
    ("json", "/json/"),
    ("pandas, numpy", ("pandas/", "numpy/")),
    ("logging, warnings", ("/logging/", "/warnings.py")),
)


@functools.cache
def group_of(filename: str) -> str:
    path = filename.replace(os.sep, "/")
    for name, parts in GROUPS:
        if any(part in path for part in ((parts,) if isinstance(parts, str) else parts)):
            return name
    return "other Python (stdlib, other packages)"


def by_layer(stats, calls: int) -> list[tuple[str, float]]:
    """(layer, CPU ms per call) of the profile: each Python function's own time in its file's group, a C
    function's split among its callers by what each call site spent in it."""
    totals: dict[str, float] = {}
    for (filename, _, name), (_, _, own, _, callers) in stats.stats.items():
        if filename != "~":
            totals[group_of(filename)] = totals.get(group_of(filename), 0.0) + own
            continue
        sites = {caller: timing[2] for caller, timing in callers.items() if caller[0] != "~"}
        spent = sum(sites.values())
        if not sites or spent <= 0:
            group = f"C, called from C ({name.split(' of ')[0][:40]})"
            totals[group] = totals.get(group, 0.0) + own
            continue
        for caller, part in sites.items():
            totals[group_of(caller[0])] = totals.get(group_of(caller[0]), 0.0) + own * part / spent
    return sorted(((g, 1000 * s / calls) for g, s in totals.items()), key=lambda gs: -gs[1])


def print_samples(sampler: CPUSampler, calls: int, process_cpu_s: float) -> None:
    layers: dict[str, float] = {}
    for (filename, _, _), spent in sampler.own.items():
        layers[group_of(filename)] = layers.get(group_of(filename), 0.0) + spent
    total = 1000 * sampler.total_s / calls
    print(f"\nsampled CPU ms per call by layer (each sample's CPU charged to its innermost Python function): "
          f"{total:.2f} ms/call sampled of {1000 * process_cpu_s / calls:.2f} ms/call the process spent")
    for group, spent in sorted(layers.items(), key=lambda gs: -gs[1]):
        if 1000 * spent / calls >= 0.005:
            print(f"  {1000 * spent / calls:7.2f} ms  {100 * spent / sampler.total_s:5.1f}%  {group}")
    for counter, title in ((sampler.inside, "inside (the function and what it calls)"),
                           (sampler.own, "own (the function and the C code it calls)")):
        print(f"\ntop 25 functions by sampled CPU {title}, ms per call:")
        for (filename, line, name), spent in counter.most_common(25):
            print(f"  {1000 * spent / calls:7.2f} ms  {name} ({_short(filename)}:{line})")


def _short(filename: str) -> str:
    """A file name from its package on (site-packages/ and the checkout's path left out)."""
    path = filename.replace(os.sep, "/")
    for marker in ("site-packages/", "/lib/python3."):
        if marker in path:
            path = path.split(marker, 1)[1]
            return path.split("/", 1)[1] if marker.startswith("/lib") else path
    return path[path.find("roma_lab/"):] if "roma_lab/" in path else path


def print_profile(stats, calls: int, path: str) -> None:
    import io

    stats.dump_stats(path)
    layers = by_layer(stats, calls)
    total = sum(ms for _, ms in layers)
    print(f"\nprofile ({path}): CPU ms per call by layer, {total:.2f} ms/call profiled in all "
          "(the profiler's own overhead included)")
    for group, ms in layers:
        if ms >= 0.005:
            print(f"  {ms:7.2f} ms  {100 * ms / total:5.1f}%  {group}")
    for order, title in (("cumulative", "cumulative CPU (the function and what it calls)"),
                         ("tottime", "own CPU (the function alone)")):
        text = io.StringIO()
        stats.stream = text
        stats.sort_stats(order).print_stats(25)
        print(f"\ntop 25 by {title}, seconds over {calls} calls:")
        print(text.getvalue().split("ncalls", 1)[-1].join(("   ncalls", "")).rstrip())


def run(args, api_base: str, ask_server, root: Path) -> None:
    from roma_lab import bench
    from roma_lab.evaluate import TaskSet, evaluate, single_call
    from roma_lab.lm import resolve_lm, set_max_concurrency

    items = bench.load_simpleqa()[: args.items]
    lm = resolve_lm(MODEL, api_base=api_base, api_key="loopback", **({"cache": False} if args.no_dspy_cache else {}))
    set_max_concurrency(MODEL, args.concurrency)
    before = ask_server()
    load_before = os.getloadavg()[0]
    watch = ThreadProfiles() if args.profile else CPUSampler() if args.sample else contextlib.nullcontext()
    cpu, started, opened = time.process_time(), time.perf_counter(), time.monotonic()
    with watch:
        rows = evaluate([single_call(lm)], TaskSet("simpleqa", tuple(items)), bench.StringMatchGrader(),
                        out=root / "out", progress=False).rows
    wall, cpu, closed = time.perf_counter() - started, time.process_time() - cpu, time.monotonic()
    load_after = os.getloadavg()[0]
    after = ask_server()
    calls = after["calls"] - before["calls"]
    import resource

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    bound = calls * args.latency / args.concurrency
    errors = int(rows["error"].notna().sum())
    # the serving span's place in the wall: set-up before the first request, the work after the last reply
    edges = (f" (from {after['first'] - opened:.1f} s to {closed - after['last']:.1f} s before the end)"
             if after["first"] is not None else "")
    ratio = (lambda seconds: f"x{seconds / bound:.3f}") if bound else (lambda seconds: "-")
    import roma_lab

    print(f"commit {commit_of(Path(roma_lab.__file__).parent)} | {calls} calls at concurrency {args.concurrency}, "
          f"{args.latency:g} s a reply{' (profiled)' if args.profile else ' (sampled)' if args.sample else ''} | wall {wall:.1f} s | serving span "
          f"{after['span_s']:.1f} s{edges} | bound {bound:.1f} s | span/bound {ratio(after['span_s'])} | "
          f"wall/bound {ratio(wall)} | most held {after['most']} | connections {after['connections'] - before['connections']} | runner CPU {1000 * cpu / calls:.2f} ms/call "
          f"| server CPU {1000 * (after['cpu_s'] - before['cpu_s']) / calls:.2f} ms/call | peak RSS {rss_mb:.0f} MB | "
          f"files {files_under(root)} ({files_under(root / 'out')} in out) | rows {len(rows)}, errors {errors} | "
          f"load {load_before:.2f} -> {load_after:.2f}", flush=True)
    if errors:
        print("first error: " + str(rows.loc[rows["error"].notna(), "error"].iloc[0]))
    if args.profile:
        print_profile(watch.stats(), calls, args.profile)
    if args.sample:
        print_samples(watch, calls, cpu)


def ladder(args, api_base: str, root: Path) -> None:
    """CPU ms per call of each layer, serially, unprofiled: the same question asked through each layer
    in turn, from the raw HTTP request up to ``evaluate`` (its marginal cost: two sizes, the difference),
    rounds interleaved and the median kept; each step's excess over the one below is that layer's cost."""
    import statistics
    import uuid

    import dspy
    import httpx
    import litellm
    import openai

    from roma_lab import bench
    from roma_lab.evaluate import TaskSet, evaluate, single_call
    from roma_lab.lm import resolve_lm, rollout

    name, nonce = MODEL.split("/", 1)[1], uuid.uuid4().hex  # every question new: no cache serves it
    ask = [{"role": "user", "content": "Who received the IEEE Frank Rosenblatt Award in 2010?"}]
    settings = {"max_tokens": 1024, "temperature": 0.0}
    http, client = httpx.Client(), openai.OpenAI(base_url=api_base, api_key="loopback")
    plain = dspy.LM(MODEL, api_base=api_base, api_key="loopback", engine="litellm", **settings)
    lm = resolve_lm(MODEL, api_base=api_base, api_key="loopback")
    system = single_call(lm)
    def item(i: int):
        return bench.Item("simpleqa", f"{nonce}-{i}", f"{ask[0]['content']} ({nonce} {i})", "Michio Sugeno")

    def asked(i: int) -> list[dict]:
        return [{"role": "user", "content": f"{ask[0]['content']} ({nonce} {i})"}]

    def through_evaluate(n: int, first: int) -> None:
        folder = root / f"ladder-{first}-{n}"
        evaluate([system], TaskSet("simpleqa", tuple(map(item, range(first, first + n)))), bench.StringMatchGrader(),
                 out=folder, progress=False)

    def in_rollout(i: int) -> None:
        with rollout("0"):
            system(item(i), 0)

    steps = [
        ("raw HTTP POST (httpx)", lambda i: http.post(f"{api_base}/chat/completions",
                                                      json={"model": name, "messages": asked(i), **settings})),
        ("openai SDK", lambda i: client.chat.completions.create(model=name, messages=asked(i), **settings)),
        ("litellm.completion", lambda i: litellm.completion(model=MODEL, api_base=api_base, api_key="loopback",
                                                             messages=asked(i), **settings)),
        ("dspy.LM (litellm engine, request cache)", lambda i: plain(messages=asked(i))),
        ("roma_lab ServerLM (slot, deadline, key)", lambda i: lm(messages=asked(i))),
        ("roma_lab single_call (Predict, JSON adapter, trace)", in_rollout),
    ]
    n, used, costs = args.items, [0], {label: [] for label, _ in steps + [("roma_lab evaluate (marginal)", None)]}
    for _ in range(3):
        for label, step in steps:
            first, used[0] = used[0], used[0] + n
            cpu = time.process_time()
            for i in range(first, first + n):
                step(i)
            costs[label].append(1000 * (time.process_time() - cpu) / n)
        first, used[0] = used[0], used[0] + 3 * n
        cpu = time.process_time()
        through_evaluate(n, first)
        small = time.process_time() - cpu
        cpu = time.process_time()
        through_evaluate(2 * n, first + n)
        costs["roma_lab evaluate (marginal)"].append(1000 * (time.process_time() - cpu - small) / n)
    print(f"ladder: CPU ms per call, serial, {n} calls a step, median of 3 rounds; load {os.getloadavg()[0]:.2f}")
    below = 0.0
    for label, values in costs.items():
        median = statistics.median(values)
        print(f"  {median:7.2f} ms  (+{median - below:5.2f})  {label}")
        below = median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=4326, help="SimpleQA items (all: 4,326)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the server holds each reply")
    parser.add_argument("--profile", metavar="FILE", help="run under cProfile (per thread, CPU time), saved to FILE")
    parser.add_argument("--sample", action="store_true",
                        help="sample each thread's CPU every 4 ms: where the milliseconds go, unprofiled")
    parser.add_argument("--ladder", action="store_true",
                        help="CPU ms per call of each layer, serially (--items calls a step; use --latency 0)")
    parser.add_argument("--no-dspy-cache", action="store_true", help="resolve_lm(..., cache=False)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (printed)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the server process
    args = parser.parse_args()
    if args.items < 1 or args.concurrency < 1 or not 0 <= args.latency < 3600:
        print("bench_harness: --items and --concurrency are >= 1, --latency in [0, 3600) s", file=sys.stderr)
        return 2
    if args.serve:
        serve(args.latency)
        return 0
    root = Path(tempfile.mkdtemp(prefix="bench_harness-"))
    # fresh caches, set before DSPy is imported (it reads DSPY_CACHEDIR then)
    os.environ.update({"DSPY_CACHEDIR": str(root / "dspy-cache"), "ROMA_LAB_CACHE": str(root / "roma-cache"),
                       "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    for name in ("ROMA_LAB_API_BASE", "ROMA_LAB_API_KEY", "ROMA_LAB_MAX_CONCURRENCY", "ROMA_LAB_BUDGET_USD"):
        os.environ.pop(name, None)
    import dspy  # noqa: F401 - imported before the clock starts: start-up is not a call's cost
    import litellm  # noqa: F401

    server = subprocess.Popen([sys.executable, __file__, "--serve", "--latency", str(args.latency)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        api_base = server.stdout.readline().strip()
        if not api_base:
            raise SystemExit("bench_harness: the loopback server did not start")

        def ask_server() -> dict:
            server.stdin.write("stats\n")
            server.stdin.flush()
            return json.loads(server.stdout.readline())

        if args.ladder:
            ladder(args, api_base, root)
        else:
            run(args, api_base, ask_server, root)
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
