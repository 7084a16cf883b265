"""``python -m roma_lab.widgets export NOTEBOOK [-o OUT]``: an executed notebook as one offline HTML page.
A missing or unreadable notebook, or an output that cannot be written, is one line on stderr and exit 2."""

from __future__ import annotations

from roma_lab._cli import CommandParser, refuse

from ._export import export_html


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="python -m roma_lab.widgets", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="write an executed notebook as HTML that needs no network")
    export.add_argument("notebook", help="an executed notebook (.ipynb)")
    export.add_argument("-o", "--out", help="output file (default: the notebook's name with .html)")
    args = parser.parse_args(argv)
    try:
        print(export_html(args.notebook, args.out))
    except (OSError, ValueError) as err:  # ValueError: not a notebook, or not a regular file (DamagedFileError)
        return refuse(err)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
