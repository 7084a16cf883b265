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
import contextlib
import contextvars
import json
import os
import secrets
import signal
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from roma_lab._environment import ENV
from roma_lab.trace import RomaSettings, ToolCall, ToolStatus, clip, jsonable, reference

from ._artifacts import RUN_STORE, ArtifactError, ArtifactRef

if TYPE_CHECKING:
    import dspy

_CLOSE_S = 10.0  # bound on closing the run's MCP connections (the SDK's own shutdown waits are ~6 s)
_LIST_PAGES = 100  # a server whose tool listing never ends cannot hang a run
_REAP_S = 5.0  # bound on waiting for a stdio server's killed processes to disappear
_MARKER = ENV.mcp_server  # in a stdio server's environment: its descendants inherit it


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

_DEFAULT_RESULT_CHARS = RomaSettings().max_tool_result_chars  # also for a tool called outside a ROMA role call

@dataclass(slots=True)
class ToolLog:
    """Where the tool calls of one role call are recorded (set by the controller around the call)."""

    t0: float  # the run's clock origin (time.monotonic())
    timeout_s: float
    calls: list[ToolCall] = field(default_factory=list)
    max_result_chars: int | None = _DEFAULT_RESULT_CHARS  # the run's max_tool_result_chars (None: never cut)


TOOL_LOG: contextvars.ContextVar[ToolLog | None] = contextvars.ContextVar("roma_tool_log", default=None)
_DEFAULT_TIMEOUT_S = 30.0  # a tool called outside a ROMA role call (RomaSettings' default)


def tool_result_limit() -> int | None:
    """The current role call's ``max_tool_result_chars`` (None: never cut)."""
    log = TOOL_LOG.get()
    return log.max_result_chars if log is not None else _DEFAULT_RESULT_CHARS


def record_tool_call(name: str, server: str | None, arguments: Mapping[str, Any], started: float, *,
                     status: ToolStatus, result_chars: int | None, error: str | None, shown_chars: int | None = None,
                     artifact: str | None = None, cost: float | None = 0.0, replayed: bool = False,
                     latency_s: float | None = None) -> None:
    """Add one :class:`ToolCall` to the role call in progress (nothing outside one): ``started`` on
    ``time.monotonic()``'s clock, ``latency_s`` the time since then unless given, ``cost`` what the
    call was billed (None: unknown), ``replayed`` served from a recording. :func:`traced_call` records
    through it; so does a tool that makes its calls itself (the web room's search-then-read)."""
    log = TOOL_LOG.get()
    if log is not None:
        log.calls.append(ToolCall(name=name, server=server, arguments=jsonable(dict(arguments)), status=status,
                                  result_chars=result_chars,
                                  latency_s=time.monotonic() - started if latency_s is None else latency_s,
                                  started_s=started - log.t0, error=error, shown_chars=shown_chars,
                                  artifact=artifact, cost=cost, replayed=replayed))


def _as_text(result: Any) -> str:
    """A built-in tool's result as the model reads it: text, other values as JSON."""
    if isinstance(result, str):
        return result
    return json.dumps(jsonable(result), ensure_ascii=False)


def _text_chars(result: Any) -> int:
    return len(_as_text(result))


@dataclass(frozen=True, slots=True)
class _Cut:
    """A tool result cut to ``max_tool_result_chars``: what the model is shown instead, and the
    artifact holding the whole text (``None``: the run has no artifact store)."""

    shown: str
    artifact: str | None


async def _cut(text: str, limit: int) -> _Cut:
    """Cut ``text`` as a context cuts a long dependency result (``clip``) and, when the run has an
    artifact store, keep the whole of it there and name it as an artifact output is named."""
    store = RUN_STORE.get()
    if store is None:
        return _Cut(clip(text, limit), None)
    ref = await asyncio.to_thread(store.put, text)
    return _Cut(f"{clip(text, limit)}\n{reference(ref)}", ref.id)


def _typed(err: BaseException, name: str, server: str | None) -> ToolCallError:
    if isinstance(err, ToolCallError):
        return err
    return ToolFailedError(name, server, f"{type(err).__name__}: {err}")


