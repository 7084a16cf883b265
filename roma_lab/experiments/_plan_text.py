"""What ``experiments plan`` prints (issue 52): one row per notebook, the total and what ``run`` does
with it, then a legend once; every line fits 100 columns (tests/test_experiments_output.py runs it
on the real experiments/)."""

from __future__ import annotations

import textwrap

from ._plan import SPEC_PROBED, SPEC_RUN, SPEC_TIMEOUT, NotebookPlan, StudyPlan, narrowed
from ._times import format_seconds

#: What ``run --budget`` does with a plan over its budget; the README says the same of ``make reproduce``.
BUDGET_RULE = "a budget sizes notebooks, it stops none"
LEGEND = (
    "n: tasks each system runs (-: not sized by tasks, runs at its own sizes).",
    "time: predicted wall time, from: here = its last full run in results/; spec = the run its spec",
    "  records (experiments/<notebook>.toml); probe = that, scaled by this machine's speed probe",
    "  (experiments probe); timeout = its spec's timeout / 3.",
    "detects (MDE, minimum detectable effect): the smallest difference in score (0 to 1) between two",
    "  systems on the same n tasks that a paired test finds 4 times in 5 (exact sign test, alpha 0.05),",
    "  were they to disagree on every task (*: how often they disagree is read from its pilot or",
    "  earlier results); \"a level\": within each level. needs n: the n a 0.30 difference needs.",
    "own size: its spec's n, its protocol's (21-26: the n a 0.30 difference needs); $ unknown: no",
    "  run here counted its tokens.",
)


def _source(plan: NotebookPlan) -> str:
    return {SPEC_RUN: "spec", SPEC_PROBED: "probe", SPEC_TIMEOUT: "timeout"}.get(plan.cost_source, "here")


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
        lines = [f"{total}, over the {format_seconds(plan.budget_s)} budget even at 2 tasks a comparison;",
                 f"  run still runs them all, the sized ones at that floor ({BUDGET_RULE})"]
    kept = [p.stem for p in plan.notebooks if p.kept]
    if kept:  # a resumed run: their sizes are those their runs started with, whatever the plan would give
        lines += textwrap.wrap(f"kept at the n their runs under this budget started with: {', '.join(kept)}",
                               width=100, initial_indent="  ", subsequent_indent="    ")
    for p in plan.notebooks:
        if p.sets:  # a budget that cannot pay its own size in every group runs its primary comparison's alone
            groups, others = narrowed(p.sets)
            also = "".join(f", {name} = {value!r}" for name, value in others)  # [plan.alone]: its systems too
            lines += textwrap.wrap(f"{p.stem} runs in {', '.join(map(str, groups))} alone{also}: its own size is "
                                   f"not paid in every {p.stratum}", width=100, initial_indent="  ",
                                   subsequent_indent="    ")
    replays = [p.stem for p in plan.notebooks if p.replay]
    if replays:  # a run served from the completion cache took seconds where the model took an hour
        lines.append(f"  not priced by their runs here, replays from the completion cache: {', '.join(replays)}")
    guessed = sum(_source(p) != "here" for p in plan.notebooks)
    probed = sum(_source(p) == "probe" for p in plan.notebooks)
    if guessed:
        lines.append(f"  {guessed} of {len(plan.notebooks)} times are the specs' figures, not runs on this "
                     "machine (design/planning.md)")
    if probed:
        lines.append(f"  {probed} of them scaled to this machine by its speed probe")
        if plan.busy_probe:  # a probe beside other work makes every scaled time too long
            lines += textwrap.wrap(plan.busy_probe, width=100, initial_indent="  warning: ", subsequent_indent="    ")
    return lines


def _expected(plan: StudyPlan) -> list[str]:
    """How many of the comparisons a pilot declares the plan expects to detect, then one line for each
    the pilot's interval expects at the notebook's own size: its pilot, the n it needs, whether funded."""
    declared = [(p, e) for p in plan.notebooks for e in p.pilots]
    if not declared:
        return []
    funded = sum(len(p.expected) for p in plan.notebooks)
    possible = [(p, e) for p, e in declared if e.needs is not None and e.needs * p.strata <= p.default_n]
    lines = [f"comparisons expected to be detectable: {funded} of the {len(declared)} a pilot declares "
             f"({len(possible)} at their own sizes)"]
    for p, e in possible:
        each = "" if p.strata == 1 else f" a {p.stratum}"
        state = "funded" if e in p.expected else f"has {p.comparison_n}"

        def short(x: float) -> str:  # +.67, -.05: a difference in [-1, 1]
            return f"{x:+.2f}".replace("0.", ".", 1)

        lines.append(f"  {p.stem}  {e.name}: pilot {short(e.estimate)} [{short(e.low).lstrip('+')}, "
                     f"{short(e.high).lstrip('+')}], needs n = {e.needs}{each}, {state}")
    return lines


def _not_afforded(plan: StudyPlan) -> list[str]:
    """One line per study the budget shrinks below its own size: that size, the time it needs here and
    the time and dollars with the quote model; then all of them together."""
    short = plan.not_afforded()
    if not short:
        return []
    pace = f"{plan.quote_concurrency} at once"
    here = plan.lm is None or plan.quote_lm != plan.lm  # the plan's own model is the embedded one
    head = (f"not affordable at their own sizes: n, time here; with {plan.quote_lm}, {pace}: time, $"
            if here else f"not affordable at their own sizes: n; with {plan.quote_lm}, {pace}: time, $")
    rows = [(p.stem, f"n = {p.default_n}", (p,)) for p in short]
    if len(short) > 1:
        rows.append(("all of them", "", short))
    width, n_width = (max(len(row[i]) for row in rows) for i in (0, 1))

    def line(name: str, n: str, items: tuple[NotebookPlan, ...]) -> str:
        money = (f"${sum(p.quote_dollars for p in items):,.2f}" if all(p.quote_dollars is not None for p in items)
                 else "$ unknown")
        quote = f"{format_seconds(sum(p.quote_seconds for p in items))}, {money}"
        if here:
            quote = f"{format_seconds(sum(p.own_seconds for p in items))} here; {quote}"
        return f"  {name.ljust(width)}  {n.rjust(n_width)}  {quote}"

    return [head, *(line(*row) for row in rows)]


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
    return [_header(plan), *table, *_total(plan), *_expected(plan), *_not_afforded(plan), *LEGEND]
