"""The model column (issue 26): summaries, comparisons, the protocol and the vs-paper tables carry
the model their rows were measured on, so a table built on the scripted test double says so."""

from __future__ import annotations

import pandas as pd
import pytest

from roma_lab.lm import model_label
from roma_lab.results import (COMPACT_COLUMNS, PAPER_COLUMNS, beside_paper, compact_beside_paper, compare,
                              summarize, summarize_protocol, wide)
from roma_lab.stats import StatsSettings

SCRIPTED = model_label("scripted")
FAST = StatsSettings(n_resamples=20, seed=0)


def scores() -> pd.DataFrame:
    rows = [{"condition": c, "subset": "s", "task_id": f"t{t}", "run": r, "success": float((t + r + i) % 2),
             "model": m}
            for i, (c, m) in enumerate([("a", SCRIPTED), ("b", "local")]) for t in range(4) for r in range(2)]
    return pd.DataFrame(rows)


def test_summarize_and_compare_carry_the_rows_model_last():
    summary = summarize(scores(), ["success"], stats=FAST)
    assert list(summary.columns)[-1] == "model"
    assert dict(zip(summary["condition"], summary["model"])) == {"a": SCRIPTED, "b": "local"}
    paired = compare(scores(), "a", "b", "success", stats=FAST)
    assert list(paired.columns)[-1] == "model" and paired.at[0, "model"] == f"{SCRIPTED}, local"  # a's, then b's
    same = compare(scores().assign(model="local"), "a", "b", "success", stats=FAST)
    assert same.at[0, "model"] == "local"  # one model named once
    bare = summarize(scores().drop(columns="model"), ["success"], stats=FAST)
    assert "model" not in bare.columns  # rows that name no model: the table keeps its columns


def test_the_protocol_carries_the_model_to_every_row():
    table = summarize_protocol(scores(), baseline="b", stats=FAST)
    assert list(table.columns)[-1] == "model"
    assert set(table.loc[table["condition"] == "b", "model"]) == {"local"}
    diff = table[table["condition"] == "a - b"]
    assert len(diff) and set(diff["model"]) == {f"{SCRIPTED}, local"}
    assert not table["model"].isna().any()


def test_wide_shows_the_model_beside_the_group_keys():
    view = wide(summarize(scores(), ["success"], stats=FAST))
    assert list(view.columns)[:3] == ["condition", "subset", "model"]
    assert list(view["model"]) == [SCRIPTED, "local"]


def paper() -> pd.DataFrame:
    return pd.DataFrame([["t1", "a", "s", "success", "fraction", 0.5, False, "Table 1", ""],
                         ["t1", "c", "s", "success", "fraction", 0.4, False, "Table 1", ""]],
                        columns=list(PAPER_COLUMNS))


def test_beside_paper_and_the_compact_view_name_the_model_of_ours():
    ours = summarize(scores(), ["success"], stats=FAST)
    full = beside_paper(ours, paper(), "t1", why="scripted", why_not_measured="not run")
    assert list(full.columns)[-1] == "model"  # on disk: a column added at the end
    assert dict(zip(full["condition"], full["model"])) == {"a": SCRIPTED, "c": "", "b": "local"}
    compact = compact_beside_paper(full)
    assert list(compact.columns) == list(COMPACT_COLUMNS) and COMPACT_COLUMNS.index("model") == 1  # on screen
    assert list(compact["model"]) == [SCRIPTED, ""]
    with pytest.raises(ValueError, match="no model column"):
        compact_beside_paper(full.drop(columns="model"))
