"""``python -m roma_lab.evaluate TASKS --system single --system roma --lm local --out DIR``: the
evaluation API from the shell, papermill-free. Prints the summary and the paired table.
``python -m roma_lab.evaluate migrate FOLDER...``: makes folders written before the one runner resumable.

A bad value (a flag, $ROMA_LAB_BUDGET_USD, $ROMA_LAB_CALL_DEADLINE_S, a task file, a model name) or a known
error (a damaged or busy results folder, a rerun that changes its tasks) is one line on stderr and exit
status 2, never a traceback."""

from __future__ import annotations

import sys
import textwrap

from roma_lab._cli import CommandParser, refuse
from roma_lab.results import FolderBusyError
from roma_lab.web import WebError

from ._budget import BudgetUnknownCostError, check_budget
from ._evaluate import NOT_RUN, evaluate
from ._schedule import SystemStalledError
from ._systems import SYSTEM_NAMES, named_systems
from ._tasks import tasks_from

# What evaluate and the names it is given raise for a bad value or a damaged, busy or stalled folder
# (ValueError: TaskFileError, DamagedFileError, EvaluationMismatchError, LogFileError, a bad number...).
KNOWN_ERRORS = (ValueError, BudgetUnknownCostError, FolderBusyError, SystemStalledError, WebError)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["migrate"]:
        return _migrate(argv[1:])
    parser = CommandParser(prog="python -m roma_lab.evaluate", description=__doc__)
    parser.add_argument("tasks", help="a .csv/.jsonl/.parquet task file, benchmark:<name> or world:<split>")
    parser.add_argument("--system", action="append", choices=SYSTEM_NAMES, required=True,
                        help="a system to run (repeat for several); the first is the paired table's baseline")
    parser.add_argument("--lm", default="local", help="model for every system (roma_lab.lm.resolve_lm name)")
    parser.add_argument("--grader", default=None,
                        help="exact, quasi-exact, numeric, contains or judge (default: the tasks' own, else quasi-exact)")
    parser.add_argument("--question-column", default="question", help="the task file's question column")
    parser.add_argument("--answer-column", default="answer", help="the task file's gold-answer column")
    parser.add_argument("--id-column", default="id", help="the task file's id column (default: row numbers)")
    parser.add_argument("--answer-form", choices=("short", "as-is"), default="short",
                        help="short (default): a task file's questions ask for the final answer only, as short golds "
                             "are written; as-is: asked as written. A benchmark: or world: set keeps its own wording")
    parser.add_argument("--runs", type=int, default=1, help="runs of every task per system (pass@k needs k)")
    parser.add_argument("--n", type=int, default=None, help="only the first N tasks")
    parser.add_argument("--corpus", default=None, help="documents for search: a folder or a .jsonl file")
    parser.add_argument("--web", default=None, metavar="PROVIDER",
                        help="search the web instead: serper, tavily, exa, brave, wikipedia or searxng=http://host:port "
                             "(keys from SERPER_API_KEY, TAVILY_API_KEY, EXA_API_KEY, BRAVE_API_KEY)")
    parser.add_argument("--web-recording", choices=("off", "record", "replay"), default=None,
                        help="record the web calls (a snapshot goes with --out), or replay a recording "
                             "(--web-dir: a run folder's web_snapshot); default $ROMA_LAB_WEB_RECORD, else off")
    parser.add_argument("--web-dir", default=None, help="the web recording's folder (default: roma_lab's cache)")
    parser.add_argument("--max-depth", type=int, default=1, help="ROMA's max_depth")
    parser.add_argument("--timeout-s", type=float, default=None, help="a system's limit per task")
    parser.add_argument("--out", required=True, help="results folder (a rerun resumes)")
    parser.add_argument("--budget-usd", type=float, default=None,
                        help="stop starting tasks once the folder's rows cost this many dollars (default: "
                             "$ROMA_LAB_BUDGET_USD, else no cap); a rerun with a higher cap resumes")
    args = parser.parse_args(argv)
    if len(set(args.system)) != len(args.system):
        parser.error(f"each --system once, got {args.system}")
    try:
        if args.budget_usd is not None:
            check_budget(args.budget_usd, "--budget-usd")
        web = None
        if args.web is not None or args.web_recording is not None or args.web_dir is not None:
            from roma_lab.web import WebSettings

            given = {"search": args.web, "recording": args.web_recording, "recording_dir": args.web_dir}
            web = WebSettings.from_environment(**{k: v for k, v in given.items() if v is not None})
        tasks = tasks_from(args.tasks, corpus=args.corpus, question=args.question_column, answer=args.answer_column,
                           id=args.id_column, web=web)
        if args.n is not None:
            tasks = tasks.head(args.n)
        if args.answer_form == "short" and tasks.grader is None and tasks.agent_task is None:
            tasks = tasks.asking_short_answers()
        systems = named_systems(args.system, args.lm, max_depth=args.max_depth)
        result = evaluate(systems, tasks, args.grader, runs=args.runs, out=args.out, timeout_s=args.timeout_s,
                          budget_usd=args.budget_usd)
    except KeyboardInterrupt:
        print(f"\ninterrupted: every row finished so far is kept in {args.out}; run the same command again to "
              "resume (finished rows are not run again)", file=sys.stderr)
        return 130
    except KNOWN_ERRORS as err:  # WebError: a missing key, a damaged snapshot...
        return refuse(err)
    import pandas as pd

    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(result.summary()[["condition", "model", "grader", "value", "ci_low", "ci_high", "n", "n_no_answer",
                                "n_system_error", "n_missing", "n_not_run", "runs", "cost_usd"]].to_string(index=False))
        if result.can_pair():
            paired = result.paired_all()
            print(paired[["condition", "model", "value", "ci_low", "ci_high", "n", "wins", "losses", "ties",
                          "sign_test_p", "sign_test_p_holm", "mde_bound"]].to_string(index=False))
            # what n can detect, in words: mde_bound is NaN where n detects nothing
            for condition, said in zip(paired["condition"], paired["mde_method"], strict=True):
                print(textwrap.fill(f"{condition}: {said}", width=100, subsequent_indent="    "))
    for warning in result.length_warnings():
        print(textwrap.fill(f"warning: {warning}", width=100, subsequent_indent="    "))
    budget = result.budget
    if budget is not None and budget.stopped:
        print(f"stopped at its dollar cap: ${budget.spent_usd:.4f} spent of ${budget.cap_usd:g}, "
              f"{budget.n_not_run} task(s) not run (status {NOT_RUN} in rows.csv); rerun with a higher "
              "--budget-usd to run them")
    print(f"rows, summary, paired table, traces and provenance in {args.out}")
    return 0



def _migrate(argv: list[str]) -> int:
    from ._migrate import migrate

    parser = CommandParser(prog="python -m roma_lab.evaluate migrate",
                           description="make results folders written before the one runner resumable")
    parser.add_argument("folders", nargs="+", help="results folders (every folder below each is looked at)")
    args = parser.parse_args(argv)
    try:
        said = migrate(*args.folders)
    except (OSError, ValueError) as err:
        return refuse(err)
    print("\n".join(said))
    return 0


if __name__ == "__main__":
    sys.exit(main())
