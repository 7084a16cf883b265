"""``python -m roma_lab.widgets export NOTEBOOK [-o OUT]``: an executed notebook as one offline HTML page."""

from __future__ import annotations

import argparse

from ._export import export_html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m roma_lab.widgets", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="write an executed notebook as HTML that needs no network")
    export.add_argument("notebook")
    export.add_argument("-o", "--out", help="output file (default: the notebook's name with .html)")
    args = parser.parse_args(argv)
    print(export_html(args.notebook, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
