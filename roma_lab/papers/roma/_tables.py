"""The one frozen type every ROMA table function returns."""

from dataclasses import dataclass

from roma_lab.results import MeasuredTables


@dataclass(frozen=True, slots=True)
class RomaTables(MeasuredTables):
    """The ROMA paper's tables as measured (Tables 1-8 and the structure and repair studies), by
    file stem, with the paper's figures beside ours in the ``*_vs_paper`` ones."""