async def traced_call(name: str, server: str | None, arguments: Mapping[str, Any],
                      call: Callable[[], Awaitable[Any]], *, text: Callable[[Any], str] = _as_text,
                      shown: Callable[[str], Any] = str) -> Any:
    """Await ``call()`` as one traced tool call, bounded by the run's ``tool_timeout_s`` whether or not
    the call honours cancellation. Raises a :class:`ToolCallError` on any failure. A result whose
    ``text`` is longer than ``max_tool_result_chars`` is cut (:func:`_cut`): the caller gets
    ``shown(cut text)`` and the trace records the whole size, the size shown and the artifact."""
    log = TOOL_LOG.get()
    timeout_s = log.timeout_s if log is not None else _DEFAULT_TIMEOUT_S
    limit = tool_result_limit()
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
        record_tool_call(name, server, arguments, started, status=err.status, result_chars=None, error=str(err))
        raise err
    try:
        result = task.result()
    except Exception as raised:  # noqa: BLE001 - every failure becomes a typed, recorded one
        err = _typed(raised, name, server)
        record_tool_call(name, server, arguments, started, status=err.status, result_chars=None, error=str(err))
        raise err from raised
    whole = text(result)
    if limit is None or len(whole) <= limit:
        record_tool_call(name, server, arguments, started, status="ok", result_chars=len(whole), error=None)
        return result
    try:
        cut = await _cut(whole, limit)
    except ArtifactError as raised:
        err = ToolFailedError(name, server, f"its result of {len(whole):,} characters is over "
                                            f"max_tool_result_chars={limit} and could not be stored: {raised}")
        record_tool_call(name, server, arguments, started, status=err.status, result_chars=None, error=str(err))
        raise err from raised
    record_tool_call(name, server, arguments, started, status="ok", result_chars=len(whole), error=None,
            shown_chars=len(cut.shown), artifact=cut.artifact)
    return shown(cut.shown)


def traced_sync(name: str, server: str | None, arguments: Mapping[str, Any], call: Callable[[], Any]) -> Any:
    """Run a fast local tool (reading an artifact) as one traced call, in the caller's thread. Its
    own typed error is re-raised unchanged (e.g. ``ArtifactMissingError``), recorded as ``error``."""
    started = time.monotonic()
    try:
        result = call()
    except Exception as err:
        record_tool_call(name, server, arguments, started, status="error", result_chars=None,
                error=f"{type(err).__name__}: {err}")
        raise
    record_tool_call(name, server, arguments, started, status="ok", result_chars=_text_chars(result), error=None)
    return result


def read_artifact(ref: ArtifactRef | str) -> str:
    """The full text of an artifact of the current ROMA run: the typed accessor for roles that need
    more than the summary in their context. Only inside a role call of a run with a store."""
    store = RUN_STORE.get()
    if store is None:
        raise ArtifactError("read_artifact works inside a role call of a ROMA run that has an artifact store")
    name = ref.id if isinstance(ref, ArtifactRef) else ref
    return traced_sync("read_artifact", None, {"ref": name}, lambda: store.read_text(ref))


# --- MCP servers ---

@dataclass(frozen=True, slots=True)
class McpServer:
    """An MCP server for a run's executors: a command started over stdio, or a Streamable HTTP URL.

    ``env`` is added to the few variables the SDK passes on (PATH, HOME, ...): the server gets no
    other secrets of this process. ``headers`` go with every request to an HTTP server (an
    ``Authorization`` header with a key, so the key never goes in the URL). Neither is shown by
    ``repr`` nor recorded (:meth:`describe` names their keys only). A run starts (or connects to)
    each server when it begins.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("an MCP server needs a name (it labels its tool calls in the trace)")
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: give exactly one of command (stdio) and url (HTTP)")
        if self.headers and self.url is None:
            raise ValueError(f"MCP server {self.name!r}: headers go with an HTTP server's requests (url=...)")
        object.__setattr__(self, "args", tuple(self.args))

    @classmethod
    def stdio(cls, name: str, command: str, *args: str, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> McpServer:
        return cls(name, command=command, args=args, env=dict(env or {}), cwd=cwd)

    @classmethod
    def http(cls, name: str, url: str, *, headers: Mapping[str, str] | None = None) -> McpServer:
        return cls(name, url=url, headers=dict(headers or {}))

    def describe(self) -> dict[str, Any]:
        """The server as a run's record names it: where it is, and the names (never the values) of
        the variables and headers it is given, which may hold keys."""
        where = {"url": self.url} if self.url is not None else {"command": self.command, "args": list(self.args)}
        return {"name": self.name, **where, "env": sorted(self.env), "headers": sorted(self.headers)}

    def _target(self, processes: _ServerProcesses | None) -> Any:
        if self.url is not None:
            return _http_with_headers(self.url, self.headers) if self.headers else self.url
        from mcp import StdioServerParameters

        argv = processes.argv([self.command, *self.args])
        return StdioServerParameters(command=argv[0], args=argv[1:], env={**self.env, _MARKER: processes.marker},
                                     cwd=self.cwd)


@contextlib.asynccontextmanager
async def _http_with_headers(url: str, headers: Mapping[str, str]):
    """The SDK's Streamable HTTP transport with ``headers`` on every request (its own client's
    timeouts: 30 s, and 300 s to read a held-open stream)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=dict(headers), timeout=httpx2.Timeout(30.0, read=300.0)) as http, \
            streamable_http_client(url, http_client=http) as streams:
        yield streams


