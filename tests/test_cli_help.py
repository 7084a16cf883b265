"""Every flag and argument of the command lines a user runs says what it is in ``--help`` (issue 52:
``--runs`` had none)."""

from __future__ import annotations

import argparse
import importlib

import pytest

# roma_lab.papers.routing's CLI is left out while its wing is being reworked (issue 52 item 8);
# roma_lab/lm/_native_build.py is the Makefile's build step, not a user's command.
CLIS = {
    "roma_lab.evaluate.__main__": [["x"], ["migrate", "x"]],
    "roma_lab.experiments._cli": [["list"]],
    "roma_lab.simulator._cli": [["x", "--model", "a=0.5"]],
    "roma_lab.web.__main__": [["x"]],
    "roma_lab.widgets.__main__": [["export", "x"]],
}


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser


def _parser(module: str, argv: list[str]) -> argparse.ArgumentParser:
    """The parser ``module.main(argv)`` builds, caught as it parses (nothing runs)."""
    def caught(self, *args, **kwargs):
        raise _Parsed(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", caught)
        with pytest.raises(_Parsed) as parsed:
            importlib.import_module(module).main(argv)
    return parsed.value.parser


def _without_help(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _without_help(sub, f"{prefix}{name} ")
        elif not isinstance(action, argparse._HelpAction) and not action.help:
            missing.append(prefix + "/".join(action.option_strings or [action.dest]))
    return missing


@pytest.mark.parametrize("module", CLIS)
def test_every_flag_of_a_cli_has_help(module):
    for argv in CLIS[module]:
        assert _without_help(_parser(module, argv)) == [], (module, argv)


def test_the_check_finds_a_flag_without_help():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int)
    commands = parser.add_subparsers()
    commands.add_parser("export").add_argument("notebook")
    assert _without_help(parser) == ["--runs", "export notebook"]
