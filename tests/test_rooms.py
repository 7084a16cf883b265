"""The house rules every room keeps: no room imports another room's private module or name, no file
grows past what a reader can hold, and the item runner is called from one place only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "roma_lab"
MAX_LINES = 700


def room_of(module: str) -> str:
    """The room of a dotted module name: ``roma_lab.<room>``, or ``roma_lab.papers.<paper>`` (a paper
    wing is a room of its own); a top-level ``roma_lab._x`` module is shared ground, its own room."""
    parts = module.split(".")
    if parts[0] != "roma_lab" or len(parts) == 1:
        return module
    return ".".join(parts[:3]) if parts[1] == "papers" and len(parts) > 2 else ".".join(parts[:2])


def module_of(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def private_imports(path: Path) -> list[str]:
    """Every import in ``path`` of another room's private module (``roma_lab.x._y``) or private name."""
    here = module_of(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                target = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [(target, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [(alias.name, None) for alias in node.names]
        else:
            continue
        for target, name in names:
            if not target.startswith("roma_lab.") or room_of(target) == room_of(here):
                continue
            inside = target[len(room_of(target)):].split(".")
            if any(part.startswith("_") for part in inside if part) or (name or "").startswith("_"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports "
                             f"{target}{'.' + name if name else ''}")
    return found


def sources() -> list[Path]:
    return sorted([*PACKAGE.rglob("*.py"), *(ROOT / "speed").glob("*.py")])


def test_no_room_imports_another_rooms_private_module_or_name():
    found = [line for path in sources() for line in private_imports(path)]
    assert not found, "\n".join(found)


def test_the_rule_sees_a_private_import_across_rooms_and_allows_one_within_a_room(tmp_path, monkeypatch):
    # the check must be able to fail: a planted import of another room's private module is found
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    room = tmp_path / "roma_lab" / "evaluate"
    room.mkdir(parents=True)
    (room / "_x.py").write_text("from roma_lab.lm._cache import FRESH_ENV\nfrom roma_lab.bench import _grade\n"
                                "from ._log import read_log\nfrom roma_lab._concurrent import concurrent_map\n"
                                "from ..papers.roma._systems import SYSTEMS\n")
    found = private_imports(room / "_x.py")
    assert [line.split(" imports ")[1] for line in found] == ["roma_lab.lm._cache.FRESH_ENV", "roma_lab.bench._grade",
                                                              "roma_lab.papers.roma._systems.SYSTEMS"]


# Rooms whose files also offer one another only names without an underscore (a room joins once it does).
NAMED_WITHIN = ("controller", "lm", "simulator", "trace", "tools", "evaluate", "world")


def underscore_imports_within(path: Path) -> list[str]:
    """Every relative import in ``path`` that takes an underscore name from another file of its room."""
    return [f"{path.relative_to(ROOT)}:{node.lineno} takes {alias.name}"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.level
            for alias in node.names if alias.name.startswith("_")]


def test_within_a_named_room_files_offer_each_other_public_names():
    found = [line for room in NAMED_WITHIN for path in sorted((PACKAGE / room).rglob("*.py"))
             for line in underscore_imports_within(path)]
    assert not found, "\n".join(found)


def test_the_within_room_rule_sees_an_underscore_name(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    (tmp_path / "a.py").write_text("from ._loop import _is_async\nfrom ._loop import RunState\n")
    assert underscore_imports_within(tmp_path / "a.py") == ["a.py:1 takes _is_async"]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_file_of_the_package_is_longer_than_a_reader_can_hold(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines; split it by job (at most {MAX_LINES})"


def test_the_item_runner_is_called_from_evaluate_only():
    callers = sorted(str(path.relative_to(ROOT)) for path in sources()
                     if path.name != "_schedule.py" and "run_jobs(" in path.read_text(encoding="utf-8"))
    assert callers == ["roma_lab/evaluate/_evaluate.py"]
