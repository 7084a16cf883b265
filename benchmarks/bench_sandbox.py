"""Per-call cost of the code sandbox (issue 9 §2): the bubblewrap jail vs the audit-hook-only child.

Runs the same tiny script N times in each mode, alternating, and prints the median wall time per
call and the ratio jail / audit-hook-only. Needs bwrap and root (the jail's own requirements).

    python benchmarks/bench_sandbox.py [--calls 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

from roma_lab.controller import check_sandbox, run_python

CODE = "print(sum(range(1000)))"


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


if __name__ == "__main__":
    main()
