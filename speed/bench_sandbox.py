"""Per-call cost of the code sandbox (issues 9 §2, 21 §1): the jail vs the audit-hook-only child,
and what the jail's own parts cost.

Runs the same tiny script N times in each mode, alternating, and prints the median wall time per
call and the ratio jail / audit-hook-only. Then the jail's parts, each timed alone: creating and
removing the call's cgroup, building the seccomp program (once per process; later calls reuse it).
Needs bwrap, root, a cgroup and libseccomp (the jail's own requirements).

    python speed/bench_sandbox.py [--calls 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

from roma_lab.tools import Cgroup, check_sandbox, run_python, seccomp_program

CODE = "print(sum(range(1000)))"


def _median_ms(action, n: int) -> float:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def _cgroup_round_trip() -> None:
    Cgroup.create("bench", memory_bytes=512 << 20, max_pids=10).remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20, help="calls per mode")
    args = parser.parse_args()
    check_sandbox("bwrap")  # fail loudly here rather than time a refusal
    warnings.simplefilter("ignore", RuntimeWarning)  # audit-hook-only warns on every call, by design

    times: dict[str, list[float]] = {"bwrap": [], "audit-hook-only": []}
    for _ in range(args.calls):
        for mode, samples in times.items():  # alternate so machine load drifts affect both alike
            start = time.perf_counter()
            result = run_python(CODE, isolation=mode)
            samples.append(time.perf_counter() - start)
            assert result.stdout == "499500\n", result

    median = {mode: statistics.median(samples) for mode, samples in times.items()}
    for mode, value in median.items():
        print(f"{mode:>16}: median {value * 1000:6.1f} ms per call  ({args.calls} calls)")
    print(f"jail / audit-hook-only: {median['bwrap'] / median['audit-hook-only']:.2f}x "
          f"(+{(median['bwrap'] - median['audit-hook-only']) * 1000:.1f} ms per call)")
    print("the jail's parts (median of 20):")
    print(f"  cgroup create + remove:        {_median_ms(_cgroup_round_trip, 20):6.2f} ms per call")
    print(f"  seccomp program, first build:  {_median_ms(seccomp_program.__wrapped__, 20):6.2f} ms once per process")
    print(f"  seccomp program, cached:       {_median_ms(seccomp_program, 20) * 1000:6.2f} us per call")


if __name__ == "__main__":
    main()
