"""Paper figures as data, and "paper beside ours": one schema, one join, one agreement rule.

Every reproduced table compares our measured figures with the paper's through :func:`beside_paper`.
The paper's figures live in ``paper_reported*.csv`` files with the columns :data:`PAPER_COLUMNS`
(each row quotes the sentence or table cell it comes from); ours arrive as tidy rows
(:data:`MEASURED_COLUMNS`, what :func:`roma_lab.results.summarize` and ``compare`` return).
See design/results_vocabulary.md.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._files import open_regular

if TYPE_CHECKING:
    import pandas as pd

#: One schema for the paper figures of every paper. ``condition`` is the system, policy, method or
#: configuration; ``subset`` the split, benchmark or level it was measured on; ``derived`` marks a
#: figure we computed from the paper's own numbers (say how in ``note``).
PAPER_COLUMNS: tuple[str, ...] = ("artefact", "condition", "subset", "metric", "unit", "value", "derived",
                                  "source", "note")
KEYS: tuple[str, ...] = ("condition", "subset", "metric")
#: Our side: one row per condition x subset x metric; ``ci_low``/``ci_high``/``n``/``unit`` optional.
MEASURED_COLUMNS: tuple[str, ...] = ("condition", "subset", "metric", "value")

UNITS: frozenset[str] = frozenset({"fraction", "percent", "percentage points", "count", "cost units", "usd", "ms",
                                   "s", "tokens", "ratio", "probability", "p-value", "p-value bound", "score",
                                   "threshold", "temperature"})
# Our value in the first unit is multiplied by this to be read in the paper's unit.
_CONVERSIONS: Mapping[tuple[str, str], float] = {("fraction", "percent"): 100.0,
                                                 ("fraction", "percentage points"): 100.0}

#: Agreement rule: figures match when within 1% of the paper's magnitude (at least 0.01 absolute),
#: p-values when within a factor of two, and a p-value the paper states only as a bound
#: (unit ``p-value bound``: "p < value") when ours is at or below it.
TOLERANCE = 0.01
P_VALUE_FACTOR = 2.0

MATCHES, DIFFERS, NOT_MEASURED, NOT_IN_PAPER = "matches", "differs", "not measured", "not in paper"
#: Verdict for a measured figure that measures something other than what the paper's does (our row
#: has ``comparable`` False, e.g. a search that made no proposal scores its starting program).
NOT_COMPARABLE = "not comparable"

Why = str | Mapping[str, str] | Callable[[Mapping[str, Any]], str]


class PaperTableError(ValueError):
    """A paper_reported file breaks the schema; the message names the file and the row."""


def read_paper_reported(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read and check a ``paper_reported*.csv`` file: exact columns, known units, numeric values,
    a source for every figure and no figure listed twice."""
    import pandas as pd

    path = Path(path)
    with open_regular(path, "rb") as f:
        df = pd.read_csv(f, dtype={"condition": str, "subset": str, "note": str}, keep_default_na=False,
                         na_values={"value": [""]})
    if tuple(df.columns) != PAPER_COLUMNS:
        raise PaperTableError(f"{path}: columns must be {list(PAPER_COLUMNS)}, got {list(df.columns)}")
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    problems = []
    for i, row in df.iterrows():
        line = i + 2  # header is line 1
        if not math.isfinite(row["value"]):
            problems.append(f"line {line}: value is not a number")
        if row["unit"] not in UNITS:
            problems.append(f"line {line}: unknown unit {row['unit']!r} (known: {sorted(UNITS)})")
        if not str(row["source"]).strip():
            problems.append(f"line {line}: no source")
        if str(row["derived"]) not in ("True", "False"):
            problems.append(f"line {line}: derived must be True or False, got {row['derived']!r}")
    duplicated = df[df.duplicated(["artefact", *KEYS], keep=False)]
    if len(duplicated):
        problems.append(f"figures listed twice: {duplicated[['artefact', *KEYS]].drop_duplicates().values.tolist()}")
    if problems:
        raise PaperTableError(f"{path}: " + "; ".join(problems))
    df["derived"] = df["derived"].astype(str) == "True"
    return df


def agreement(paper: float, ours: float, unit: str) -> str:
    """The one agreement rule: ``matches``, ``differs`` or ``not measured`` (ours is NaN)."""
    if ours is None or (isinstance(ours, float) and math.isnan(ours)):
        return NOT_MEASURED
    if unit == "p-value bound":
        return MATCHES if ours <= paper else DIFFERS
    if unit == "p-value":
        if ours <= 0 or paper <= 0:
            return MATCHES if ours == paper else DIFFERS
        return MATCHES if abs(math.log(ours / paper)) <= math.log(P_VALUE_FACTOR) + 1e-12 else DIFFERS
    return MATCHES if abs(ours - paper) <= TOLERANCE * max(1.0, abs(paper)) + 1e-12 else DIFFERS


def _reason(why: Why | None, row: Mapping[str, Any]) -> str:
    if why is None:
        return ""
    if isinstance(why, str):
        return why
    if isinstance(why, Mapping):
        return why.get(row["metric"], why.get("*", ""))
    return why(row) or ""


def _required_reason(why: Why | None, row: Mapping[str, Any], problem: str) -> str:
    """The reason ``why`` gives for a row that must have one; none is an error naming the ``problem``."""
    reason = _reason(why, row)
    if not reason:
        raise ValueError(f"{problem} and no reason was given")
    return reason


