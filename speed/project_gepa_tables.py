"""Print every model call notebooks 30 (Table 7) and 31 (Table 8) make at given sizes, by role, and their
projected cold time on the embedded Qwen2.5-Coder-1.5B: a command line over
``roma_lab.papers.roma.project_gepa_tables`` (design/gepa_tables.md, "Default sizes and their cost").

Speeds: the embedded model's own, measured, from ``results/lm_speed.jsonl`` when a run has written it
(``--speed-log`` names another), else ``GEPA_DESIGN_SPEEDS``, the ones the design note's rule was applied at
(``--design-speeds`` asks for those); the output names its source.

    nice -n 19 .venv/bin/python speed/project_gepa_tables.py            # both notebooks' defaults
    nice -n 19 .venv/bin/python speed/project_gepa_tables.py --sizes "30:N_TEST=3;REPEATS=1"
"""

from __future__ import annotations

import argparse
import ast
import logging
from pathlib import Path

from roma_lab.papers.roma import (
    GEPA_DESIGN_SPEEDS,
    PromptTokenizer,
    gepa_notebook_parameters,
    measured_projection_speeds,
    project_gepa_tables,
)

_ROOT = Path(__file__).resolve().parents[1]
SHOWN = ("BENCHMARKS", "BENCHMARK", "N_TRAIN", "N_VAL", "N_TEST", "REPEATS", "MAX_METRIC_CALLS", "K", "N", "MAX_TOKENS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", action="append", default=[],
                        help="NB:NAME=VALUE;... overrides of a notebook's parameters (NB is 30 or 31)")
    parser.add_argument("--reflection-tokens", type=int, help="the length of a reflection or merge reply")
    parser.add_argument("--speed-log", type=Path, default=_ROOT / "results" / "lm_speed.jsonl")
    parser.add_argument("--design-speeds", action="store_true", help="price tokens at GEPA_DESIGN_SPEEDS")
    args = parser.parse_args()
    overrides: dict[str, dict[str, object]] = {nb: {} for nb in ("30", "31")}
    for spec in args.sizes:
        nb, _, pairs = spec.partition(":")
        for pair in pairs.split(";"):
            name, _, value = pair.partition("=")
            overrides[nb][name] = ast.literal_eval(value)
    speeds = None if args.design_speeds else measured_projection_speeds(args.speed_log)
    speeds = speeds or GEPA_DESIGN_SPEEDS
    print(f"speeds: prompt {speeds.prompt_tps:.1f} / generation {speeds.generation_tps:.1f} tok/s, model load "
          f"{speeds.load_s:.0f} s ({speeds.source})")
    logging.getLogger("dspy").setLevel(logging.WARNING)
    tokenizer = PromptTokenizer()
    reflection = {} if args.reflection_tokens is None else {"reflection_tokens": args.reflection_tokens}
    for nb in (n for n in overrides if not args.sizes or overrides[n]):
        params = gepa_notebook_parameters(nb, _ROOT) | overrides[nb]
        projection = project_gepa_tables(nb, params, tokenizer, speeds=speeds, **reflection)
        shown = {k: v for k, v in params.items() if k in SHOWN}
        print(f"\n== notebook {nb}: {shown}; reflection/merge replies {projection.reflection_tokens} tokens")
        print("benchmark  role                     calls made (never/improves)  computed  prompt tok  output tok"
              "  seconds  (computed: distinct requests, the rest are cache hits; tokens and seconds of the "
              "larger script)")
        for benchmark, scripts in projection.tallies.items():
            worst = max(scripts, key=lambda k: scripts[k].seconds(speeds))
            for script in scripts:
                print(f"{benchmark:10s} metric runs ({script}): {scripts[script].metric_runs}")
            for name in sorted(set(scripts["never"].roles) | set(scripts["improves"].roles)):
                n, i, r = (scripts[script].role(name) for script in ("never", "improves", worst))
                print(f"{benchmark:10s} {name:24s} {n.calls:5d} / {i.calls:<5d}{n.computed:15d} / {i.computed:<5d} "
                      f"{r.prompt_tokens:8d} {r.output_tokens:10d} {r.seconds(speeds):8.0f}")
            print(f"{benchmark:10s} total ({worst} script): {scripts[worst].seconds(speeds):.0f} s")
        print(f"projected cold time (+ {speeds.load_s:.0f} s model load): {projection.seconds:.0f} s = "
              f"{projection.seconds / 60:.1f} min")


if __name__ == "__main__":
    main()
