"""Tidy CSV tables: one file per table, written atomically, read back exactly; and the frozen
type a paper's entry functions return them in."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from ._files import write_text_atomic

if TYPE_CHECKING:  # pandas is heavy; imported where used
    import pandas as pd

    from roma_lab.stats import StatsSettings

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
