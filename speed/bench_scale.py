"""The papers' scale against the simulated provider (issue 43, item 3): one run, ratios.

    python speed/bench_scale.py                                  # the issue's sizes (20 min on 2 shared cores)
    python speed/bench_scale.py --tasks 40 --runs 1 --simpleqa 500 --kills 1   # a quick look

Four parts, each runner in a process of its own (so its CPU time and peak memory are its own, and it
can be killed), the simulated provider (``roma_lab.simulator.simulated_provider``) in this one, on
127.0.0.1, every model call reaching it (a fresh DSPy cache per part):

1. **clean**: the generated world's test split (``--tasks``, 362) x ``--runs`` (3) x three systems
   (a single call, the default agent, ROMA at depth 1) through ``python -m roma_lab.evaluate`` at
   concurrency ``--concurrency`` (32), each reply's latency lognormal (``--median-s`` 1,
   ``--p99-s`` 4). Printed: the process's wall, the serving span (first request to last reply: the
   wall without the interpreter's start-up), the concurrency bound (the sum of the latencies the
   provider served, divided by the concurrency: no schedule of these calls on that many slots is
   faster), the span's ratio to it, the runner's CPU seconds per model call (the harness's overhead), its peak RSS, the
   files written and the bytes of the results (the DSPy cache apart).
2. **faults**: the same with 1% 429s with ``Retry-After: 1``, 1% 429s without and 1% 500s per
   attempt (2% 429s, 1% 500s), retried by the project's client; the rows must equal the clean ones.
3. **kills**: the same as clean, the runner SIGKILLed ``--kills`` (3) times at moments drawn
   uniformly within the clean run's wall (seeded), restarted at once each time, then run to the
   end: the rows must equal the clean run's, one per (system, run, task), nothing duplicated.
4. **simpleqa**: SimpleQA's 4,326 items (``--simpleqa``) through ``evaluate`` with a single call
   at concurrency 64 (string-match graded): wall against the bound, and the accuracy against the
   planted skill.

Rows are compared on (system, run, task_id, prediction, score). The model's skill is 0.6 (SimpleQA
0.4), priced at USD 0.15 / 0.60 per 1k tokens so every row has a cost. Run it on a quiet machine: on
two shared cores the runner's CPU, not the provider, is what bounds a large concurrency.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SYSTEMS = ("single", "agent", "roma")
MODEL = "sim"
PRICES = (0.15, 0.60)


def served(calls) -> tuple[int, float, float]:
    """(attempts the provider received, seconds of latency it served, seconds from the first request's
    arrival to the last reply: the run's wall without the interpreter's start-up and imports)."""
    span = max(c.arrived_s + c.latency_s for c in calls) - min(c.arrived_s for c in calls)
    return len(calls), sum(c.latency_s for c in calls), span


def tree(folder: Path, skip: str = "dspy-cache") -> tuple[int, int]:
    """(files, bytes) under ``folder``, the DSPy cache left out."""
    files = [p for p in folder.rglob("*") if p.is_file() and skip not in p.parts]
    return len(files), sum(p.stat().st_size for p in files)


def runner_env(sim, out: Path, concurrency: int) -> dict[str, str]:
    return {**os.environ, "ROMA_LAB_API_BASE": sim.base_url, "ROMA_LAB_MAX_CONCURRENCY": str(concurrency),
            "DSPY_CACHEDIR": str(out / "dspy-cache"), "ROMA_LAB_CACHE": str(out / "roma-cache"),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": os.pathsep.join(sys.path)}


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(command, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT)


def finish(process: subprocess.Popen) -> tuple[int, object]:
    """(exit status, the child's rusage): its own CPU time and peak RSS."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage


def evaluate_command(args, out: Path) -> list[str]:
    systems = [flag for name in SYSTEMS for flag in ("--system", name)]
    return [sys.executable, "-m", "roma_lab.evaluate", "world:test", *systems, "--lm", f"openai/{MODEL}",
            "--runs", str(args.runs), "--n", str(args.tasks), "--out", str(out)]


def rows_of(out: Path):
    import pandas as pd

    rows = pd.read_csv(out / "rows.csv", dtype={"task_id": str, "prediction": str})
    return rows


def compared(rows):
    keep = ["condition", "run", "task_id", "prediction", "score"]
    return rows[keep].sort_values(keep[:3], ignore_index=True)


def one_pass(name: str, args, sim, root: Path) -> dict:
    out = root / name
    out.mkdir()
    before = len(sim.calls)
    started = time.monotonic()
    code, usage = finish(start(evaluate_command(args, out), runner_env(sim, out, args.concurrency), out / "log.txt"))
    wall = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"{name}: the runner exited {code}; see {out / 'log.txt'}")
    n_calls, latency, span = served(sim.calls[before:])
    files, size = tree(out)
    result = {"part": name, "wall_s": wall, "serving_s": span, "bound_s": latency / args.concurrency,
              "calls": n_calls,
              "cpu_s_per_call": (usage.ru_utime + usage.ru_stime) / n_calls, "peak_rss_mb": usage.ru_maxrss / 1024,
              "files": files, "results_mb": size / 2**20, "rows": len(rows_of(out)),
              "outcomes": outcome_counts(sim.calls[before:])}
    result["serving_over_bound"] = span / result["bound_s"]
    return result


def outcome_counts(calls) -> dict[str, int]:
    counts: dict[str, int] = {}
    for c in calls:
        counts[c.outcome] = counts.get(c.outcome, 0) + 1
    return counts


