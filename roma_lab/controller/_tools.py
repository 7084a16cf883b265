"""Tools for executors: built-in (search, sandboxed Python, artifacts) and MCP servers' (paper §2.1).

Every tool call goes through :func:`traced_call` (or :func:`traced_sync`): it is bounded by the
run's ``tool_timeout_s`` without needing the tool's cooperation, any failure becomes a typed
:class:`ToolCallError`, and a :class:`ToolCall` (name, arguments, status, result size, latency,
error) is added to the role call that made it. MCP servers are reached with the official ``mcp``
SDK (``mcp.Client`` over stdio or Streamable HTTP) and their tools turned into DSPy tools by
``dspy.Tool.from_mcp_tool``; a run connects to its servers when it starts and closes them when it
ends, on its own event loop. See design/mcp.md.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ._types import ToolCall, ToolStatus

if TYPE_CHECKING:
    import dspy

_CLOSE_S = 10.0  # bound on closing the run's MCP connections (the SDK's own shutdown waits are ~6 s)
_LIST_PAGES = 100  # a server whose tool listing never ends cannot hang a run


class ToolCallError(RuntimeError):
    """A tool call did not give a usable result. ``status`` is what the trace records."""

    status: ClassVar[ToolStatus] = "error"

    def __init__(self, tool: str, server: str | None, message: str):
        where = f"tool {tool!r}" + (f" of MCP server {server!r}" if server else "")
        super().__init__(f"{where}: {message}")
        self.tool = tool
        self.server = server


class ToolFailedError(ToolCallError):
    """The tool ran and reported an error (an MCP ``isError`` result, or a built-in tool raised)."""


class ToolTimeoutError(ToolCallError):
    """No answer within ``tool_timeout_s``."""

    status = "timed_out"


class ToolServerGoneError(ToolCallError):
    """The tool's MCP server closed the connection (it exited or crashed)."""

    status = "disconnected"


class ToolResultError(ToolCallError):
    """The answer broke the protocol: it does not validate, or its structured content does not match
    the tool's declared output schema."""

    status = "malformed"


class McpServerError(RuntimeError):
    """An MCP server could not be started and listed; the run's root fails with this."""

    def __init__(self, server: str, message: str):
        super().__init__(f"MCP server {server!r} {message}")
        self.server = server


# --- the record of tool calls, per role call ---

@dataclass(slots=True)
class ToolLog:
    """Where the tool calls of one role call are recorded (set by the controller around the call)."""

    t0: float  # the run's clock origin (time.monotonic())
    timeout_s: float
    calls: list[ToolCall] = field(default_factory=list)


_TOOL_LOG: contextvars.ContextVar[ToolLog | None] = contextvars.ContextVar("roma_tool_log", default=None)
_DEFAULT_TIMEOUT_S = 30.0  # a tool called outside a ROMA role call (RomaSettings' default)


def _record(name: str, server: str | None, arguments: Mapping[str, Any], started: float, *,
            status: ToolStatus, result_chars: int | None, error: str | None) -> None:
    log = _TOOL_LOG.get()
    if log is not None:
        from ._roma import _jsonable

        log.calls.append(ToolCall(name=name, server=server, arguments=_jsonable(dict(arguments)), status=status,
                                  result_chars=result_chars, latency_s=time.monotonic() - started,
                                  started_s=started - log.t0, error=error))


def _text_chars(result: Any) -> int:
    if isinstance(result, str):
        return len(result)
    from ._roma import _jsonable

    return len(json.dumps(_jsonable(result), ensure_ascii=False))


def _typed(err: BaseException, name: str, server: str | None) -> ToolCallError:
    if isinstance(err, ToolCallError):
        return err
    return ToolFailedError(name, server, f"{type(err).__name__}: {err}")


async def traced_call(name: str, server: str | None, arguments: Mapping[str, Any],
                      call: Callable[[], Awaitable[Any]], *, size: Callable[[Any], int] = _text_chars) -> Any:
    """Await ``call()`` as one traced tool call, bounded by the run's ``tool_timeout_s`` whether or not
    the call honours cancellation. Raises a :class:`ToolCallError` on any failure."""
    log = _TOOL_LOG.get()
    timeout_s = log.timeout_s if log is not None else _DEFAULT_TIMEOUT_S
    started = time.monotonic()
    task = asyncio.ensure_future(call())
    try:
        # asyncio.wait, not wait_for: wait_for would wait for a tool that ignores its cancellation
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:  # the role call itself was cancelled: stop the tool too
        task.cancel()
        raise
    if not done:
        task.cancel()
        err: ToolCallError = ToolTimeoutError(name, server, f"no answer within {timeout_s:g} s")
        _record(name, server, arguments, started, status=err.status, result_chars=None, error=str(err))
        raise err
    try:
        result = task.result()
    except Exception as raised:  # noqa: BLE001 - every failure becomes a typed, recorded one
        err = _typed(raised, name, server)
        _record(name, server, arguments, started, status=err.status, result_chars=None, error=str(err))
        raise err from raised
    _record(name, server, arguments, started, status="ok", result_chars=size(result), error=None)
    return result


def traced_sync(name: str, server: str | None, arguments: Mapping[str, Any], call: Callable[[], Any]) -> Any:
    """Run a fast local tool (reading an artifact) as one traced call, in the caller's thread. Its
    own typed error is re-raised unchanged (e.g. ``ArtifactMissingError``), recorded as ``error``."""
    started = time.monotonic()
    try:
        result = call()
    except Exception as err:
        _record(name, server, arguments, started, status="error", result_chars=None,
                error=f"{type(err).__name__}: {err}")
        raise
    _record(name, server, arguments, started, status="ok", result_chars=_text_chars(result), error=None)
    return result


