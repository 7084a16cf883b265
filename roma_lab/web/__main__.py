"""``python -m roma_lab.web serve --corpus FILE.jsonl [--files DIR] [--port N]``: the offline web on
127.0.0.1, its base URL printed once it serves; Ctrl-C (or SIGTERM) stops it cleanly."""

from __future__ import annotations

import signal
import sys

from roma_lab._cli import CommandParser, port, refuse

from ._offline import OfflineWeb


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="python -m roma_lab.web", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve a corpus as an offline web on 127.0.0.1")
    serve.add_argument("--corpus", required=True, help="a JSONL file of {\"id\", \"text\"} documents")
    serve.add_argument("--files", help="a folder of files to serve too (e.g. CSV ledgers)")
    serve.add_argument("--port", type=port, default=0, help="the port (default: a free one; fix it for replayable runs)")
    args = parser.parse_args(argv)
    try:
        web = OfflineWeb(args.corpus, files=args.files, port=args.port)
    except (OSError, ValueError, TypeError) as err:
        return refuse(f"serve: {err}")

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    print(f"serving {len(web.documents)} documents and {len(web.files)} files at {web.base_url} "
          f"(search: {web.search_spec}; allow_hosts={web.allow_hosts[0]!r})", flush=True)
    try:
        web.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        web.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
