"""A real OpenAI-compatible server for the online-path tests, and a fault-injecting proxy before it.

``LlamaServer`` runs llama-cpp-python's own server (``python -m llama_cpp.server``, the
``llama-cpp-python[server]`` extra) on the small embedded model, on 127.0.0.1, in its own process
group: started with a readiness poll that gives up after ``READY_TIMEOUT_S`` (a hang guard, not a
speed check), stopped by killing the group. ``FaultProxy`` stands between the client and that server
and forwards every request, recording what the server answered (its ``usage`` included); told to,
it produces the HTTP faults a real llama.cpp server cannot be asked for (429, 500, a body that is not
JSON, a reply that comes too late). The model server itself is never faked. ``LoopbackServer`` is
the threaded loopback HTTP server under the proxy and under ``stub_openai.StubServer``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SERVED_NAME = "smollm2-135m"  # the server's --model_alias; clients call it as openai/<this>
READY_TIMEOUT_S = 120.0  # hang guard for start-up (model load), never a speed assertion
FAULTS = ("429", "500", "malformed", "slow")


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


class LoopbackServer:
    """An HTTP server on 127.0.0.1 answering with ``handler`` on its own thread: it serves inside
    ``with`` and shuts down on exit, after :meth:`_release` has let go of any request it holds open.
    ``port`` 0 lets the OS pick one; ``api_base`` is its OpenAI-style ``/v1`` address. The base of the
    fault proxy here and of the scripted ``stub_openai.StubServer``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, name: str, port: int = 0):
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._release()
        self._server.shutdown()
        self._server.server_close()

    def _release(self) -> None:
        """End every request held open (nothing by default), so shutdown does not wait for them."""