def kills_pass(args, sim, root: Path, clean_wall: float) -> dict:
    out = root / "kills"
    out.mkdir()
    env = runner_env(sim, out, args.concurrency)
    rng = random.Random(args.seed)
    moments = sorted(rng.uniform(0.05, 0.95) * clean_wall for _ in range(args.kills))
    before = len(sim.calls)
    started, killed_at = time.monotonic(), []
    for moment in moments:
        process = start(evaluate_command(args, out), env, out / "log.txt")
        while process.poll() is None and time.monotonic() - started < moment:
            time.sleep(0.05)
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            killed_at.append(round(time.monotonic() - started, 1))
        process.wait()
    code, _ = finish(start(evaluate_command(args, out), env, out / "log.txt"))
    wall = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"kills: the last runner exited {code}; see {out / 'log.txt'}")
    import pandas as pd

    rows = rows_of(out)
    keys = rows[["condition", "run", "task_id"]]
    # the runner's own log too: a row written twice (or an error row left by a kill) would show here
    written = pd.read_csv(out / "attempts.csv", dtype=str)
    return {"part": "kills", "wall_s": wall, "killed_at_s": killed_at, "calls": len(sim.calls) - before,
            "rows": len(rows), "duplicated_rows": int(keys.duplicated().sum()),
            "runner_rows": len(written), "runner_error_rows": int(written["error"].notna().sum()),
            "runner_duplicates": int(written.duplicated(["run", "condition", "task_id"]).sum()),
            "out": out}


SIMPLEQA_RUNNER = """
import sys, time
from roma_lab import bench
from roma_lab.evaluate import TaskSet, evaluate, single_call
from roma_lab.lm import set_max_concurrency
items = bench.load_simpleqa()[:int(sys.argv[1])]
set_max_concurrency("openai/{model}", int(sys.argv[2]))
rows = evaluate([single_call("openai/{model}")], TaskSet("simpleqa", tuple(items)), bench.StringMatchGrader(),
                out=sys.argv[3], progress=False).rows
print("accuracy", rows["score"].mean(), "errors", int(rows["error"].notna().sum()))
"""


def simpleqa_pass(args, root: Path) -> dict:
    from roma_lab import bench
    from roma_lab.simulator import SimLatency, SimModel, simulated_provider

    items = bench.load_simpleqa()[:args.simpleqa]
    out = root / "simpleqa"
    out.mkdir()
    with simulated_provider(items, {MODEL: SimModel(0.4, *PRICES)}, seed=args.seed,
                            latency=SimLatency(args.median_s, args.p99_s)) as sim:
        started = time.monotonic()
        command = [sys.executable, "-c", SIMPLEQA_RUNNER.format(model=MODEL), str(args.simpleqa), "64",
                   str(out / "simpleqa")]
        code, usage = finish(start(command, runner_env(sim, out, 64), out / "log.txt"))
        wall = time.monotonic() - started
        if code != 0:
            raise SystemExit(f"simpleqa: the runner exited {code}; see {out / 'log.txt'}")
        n_calls, latency, span = served(sim.calls)
        planted = sim.world.expected_accuracy(MODEL)
    return {"part": "simpleqa", "items": len(items), "wall_s": wall, "serving_s": span, "bound_s": latency / 64,
            "serving_over_bound": span / (latency / 64), "calls": n_calls,
            "cpu_s_per_call": (usage.ru_utime + usage.ru_stime) / n_calls, "peak_rss_mb": usage.ru_maxrss / 1024,
            "expected_accuracy": planted, "log": (out / "log.txt").read_text().strip().splitlines()[-1:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=362, help="tasks of the world's test split (all: 362)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--median-s", type=float, default=1.0)
    parser.add_argument("--p99-s", type=float, default=4.0)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--simpleqa", type=int, default=4326, help="SimpleQA items (0: skip the part)")
    parser.add_argument("--parts", nargs="+", default=["clean", "faults", "kills", "simpleqa"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="keep the results here (default: a temporary folder)")
    args = parser.parse_args()
    from roma_lab.evaluate import world_task_set
    from roma_lab.simulator import SimFaults, SimLatency, SimModel, simulated_provider

    tasks = world_task_set("test")
    latency = SimLatency(args.median_s, args.p99_s)
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_scale-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"{args.tasks} tasks x {args.runs} runs x {len(SYSTEMS)} systems at concurrency {args.concurrency}, "
          f"latency median {args.median_s} s, p99 {args.p99_s} s; results in {root}; load {os.getloadavg()[0]:.2f}",
          flush=True)
    results = []

    def report(result: dict) -> None:
        results.append(result)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in result.items() if k != "out"}),
              flush=True)

    world = {"tasks": tasks, "models": {MODEL: SimModel(0.6, *PRICES)}, "seed": args.seed, "latency": latency}
    clean = None
    if "clean" in args.parts or "kills" in args.parts:
        with simulated_provider(**world) as sim:
            if "clean" in args.parts:
                report(clean := one_pass("clean", args, sim, root))
            if "kills" in args.parts:
                wall = clean["wall_s"] if clean else args.tasks * args.runs * 10 * args.median_s / args.concurrency
                kills = kills_pass(args, sim, root, wall)
                if clean:
                    kills["rows_equal_clean"] = bool(compared(rows_of(kills["out"])).equals(
                        compared(rows_of(root / "clean"))))
                report(kills)
    if "faults" in args.parts:
        faults = SimFaults(rate_limit_retry_after=0.01, rate_limit=0.01, server_error=0.01, retry_after_s=1)
        with simulated_provider(**world, faults=faults) as sim:
            result = one_pass("faults", args, sim, root)
        if clean:
            result["rows_equal_clean"] = bool(compared(rows_of(root / "faults")).equals(compared(rows_of(root / "clean"))))
        report(result)
    if "simpleqa" in args.parts and args.simpleqa:
        report(simpleqa_pass(args, root))
    (root / "bench_scale.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "out"} for r in results],
                                                      indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
