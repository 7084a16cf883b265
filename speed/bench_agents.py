"""Sizing the agent notebooks: per-step latency and tokens of the agent on the embedded model, cold
and warm, and success of a few configurations on a small sample of the offline tool benchmark.

    python speed/bench_agents.py                          # "local" (Qwen2.5-Coder-1.5B), 6 tasks
    python speed/bench_agents.py --model local:smollm2-135m --families statistic multi_hop

The completion cache is a fresh folder (--cache, default a new temporary one), so the first pass
is cold; the warm pass reruns the first configuration and must add no cache entry (no model call).
Prints one run's numbers with the load average before and after; run it on a quiet machine
(llama.cpp slows badly when cores are shared). ``--configs thought`` is the ReAct actor (a
free-text thought before each action), the default before the step was made cheaper (design/agents.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

# One task per family with a different minimum route: T, C, DTC, TV, DT, DC.
FAMILIES = ("record_lookup", "statistic", "filtered_computation", "conflicting_sources", "multi_hop",
            "locale_normalisation")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--split", default="dev")
    parser.add_argument("--cache", type=Path, default=None, help="completion cache folder (default: a new temp dir)")
    parser.add_argument("--configs", nargs="+", default=["baseline", "revise", "summary"])
    args = parser.parse_args()
    os.environ["ROMA_LAB_CACHE"] = str(args.cache or tempfile.mkdtemp(prefix="bench_agents_cache_"))
    models = Path(os.environ["ROMA_LAB_CACHE"]) / "models"
    shared_models = Path.home() / ".cache" / "roma_lab" / "models"
    if not models.exists() and shared_models.is_dir():
        models.parent.mkdir(parents=True, exist_ok=True)
        models.symlink_to(shared_models)  # reuse the assembled model file instead of a 1 GB copy

    from roma_lab.agents import AgentConfig, suite_tasks
    from roma_lab.lm import resolve_lm
    from roma_lab.papers.oagents import Condition, run_conditions

    configs = {
        "baseline": AgentConfig(name="baseline"),
        "thought": AgentConfig(name="thought", thought=True),
        "revise": AgentConfig(name="revise", planning="revise", revise_every=2),
        "summary": AgentConfig(name="summary", memory="summary"),
        "vote3": AgentConfig(name="vote3", tts="best_of_n", n_rollouts=3, temperature=0.7),
    }
    tasks = [next(t for t in suite_tasks((args.split,), families=[f])) for f in args.families]
    lm = resolve_lm(args.model)
    entries = Path(os.environ["ROMA_LAB_CACHE"]) / "completions"
    out = Path(tempfile.mkdtemp(prefix="bench_agents_runs_"))
    print(f"model {lm.model}, {len(tasks)} tasks ({', '.join(args.families)}), cache {os.environ['ROMA_LAB_CACHE']}; "
          f"load average {os.getloadavg()[0]:.2f}")
    first = None
    for name in args.configs:
        start = time.perf_counter()
        rows = run_conditions([Condition(name, configs[name])], tasks, out / "cold", runs=1, lm=lm, progress=False)
        wall = time.perf_counter() - start
        first = first or (name, rows)
        _report(name, "cold", rows, wall, out / "cold")
    name, cold_rows = first
    before = len(list(entries.rglob("*.json")))
    start = time.perf_counter()
    warm_rows = run_conditions([Condition(name, configs[name])], tasks, out / "warm", runs=1, lm=lm, progress=False)
    wall = time.perf_counter() - start
    added = len(list(entries.rglob("*.json"))) - before
    _report(name, "warm", warm_rows, wall, out / "warm")
    same = warm_rows["prediction"].tolist() == cold_rows["prediction"].tolist()
    print(f"warm rerun of {name}: {added} new cache entries (model calls), answers identical to cold: {same}; "
          f"load average {os.getloadavg()[0]:.2f}")


def _report(name: str, tier: str, rows, wall: float, root: Path) -> None:
    from roma_lab.trace import read_trajectories

    actor = [c for t in read_trajectories(root) if t.config["name"] == name
             for r in t.rollouts for s in r.steps for c in s.calls if c.role == "actor"]
    latency = [c.latency_s for c in actor]
    print(f"\n[{name}, {tier}] {len(rows)} tasks in {wall:.1f} s ({wall / len(rows):.1f} s/task); "
          f"success {int(rows['score'].eq(1.0).sum())}/{len(rows)}; statuses {rows['status'].value_counts().to_dict()}")
    print(f"  steps/task {rows['steps'].mean():.1f}, model calls/task {rows['model_calls'].mean():.1f}, "
          f"tokens/task in {rows['input_tokens'].mean():.0f} out {rows['output_tokens'].mean():.0f}")
    if latency:
        print(f"  actor step: median {statistics.median(latency):.2f} s, max {max(latency):.2f} s; "
              f"tokens/step in {statistics.mean(c.input_tokens for c in actor):.0f} "
              f"out {statistics.mean(c.output_tokens for c in actor):.0f}")
    for row in rows.itertuples():
        print(f"  {row.task_id:<36} {row.status:<18} agent={row.agent_status:<16} steps={row.steps} "
              f"answer={row.prediction!r}")


if __name__ == "__main__":
    main()
