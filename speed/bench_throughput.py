"""Throughput of the agent benchmark through ``evaluate``: correct answers per hour where a model answers
(the unit speed is judged in: a speed-up that costs accuracy is not one), tasks per hour and tokens beside it.

    python speed/bench_throughput.py                         # loopback server, 32 tasks, 2 s a reply
    python speed/bench_throughput.py --tasks 16 --latency 0.5 --concurrency 1 4 16
    python speed/bench_throughput.py --embedded              # also the embedded model (loads it)
    python speed/bench_throughput.py --no-loopback --world 12  # the default agent on world tasks, switches off/on
    python speed/bench_throughput.py --no-loopback --world 9 --levels L1 L2 L3  # ... and per level (a dev pilot)

The loopback part needs no model: a stdlib HTTP server on 127.0.0.1 answers every OpenAI chat
completion after a fixed latency (``--latency``) with a reply that plans and answers at once, so
each task costs two requests (planner, actor) and the wall time is the requests' waiting; its replies
answer "0" whatever is asked, so that part measures the harness in tasks per hour, not answers. The
model's request bound is set with ``roma_lab.lm.set_max_concurrency`` for each ``--concurrency``
and every run starts from a fresh folder with DSPy's request cache off. Printed: tasks/hour, the
requests the server saw and the most it held at once, and the ratio to concurrency 1 (issue 23:
>= 10x at 16). ``--embedded`` also runs the embedded model (``--model``, default "local") on the same tasks:
first through today's serial engine (llama-cpp-python, one sequence at a time), then on the
embedded llama.cpp server at each ``--slots`` count (1, 2, 4, 8), with model calls, prompt tokens
sent and aggregate generated tokens/s; it loads the model (tens of minutes on a small machine). Prints one run's
numbers with the load average: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import sys
import threading
import time
from pathlib import Path

# the loopback OpenAI-compatible server the tests use (one server, not a copy)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from stub_openai import StubServer  # noqa: E402

# Every field the planner and the actor ask for: each adapter keeps the ones its signature names.
REPLY = {"plan": "1. Answer.", "thought": "", "action": "final_answer", "arguments": "{}", "answer": "0"}
MODEL = "openai/loopback"


class Latency:
    """Waits ``latency_s`` for each request the server answers, counting them and the most held at once."""

    def __init__(self, latency_s: float):
        self.latency_s, self.requests, self.in_flight, self.most = latency_s, 0, 0, 0
        self._lock = threading.Lock()

    def hold(self) -> None:
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            time.sleep(self.latency_s)
        finally:
            with self._lock:
                self.in_flight -= 1

    def reset(self) -> None:
        with self._lock:
            self.requests = self.most = 0


def run_tasks(lm, tasks, config, runs: int) -> tuple[float, object]:
    """(wall seconds, rows) of one evaluation of ``config`` from a fresh folder."""
    from roma_lab.papers.oagents import Condition, run_conditions

    out = Path(tempfile.mkdtemp(prefix="bench_throughput_"))
    start = time.perf_counter()
    rows = run_conditions([Condition(config.name, config)], tasks, out, runs=runs, lm=lm, progress=False)
    return time.perf_counter() - start, rows


def loopback(args, tasks, config) -> None:
    from roma_lab.lm import resolve_lm, set_max_concurrency

    print(f"\nloopback server, {args.latency:g} s per reply, {len(tasks)} tasks x {args.runs} run(s), "
          f"{config.name!r} (planner + actor: 2 requests a task)")
    print(f"{'concurrency':>11} {'wall s':>8} {'tasks/hour':>11} {'requests':>9} {'most held':>10} {'x serial':>9}")
    latency = Latency(args.latency)
    models = [{"id": MODEL.split("/", 1)[1], "object": "model"}]  # the model list a server-address model asks for
    with StubServer([json.dumps(REPLY)], models=models, hold=latency.hold) as server:
        lm = resolve_lm(MODEL, api_base=server.api_base, api_key="loopback", cache=False)
        run_tasks(lm, tasks[:1], config, 1)  # warm-up: imports and first-call set-up, not timed
        serial = None
        for n in args.concurrency:
            set_max_concurrency(MODEL, n)
            latency.reset()
            try:
                wall, rows = run_tasks(lm, tasks, config, args.runs)
            finally:
                set_max_concurrency(MODEL, None)
            bad = rows["agent_status"].ne("answered").sum()
            per_hour = len(rows) / wall * 3600
            serial = serial or per_hour
            print(f"{n:>11} {wall:>8.2f} {per_hour:>11.0f} {latency.requests:>9} {latency.most:>10} "
                  f"{per_hour / serial:>8.2f}x" + (f"  ({bad} tasks not answered)" if bad else ""))


def embedded(args, tasks, config) -> None:
    from roma_lab.lm import resolve_lm

    print(f"\nembedded model {args.model!r}, {len(tasks)} tasks x {args.runs} run(s), {config.name!r}, "
          "no completion cache; today's serial engine first, then the embedded server at each slot count")
    print(f"{'engine':>17} {'slots':>5} {'wall s':>8} {'correct/hour':>12} {'tasks/hour':>11} {'calls':>6} "
          f"{'prompt tok':>10} {'gen tok/s':>10} {'answered':>8} {'correct':>7} {'x serial':>9} {'calls/task':>10} "
          f"{'sent/task':>9} {'gen/task':>8}")
    serial = None
    for engine, slots in [("llama-cpp-python", 1)] + [("llama.cpp-server", n) for n in args.slots]:
        lm = resolve_lm(args.model, engine=engine, slots=slots, cache=False)
        wall, rows = run_tasks(lm, tasks, config, args.runs)
        per_hour = len(rows) / wall * 3600
        correct = int(rows["correct"].eq(True).sum())
        serial = serial or per_hour
        answered = int(rows["agent_status"].eq("answered").sum())
        print(f"{engine:>17} {slots:>5} {wall:>8.1f} {correct / wall * 3600:>12.1f} {per_hour:>11.1f} "
              f"{int(rows['model_calls'].sum()):>6} "
              f"{int(rows['input_tokens'].sum()):>10} {rows['output_tokens'].sum() / wall:>10.2f} "
              f"{answered:>5}/{len(rows):<2} {correct:>4}/{len(rows):<2} "
              f"{per_hour / serial:>8.2f}x {rows['model_calls'].mean():>10.2f} "
              f"{rows['input_tokens'].mean():>9.0f} {rows['output_tokens'].mean():>8.0f}", flush=True)


def world(args) -> None:
    """The default agent on world dev tasks (``--levels``, the draw spread evenly over them), serial
    engine: the agent's cheaper-task switches off (the repeat guard; a re-answer as a whole new
    rollout) and on (the defaults), same tasks; then each row's correct answers per level (a dev pilot
    of where the model has room: design/world_benchmark.md)."""
    from dataclasses import replace

    from roma_lab.agents import AgentConfig, world_tasks
    from roma_lab.lm import resolve_lm

    from roma_lab.agents import world_level

    tasks = world_tasks("dev", args.world, seed=0, levels=tuple(args.levels))
    levels = {t.item.item_id: world_level(t) for t in tasks}
    print(f"\nembedded model {args.model!r}, {len(tasks)} world dev tasks ({', '.join(args.levels)}) x {args.runs} "
          "run(s), the default "
          "agent, serial engine, no completion cache")
    print(f"{'agent':>34} {'wall s':>8} {'correct/hour':>12} {'x before':>8} {'tasks/hour':>11} {'x before':>8} "
          f"{'calls/task':>10} {'sent/task':>9} {'gen/task':>8} {'repeats':>7} {'reanswers':>9} {'correct':>7}")
    before, correct_before, by_level = None, None, {}
    for name, config in (("before (no guard, re-answer rollout)", AgentConfig(repeat_guard=False, reanswer_with="rollout")),
                         ("after (the defaults)", AgentConfig())):
        lm = resolve_lm(args.model, engine="llama-cpp-python", cache=False)
        wall, rows = run_tasks(lm, tasks, replace(config, name="world"), args.runs)
        per_hour = len(rows) / wall * 3600
        correct = int(rows["correct"].eq(True).sum())
        correct_per_hour = correct / wall * 3600
        before = before or per_hour
        correct_before = correct_per_hour if correct_before is None else correct_before
        times = f"{correct_per_hour / correct_before:>7.2f}x" if correct_before else f"{'-':>8}"
        print(f"{name:>34} {wall:>8.1f} {correct_per_hour:>12.1f} {times} {per_hour:>11.1f} "
              f"{per_hour / before:>7.2f}x {rows['model_calls'].mean():>10.2f} "
              f"{rows['input_tokens'].mean():>9.0f} {rows['output_tokens'].mean():>8.0f} "
              f"{int(rows['repeated_calls'].sum()):>7} {int(rows['reanswered'].sum()):>9} "
              f"{correct:>4}/{len(rows):<2}", flush=True)
        level = rows["task_id"].map(levels)
        by_level[name] = {lv: (int(rows.loc[level == lv, "correct"].eq(True).sum()), int((level == lv).sum()))
                          for lv in args.levels}
    print("correct per level: " + "; ".join(
        f"{name}: " + ", ".join(f"{lv} {c}/{n}" for lv, (c, n) in counts.items()) for name, counts in by_level.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=32, help="dev tasks of the offline tool suite")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--latency", type=float, default=2.0, help="seconds the loopback server takes a reply")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--embedded", action="store_true", help="also the embedded model (loads it)")
    parser.add_argument("--model", default="local", help="the embedded model, with --embedded")
    parser.add_argument("--slots", type=int, nargs="*", default=[1, 2, 4, 8],
                        help="server slot counts, with --embedded; none (`--slots` alone) runs the serial engine only")
    parser.add_argument("--no-loopback", action="store_true", help="skip the loopback server part")
    parser.add_argument("--world", type=int, default=0, metavar="N",
                        help="also the default agent on N world dev tasks, its cheaper-task switches off and on")
    parser.add_argument("--levels", nargs="+", default=["L1", "L2"], choices=["L1", "L2", "L3"],
                        help="the world levels of --world's tasks")
    args = parser.parse_args()
    os.environ.setdefault("ROMA_LAB_CACHE", tempfile.mkdtemp(prefix="bench_throughput_cache_"))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch inside the first timed call

    from roma_lab.agents import AgentConfig, suite_tasks

    tasks = suite_tasks(("dev",))[: args.tasks]
    config = AgentConfig(name="throughput", planning="revise", reanswer=False)
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    if not args.no_loopback:
        loopback(args, tasks, config)
    if args.embedded:
        embedded(args, tasks, config)
    if args.world:
        world(args)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