class LlamaServer:
    """llama-cpp-python's OpenAI-compatible server on the small embedded model, on loopback."""

    def __init__(self, log_dir: Path, port: int | None = None):
        self.port = port or free_port()
        self.log_path = Path(log_dir) / f"llama-server-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaServer:
        from roma_lab.lm import MODELS, model_file

        model = model_file(MODELS["smollm2-135m"])  # the verified GGUF file roma_lab loads in-process
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", SERVED_NAME,
                   "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "4096",
                   "--n_threads", "1", "--n_threads_batch", "1"]  # one core: other work shares the machine
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)  # its own group, killed whole
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _answers(f"{self.api_base}/models"):
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}; log: "
                                   f"{self.log_path.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"llama_cpp.server not ready after {READY_TIMEOUT_S:g} s; log: {self.log_path}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        """Kill the server's process group (SIGKILL: a killed server is one of the faults) and reap it."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)


@dataclass
class Exchange:
    """One request the proxy received and what went back (``fault`` names an injected one)."""

    path: str
    request: dict
    authorization: str | None  # the key the client sent
    status: int | None
    response: dict | None
    fault: str | None = None


@dataclass
class _Plan:
    fault: str | None = None
    times: int | None = None  # None: every request until cleared
    hold_s: float = 0.0
    on_request: list = field(default_factory=list)
    retry_after: str | None = "0"


class FaultProxy(LoopbackServer):
    """Reverse proxy on loopback before ``upstream`` (an http://host:port origin).

    ``inject(kind, times=None)`` makes the next ``times`` requests (all, when None) fail with
    ``kind``: "429" (rate limit, ``Retry-After: <retry_after>``, by default 0; ``retry_after=None``
    sends no hint, so the client backs off on its own schedule), "500", "malformed" (the server's reply, cut off
    inside a JSON string, as HTTP 200), "slow" (the request is held ``hold_s`` seconds before it is
    forwarded; at teardown it is dropped instead). When the upstream cannot be
    reached or drops the connection, the client's connection is closed without a reply, as a dead
    server's would be. ``exchanges`` records every other request and the reply sent back. ``GET
    .../models`` (what ``ServerLM`` asks once per address to learn what is served) is forwarded
    untouched and only counted in ``model_lists``: faults and request counts are the completions'.
    """

    def __init__(self, upstream_port: int, *, max_tokens_cap: int | None = None):
        self.upstream_port = upstream_port
        # A server-side limit on reply length (as llama.cpp's own server has with --n-predict), for
        # runs whose requests ask for more than a test can wait for; the model still answers them.
        self.max_tokens_cap = max_tokens_cap
        self.exchanges: list[Exchange] = []
        self.model_lists = 0
        self.release = threading.Event()  # ends every hold at once (teardown)
        self._plan = _Plan()
        self._lock = threading.Lock()
        super().__init__(self._handler(), name="fault-proxy")

    def _release(self) -> None:
        self.release.set()

    def inject(self, kind: str | None, *, times: int | None = None, hold_s: float = 0.0,
               retry_after: str | None = "0") -> None:
        if kind is not None and kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}; one of {FAULTS}")
        with self._lock:
            self._plan = _Plan(kind, times, hold_s, self._plan.on_request, retry_after)

    def on_request(self, hook) -> None:
        """Call ``hook(n)`` (n = requests received so far) before each request is forwarded."""
        self._plan.on_request.append(hook)

    def completions(self) -> list[Exchange]:
        """The chat completions the real server answered (no injected fault, a JSON reply)."""
        return [e for e in self.exchanges if e.path.endswith("/chat/completions") and e.fault is None
                and e.status == 200 and e.response is not None]

    def _next_fault(self) -> _Plan:
        with self._lock:
            plan = self._plan
            if plan.fault is None:
                return plan
            if plan.times is not None:
                plan.times -= 1
                if plan.times <= 0:
                    self._plan = _Plan(None, None, 0.0, plan.on_request)
            return plan

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    with proxy._lock:
                        proxy.model_lists += 1
                    return self._relay(b"")
                self._forward(b"")

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _upstream(self, body: bytes):
                """(reply, payload) from the server, or None when it is dead (the connection then ends)."""
                try:
                    upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=300)
                    upstream.request(self.command, self.path, body=body or None,
                                     headers={"Content-Type": "application/json"})
                    reply = upstream.getresponse()
                    payload = reply.read()
                    upstream.close()
                except (OSError, http.client.HTTPException):
                    self.close_connection = True  # a dead server: the connection ends with no reply
                    return None
                return reply, payload

            def _relay(self, body: bytes) -> None:
                answered = self._upstream(body)
                try:
                    if answered is not None:
                        self._reply(answered[0].status, answered[1])
                except OSError:  # the client gave up first
                    self.close_connection = True

            def _forward(self, body: bytes) -> None:
                try:
                    request = json.loads(body) if body else {}
                except ValueError:
                    request = {"unparsed": body.decode(errors="replace")}
                exchange = Exchange(self.path, request, self.headers.get("Authorization"), None, None)
                proxy.exchanges.append(exchange)
                for hook in list(proxy._plan.on_request):
                    hook(len(proxy.exchanges))
                plan = proxy._next_fault()
                exchange.fault = plan.fault
                if plan.fault == "429":
                    exchange.status = 429
                    self._reply(429, b'{"error": {"message": "rate limited (injected)", "type": "rate_limit"}}',
                                {} if plan.retry_after is None else {"Retry-After": plan.retry_after})
                    return
                if plan.fault == "500":
                    exchange.status = 500
                    self._reply(500, b'{"error": {"message": "internal error (injected)", "type": "server_error"}}')
                    return
                if plan.fault == "slow" and proxy.release.wait(plan.hold_s):
                    self.close_connection = True  # released at teardown: the reply never comes
                    return
                if proxy.max_tokens_cap and isinstance(request.get("max_tokens"), int):
                    body = json.dumps({**request, "max_tokens": min(request["max_tokens"], proxy.max_tokens_cap)}).encode()
                answered = self._upstream(body)
                if answered is None:
                    return
                reply, payload = answered
                exchange.status = reply.status
                try:
                    exchange.response = json.loads(payload)
                except ValueError:
                    exchange.response = None
                if plan.fault == "malformed":  # the real reply, cut inside a string: HTTP 200, not JSON
                    payload = payload.partition(b'"choices"')[0] + b'"choices": [{"message": {"content": "cut'
                try:
                    self._reply(reply.status, payload)
                except OSError:  # the client gave up (timed out) before the held reply came
                    self.close_connection = True

        return Handler


# --- pytest fixtures (imported by the tests/test_online_*.py modules) ---------------------------------


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """One real server per test module; tests that kill a server start their own."""
    server = LlamaServer(tmp_path_factory.mktemp("llama-server")).start()
    yield server
    server.stop()


@pytest.fixture
def proxy(llama_server):
    with FaultProxy(llama_server.port) as fault_proxy:
        yield fault_proxy


@contextlib.contextmanager
def fresh_dspy_cache(directory, monkeypatch):
    """DSPy's request cache (memory and disk) in ``directory`` while the block runs, its disk cache
    closed after: each one holds 48 descriptors (16 shards x 3 SQLite files), and a test session that
    left them open reached descriptor 1,429."""
    import dspy
    from dspy.clients.cache import Cache

    cache = Cache(True, True, str(directory))
    monkeypatch.setattr(dspy, "cache", cache, raising=False)
    try:
        yield cache
    finally:
        cache.disk_cache.close()


@pytest.fixture(autouse=True)
def online_isolation(tmp_path, monkeypatch):
    """A fresh DSPy request cache per test, in this process and in any it starts (a request cached
    by another test or run would never reach the server), roma_lab's own cache in tmp, no model
    or server named by the environment, and no server's model list remembered."""
    monkeypatch.setenv("DSPY_CACHEDIR", str(tmp_path / "dspy-cache"))  # the same for a notebook's kernel
    monkeypatch.setenv("ROMA_LAB_CACHE", str(tmp_path / "roma-cache"))
    for name in ("ROMA_LAB_LM", "ROMA_LAB_API_BASE", "ROMA_LAB_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    # what each server said it serves is kept per process: a proxy port used again is another server
    monkeypatch.setattr("roma_lab.lm._server._identities", {})
    with fresh_dspy_cache(tmp_path / "dspy-cache", monkeypatch):
        yield
