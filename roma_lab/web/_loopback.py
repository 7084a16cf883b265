"""A threaded HTTP server on 127.0.0.1 (never another interface), for the offline web and the stubs."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["LOOPBACK", "LoopbackServer", "QuietHandler"]

LOOPBACK = "127.0.0.1"


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, logging nothing (a test's or a notebook's output stays clean)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # the base class names it format
        pass

    def send_body(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class LoopbackServer:
    """Serves ``handler`` on 127.0.0.1:``port`` (0: a free port) from a thread of its own: ``start()``
    / ``stop()``, or ``with``. ``release`` is set on stop, ending any request a handler holds open."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, port: int = 0, name: str = "roma_lab-loopback"):
        self.release = threading.Event()
        self._server = ThreadingHTTPServer((LOOPBACK, port), handler)
        self._server.daemon_threads = True
        # a short poll: stopping waits for it (the default 0.5 s would be most of a test's time)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=name,
                                        daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self):
        """Serve (a second call does nothing: ``with serve_offline_web(...)`` starts once)."""
        if not self._thread.is_alive() and not self.release.is_set():
            self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (the command line's way); ``stop`` after."""
        self._server.serve_forever()
