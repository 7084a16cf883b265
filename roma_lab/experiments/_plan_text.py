"""What ``experiments plan`` prints (issue 52): one row per notebook, the total and what ``run`` does
with it, then a legend once; every line fits 100 columns (tests/test_experiments_output.py runs it
on the real experiments/)."""

from __future__ import annotations

from ._plan import SPEC_RUN, SPEC_TIMEOUT, NotebookPlan, StudyPlan
from ._times import format_seconds

#: What ``run --budget`` does with a plan over its budget; the README says the same of ``make reproduce``.
BUDGET_RULE = "a budget sizes notebooks, it stops none"
LEGEND = (
    "n: tasks each system runs (-: not sized by tasks, runs at its own sizes).",
    "time: predicted wall time, from: here = its last full run in results/; spec = the run its spec",
    "  records (experiments/<notebook>.toml); timeout = its spec's timeout / 3.",
    "detects (MDE, minimum detectable effect): the smallest difference in score (0 to 1) between two",
    "  systems on the same n tasks that a paired test finds 4 times in 5 (exact sign test, alpha 0.05),",
    "  were they to disagree on every task (*: how often they disagree is read from its pilot or",
    "  earlier results); \"a level\": within each level. needs n: the n a 0.30 difference needs.",
)


def _source(plan: NotebookPlan) -> str:
    return {SPEC_RUN: "spec", SPEC_TIMEOUT: "timeout"}.get(plan.cost_source, "here")


def _header(plan: StudyPlan) -> str:
    what = f"a {format_seconds(plan.budget_s)} budget" if plan.budget_s else "the notebooks' own sizes"
    if plan.budget_usd is not None:
        what += f", at most ${plan.budget_usd:,.2f} a notebook"
    pace = "one task at a time" if plan.concurrency == 1 else f"{plan.concurrency} tasks at once"
    model = plan.lm or "each notebook's own"
    return f"plan for {what}; model: {model}, {pace}"


def _total(plan: StudyPlan) -> list[str]:
    total = f"total: {format_seconds(plan.seconds)} predicted"
    if plan.budget_s is None:
        lines = [f"{total} at the notebooks' own sizes"]
    elif plan.seconds <= plan.budget_s:
        lines = [f"{total}, within the {format_seconds(plan.budget_s)} budget"]
    else:  # the budget rule's floor (2 tasks each) is over it: run still runs them all at that floor
        lines = [f"{total}, over the {format_seconds(plan.budget_s)} budget even at n = 2 each;",
                 f"  run still runs every notebook, the sized ones at n = 2 ({BUDGET_RULE})"]
    guessed = sum(_source(p) != "here" for p in plan.notebooks)
    if guessed:
        lines.append(f"  {guessed} of {len(plan.notebooks)} times are the specs' figures, not runs on this "
                     "machine (design/planning.md)")
    return lines


def plan_lines(plan: StudyPlan) -> list[str]:
    """The plan as a person reads it: a header, one aligned row per notebook, the total, the legend."""
    marked = any(p.discordance is not None for p in plan.notebooks)
    rows = [("notebook", "n", "time", "from", *(("",) if marked else ()), "detects (MDE)")]
    for p in plan.notebooks:
        mark = ("*" if p.discordance is not None else "",) if marked else ()
        rows.append((p.stem, "-" if p.n is None else str(p.n), format_seconds(p.seconds), _source(p), *mark,
                     p.detects))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    right = (False, True, True, False, False)  # n and time right-aligned
    table = ["  ".join([*(cell.rjust(w) if r else cell.ljust(w) for cell, w, r in zip(row, widths, right, strict=False)),
                        row[-1]]).rstrip() for row in rows]
    return [_header(plan), *table, *_total(plan), *LEGEND]
