"""Tidy CSV tables: one file per table, written atomically, read back exactly; and the frozen
type a paper's entry functions return them in.

A text cell a spreadsheet would take for a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return, and not a plain number such as ``-5``) is written with a ``'`` in front, and so is
one that starts with ``'`` already; :func:`read_table` removes exactly that one ``'``, so the round trip
stays exact. Numbers (a numeric column's ``-5``) are not text and are written as they are."""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ._files import open_regular, write_text_atomic

if TYPE_CHECKING:  # pandas is heavy; imported where used
    import pandas as pd

    from roma_lab.stats import StatsSettings

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# What makes a spreadsheet read a cell as a formula (OWASP's CSV injection list); a plain number is none.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_ESCAPE = "'"


def _escaped(value: Any) -> Any:
    if isinstance(value, str) and (value.startswith(_ESCAPE) or (value.startswith(_FORMULA_START)
                                                                 and not _PLAIN_NUMBER.fullmatch(value))):
        return _ESCAPE + value
    return value


def _unescaped(value: Any) -> Any:
    return value[1:] if isinstance(value, str) and value.startswith(_ESCAPE) else value


def _text_columns(df: pd.DataFrame) -> list[str]:
    import pandas as pd

    return [c for c in df.columns if df[c].dtype == object or isinstance(df[c].dtype, pd.StringDtype)]


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
    never sees half a table, and an interrupted write leaves the previous file intact. Text a
    spreadsheet would run as a formula gets a ``'`` in front (the module's docstring; read_table
    takes it off).
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
    text = _text_columns(df)
    df = df.assign(**{c: df[c].map(_escaped) for c in text})
    # csv quotes a field holding "\n" but not a lone "\r", which a reader takes for the end of the row
    carriage_return = any(df[c].map(lambda v: isinstance(v, str) and "\r" in v).any() for c in text)
    return write_text_atomic(path, df.to_csv(index=False, lineterminator="\n",
                                             quoting=csv.QUOTE_ALL if carriage_return else csv.QUOTE_MINIMAL))


def read_table(out_dir: str | os.PathLike[str], name: str, *, dtype: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Read back a table written by :func:`write_table` (floats round-trip exactly; NaN is an empty cell;
    the ``'`` written before formula-like text taken off). ``dtype``: pandas' read_csv types by column
    (e.g. ``{"task_id": str}`` keeps "007")."""
    import pandas as pd

    path = _table_path(out_dir, name)
    try:
        handle = open_regular(path, "rb")  # a FIFO or folder in its place: DamagedFileError naming it
    except FileNotFoundError:
        raise FileNotFoundError(f"no table {name!r} in {Path(out_dir)} (expected {path})") from None
    # pandas 3 parses floats exactly by default and deprecates the option pandas 2 needs for it.
    exact = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
    with handle:
        df = pd.read_csv(handle, dtype=dict(dtype) if dtype else None, **exact)
    return df.assign(**{c: df[c].map(_unescaped) for c in _text_columns(df)})


@dataclass(frozen=True, slots=True)
class MeasuredTables(Mapping[str, "pd.DataFrame"]):
    """One paper's tables as measured: tidy DataFrames by file stem (``tables["table2_summary"]`` is
    ``<out_dir>/table2_summary.csv``), the paper's figures beside ours in the ``*_vs_paper`` ones,
    the folder they were written to and the statistics settings they were computed with (None: the
    tables use no statistics). Each paper wing names its own subclass (``RomaTables``, ``RoutingTables``)."""

    tables: Mapping[str, pd.DataFrame]
    out_dir: Path | None = None
    stats: StatsSettings | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tables", MappingProxyType(dict(self.tables)))  # frozen all the way down

    def __getitem__(self, name: str) -> pd.DataFrame:
        try:
            return self.tables[name]
        except KeyError:
            raise KeyError(f"no table {name!r} here; the tables are {sorted(self.tables)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.tables)

    def __len__(self) -> int:
        return len(self.tables)

    @property
    def vs_paper(self) -> pd.DataFrame:
        """Every ``<artefact>_vs_paper`` table, stacked, with the table it came from in ``table``."""
        import pandas as pd

        parts = [df.assign(table=name) for name, df in self.tables.items() if name.endswith("_vs_paper")]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
