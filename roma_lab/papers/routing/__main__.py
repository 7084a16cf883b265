"""Headless reproduction of the meta-routing paper: `python -m roma_lab.papers.routing reproduce --out DIR`
(`--router robust`: the paper's tables with the paraphrase-robust router instead of the paper's);
`python -m roma_lab.papers.routing paraphrase --out DIR` writes issue 45's train paraphrases (the embedded model)."""

from __future__ import annotations

import json
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from ..._cli import CommandParser, positive_int, refuse
from ...router import DEFAULT_SEED
from ...stats import DEFAULT_STATS, StatsSettings
from ._robust import ROUTERS
from ._tables import ENCODER_CANDIDATES, TABLES, TRAINING_SIZES, reproduce_tables


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="python -m roma_lab.papers.routing", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("reproduce", help="compute every table, write CSVs, summary.json and provenance.json")
    rep.add_argument("--out", required=True, help="output directory")
    rep.add_argument("--tables", nargs="+", default=list(TABLES), choices=TABLES)
    rep.add_argument("--suite-seed", type=int, default=DEFAULT_SEED)
    rep.add_argument("--seed", type=int, default=0, help="bootstrap / random-baseline seed")
    rep.add_argument("--n-resamples", type=int, default=DEFAULT_STATS.n_resamples)
    rep.add_argument("--repeats", type=int, default=5, help="latency repetitions per task")
    rep.add_argument("--encoders", nargs="+", default=list(ENCODER_CANDIDATES), choices=ENCODER_CANDIDATES,
                     help="sentence-encoder candidates of the semantic tables (chosen on dev)")
    rep.add_argument("--router", choices=ROUTERS, default="paper",
                     help="the router the paper's tables run: the paper's (default) or the robust one (n-grams beside "
                          "MiniLM, trained on train and its paraphrases; the paper's, with a warning, without MiniLM)")
    rep.add_argument("--force", action="store_true", help="empty a non-empty --out first")
    para = sub.add_parser("paraphrase", help="rewrite the train prompts with the embedded model (issue 45's protocol)")
    para.add_argument("--out", required=True, help="output directory (resumes from its replies.jsonl)")
    para.add_argument("--limit", type=positive_int, default=None,
                      help="only the first N train prompts (families in turn)")
    para.add_argument("--suite-seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    if Path(args.out).exists() and not Path(args.out).is_dir():
        return refuse(f"--out {args.out} is not a folder")
    if args.command == "paraphrase":
        return _paraphrase(args, argv)

    from ...results import write_provenance

    out_dir = Path(args.out)
    if out_dir.exists() and any(out_dir.iterdir()):
        if not args.force:
            # provenance hashes every file in --out: old tables would be claimed by this run
            return refuse(f"{out_dir} is not empty; pass --force to replace its contents")
        shutil.rmtree(out_dir)
    started = datetime.now(UTC)
    clock = time.perf_counter()
    params = {"tables": args.tables, "suite_seed": args.suite_seed, "seed": args.seed,
              "n_resamples": args.n_resamples, "repeats": args.repeats, "training_sizes": list(TRAINING_SIZES),
              "encoders": args.encoders, "router": args.router}
    try:
        out = reproduce_tables(args.out, tables=args.tables, suite_seed=args.suite_seed, seed=args.seed,
                               repeats=args.repeats, encoders=args.encoders, router=args.router,
                               stats=StatsSettings(n_resamples=args.n_resamples, seed=args.seed))
    except (ValueError, ImportError) as err:  # ImportError: a table's encoder is not installed
        return refuse(err)
    write_provenance(args.out, parameters=params, seeds={"suite_seed": args.suite_seed, "seed": args.seed},
                     started_at=started, extra={"wall_seconds": time.perf_counter() - clock}, stats=out.stats)
    router = json.loads((out_dir / "summary.json").read_text())["router"]
    print(f"wrote {len(out)} tables, summary.json and provenance.json to {args.out} "
          f"in {time.perf_counter() - clock:.1f} s (the paper's tables with the {router} router)")
    if "table2_sensitivity" in out:
        print("learned success on the standard test, by wording of the four reworded families:")
        for r in out["table2_sensitivity"].itertuples():
            print(f"  {r.wording:<13} {r.success:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]  {r.description}")
    if "robust_overview" in out:
        print("coverage of the minimum route (goal .90), per router and held-out set; ms per routing decision:")
        for r in out["robust_overview"].itertuples():
            print(f"  {r.router:<7} {r.subset:<10} {r.coverage:.3f} [{r.coverage_ci_low:.3f}, {r.coverage_ci_high:.3f}]"
                  f"  {r.ms_per_decision:.3f} ms ({r.share_of_a_model_call:.3%} of a model call)")
    return 0


def _paraphrase(args, argv) -> int:
    import shlex

    from ...router import generate_suite, split_tasks
    from ._paraphrase import generate_paraphrases

    argv = sys.argv[1:] if argv is None else argv
    command = "python -m roma_lab.papers.routing " + shlex.join(argv)
    record = generate_paraphrases(split_tasks(generate_suite(args.suite_seed), "train"), args.out, limit=args.limit,
                                  command=command, log=lambda line: print(line, flush=True))
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