# --- MCP servers ---

@dataclass(frozen=True, slots=True)
class McpServer:
    """An MCP server for a run's executors: a command started over stdio, or a Streamable HTTP URL.

    ``env`` is added to the few variables the SDK passes on (PATH, HOME, ...): the server gets no
    other secrets of this process. A run starts (or connects to) each server when it begins.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("an MCP server needs a name (it labels its tool calls in the trace)")
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: give exactly one of command (stdio) and url (HTTP)")
        object.__setattr__(self, "args", tuple(self.args))

    @classmethod
    def stdio(cls, name: str, command: str, *args: str, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> McpServer:
        return cls(name, command=command, args=args, env=dict(env or {}), cwd=cwd)

    @classmethod
    def http(cls, name: str, url: str) -> McpServer:
        return cls(name, url=url)

    def _target(self) -> Any:
        if self.url is not None:
            return self.url
        from mcp import StdioServerParameters

        return StdioServerParameters(command=self.command, args=list(self.args), env=dict(self.env) or None,
                                     cwd=self.cwd)


def _mcp_result_chars(result: Any) -> int:
    """Size of an MCP tool result as text: its text contents, other contents as JSON."""
    from mcp.types import TextContent

    return sum(len(c.text) if isinstance(c, TextContent) else len(c.model_dump_json()) for c in result.content)


@dataclass(frozen=True, slots=True)
class _TracedSession:
    """What ``dspy.Tool.from_mcp_tool`` calls a tool through: the SDK client, with every call traced
    and every failure typed (classified by exception type and MCP error code, never by message)."""

    client: Any  # mcp.Client, entered
    server: str

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        return await traced_call(name, self.server, arguments or {}, lambda: self._call(name, arguments or {}),
                                 size=_mcp_result_chars)

    async def _call(self, name: str, arguments: dict[str, Any]) -> Any:
        import anyio
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT, TextContent
        from pydantic import ValidationError

        try:
            result = await self.client.call_tool(name, arguments)
        except MCPError as err:
            kind = {CONNECTION_CLOSED: ToolServerGoneError, REQUEST_TIMEOUT: ToolTimeoutError}.get(err.code, ToolFailedError)
            raise kind(name, self.server, f"MCP error {err.code}: {err}") from err
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError) as err:
            raise ToolServerGoneError(name, self.server, f"{type(err).__name__}: {err}") from err
        except (ValidationError, RuntimeError) as err:  # the SDK refused the answer it got
            raise ToolResultError(name, self.server, f"{type(err).__name__}: {err}") from err
        if result.is_error:
            text = " ".join(c.text for c in result.content if isinstance(c, TextContent))
            raise ToolFailedError(name, self.server, f"the tool reported an error: {text[:500]}")
        return result


def _leaf(err: BaseException) -> BaseException:
    """The first real exception inside (nested) task-group exception groups."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


class McpConnections:
    """The MCP connections of one run, on the run's event loop: each kept open by a task of its own
    (the SDK's client must be entered and left in one task) until :meth:`close`."""

    def __init__(self) -> None:
        self._closing = asyncio.Event()
        self._keepers: list[asyncio.Task] = []

    async def open(self, server: McpServer, timeout_s: float) -> tuple[dspy.Tool, ...]:
        """Start or reach ``server`` and list its tools, within ``timeout_s`` (else
        :class:`McpServerError`); its tools as DSPy tools whose calls are traced (each call is
        bounded by the role call's ``tool_timeout_s``, see :func:`traced_call`)."""
        import dspy

        ready: asyncio.Future = asyncio.get_running_loop().create_future()
        keeper = asyncio.create_task(self._keep(server, ready, timeout_s))
        self._keepers.append(keeper)
        done, _ = await asyncio.wait({ready}, timeout=timeout_s)
        if not done:
            keeper.cancel()
            raise McpServerError(server.name, f"did not start and list its tools within {timeout_s:g} s")
        if ready.exception() is not None:
            cause = _leaf(ready.exception())
            raise McpServerError(server.name, f"could not be reached: {type(cause).__name__}: {cause}") from cause
        client, tools = ready.result()
        session = _TracedSession(client, server.name)
        return tuple(dspy.Tool.from_mcp_tool(session, tool) for tool in tools)

    async def _keep(self, server: McpServer, ready: asyncio.Future, timeout_s: float) -> None:
        from mcp import Client

        try:
            async with Client(server._target(), read_timeout_seconds=timeout_s) as client:
                tools, cursor = [], None
                for _ in range(_LIST_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                ready.set_result((client, tools))
                await self._closing.wait()
        except asyncio.CancelledError:  # open() gave up on it, or the run is ending
            raise
        except BaseException as err:  # noqa: BLE001 - reported through `ready`, or by the calls that fail
            if not ready.done():
                ready.set_exception(err)
            # after the tools were listed, a broken connection shows in the trace as failed calls

    async def close(self) -> None:
        self._closing.set()
        if self._keepers:
            await asyncio.wait(self._keepers, timeout=_CLOSE_S)


# The current run's MCP tools, for executors (a ContextVar: each run sees only its own).
_RUN_TOOLS: contextvars.ContextVar[tuple] = contextvars.ContextVar("roma_run_tools", default=())


def run_tools() -> tuple[dspy.Tool, ...]:
    """The MCP tools of the ROMA run this role call belongs to (empty outside a run, or without servers)."""
    return _RUN_TOOLS.get()
