"""Speed-up of a sweep on 1, 2 and 4 Dask workers against a latency-bound model (issue 13 §1).

A remote provider answers each request after network and queue latency, and serves many requests
at once; this machine reaches no provider, so the stand-in is a loopback OpenAI-compatible endpoint
(below) that answers every chat completion after a fixed delay, concurrently. The sweep is
``roma_lab.evaluate`` over N items, each one call through LiteLLM
(``resolve_lm("openai/<name>", api_base=...)``, DSPy's request cache off), in-process and on a
LocalCluster of 1, 2 and 4 worker processes. Each cluster is started, its workers import DSPy and
LiteLLM, and a short warm-up sweep runs before the timed sweep; start-up (with the imports) is printed apart.
Prints seconds per sweep, the ratios and the load average around the run, all from this one run.

    python speed/bench_dask.py [--items 24] [--delay 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from roma_lab import cluster as roma_cluster
from roma_lab.bench import Item, StringMatchGrader
from roma_lab.evaluate import TaskSet, evaluate, function
from roma_lab.lm import resolve_lm

SERVED = "latency-stand-in"


def serve(delay_s: float) -> ThreadingHTTPServer:
    """The stand-in provider on 127.0.0.1: every chat completion answered "ok" after ``delay_s``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            time.sleep(delay_s)
            body = json.dumps({
                "id": "stand-in", "object": "chat.completion", "created": 0, "model": SERVED,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class OneCall:
    """One model call per item (pickled to the workers with its LM)."""

    def __init__(self, lm) -> None:
        self.lm = lm

    def __call__(self, question: str) -> str:
        return self.lm(question)[0]


def _import_models() -> None:
    import dspy  # noqa: F401
    import litellm  # noqa: F401


def sweep(items, system, out: Path, cluster: str) -> float:
    os.environ[roma_cluster.ENV_VAR] = cluster  # where evaluate sends the items
    start = time.perf_counter()
    result = evaluate([function(system, label="stand-in")], TaskSet(items[0].benchmark, tuple(items)),
                      StringMatchGrader(), out=out, progress=False).rows
    seconds = time.perf_counter() - start
    if result["error"].notna().any() or len(result) != len(items):
        raise RuntimeError(f"the sweep on {cluster} had errors: {result['error'].dropna().unique()[:3]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=24, help="items per sweep (one model call each)")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the stand-in provider takes per reply")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # inherited by the workers too
    os.environ.pop(roma_cluster.ENV_VAR, None)
    load_before = os.getloadavg()
    server = serve(args.delay)
    api_base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    system = OneCall(resolve_lm(f"openai/{SERVED}", api_base=api_base, cache=False, num_retries=0))
    items = [Item(benchmark="stand-in", item_id=str(i), question=f"Question {i}: say ok", answer="ok")
             for i in range(args.items)]
    work = Path(tempfile.mkdtemp(prefix="bench_dask-"))
    seconds, startup = {}, {}
    for n in (0, 1, 2, 4):  # 0: in-process, one item after the other
        name = f"local:{n}" if n else "in-process"
        if n:
            start = time.perf_counter()
            roma_cluster.session(name).client.run(_import_models)  # every worker, before the clock
            startup[name] = f"{time.perf_counter() - start:.2f}"
        # first calls (LiteLLM's HTTP client, DSPy's settings) in each process: not part of the sweep
        warm = [Item(benchmark="warm-up", item_id=str(i), question=f"warm {i}", answer="ok") for i in range(2 * max(n, 1))]
        sweep(warm, system, work / f"warm-{n}", name)
        seconds[name] = sweep(items, system, work / f"sweep-{n}", name)
        roma_cluster.shutdown()
    server.shutdown()

    print(f"{args.items} items, one call each, stand-in provider answering after {args.delay:g} s "
          f"(loopback HTTP; a remote provider's latency, not a model's compute)")
    print(f"{'run':>11}  {'sweep s':>8}  {'vs 1 worker':>11}  {'vs in-process':>13}  {'cluster start s':>15}")
    for run, value in seconds.items():
        print(f"{run:>11}  {value:8.2f}  {seconds['local:1'] / value:10.2f}x  {seconds['in-process'] / value:12.2f}x"
              f"  {startup.get(run, '-'):>15}")
    print("load average 1/5/15 min: before " + " ".join(f"{x:.2f}" for x in load_before)
          + ", after " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" ({os.cpu_count()} CPUs)")
    print("speed-up vs 1 worker: " + ", ".join(f"{n} workers {seconds['local:1'] / seconds[f'local:{n}']:.2f}x"
                                                for n in (1, 2, 4)))


if __name__ == "__main__":
    main()
