"""The one rule of every ``python -m roma_lab...`` command: a bad value or a known error is one line on
stderr starting ``error:``, and exit status 2, before anything runs where it can be; never a traceback,
never argparse's usage block (``--help`` shows it)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

__all__ = ["CommandParser", "port", "positive_int", "refuse"]


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


class CommandParser(argparse.ArgumentParser):
    """argparse with a usage error as one line like the command's other errors (subcommands too:
    argparse makes them of their parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {_one_line(message)} (`{self.prog} --help` shows the usage)\n")


def port(text: str) -> int:
    """argparse's type of a TCP port to serve on: 0 (any free port) to 65535."""
    if not (text.isdigit() and int(text) <= 65535):
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535 (0: any free port), got {text!r}")
    return int(text)


def positive_int(text: str) -> int:
    """argparse's type of a count that must be at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number >= 1, got {text!r}")
    return value


def refuse(error: object) -> int:
    """Say ``error`` (an exception or a message) as one line on stderr; the exit status to return: 2."""
    print(f"error: {_one_line(error)}", file=sys.stderr)
    return 2
