"""One environment-settings object (issue 40): every ROMA_LAB_* variable the package reads is named
in roma_lab._environment.ENV, and none is named twice."""

from __future__ import annotations

import re
from pathlib import Path

from roma_lab._environment import ENV

PACKAGE = Path(__file__).resolve().parents[1] / "roma_lab"


def test_every_variable_the_package_names_is_declared_once_and_only_there():
    names = ENV.names()
    assert len(set(names)) == len(names) and all(n.startswith("ROMA_LAB_") for n in names)
    spelled = {}
    for path in PACKAGE.rglob("*.py"):
        for name in re.findall(r"[\"'](ROMA_LAB_[A-Z_]+)[\"']", path.read_text(encoding="utf-8")):
            spelled.setdefault(name, []).append(path.relative_to(PACKAGE).as_posix())
    assert {n: where for n, where in spelled.items() if where != ["_environment.py"]} == {}
    assert set(spelled) == set(names)
