"""StatsSettings is the one place the statistics defaults live (issue 22).

Guards: no function in the package writes its own default for a statistics setting (a source
scan, so a new copy fails even in a module no test imports); the primitives of ``roma_lab.stats``
take their plain keywords' defaults from ``DEFAULT_STATS`` (the very object's fields, not equal
literals); every public function above them takes one ``stats=DEFAULT_STATS`` instead.
"""

import ast
import dataclasses
import importlib
import inspect
from pathlib import Path

import pytest

import roma_lab
from roma_lab.stats import DEFAULT_STATS, StatsSettings

PACKAGE = Path(roma_lab.__file__).resolve().parent
SETTINGS_FILE = PACKAGE / "stats" / "_settings.py"
#: Keyword names that are statistics settings wherever they appear with a number as default.
#: (``seed`` is left out: in the studies it is also the seed of the task sample and the policies.)
STATS_NAMES = ("n_resamples", "level", "alpha", "power")
PUBLIC_MODULES = ("roma_lab.stats", "roma_lab.results", "roma_lab.bench", "roma_lab.router",
                  "roma_lab.papers.routing", "roma_lab.papers.oagents", "roma_lab.papers.roma")


def test_defaults_are_the_protocol_defaults_and_frozen():
    assert DEFAULT_STATS == StatsSettings()
    assert DEFAULT_STATS.as_dict() == {"n_resamples": 2000, "seed": 0, "level": 0.95, "alpha": 0.05, "power": 0.8,
                                       "paired_ci": "t"}
    with pytest.raises(ValueError, match="paired_ci"):
        StatsSettings(paired_ci="studentized")
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_STATS.n_resamples = 10  # type: ignore[misc]


def _numeric_defaults(tree: ast.AST):
    """(line, function, argument, value) for every statistics argument whose default is a number."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        args = node.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            if arg.arg in STATS_NAMES and isinstance(default, ast.Constant) and isinstance(default.value, (int, float)):
                yield default.lineno, getattr(node, "name", "<lambda>"), arg.arg, default.value


def test_no_module_writes_its_own_statistics_default():
    copies = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == SETTINGS_FILE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        copies += [f"{path.relative_to(PACKAGE.parent)}:{line} {func}({arg}={value!r})"
                   for line, func, arg, value in _numeric_defaults(tree)]
        # an argparse option is a default too
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and any(isinstance(a, ast.Constant) and a.value == "--n-resamples"
                                                   for a in node.args)):
                copies += [f"{path.relative_to(PACKAGE.parent)}:{k.value.lineno} --n-resamples default"
                           for k in node.keywords if k.arg == "default" and isinstance(k.value, ast.Constant)]
    assert not copies, "statistics defaults written outside roma_lab/stats/_settings.py:\n" + "\n".join(copies)


def _public_functions():
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if callable(obj) and not inspect.isclass(obj):
                try:
                    parameters = inspect.signature(obj).parameters
                except (TypeError, ValueError):
                    continue
                yield module_name, f"{module_name}.{name}", parameters


def test_the_primitives_take_their_defaults_from_stats_settings():
    found = {name: p for module, name, p in _public_functions() if module == "roma_lab.stats" and "n_resamples" in p}
    assert {"roma_lab.stats.bootstrap_ci", "roma_lab.stats.paired_bootstrap_ci", "roma_lab.stats.paired_ci"} <= set(found)
    wrong = [name for name, parameters in found.items()
             if not all(parameters[s].default is getattr(DEFAULT_STATS, s)
                        for s in ("n_resamples", "seed", "level") if s in parameters)]
    # the paired CI's method is a setting too: the tables' one place to choose it
    assert found["roma_lab.stats.paired_ci"]["method"].default is DEFAULT_STATS.paired_ci
    assert not wrong, "defaults not taken from StatsSettings: " + ", ".join(wrong)


def test_above_the_primitives_one_stats_keyword_replaces_the_five():
    """results, bench, router and the papers take ``stats=DEFAULT_STATS``, never the settings one by one."""
    above = [(name, p) for module, name, p in _public_functions() if module != "roma_lab.stats"]
    with_stats = {name for name, parameters in above if "stats" in parameters}
    assert {"roma_lab.results.compare", "roma_lab.results.summarize", "roma_lab.results.summarize_protocol",
            "roma_lab.bench.summarize_results", "roma_lab.bench.compare_systems",
            "roma_lab.router.summarize_routes", "roma_lab.papers.roma.run_roma_table",
            "roma_lab.papers.routing.reproduce_tables", "roma_lab.papers.oagents.measure_protocol"} <= with_stats
    # the provenance writers (record_stats, write_provenance) record settings given to them: no default
    wrong = [f"{name}: stats={parameters['stats'].default!r}" for name, parameters in above
             if "stats" in parameters and parameters["stats"].default not in (inspect.Parameter.empty, None)
             and parameters["stats"].default is not DEFAULT_STATS]
    # ``level`` elsewhere names a task's level breakdown (papers.oagents.run_study), not a CI level
    copies = [f"{name}({s}=...)" for name, parameters in above
              for s in ("n_resamples", "alpha", "power") if s in parameters]
    assert not wrong and not copies, "statistics settings not taken as one StatsSettings:\n" + "\n".join(wrong + copies)


def test_a_study_records_the_settings_it_used():
    from roma_lab.papers.oagents import audit_paper_numbers

    assert audit_paper_numbers().stats is DEFAULT_STATS
    stricter = StatsSettings(alpha=0.1)
    audit = audit_paper_numbers(stats=stricter)
    assert audit.stats is stricter
