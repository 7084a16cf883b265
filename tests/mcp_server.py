"""A small MCP server for the controller's MCP tests, on the official SDK's low-level ``Server``.

Tools: ``search`` (roma_lab's BM25 over a few fixed passages) and ``calculate`` (arithmetic on
numbers, evaluated from the expression's syntax tree: nothing is executed). Run over stdio:

    python tests/mcp_server.py [--fault KIND] [--http PORT]

``--fault`` breaks the server on purpose: ``no_start`` (never answers the handshake), ``exit``
(exits before it), ``die`` (``calculate`` kills the process), ``hang`` (``calculate`` never returns),
``malformed`` (``calculate`` returns structured content that breaks its declared output schema),
``error`` (``calculate`` reports a tool error), ``big`` (``calculate`` answers with 30 MB of text).
``--spawn FILE`` first starts a plain child and a ``setsid`` daemon (both sleep for an hour) and
writes the pids of this server and of both to FILE, and starts a ``setsid`` daemon with an empty
environment (only a cgroup holds that one) whose pid goes to FILE.clean; ``--wrap`` starts the real server (this script
with the other flags) as a child and waits for it, as launchers like ``npx`` or ``uv run`` do.
``--http PORT`` serves Streamable HTTP on 127.0.0.1 instead of stdio. The low-level server (not ``MCPServer``) because only it lets a test
send an answer that breaks the tool's own declared schema.
"""

from __future__ import annotations

import argparse
import ast
import operator
import os
import subprocess
import sys
import time

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server

PASSAGES = [
    "The Danube flows through ten countries, more than any other river in the world.",
    "The Rhine is 1,233 kilometres long and flows from the Swiss Alps to the North Sea.",
    "The Amazon carries more water than any other river.",
]
BIG_CHARS = 30_000_000  # the size of the ``big`` fault's answer
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.USub: operator.neg}


def calculate(expression: str) -> float:
    """Arithmetic only: numbers and + - * / ** (a tree walk, never eval)."""
    def walk(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.operand))
        raise ValueError(f"not arithmetic: {ast.dump(node)[:80]}")
    return walk(ast.parse(expression, mode="eval").body)


TOOLS = [
    types.Tool(name="search", description="Search a few passages about rivers (BM25); best first.",
               input_schema={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
    types.Tool(name="calculate", description="Evaluate an arithmetic expression, e.g. '6 * 7'.",
               input_schema={"type": "object", "properties": {"expression": {"type": "string"}},
                             "required": ["expression"]},
               output_schema={"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]}),
]


def build(fault: str | None) -> Server:
    retrievers = []  # built on the first search: the fault cases never pay for the index

    def search(query: str) -> list[str]:
        if not retrievers:
            from roma_lab.tools import BM25Retriever

            retrievers.append(BM25Retriever(PASSAGES))
        return [p.text for p in retrievers[0].search(query, k=2)]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx, params) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "search":
            hits = search(str(args.get("query", "")))
            return types.CallToolResult(content=[types.TextContent(type="text", text=h) for h in hits])
        if fault == "die":
            os._exit(1)
        if fault == "hang":
            await anyio.sleep(3600)
        if fault == "error":
            return types.CallToolResult(content=[types.TextContent(type="text", text="division by zero")],
                                        is_error=True)
        value = calculate(str(args.get("expression", "")))
        if fault == "big":
            text = f"{value:g} " + "x" * (BIG_CHARS - len(f"{value:g} "))
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                        structured_content={"value": value})
        if fault == "malformed":  # the declared schema says a number
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(value))],
                                        structured_content={"value": f"{value} (as text)"})
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{value:g}")],
                                    structured_content={"value": value})

    return Server("roma-test-tools", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def spawn(pid_file: str) -> None:
    """A plain child and a daemon that left this process group and session (``setsid``), both
    sleeping for an hour; their pids and this server's go to ``pid_file`` (written whole, then moved)."""
    sleep = [sys.executable, "-c", "import time; time.sleep(3600)"]
    child = subprocess.Popen(sleep, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    daemon = subprocess.Popen(sleep, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    clean = subprocess.Popen(sleep, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
                             env={})
    for name, pids in ((f"{pid_file}.clean", [clean.pid]), (pid_file, [os.getpid(), child.pid, daemon.pid])):
        with open(f"{name}.tmp", "w") as f:
            f.write(" ".join(map(str, pids)) + "\n")
        os.replace(f"{name}.tmp", name)


def _requiring(app, name: str, value: str):
    """The ASGI ``app`` behind a check that every HTTP request carries header ``name: value``."""
    wanted = (name.lower().encode(), value.encode())

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and wanted not in list(scope.get("headers", [])):
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"missing or wrong key"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", choices=["no_start", "exit", "die", "hang", "malformed", "error", "big"])
    parser.add_argument("--http", type=int, help="serve Streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--require-header", metavar="NAME=VALUE",
                        help="over HTTP, answer 401 to a request without this header (a key in a header)")
    parser.add_argument("--spawn", metavar="FILE", help="start a child and a setsid daemon; write the pids to FILE")
    parser.add_argument("--wrap", action="store_true", help="run the server as a child of this process")
    args = parser.parse_args()
    if args.wrap:  # the real server is a child; this wrapper only waits (its stdio is the child's)
        if args.spawn:
            with open(f"{args.spawn}.wrapper", "w") as f:
                f.write(f"{os.getpid()}\n")
        sys.exit(subprocess.call([sys.executable, __file__, *(a for a in sys.argv[1:] if a != "--wrap")]))
    if args.spawn:
        spawn(args.spawn)
    if args.fault == "no_start":
        time.sleep(3600)
    if args.fault == "exit":
        sys.exit(3)
    server = build(args.fault)
    if args.http:
        import uvicorn

        app = server.streamable_http_app()
        if args.require_header:
            app = _requiring(app, *args.require_header.split("=", 1))
        uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()
