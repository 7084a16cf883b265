"""Tidy result tables and the provenance record written next to them.

Every experiment writes long-format CSV tables with :func:`write_table` and one
``provenance.json`` (a :class:`Provenance`) that says what produced them.
"""

from ._files import QuarantineWarning, quarantine, quarantined_files, write_text_atomic
from ._provenance import (
    PROVENANCE_FILE,
    TRACKED_PACKAGES,
    Provenance,
    ProvenanceError,
    changed_outputs,
    default_repo_root,
    git_state,
    package_source_hash,
    package_versions,
    parameters_hash,
    read_provenance,
    sha256_file,
    write_provenance,
)
from ._tables import read_table, write_table

__all__ = [
    "PROVENANCE_FILE",
    "TRACKED_PACKAGES",
    "Provenance",
    "ProvenanceError",
    "QuarantineWarning",
    "changed_outputs",
    "default_repo_root",
    "git_state",
    "package_source_hash",
    "package_versions",
    "parameters_hash",
    "quarantine",
    "quarantined_files",
    "read_provenance",
    "read_table",
    "sha256_file",
    "write_provenance",
    "write_table",
    "write_text_atomic",
]
