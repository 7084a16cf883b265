"""roma_lab._lazy: a package's DSPy-backed names import their module on first use, not before."""

import subprocess
import sys

import pytest

from roma_lab._lazy import lazy_exports


def test_lazy_names_load_their_module_on_first_use_only():
    code = ("import sys, roma_lab.controller, roma_lab.papers.roma;"
            "before = 'dspy' in sys.modules;"
            "from roma_lab.controller import Planner;"
            "from roma_lab.papers.roma import table7_gepa;"
            "print(before, 'dspy' in sys.modules, Planner.__module__, table7_gepa.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "roma_lab.controller._roles", "roma_lab.papers.roma._gepa_tables"]


def test_other_names_are_missing_attributes_naming_the_package():
    getattr_ = lazy_exports("roma_lab.results", "._tables", ["write_table"])
    assert getattr_("write_table").__name__ == "write_table"
    with pytest.raises(AttributeError, match="module 'roma_lab.results' has no attribute 'nope'"):
        getattr_("nope")
