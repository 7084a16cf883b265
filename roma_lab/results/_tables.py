"""Tidy CSV tables: one file per table, written atomically, read back exactly."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ._files import write_text_atomic

if TYPE_CHECKING:  # pandas is heavy; imported where used
    import pandas as pd

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _table_path(out_dir: str | os.PathLike[str], name: str) -> Path:
    if not isinstance(name, str) or not _NAME.match(name) or name.endswith(".csv"):
        raise ValueError(
            f"table name must be a plain file stem such as 'table2' (no directory, no '.csv'), got {name!r}"
        )
    return Path(out_dir) / f"{name}.csv"


def write_table(df: pd.DataFrame, out_dir: str | os.PathLike[str], name: str) -> Path:
    """Write ``df`` as the tidy CSV ``<out_dir>/<name>.csv`` and return its path.

    A meaningful index (named, or not a plain 0..n-1 range) becomes ordinary columns, so
    nothing held in the index is dropped silently. The file appears atomically: a reader
    never sees half a table, and an interrupted write leaves the previous file intact.
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"write_table expects a pandas DataFrame, got {type(df).__name__}")
    path = _table_path(out_dir, name)
    if not all(isinstance(c, str) for c in df.columns) or df.columns.has_duplicates:
        raise ValueError(f"table {name!r}: columns must be unique strings, got {list(df.columns)!r}")
    plain_index = isinstance(df.index, pd.RangeIndex) and df.index.name is None and df.index.start == 0
    if not plain_index:
        df = df.reset_index()
    return write_text_atomic(path, df.to_csv(index=False, lineterminator="\n"))


def read_table(out_dir: str | os.PathLike[str], name: str) -> pd.DataFrame:
    """Read back a table written by :func:`write_table` (floats round-trip exactly; NaN is an empty cell)."""
    import pandas as pd

    path = _table_path(out_dir, name)
    if not path.is_file():
        raise FileNotFoundError(f"no table {name!r} in {Path(out_dir)} (expected {path})")
    # pandas 3 parses floats exactly by default and deprecates the option pandas 2 needs for it.
    exact = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
    return pd.read_csv(path, **exact)
