"""Tidy result tables, the provenance record written next to them, and the one results vocabulary.

Every experiment writes long-format CSV tables with :func:`write_table` and one
``provenance.json`` (a :class:`Provenance`) that says what produced them. Every room summarises
scores with :func:`summarize` / :func:`compare` and sets them beside the paper's figures with
:func:`beside_paper` (design/results_vocabulary.md), shown as :func:`compact_beside_paper` and drawn by
:func:`plot_beside_paper`; :func:`summarize_protocol` applies the whole
evaluation protocol (design/protocol.md) to tidy per-run scores, and :func:`calibrate_statistics`
runs simulated studies through it to show the statistics calibrated (design/calibration.md).
"""

from ._files import (
    MAX_NAME_BYTES,
    DamagedFileError,
    QuarantineWarning,
    quarantine,
    quarantined_files,
    read_json_file,
    read_regular_bytes,
    safe_name,
    write_text_atomic,
)
from ._provenance import (
    PROVENANCE_FILE,
    STATS_FILE,
    TRACKED_PACKAGES,
    Provenance,
    ProvenanceError,
    StatsRecord,
    changed_outputs,
    default_repo_root,
    git_state,
    package_source_hash,
    package_versions,
    parameters_hash,
    read_provenance,
    record_stats,
    sha256_file,
    write_provenance,
)
from ._paper import (
    DIFFERS,
    MATCHES,
    NOT_COMPARABLE,
    NOT_IN_PAPER,
    NOT_MEASURED,
    PAPER_COLUMNS,
    TOLERANCE,
    PaperTableError,
    agreement,
    beside_paper,
    read_paper_reported,
)
from ._calibration import CALIBRATION_COLUMNS, CalibrationSettings, calibrate_statistics, plot_calibration
from ._figures import COMPACT_COLUMNS, NOT_A_MEASUREMENT, compact_beside_paper, label_if_not_measured, plot_beside_paper
from ._protocol import PROTOCOL_COLUMNS, TIE_RULE, summarize_protocol
from ._summary import CONDITION, MODEL, as_metrics, compare, models_of, summarize, wide
from ._tables import MeasuredTables, read_table, write_table

__all__ = [
    "CALIBRATION_COLUMNS",
    "CalibrationSettings",
    "COMPACT_COLUMNS",
    "CONDITION",
    "DamagedFileError",
    "MAX_NAME_BYTES",
    "NOT_A_MEASUREMENT",
    "MODEL",
    "DIFFERS",
    "MATCHES",
    "MeasuredTables",
    "NOT_COMPARABLE",
    "NOT_IN_PAPER",
    "NOT_MEASURED",
    "PAPER_COLUMNS",
    "PROTOCOL_COLUMNS",
    "TIE_RULE",
    "TOLERANCE",
    "PaperTableError",
    "TRACKED_PACKAGES",
    "Provenance",
    "agreement",
    "as_metrics",
    "beside_paper",
    "calibrate_statistics",
    "compact_beside_paper",
    "label_if_not_measured",
    "plot_beside_paper",
    "plot_calibration",
    "compare",
    "models_of",
    "PROVENANCE_FILE",
    "ProvenanceError",
    "STATS_FILE",
    "StatsRecord",
    "QuarantineWarning",
    "changed_outputs",
    "default_repo_root",
    "git_state",
    "package_source_hash",
    "package_versions",
    "parameters_hash",
    "read_paper_reported",
    "quarantine",
    "quarantined_files",
    "read_json_file",
    "read_regular_bytes",
    "safe_name",
    "read_provenance",
    "read_table",
    "record_stats",
    "sha256_file",
    "summarize",
    "summarize_protocol",
    "wide",
    "write_provenance",
    "write_table",
    "write_text_atomic",
]