class _ServerProcesses:
    """Every process a stdio MCP server starts, so that all of them end with the run (:meth:`end`).

    The SDK starts the server as a process group of its own but ends the group only when the
    server outlives its stdin: children of a server that exits or crashes, and daemons that call
    ``setsid``, would live on. So the server runs in a cgroup of its own where one can be made
    (``Cgroup.join_argv``; nothing leaves a cgroup by ``setsid``), and its environment carries a
    marker its descendants inherit: at the end the cgroup is killed, and every process still
    carrying the marker is killed with its process group. Without a cgroup, a daemon that both
    calls ``setsid`` and clears its environment escapes (design/mcp.md)."""

    def __init__(self, server: McpServer):
        from ._cgroup import Cgroup, CgroupUnavailableError, cgroup_problem

        self.server = server.name
        self.marker = secrets.token_hex(16)
        self.cgroup = None
        if cgroup_problem() is None:
            try:
                self.cgroup = Cgroup.create("mcp")
            except CgroupUnavailableError as err:  # e.g. a full parent; the marker still finds them
                warnings.warn(f"MCP server {server.name!r} runs without a cgroup: {err}", stacklevel=2)
        self._lock = threading.Lock()

    def argv(self, argv: list[str]) -> list[str]:
        return argv if self.cgroup is None else self.cgroup.join_argv(argv)

    def end(self) -> None:
        """Kill every process of the server and wait (bounded) until they are gone. Thread-safe
        (the keeper task and the run's end may both call it); each call sweeps again, since the
        run's end may come while its abandoned loop is still starting the server (a server started
        after its cgroup was removed cannot join it and does not start)."""
        with self._lock:
            if self.cgroup is not None:
                try:
                    self.cgroup.remove()  # idempotent
                except (OSError, TimeoutError) as err:  # the marker sweep below still runs
                    warnings.warn(f"MCP server {self.server!r}: its cgroup could not be removed: {err}",
                                  stacklevel=2)
            left = _kill_marked(self.marker)
        if left:
            warnings.warn(f"MCP server {self.server!r}: processes {left} still alive {_REAP_S:g} s after SIGKILL",
                          stacklevel=2)


def _kill_marked(marker: str) -> list[int]:
    """SIGKILL every process whose environment carries ``marker``, and its process group (never this
    process's own); returns those still alive after ``_REAP_S``."""
    import psutil

    own_group = os.getpgrp()
    marked = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(_MARKER) == marker:
                marked.append(proc)
        except (psutil.Error, OSError):  # gone, a zombie, or another user's process
            continue
    for proc in marked:
        try:
            group = os.getpgid(proc.pid)
            if group != own_group:
                os.killpg(group, signal.SIGKILL)  # members that cleared the marker go too
            proc.kill()
        except (psutil.Error, OSError):
            continue
    _, alive = psutil.wait_procs(marked, timeout=_REAP_S)
    return [p.pid for p in alive]


def _mcp_text(result: Any) -> str:
    """An MCP tool result as text: its text contents, other contents as JSON (its structured content
    repeats them, so it is not counted twice)."""
    from mcp.types import TextContent

    return "\n".join(c.text if isinstance(c, TextContent) else c.model_dump_json() for c in result.content)


def _mcp_shown(text: str) -> Any:
    """A cut MCP result: one text content (structured content dropped: the cut text no longer matches it)."""
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text)])


@dataclass(frozen=True, slots=True)
class _TracedSession:
    """What ``dspy.Tool.from_mcp_tool`` calls a tool through: the SDK client, with every call traced
    and every failure typed (classified by exception type and MCP error code, never by message)."""

    client: Any  # mcp.Client, entered
    server: str

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        return await traced_call(name, self.server, arguments or {}, lambda: self._call(name, arguments or {}),
                                 text=_mcp_text, shown=_mcp_shown)

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
        self._processes: list[_ServerProcesses] = []

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

        processes = None
        try:
            if server.url is None:
                processes = await asyncio.to_thread(_ServerProcesses, server)
                self._processes.append(processes)
            async with Client(server._target(processes), read_timeout_seconds=timeout_s) as client:
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
        finally:
            if processes is not None:  # the server's children and daemons end with its connection
                await asyncio.shield(asyncio.to_thread(processes.end))

    async def close(self) -> None:
        self._closing.set()
        if self._keepers:
            await asyncio.wait(self._keepers, timeout=_CLOSE_S)

    def end_processes(self) -> None:
        """End every stdio server's processes now, from any thread: a run that returns at its
        deadline, while its loop may be blocked, does not wait for the keepers to do it."""
        for processes in list(self._processes):
            processes.end()


# The current run's MCP tools, for executors (a ContextVar: each run sees only its own).
RUN_TOOLS: contextvars.ContextVar[tuple] = contextvars.ContextVar("roma_run_tools", default=())


def run_tools() -> tuple[dspy.Tool, ...]:
    """The MCP tools of the ROMA run this role call belongs to (empty outside a run, or without servers)."""
    return RUN_TOOLS.get()
