"""Typed papermill runner: ``experiments/<stem>.toml`` specs -> ``results/<stem>/``.

Command line: ``python -m roma_lab.experiments list`` and
``python -m roma_lab.experiments run [STEM ...] [--all] [--smoke] [--lm MODEL] [--force] [--cluster NAME]
[--per item|notebook] [--set NAME=VALUE ...]`` (a Dask cluster: design/cluster.md; ``--set N_TASKS=100`` sizes
a run, design/runner.md) and ``python -m roma_lab.experiments times``
(the README's run-time table from the provenance files, each run's time beside the time predicted for it);
``plan`` and ``probe`` (this machine's speed, which the plan scales the specs' figures by): design/planning.md.
"""

from ._contract import contract_problems, notebook_problems
from ._key import experiment_status, run_parameters
from ._runner import RunOutcome, run_experiment, run_experiments
from ._spec import ExperimentSpec, OverrideError, SpecError, declared_parameters, load_spec, load_specs
from ._times import RunTime, run_times, times_markdown

__all__ = [
    "ExperimentSpec",
    "OverrideError",
    "RunOutcome",
    "RunTime",
    "SpecError",
    "contract_problems",
    "declared_parameters",
    "experiment_status",
    "load_spec",
    "load_specs",
    "notebook_problems",
    "run_experiment",
    "run_experiments",
    "run_parameters",
    "run_times",
    "times_markdown",
]
