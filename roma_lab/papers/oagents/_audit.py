"""The OAgents paper's own numbers as data (``paper_reported.csv``) and an audit of their arithmetic.

GAIA figures are shares of whole tasks: a percentage printed for a level of n tasks must be k/n for
a whole k (within the rounding of its printed decimals), the level counts must add up to the
average over 165 tasks, and a difference between two configurations must be a whole number of
tasks. :func:`audit_paper_numbers` checks every figure, the text against the tables and the
paper's ranking claims, gives the exact (Clopper-Pearson) CI each implied count k of n allows,
and for each comparison the paper makes says whether a paired test could tell it apart at that n
(design/protocol.md). Rows of artefact ``"<table> text"`` quote the prose about ``<table>``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from roma_lab.stats import DEFAULT_STATS, StatsSettings

if TYPE_CHECKING:
    import pandas as pd

PAPER_REPORTED = Path(__file__).with_name("paper_reported.csv")
TEXT = " text"
#: GAIA validation split (Mialon et al. 2023): 165 tasks, 53 / 86 / 26 per level. The OAgents
#: paper never prints these sizes; every GAIA figure it gives is measured on them.
GAIA_SIZES: Mapping[str, int] = {"GAIA avg": 165, "GAIA L1": 53, "GAIA L2": 86, "GAIA L3": 26}
#: Rows measured on other tasks than GAIA's 165: Search-o1 and WebThinker report GAIA on the 103-task
#: text-only subset (39 / 52 / 12 per level), which Table 1 copies without saying so; on it every
#: figure of theirs is a whole count (Search-o1: 41/103, 21/39, 18/52, 2/12).
TEXT_ONLY_103 = {"GAIA avg": 103, "GAIA L1": 39, "GAIA L2": 52, "GAIA L3": 12}
ROW_SIZES: Mapping[str, Mapping[str, int]] = {"Search-o1-32B": TEXT_ONLY_103, "WebThinker-32B-RL": TEXT_ONLY_103}
ROW_SIZE_SOURCE = "the 103-task text-only GAIA subset its own paper reports (not printed in OAgents)"
#: Subsets whose tasks are exactly the tasks of their parts (Table 2 prints its part sizes).
PARTS: Mapping[str, tuple[str, ...]] = {
    "GAIA avg": ("GAIA L1", "GAIA L2", "GAIA L3"),
    "GAIA multimodal": ("GAIA multimodal audio", "GAIA multimodal image", "GAIA multimodal tabular"),
}
#: A subset whose size the paper does not give (the BrowseComp subset) gets the smallest size at
#: most this large for which every one of its figures is a whole count.
MAX_INFERRED_SIZE = 1000
WHOLE, TRUNCATED, NOT_WHOLE = "whole count", "truncated, not rounded", "not a whole count"
#: Verdicts on a stated difference of whole tasks, from the sign test and the MDE (design/protocol.md).
NO_DIFFERENCE = "no difference in whole tasks"
NEVER_SIGNIFICANT = "cannot be significant under any pairing"
UNDERPOWERED = "under-powered under any pairing"
DETECTABLE = "detectable even with independent outcomes"
DEPENDS = "detectable only if outcomes are correlated"

COUNT_COLUMNS = ("artefact", "condition", "subset", "metric", "value", "decimals", "n", "n_source", "exact_count",
                 "count", "count_value", "miss", "status", "ci_low", "ci_high", "ci_method", "note")
SUM_COLUMNS = ("artefact", "condition", "metric", "subset", "value", "n", "parts", "part_counts", "summed_count",
               "summed_value", "miss", "status")
COMPARISON_COLUMNS = ("artefact", "condition", "subset", "value", "derived", "n", "exact_count", "count", "count_value",
                      "miss", "status", "count_a", "count_b", "best_case_sign_p", "discordance_independent",
                      "mde_independent", "max_discordance", "verdict", "source")
TEXT_COLUMNS = ("artefact", "table", "condition", "subset", "metric", "paper", "from_rows", "difference", "matches",
                "check", "source")
CLAIM_COLUMNS = ("artefact", "kind", "condition", "subset", "value", "other", "other_value", "holds", "note", "source")
FINDING_COLUMNS = ("kind", "artefact", "condition", "subset", "value", "nearest", "miss", "detail")


@dataclass(frozen=True, slots=True)
class RankClaim:
    """A sentence saying one figure beats others: ``claimed`` (condition, subset) against
    ``against`` (cells; empty = every other condition of ``artefact`` on the same subset).

    ``kind``: ``"highest"`` (above every other), ``"ties highest"`` (equal to the largest other),
    ``"all positive"`` (it and every other cell above 0). A condition ``"A - B"`` is computed from
    the two rows of ``artefact`` when it is not a row itself.
    """

    artefact: str
    claimed: tuple[str, str]
    against: tuple[tuple[str, str], ...]
    kind: str
    source: str
    note: str = ""


def _levels(condition: str, *subsets: str) -> tuple[tuple[str, str], ...]:
    return tuple((condition, subset) for subset in subsets)


_OPEN_SOURCE = ("OWL-Workforce", "OWL-Roleplaying", "TapeAgents", "AutoAgent", "Open Deep Research", "Smolagents",
                "Magnetic-1", "FRIDAY")
_RIVALS_OF_OWL = tuple((name, "GAIA avg") for name in _OPEN_SOURCE if name != "OWL-Roleplaying")
_S42, _S421, _S422 = "Section 4.2", "Section 4.2.1", "Section 4.2.2"
_BEST_OPEN = ("Section 1, contributions: \"ranking 1st among open-source agent frameworks on ~\\gaia{} benchmark\"")

#: The ranking claims of the text, each checked against the tables.
CLAIMS: tuple[RankClaim, ...] = (
    RankClaim("table1", ("OAgents-Pass@3", "GAIA avg"), (), "highest",
              f'{_S42}: "our method (\\owo{{}}-Pass@3) achieves the highest overall average score of 73.93\\%, '
              'outperforming all other frameworks"'),
    RankClaim("table1", ("OAgents-Pass@3", "GAIA L1"), (), "ties highest",
              f'{_S42}: "In terms of Level 1 task performance, our method reaches 83.02\\%, tying with the '
              'best-performing frameworks"'),
    RankClaim("table1", ("OAgents-Pass@3", "GAIA avg"), _levels("Langfun Agent", "GAIA avg") +
              _levels("TraseAgent", "GAIA avg"), "highest",
              f'{_S42}: "our method shows a clear edge in both average and Level 2 accuracy"'),
    RankClaim("table1", ("OAgents-Pass@3", "GAIA L2"), _levels("Langfun Agent", "GAIA L2") +
              _levels("TraseAgent", "GAIA L2"), "highest",
              f'{_S42}: "our method shows a clear edge in both average and Level 2 accuracy"'),
    RankClaim("table1", ("OWL-Roleplaying", "GAIA avg"), _RIVALS_OF_OWL, "highest",
              f'{_S42}: "\\owo{{}}-Pass@3 demonstrates a significant margin over the best alternative, '
              'OWL-Roleplaying (58.18\\%)"', "the best open-source alternative"),
    RankClaim("table1", ("OAgents", "GAIA avg"), tuple((name, "GAIA avg") for name in _OPEN_SOURCE), "highest",
              _BEST_OPEN, "read with OAgents' Pass@1 figure"),
    RankClaim("table1", ("OAgents-Pass@3", "GAIA avg"), tuple((name, "GAIA avg") for name in _OPEN_SOURCE),
              "highest", _BEST_OPEN, "read with OAgents' Pass@3 figure"),
    RankClaim("table4", ("Multi-source (k=5) - Single-source", "GAIA L3"),
              _levels("Multi-source (k=5) - Single-source", "GAIA L1", "GAIA L2"), "highest",
              f'{_S421}: "integrating complementary search engines (DuckDuckGo, Baidu, Bing) consistently improves '
              'retrieval accuracy, with the largest gain in Level 3 tasks (+7.69\\%)"'),
    RankClaim("table4", ("Multi-source (k=3) - Single-source", "GAIA avg"),
              _levels("Multi-source (k=3) - Single-source", "GAIA L1", "GAIA L2", "GAIA L3") +
              _levels("Multi-source (k=5) - Single-source", "GAIA avg", "GAIA L1", "GAIA L2", "GAIA L3"),
              "all positive", f'{_S421}: "integrating complementary search engines (DuckDuckGo, Baidu, Bing) '
              'consistently improves retrieval accuracy"', "every source configuration on every level"),
    RankClaim("table6", ("Claude-3-7 Advance - Claude-3-7 Baseline", "GAIA avg"), (), "highest",
              f'{_S421}: "Notably, Claude-3-7 gains 20.61\\%, the highest observed boost"'),
    RankClaim("table7", ("+ Subtask - OAgents", "GAIA L2"), _levels("+ Subtask - OAgents", "GAIA L1", "GAIA L3"),
              "highest", f'{_S422}: "Subtask Decomposition achieves a 2.42\\% improvement over baseline, demonstrating '
              'that breaking down tasks into structured subtasks enhances systematic reasoning, particularly for '
              'tasks of moderate complexity"', "moderate complexity read as Level 2"),
    RankClaim("table7", ("+ Plan tips - OAgents", "GAIA L3"), _levels("+ Plan tips - OAgents", "GAIA L1", "GAIA L2"),
              "highest", f'{_S422}: "They contribute to a 14.54\\% performance improvement [...] This is especially '
              'important for high complexity tasks."', "high complexity read as Level 3; gains in percentage points"),
    RankClaim("figure2", ("+ Long-Term Memory - Current Memory", "GAIA avg"), (), "highest",
              f'{_S422}: "The most significant gain came from long-term memory, raising the average to 55.76\\%"'),
    RankClaim("figure3", ("BO4 - baseline", "GAIA avg"), (), "highest",
              f'{_S422}: "BO4 achieves the best overall performance (5.19\\%)"'),
)


@dataclass(frozen=True, slots=True)
class PaperAudit:
    """The audit's tidy tables (each also written as ``audit_<name>.csv``), and the statistics
    settings they were computed with."""

    counts: pd.DataFrame
    sums: pd.DataFrame
    comparisons: pd.DataFrame
    text: pd.DataFrame
    claims: pd.DataFrame
    findings: pd.DataFrame
    stats: StatsSettings = DEFAULT_STATS


def paper_reported_df(path: str | os.PathLike[str] = PAPER_REPORTED) -> pd.DataFrame:
    """The paper's figures (checked against the vocabulary schema), with ``decimals``: how many
    decimals each value was printed with, which sets how far rounding can move it."""
    import pandas as pd

    from roma_lab.results import read_paper_reported

    paper = read_paper_reported(path)
    printed = pd.read_csv(path, dtype=str, keep_default_na=False)["value"].str.strip()
    return paper.assign(decimals=[len(text.partition(".")[2]) for text in printed])


def audit_paper_numbers(
    out_dir: str | os.PathLike[str] | None = None,
    *,
    paper: str | os.PathLike[str] = PAPER_REPORTED,
    sizes: Mapping[str, int] = GAIA_SIZES,
    row_sizes: Mapping[str, Mapping[str, int]] = ROW_SIZES,
    claims: Sequence[RankClaim] = CLAIMS,
    stats: StatsSettings = DEFAULT_STATS,
) -> PaperAudit:
    """Audit every figure of ``paper``; with ``out_dir``, write each table as ``audit_<name>.csv``.

    ``counts``: per percentage, its size n (stated, ``row_sizes`` for a condition measured on other
    tasks, GAIA's, or inferred), the whole count k it
    implies, how far the printed figure misses k/n, and the exact CI of k of n. ``sums``: level
    counts against the average. ``comparisons``: per difference the paper states, its count, the
    smallest p-value any pairing allows, the MDE if the two configurations' outcomes were
    independent, the largest discordance at which it is detectable, and a verdict. ``text``: the
    prose and the printed gaps against the table rows. ``claims``: :data:`CLAIMS`. ``findings``:
    every inconsistency found, one sentence each. ``alpha``, ``power`` and ``level`` (the exact CIs)
    come from ``stats``.
    """
    from roma_lab.results import write_table

    alpha, power, level = stats.alpha, stats.power, stats.level

    frame = paper_reported_df(paper)
    percent = frame[frame["unit"] == "percent"]
    figures = percent[~percent["artefact"].str.endswith(TEXT)]
    n_of = _sizes(frame, figures, sizes)
    counts = _counts(figures, n_of, level, row_sizes)
    tables = {"counts": counts, "sums": _sums(counts), "comparisons": _comparisons(frame, counts, n_of, alpha, power),
              "text": _text(frame), "claims": _claims(frame, claims)}
    audit = PaperAudit(**tables, findings=_findings(**tables), stats=stats)
    if out_dir is not None:
        for name in (*tables, "findings"):
            write_table(getattr(audit, name), out_dir, f"audit_{name}")
    return audit


# --- whole counts ---------------------------------------------------------------------------------------------------

def _reading(printed: float, exact: float, decimals: int, *, difference: bool = False) -> str:
    """How a printed figure relates to an exact one: rounded from it, truncated, or neither.

    A difference of two rounded figures may be off by one unit in its last printed decimal (half
    from each), so it gets that tolerance.
    """
    ulp = 10.0 ** -decimals
    if abs(exact - printed) <= (ulp if difference else ulp / 2) + 1e-9:
        return WHOLE
    if not difference and 0 <= exact - printed < ulp - 1e-9:
        return TRUNCATED
    return NOT_WHOLE


def _whole(value: float, n: int, decimals: int, *, difference: bool = False) -> tuple[int, str]:
    """The count k of n a printed percentage (or difference) stands for, and how it was printed."""
    exact = value * n / 100
    k = round(exact) if difference else min(max(round(exact), 0), n)
    status = _reading(value, 100 * k / n, decimals, difference=difference)
    up = math.ceil(exact - 1e-9)  # a truncated percentage sits below its k/n
    if status == NOT_WHOLE and not difference and _reading(value, 100 * up / n, decimals) == TRUNCATED:
        return up, TRUNCATED
    return k, status


def _sizes(frame, figures, sizes) -> dict[str, tuple[int, str]]:
    stated = frame[(frame["metric"] == "tasks") & (frame["unit"] == "count")]
    n_of = {subset: (int(n), "GAIA validation split (not printed in the paper)") for subset, n in sizes.items()}
    n_of |= {row.subset: (int(row.value), "stated in the table") for row in stated.itertuples()}
    for subset, group in figures.groupby("subset", sort=False):
        if subset in n_of:
            continue
        n = next((n for n in range(1, MAX_INFERRED_SIZE + 1)
                  if all(_whole(v, n, d)[1] == WHOLE for v, d in zip(group["value"], group["decimals"]))), None)
        if n is None:
            raise ValueError(f"no size up to {MAX_INFERRED_SIZE} makes every {subset!r} figure a whole count; "
                             "give its size")
        n_of[subset] = (n, "inferred: the smallest size for which every figure is a whole count")
    return n_of


def _counts(figures, n_of, level, row_sizes):
    import pandas as pd
    from scipy import stats

    rows = []
    for row in figures.itertuples():
        own = row_sizes.get(row.condition, {})
        n, n_source = (own[row.subset], ROW_SIZE_SOURCE) if row.subset in own else n_of[row.subset]
        k, status = _whole(row.value, n, row.decimals)
        interval = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
        rows.append({"artefact": row.artefact, "condition": row.condition, "subset": row.subset,
                     "metric": row.metric, "value": row.value, "decimals": row.decimals, "n": n, "n_source": n_source,
                     "exact_count": row.value * n / 100, "count": k, "count_value": 100 * k / n,
                     "miss": row.value - 100 * k / n, "status": status,
                     "ci_low": 100 * interval.low, "ci_high": 100 * interval.high,
                     "ci_method": f"Clopper-Pearson exact {level:.0%}, {k} of {n}", "note": row.note})
    return pd.DataFrame(rows, columns=COUNT_COLUMNS)


def _sums(counts):
    import pandas as pd

    rows = []
    for (artefact, condition, metric), group in counts.groupby(["artefact", "condition", "metric"], sort=False):
        by_subset = group.set_index("subset")
        for total, parts in PARTS.items():
            if total not in by_subset.index or not set(parts) <= set(by_subset.index):
                continue
            top = by_subset.loc[total]
            summed = int(sum(by_subset.loc[p, "count"] for p in parts))
            implied = 100 * summed / top["n"]
            status = _reading(top["value"], implied, int(top["decimals"]))
            rows.append({"artefact": artefact, "condition": condition, "metric": metric, "subset": total,
                         "value": top["value"], "n": int(top["n"]), "parts": " + ".join(parts),
                         "part_counts": " + ".join(str(int(by_subset.loc[p, "count"])) for p in parts),
                         "summed_count": summed, "summed_value": implied, "miss": top["value"] - implied,
                         "status": {WHOLE: "adds up", NOT_WHOLE: "does not add up"}.get(status, status)})
    return pd.DataFrame(rows, columns=SUM_COLUMNS)


# --- differences, text and claims -------------------------------------------------------------------------------------

def _split(condition: str, names: set[str]) -> tuple[str, str] | None:
    """``"A - B"`` into (A, B) where both are row names (names may themselves contain " - ")."""
    found = [(condition[:i], condition[i + 3:]) for i in range(len(condition)) if condition.startswith(" - ", i)]
    found = [(a, b) for a, b in found if a in names and b in names]
    if len(found) > 1:
        raise ValueError(f"{condition!r} splits into two row names in more than one way: {found}")
    return found[0] if found else None


def _value(frame, artefact: str, condition: str, subset: str) -> float:
    """A figure of ``artefact``; a difference ``"A - B"`` that is not a row is computed from its rows
    (NaN when neither exists)."""
    rows = frame[(frame["artefact"] == artefact) & (frame["subset"] == subset) & (frame["unit"] != "count")]
    hit = rows[rows["condition"] == condition]
    if len(hit) > 1:
        hit = hit[hit["metric"].isin(["pass@1", "pass@1_diff"])]
    if len(hit) == 1:
        return float(hit["value"].iloc[0])
    pair = _split(condition, set(rows.loc[rows["unit"] == "percent", "condition"]))
    return _value(frame, artefact, pair[0], subset) - _value(frame, artefact, pair[1], subset) if pair else math.nan


def _comparisons(frame, counts, n_of, alpha, power):
    import pandas as pd
    from scipy import stats

    from roma_lab.stats import max_discordance, min_detectable_effect

    count_of = counts.set_index(["artefact", "condition", "subset"])["count"]
    count_of = count_of[~count_of.index.duplicated()]  # Table 9 lists OAgents twice: Pass@1 comes first
    rows = []
    for row in frame[frame["unit"] == "percentage points"].itertuples():
        table = row.artefact.removesuffix(TEXT)
        n = n_of[row.subset][0]
        k, status = _whole(row.value, n, row.decimals, difference=True)
        names = set(counts.loc[(counts["artefact"] == table) & (counts["subset"] == row.subset), "condition"])
        pair = _split(row.condition, names)
        a, b = (count_of.get((table, name, row.subset), math.nan) for name in pair) if pair else (math.nan, math.nan)
        independent = a / n * (1 - b / n) + b / n * (1 - a / n) if pair else math.nan
        mde = (min_detectable_effect(n, discordance=independent, alpha=alpha, power=power).effect * 100
               if independent > 0 else math.nan)
        best_p = float(stats.binomtest(abs(k), abs(k)).pvalue) if k else 1.0
        psi = max_discordance(n, k / n, alpha=alpha, power=power) if k else math.nan
        if k == 0:
            verdict = NO_DIFFERENCE
        elif best_p >= alpha:
            verdict = NEVER_SIGNIFICANT
        elif math.isnan(psi):
            verdict = UNDERPOWERED
        elif abs(row.value) >= mde:  # False for NaN: the two rows are not given, or nothing is detectable
            verdict = DETECTABLE
        else:
            verdict = DEPENDS
        rows.append({"artefact": row.artefact, "condition": row.condition, "subset": row.subset, "value": row.value,
                     "derived": row.derived, "n": n, "exact_count": row.value * n / 100, "count": k,
                     "count_value": 100 * k / n, "miss": row.value - 100 * k / n, "status": status,
                     "count_a": a, "count_b": b, "best_case_sign_p": best_p, "discordance_independent": independent,
                     "mde_independent": mde, "max_discordance": psi, "verdict": verdict, "source": row.source})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def _text(frame):
    """The prose (``<table> text`` rows the paper states, not our derived ones) and the printed gaps,
    against the table rows they describe."""
    import pandas as pd

    stated = frame[~frame["derived"] & frame["unit"].isin(["percent", "percentage points"])]
    checked = stated[stated["artefact"].str.endswith(TEXT) | (stated["unit"] == "percentage points")]
    rows = []
    for row in checked.itertuples():
        table = row.artefact.removesuffix(TEXT)
        own = row.artefact == table  # a printed gap: recompute it from the rows, never read it back
        pair = _split(row.condition, set(frame.loc[(frame["artefact"] == table) & (frame["unit"] == "percent"),
                                                   "condition"]))
        if own and pair is None:
            continue  # a difference of rows the paper does not give (Figure 3's unnamed baseline)
        expected = (_value(frame, table, pair[0], row.subset) - _value(frame, table, pair[1], row.subset) if pair
                    else _value(frame, table, row.condition, row.subset))
        tolerance = 10.0 ** -row.decimals + 1e-9
        rows.append({"artefact": row.artefact, "table": table, "condition": row.condition, "subset": row.subset,
                     "metric": row.metric, "paper": row.value, "from_rows": expected,
                     "difference": row.value - expected,
                     "matches": bool(abs(row.value - expected) <= tolerance) if not math.isnan(expected) else None,
                     "check": "printed gap vs its rows" if own else "text vs table", "source": row.source})
    return pd.DataFrame(rows, columns=TEXT_COLUMNS)


def _claims(frame, claims):
    import pandas as pd

    rows = []
    for claim in claims:
        condition, subset = claim.claimed
        against = claim.against or tuple(
            (name, subset) for name in dict.fromkeys(frame.loc[(frame["artefact"] == claim.artefact)
                                                               & (frame["subset"] == subset)
                                                               & (frame["unit"] != "count"), "condition"])
            if name != condition and (" - " in name) == (" - " in condition))
        mine = _value(frame, claim.artefact, condition, subset)
        others = {cell: _value(frame, claim.artefact, *cell) for cell in against}
        missing = [cell for cell, v in others.items() if math.isnan(v)] + ([claim.claimed] if math.isnan(mine) else [])
        if missing:
            raise ValueError(f"claim on {claim.artefact} names figures it does not have: {missing}")
        best = max(others, key=others.get)
        if claim.kind == "highest":
            holds = mine > others[best] + 1e-9
        elif claim.kind == "ties highest":
            holds = abs(mine - others[best]) <= 1e-9
        elif claim.kind == "all positive":
            best = min(others, key=others.get)
            holds = mine > 0 and others[best] > 0
        else:
            raise ValueError(f"unknown claim kind {claim.kind!r}")
        rows.append({"artefact": claim.artefact, "kind": claim.kind, "condition": condition, "subset": subset,
                     "value": mine, "other": f"{best[0]} [{best[1]}]", "other_value": others[best],
                     "holds": bool(holds), "note": claim.note, "source": claim.source})
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def _findings(counts, sums, comparisons, text, claims):
    import pandas as pd

    rows = []
    for r in counts[counts["status"] != WHOLE].itertuples():
        low, high = math.floor(r.exact_count), math.ceil(r.exact_count)
        rows.append({"kind": f"percentage: {r.status}", "artefact": r.artefact, "condition": r.condition,
                     "subset": r.subset, "value": r.value, "nearest": r.count_value, "miss": r.miss,
                     "detail": f"{r.value:g}% of {r.n} tasks is {r.exact_count:.2f} tasks; {low} tasks give "
                               f"{100 * low / r.n:.2f}%, {high} give {100 * high / r.n:.2f}%"})
    for r in sums[sums["status"] != "adds up"].itertuples():
        rows.append({"kind": f"levels vs average: {r.status}", "artefact": r.artefact, "condition": r.condition,
                     "subset": r.subset, "value": r.value, "nearest": r.summed_value, "miss": r.miss,
                     "detail": f"the parts' counts {r.part_counts} = {r.summed_count} of {r.n} tasks give "
                               f"{r.summed_value:.2f}%, the paper prints {r.value:g}"})
    for r in comparisons[comparisons["status"] == NOT_WHOLE].itertuples():
        rows.append({"kind": "difference: not a whole number of tasks", "artefact": r.artefact,
                     "condition": r.condition, "subset": r.subset, "value": r.value, "nearest": r.count_value,
                     "miss": r.miss, "detail": f"{r.value:g} points of {r.n} tasks is {r.exact_count:.2f} tasks; "
                                               f"{r.count} tasks give {r.count_value:.2f} points"})
    for r in text[text["matches"].eq(False)].itertuples():  # None: not checkable
        rows.append({"kind": f"{r.check}: differs", "artefact": r.artefact, "condition": r.condition,
                     "subset": r.subset, "value": r.paper, "nearest": r.from_rows, "miss": r.difference,
                     "detail": f"the paper says {r.paper:g}; its {r.table} rows give {r.from_rows:.2f}"})
    for r in claims[~claims["holds"]].itertuples():
        rows.append({"kind": f"claim does not hold ({r.kind})", "artefact": r.artefact, "condition": r.condition,
                     "subset": r.subset, "value": r.value, "nearest": r.other_value, "miss": r.value - r.other_value,
                     "detail": f"{r.condition} [{r.subset}] = {r.value:.2f} vs {r.other} = {r.other_value:.2f}"})
    return pd.DataFrame(rows, columns=FINDING_COLUMNS)


def plot_paper_comparisons(comparisons: pd.DataFrame):
    """Each comparison the paper states: its size beside the MDE under independent outcomes."""
    import matplotlib.pyplot as plt

    shown = comparisons.assign(table=comparisons["artefact"].str.removesuffix(TEXT)).drop_duplicates(
        ["table", "condition", "subset"])
    colours = {NEVER_SIGNIFICANT: "tab:red", UNDERPOWERED: "tab:pink", DEPENDS: "tab:orange", DETECTABLE: "tab:green",
               NO_DIFFERENCE: "tab:grey"}
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(8, 0.22 * len(shown) + 2.0))
    y = list(range(len(shown)))
    ax.barh(y, shown["value"].abs(), color=[colours[v] for v in shown["verdict"]])
    ax.scatter(shown["mde_independent"], y, marker="|", s=120, color="black", zorder=3)
    ax.set_yticks(y, [f"{t}: {c} [{s}]" for t, c, s in zip(shown["table"], shown["condition"], shown["subset"])],
                  fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("|difference| the paper states (percentage points)")
    handles = [Patch(color=colour, label=verdict) for verdict, colour in colours.items()]
    handles.append(Line2D([], [], marker="|", markersize=10, linestyle="", color="black",
                          label="MDE if outcomes were independent"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=2, fontsize=7)
    fig.tight_layout()
    return fig