def beside_paper(
    ours: pd.DataFrame,
    paper: pd.DataFrame,
    artefact: str,
    *,
    why: Why | None = None,
    why_not_measured: Why | None = None,
    why_not_comparable: Why | None = None,
    setting: str | None = None,
) -> pd.DataFrame:
    """Every paper figure of ``artefact`` beside ours: an outer join on (condition, subset, metric).

    ``ours``: tidy measured rows (:data:`MEASURED_COLUMNS`, optionally ``unit``, ``ci_low``,
    ``ci_high``, ``n``, ``setting``, ``comparable``, ``model``); rows for metrics the paper does not report for
    ``artefact`` are left out. A paper figure we did not measure stays as ``not measured``; a measured condition the
    paper does not have is ``not in paper``. ``why`` explains differences (one text, a mapping metric
    -> text with optional ``"*"``, or a function of the row); every ``differs`` row needs a reason, so
    a difference can never go unexplained, and so does every ``not measured`` row
    (``why_not_measured``). A row of ours with ``comparable`` False measures something other than
    the paper's figure: it reads ``not comparable`` whatever its value (the value is still shown),
    with a required reason (``why_not_comparable``). ``setting`` says what differs from the paper's set-up (model, data, n, R)
    and goes on every measured row that has no ``setting`` of its own. ``paper_in_ci`` says whether
    the paper's figure lies inside our confidence interval. ``model`` (the last column) names the
    model our figure was measured on, from our rows ("" where we measured nothing).
    """
    import numpy as np
    import pandas as pd

    missing = [c for c in MEASURED_COLUMNS if c not in ours.columns]
    if missing:
        raise ValueError(f"{artefact}: measured table lacks column(s) {missing}; it needs {list(MEASURED_COLUMNS)}")
    figures = paper[paper["artefact"] == artefact]
    if figures.empty:
        raise ValueError(f"no paper figures for artefact {artefact!r}")
    mine = ours[ours["metric"].isin(set(figures["metric"]))].copy()
    for column in ("ci_low", "ci_high", "n"):
        if column not in mine:
            mine[column] = math.nan
    if "comparable" not in mine:
        mine["comparable"] = True
    elif not mine["comparable"].map(lambda v: isinstance(v, bool | np.bool_)).all():
        raise ValueError(f"{artefact}: the comparable column must hold True or False only")
    if "model" not in mine:
        mine["model"] = ""
    if "setting" not in mine:
        mine["setting"] = setting or ""
    elif setting is not None:
        mine["setting"] = mine["setting"].fillna("").replace("", setting)
    if mine.duplicated(list(KEYS)).any():
        raise ValueError(f"{artefact}: measured table lists some (condition, subset, metric) twice")
    # rows in the paper file's order, then the conditions only we measured, in our order
    figures = figures.assign(_paper_order=range(len(figures)))
    mine = mine.assign(_our_order=range(len(mine)))
    joined = (figures.merge(mine, on=list(KEYS), how="outer", suffixes=("_paper", ""), indicator=True)
              .sort_values(["_paper_order", "_our_order"], na_position="last", kind="stable"))

    rows = []
    for row in joined.to_dict("records"):
        paper_unit = row.get("unit_paper")
        unit = paper_unit if isinstance(paper_unit, str) else row.get("unit", "")
        factor = 1.0
        our_unit = row.get("unit") if isinstance(row.get("unit"), str) else unit
        if isinstance(paper_unit, str) and our_unit != paper_unit:
            if (our_unit, paper_unit) not in _CONVERSIONS:
                raise ValueError(f"{artefact}: {row['metric']} is in {our_unit!r} but the paper reports {paper_unit!r}")
            factor = _CONVERSIONS[(our_unit, paper_unit)]
        value, low, high = (row[c] * factor for c in ("value", "ci_low", "ci_high"))
        p = row["value_paper"]
        if row["_merge"] == "right_only":
            verdict = NOT_IN_PAPER
        elif row["_merge"] == "both" and not row["comparable"]:
            verdict = NOT_COMPARABLE
        else:
            verdict = agreement(p, value, unit)
        out = {
            "artefact": artefact, "condition": row["condition"], "subset": row["subset"], "metric": row["metric"],
            "unit": unit, "paper": p, "paper_derived": bool(row["derived"]) if row["_merge"] != "right_only" else False,
            "ours": value, "ours_ci_low": low, "ours_ci_high": high, "n": row["n"],
            "difference": value - p, "agreement": verdict,
            "paper_in_ci": bool(low <= p <= high) if not (math.isnan(low) or math.isnan(high) or math.isnan(p))
            else None,
            "setting": row["setting"] if isinstance(row["setting"], str) else "",
            "why": "", "paper_source": row["source"] if isinstance(row["source"], str) else "",
            "paper_note": row["note"] if isinstance(row["note"], str) else "",
            "model": row["model"] if isinstance(row["model"], str) else "",
        }
        figure = f"{row['condition']}/{row['subset']}/{row['metric']}"
        if verdict == DIFFERS:
            out["why"] = _required_reason(why, out, f"{artefact}: {figure} differs from the paper ({value:g} vs {p:g})")
        elif verdict == NOT_COMPARABLE:
            out["why"] = _required_reason(why_not_comparable, out, f"{artefact}: {figure} is marked not comparable")
        elif verdict == NOT_MEASURED:
            out["why"] = _required_reason(why_not_measured, out, f"{artefact}: paper figure {figure} was not measured")
        rows.append(out)
    columns = ["artefact", "condition", "subset", "metric", "unit", "paper", "paper_derived", "ours", "ours_ci_low",
               "ours_ci_high", "n", "difference", "agreement", "paper_in_ci", "setting", "why", "paper_source",
               "paper_note", "model"]
    return pd.DataFrame(rows, columns=columns)
