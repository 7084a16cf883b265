"""ROMA controller scheduling benchmark (issue 3): scripted fixed-latency roles, no model.

Tree 1 -> 8 -> (8 x 4): every 4th sibling depends on its left neighbour, and `search` leaves are
3x slower than `think` leaves, so a level-by-level barrier schedule loses time that a
dependency-aware one does not. Prints, from one run each:
  wall / critical-path bound            (target <= 1.10)
  barrier schedule / critical-path bound
  controller overhead per node           (zero-latency roles; target < 1 ms)

    python speed/bench_controller.py [--latency 0.02]
"""

from __future__ import annotations

import argparse
import time

from roma_lab.trace import schedule_bounds
from roma_lab.controller import Roma, fixed_latency_roles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per role call (search leaves: 3x)")
    args = parser.parse_args()

    def roles(latency: float):
        return fixed_latency_roles((8, 4), latency_s=latency, chain_every=4, task_types=("think", "search"),
                                   executor_latency_s={"search": 3 * latency})

    warm = roles(0.0)  # first run pays one-off imports (DSPy's usage tracker)
    Roma(**warm.role_kwargs(), max_depth=2, max_concurrency=64).run(warm.goal)

    timed = roles(args.latency)
    run = Roma(**timed.role_kwargs(), max_depth=2, max_concurrency=64).run(timed.goal)
    assert run.status == "completed", run.root.error
    bounds = schedule_bounds(run)

    zero = roles(0.0)
    roma = Roma(**zero.role_kwargs(), max_depth=2, max_concurrency=64)
    start = time.perf_counter()
    zero_run = roma.run(zero.goal)
    overhead_ms = (time.perf_counter() - start) / len(zero_run.nodes) * 1000

    n_calls = sum(len(n.calls) for n in run.nodes)
    print(f"tree: {len(run.nodes)} nodes, {n_calls} role calls, latency {args.latency * 1000:.0f} ms "
          f"(search leaves {3 * args.latency * 1000:.0f} ms)")
    print(f"wall {bounds.wall_s:.3f} s | critical path {bounds.critical_path_s:.3f} s | "
          f"barrier {bounds.barrier_s:.3f} s | sequential {bounds.sequential_s:.3f} s")
    print(f"wall / critical-path bound:    {bounds.wall_s / bounds.critical_path_s:.3f}  (target <= 1.10)")
    print(f"barrier / critical-path bound: {bounds.barrier_s / bounds.critical_path_s:.3f}")
    print(f"sequential / wall:             {bounds.sequential_s / bounds.wall_s:.1f}x")
    print(f"controller overhead per node:  {overhead_ms:.3f} ms  (target < 1 ms)")


if __name__ == "__main__":
    main()
