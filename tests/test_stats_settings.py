"""StatsSettings is the one place the statistics defaults live (issue 22).

Two guards: no function in the package writes its own default for a statistics setting (a source
scan, so a new copy fails even in a module no test imports), and every public function that takes
``n_resamples`` gets its default from ``DEFAULT_STATS`` (the very object, not an equal literal) or
takes ``stats=DEFAULT_STATS`` and resolves ``n_resamples=None`` through it.
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
    assert DEFAULT_STATS.as_dict() == {"n_resamples": 2000, "seed": 0, "level": 0.95, "alpha": 0.05, "power": 0.8}
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_STATS.n_resamples = 10  # type: ignore[misc]


def test_override_replaces_only_what_is_given():
    assert DEFAULT_STATS.override(n_resamples=None, seed=None) == DEFAULT_STATS
    changed = DEFAULT_STATS.override(n_resamples=50, seed=3)
    assert changed.as_dict() == DEFAULT_STATS.as_dict() | {"n_resamples": 50, "seed": 3}
    assert DEFAULT_STATS.n_resamples == 2000  # the default itself is untouched


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


def _public_functions_taking_n_resamples():
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if callable(obj) and not inspect.isclass(obj):
                try:
                    parameters = inspect.signature(obj).parameters
                except (TypeError, ValueError):
                    continue
                if "n_resamples" in parameters:
                    yield f"{module_name}.{name}", parameters


def test_public_functions_take_their_defaults_from_stats_settings():
    found = dict(_public_functions_taking_n_resamples())
    assert len(found) >= 20, sorted(found)  # the guard must see the functions it guards
    wrong = []
    for name, parameters in found.items():
        default = parameters["n_resamples"].default
        if "stats" in parameters:
            ok = default is None and parameters["stats"].default is DEFAULT_STATS
        else:
            ok = default is DEFAULT_STATS.n_resamples
            ok &= all(parameters[s].default is getattr(DEFAULT_STATS, s)
                      for s in ("level", "alpha", "power") if s in parameters)
        if not ok:
            wrong.append(f"{name}: n_resamples={default!r}")
    assert not wrong, "defaults not taken from StatsSettings:\n" + "\n".join(wrong)


def test_a_study_records_the_settings_it_used():
    from roma_lab.papers.oagents import audit_paper_numbers

    assert audit_paper_numbers().stats is DEFAULT_STATS
    assert audit_paper_numbers(alpha=0.1).stats == DEFAULT_STATS.override(alpha=0.1)
