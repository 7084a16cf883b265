"""``python -m roma_lab.simulator TASKS --model strong=0.8 --model weak=0.4``: the simulated provider
from the shell, on 127.0.0.1 until interrupted (Ctrl-C or SIGTERM).

    python -m roma_lab.simulator world:test --model strong=0.8 --model tiered=L1:0.9,L2:0.6,L3:0.3 \\
        --price strong=0.15,0.60 --median-s 1 --p99-s 8 --rate-limit 0.02 --server-error 0.01 --port 8765
    ROMA_LAB_API_BASE=http://127.0.0.1:8765/v1 python -m roma_lab.evaluate world:test --system single \\
        --lm openai/strong --out results/sim

TASKS is anything ``roma_lab.evaluate.tasks_from`` reads (a .csv/.jsonl/.parquet file,
``benchmark:<name>``, ``world:<split>``). It prints ``ROMA_LAB_API_BASE=<url>`` once serving. A bad
value (a port out of range or taken, a model or level named twice, a skill or price that is none, a
task file that cannot be read) is refused before anything is served: one line on stderr, exit
status 2. The rules are ``_world.py``'s; design/simulated_provider.md.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
import threading

from roma_lab._cli import CommandParser, port

from ._provider import LOOPBACK, SimulatedProvider
from ._world import SimFaults, SimLatency, SimModel, SimulatedWorld


def _number(text: str) -> float:
    """A finite number (``float`` also takes "nan" and "inf")."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    return value


def _finite(text: str) -> float:
    try:
        return _number(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a finite number, got {text!r}") from None


def _skill(text: str) -> float | dict[str, float]:
    """``0.8`` or ``L1:0.9,L2:0.5``; the range is :class:`SimModel`'s to check."""
    try:
        if ":" not in text:
            return _number(text)
        pairs = [(level.strip(), _number(p)) for level, _, p in (part.partition(":") for part in text.split(","))]
    except ValueError:
        raise ValueError(f"a skill is a probability (0.8) or one per level (L1:0.9,L2:0.5), got {text!r}") from None
    levels = [level for level, _ in pairs]
    if "" in levels or len(set(levels)) < len(levels):
        raise ValueError(f"a skill per level names each level once, got {text!r}")
    return dict(pairs)


def _pairs(values: list[str], flag: str, parser: argparse.ArgumentParser) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            parser.error(f"{flag} takes NAME=VALUE, got {value!r}")
        if name in out:
            parser.error(f"{flag} names {name!r} twice ({flag} {name}={out[name]} and {value})")
        out[name] = rest
    return out


def _models(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, SimModel]:
    """Each ``--model`` with its ``--price``; a bad one is the parser's error, naming the flag."""
    prices = _pairs(args.price, "--price", parser)
    models = {}
    for name, skill in _pairs(args.model, "--model", parser).items():
        price = prices.pop(name, None)
        try:
            usd = [_number(p) for p in price.split(",")] if price is not None else []
        except ValueError:
            usd = []
        if price is not None and len(usd) != 2:
            parser.error(f"--price {name}={price}: takes IN,OUT, USD per 1k prompt and completion tokens")
        try:
            models[name] = SimModel(_skill(skill), *usd)
        except ValueError as err:
            parser.error(f"--model {name}: {err}")
    if prices:
        parser.error(f"--price names models not served: {sorted(prices)}")
    return models


def _parser() -> CommandParser:
    parser = CommandParser(prog="python -m roma_lab.simulator", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", help="a task file, benchmark:<name> or world:<split> (roma_lab.evaluate.tasks_from)")
    parser.add_argument("--model", action="append", required=True,
                        help="NAME=SKILL (0.8) or NAME=L1:0.9,L2:0.5 (per level); repeat for several")
    parser.add_argument("--price", action="append", default=[],
                        help="NAME=IN,OUT: USD per 1k prompt and completion tokens (default: unpriced)")
    parser.add_argument("--seed", type=int, default=0,
                        help="the world's seed: the same seed, the same answers, latencies and faults")
    parser.add_argument("--difficulty-sd", type=_finite, default=1.5, help="task difficulty spread (logit scale)")
    parser.add_argument("--median-s", type=_finite, default=0.0, help="median latency of a reply")
    parser.add_argument("--p99-s", type=_finite, default=None, help="99th percentile latency (lognormal)")
    parser.add_argument("--rate-limit-retry-after", type=_finite, default=0.0, help="rate of 429s with Retry-After")
    parser.add_argument("--rate-limit", type=_finite, default=0.0, help="rate of 429s without Retry-After")
    parser.add_argument("--retry-after-s", type=int, default=1, help="seconds a 429's Retry-After header asks for")
    parser.add_argument("--server-error", type=_finite, default=0.0, help="rate of 500s")
    parser.add_argument("--stall", type=_finite, default=0.0, help="rate of stalls (held --stall-s, then closed)")
    parser.add_argument("--stall-s", type=_finite, default=3600.0, help="seconds a stall holds the connection")
    parser.add_argument("--drop", type=_finite, default=0.0, help="rate of connections closed unanswered")
    parser.add_argument("--host", default=LOOPBACK, help=f"only {LOOPBACK} is accepted")
    parser.add_argument("--port", type=port, default=0, help="0: any free port")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.host != LOOPBACK:
        parser.error(f"the simulated provider binds {LOOPBACK} only, not {args.host!r}")
    from roma_lab.evaluate import TaskFileError, tasks_from

    models = _models(args, parser)
    try:
        tasks = tasks_from(args.tasks)
        world = SimulatedWorld(tasks, models, seed=args.seed, difficulty_sd=args.difficulty_sd)
        latency = SimLatency(args.median_s, args.p99_s)
        faults = SimFaults(args.rate_limit_retry_after, args.rate_limit, args.server_error, args.stall, args.drop,
                           args.retry_after_s, args.stall_s)
    except (TaskFileError, ValueError, TypeError) as err:
        parser.error(str(err))
    with contextlib.ExitStack() as stack:
        try:
            sim = stack.enter_context(SimulatedProvider(world, latency=latency, faults=faults, port=args.port))
        except OSError as err:  # the port is taken, or not ours to bind
            parser.error(f"cannot serve on port {args.port}: {err.strerror or err}")
        done = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: done.set())
        print(f"ROMA_LAB_API_BASE={sim.base_url}", flush=True)
        print(f"serving {', '.join(f'openai/{m}' for m in models)} on {len(tasks)} tasks of {tasks.name} "
              f"(seed {args.seed}); Ctrl-C stops", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            done.wait()
    return 0
