"""A scripted OpenAI-compatible server on loopback, for tests about which server a reply came from.

``StubServer`` answers ``POST /v1/chat/completions`` with the next of its ``replies`` (the last one
repeats) and ``GET /v1/models`` with ``models`` (None: 404, as a server without that route), and
counts what it was asked; ``hold`` (if given) is called before each completion is sent, e.g. to
count the requests it holds at once; ``usage`` is the usage block every reply reports. Two of them with different replies tell apart which server answered;
no model runs, so these tests need neither weights nor the network. ``port`` reuses an address, as
a server restarted on another model would.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from online_server import LoopbackServer


class StubServer(LoopbackServer):
    def __init__(self, replies: list[str], *, models: list[dict] | None = None, port: int = 0,
                 hold_models: threading.Event | None = None, hold: Callable[[], None] | None = None,
                 usage: dict | None = None):
        self.replies = list(replies)
        self.usage = usage or {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
        self.hold = hold
        self.models = models
        self.hold_models = hold_models  # GET /models waits for it (at most 60 s): a server that never lists
        self.completions: list[dict] = []  # request bodies received, in order
        self.model_lists = 0  # GET /models received
        self._lock = threading.Lock()
        super().__init__(self._handler(), name="stub-openai", port=port)

    def _release(self) -> None:
        if self.hold_models is not None:
            self.hold_models.set()

    def _reply_text(self, body: dict) -> str:
        with self._lock:
            self.completions.append(body)
            return self.replies[min(len(self.completions), len(self.replies)) - 1]

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if not self.path.rstrip("/").endswith("/models"):
                    return self._send(404, {"error": {"message": "not found"}})
                with stub._lock:
                    stub.model_lists += 1
                if stub.hold_models is not None:
                    stub.hold_models.wait(60)
                if stub.models is None:
                    return self._send(404, {"error": {"message": "no such route"}})
                self._send(200, {"object": "list", "data": stub.models})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": "not found"}})
                text = stub._reply_text(body)
                if stub.hold is not None:
                    stub.hold()
                self._send(200, {
                    "id": f"stub-{len(stub.completions)}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "stub"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                    "usage": stub.usage,
                })

        return Handler
