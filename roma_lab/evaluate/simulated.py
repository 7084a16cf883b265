"""``python -m roma_lab.evaluate.simulated TASKS --model strong=0.8 --model weak=0.4``: the simulated provider
from the shell, on 127.0.0.1 until interrupted (Ctrl-C or SIGTERM).

    python -m roma_lab.evaluate.simulated world:test --model strong=0.8 --model tiered=L1:0.9,L2:0.6,L3:0.3 \\
        --price strong=0.15,0.60 --median-s 1 --p99-s 8 --rate-limit 0.02 --server-error 0.01 --port 8765
    ROMA_LAB_API_BASE=http://127.0.0.1:8765/v1 python -m roma_lab.evaluate world:test --system single \\
        --lm openai/strong --out results/sim

TASKS is anything ``roma_lab.evaluate.tasks_from`` reads (a .csv/.jsonl/.parquet file,
``benchmark:<name>``, ``world:<split>``). It prints ``ROMA_LAB_API_BASE=<url>`` once serving. The
rules are ``roma_lab.lm._simulated``'s; design/simulated_provider.md.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from roma_lab.lm._simulated import (
    LOOPBACK,
    SimFaults,
    SimLatency,
    SimModel,
    simulated_provider,
)


def _skill(text: str) -> float | dict[str, float]:
    """``0.8`` or ``L1:0.9,L2:0.5``."""
    if ":" not in text:
        return float(text)
    return {level.strip(): float(p) for level, _, p in (part.partition(":") for part in text.split(","))}


def _pairs(values: list[str], flag: str, parser: argparse.ArgumentParser) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            parser.error(f"{flag} takes NAME=VALUE, got {value!r}")
        out[name] = rest
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m roma_lab.evaluate.simulated", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", help="a task file, benchmark:<name> or world:<split> (roma_lab.evaluate.tasks_from)")
    parser.add_argument("--model", action="append", required=True,
                        help="NAME=SKILL (0.8) or NAME=L1:0.9,L2:0.5 (per level); repeat for several")
    parser.add_argument("--price", action="append", default=[],
                        help="NAME=IN,OUT: USD per 1k prompt and completion tokens (default: unpriced)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--difficulty-sd", type=float, default=1.5, help="task difficulty spread (logit scale)")
    parser.add_argument("--median-s", type=float, default=0.0, help="median latency of a reply")
    parser.add_argument("--p99-s", type=float, default=None, help="99th percentile latency (lognormal)")
    parser.add_argument("--rate-limit-retry-after", type=float, default=0.0, help="rate of 429s with Retry-After")
    parser.add_argument("--rate-limit", type=float, default=0.0, help="rate of 429s without Retry-After")
    parser.add_argument("--retry-after-s", type=int, default=1)
    parser.add_argument("--server-error", type=float, default=0.0, help="rate of 500s")
    parser.add_argument("--stall", type=float, default=0.0, help="rate of stalls (held --stall-s, then closed)")
    parser.add_argument("--stall-s", type=float, default=3600.0)
    parser.add_argument("--drop", type=float, default=0.0, help="rate of connections closed unanswered")
    parser.add_argument("--host", default=LOOPBACK, help=f"only {LOOPBACK} is accepted")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args(argv)
    if args.host != LOOPBACK:
        parser.error(f"the simulated provider binds {LOOPBACK} only, not {args.host!r}")
    from ._tasks import TaskFileError, tasks_from

    prices = {name: value.split(",") for name, value in _pairs(args.price, "--price", parser).items()}
    try:
        tasks = tasks_from(args.tasks)
        models = {}
        for name, skill in _pairs(args.model, "--model", parser).items():
            price = [float(p) for p in prices.pop(name, [None, None]) if p is not None]
            models[name] = SimModel(_skill(skill), *price)
        if prices:
            parser.error(f"--price names models not served: {sorted(prices)}")
        latency = SimLatency(args.median_s, args.p99_s)
        faults = SimFaults(args.rate_limit_retry_after, args.rate_limit, args.server_error, args.stall, args.drop,
                           args.retry_after_s, args.stall_s)
        server = simulated_provider(tasks, models, seed=args.seed, difficulty_sd=args.difficulty_sd,
                                    latency=latency, faults=faults, port=args.port)
        done = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: done.set())
        with server as sim:
            print(f"ROMA_LAB_API_BASE={sim.base_url}", flush=True)
            print(f"serving {', '.join(f'openai/{m}' for m in models)} on {len(tasks)} tasks of {tasks.name} "
                  f"(seed {args.seed}); Ctrl-C stops", file=sys.stderr, flush=True)
            try:
                done.wait()
            except KeyboardInterrupt:
                pass
    except (TaskFileError, ValueError, TypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
