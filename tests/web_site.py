"""A scripted web site on loopback for the reader's and the URL guard's tests.

``Site({"/path": Route(...)})`` answers each path with its route: a status, headers and a body, sent
whole or dripped a byte at a time (``drip_s``), or held after the headers (``stall``); every request's
path and Host header is kept in ``requests``, and the most requests in flight at once in ``peak``.
"""

from __future__ import annotations

import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from online_server import LoopbackServer


@dataclass(frozen=True)
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    drip_s: float | None = None
    stall: bool = False
    hold_s: float = 0.0


def redirect(location: str, status: int = 302) -> Route:
    return Route(status, b"", {"Location": location})


def tiny_pdf(text: str, title: str) -> bytes:
    """A one-page PDF showing ``text`` in Helvetica, with ``title`` in its metadata."""
    content = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                b"/Resources << /Font << /F1 5 0 R >> >> >>"),
               b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               b"<< /Title (%s) >>" % title.encode()]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


class Site(LoopbackServer):
    def __init__(self, routes: dict[str, Route], *, port: int = 0):
        self.routes = routes
        self.requests: list[tuple[str, str]] = []  # (path, Host header)
        self.headers: list[dict[str, str]] = []  # each request's headers, names in lower case
        self.peak = 0
        self._active = 0
        self._lock = threading.Lock()
        self.release = threading.Event()
        super().__init__(self._handler(), name="web-site", port=port)
        # stop within 50 ms (serve_forever's default poll is 0.5 s)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _release(self) -> None:
        self.release.set()

    def _handler(self):
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                with site._lock:
                    site.requests.append((self.path, self.headers.get("Host", "")))
                    site.headers.append({k.lower(): v for k, v in self.headers.items()})
                    site._active += 1
                    site.peak = max(site.peak, site._active)
                try:
                    self._answer(site.routes.get(self.path.split("?")[0]) or Route(404, b"no such page"))
                finally:
                    with site._lock:
                        site._active -= 1

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.do_GET()

            def _answer(self, route: Route) -> None:
                if route.hold_s:
                    time.sleep(route.hold_s)
                self.send_response(route.status)
                headers = {"Content-Type": "text/html; charset=utf-8", **route.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                if route.stall:
                    site.release.wait(60)
                    return
                if route.drip_s is None:
                    self.wfile.write(route.body)
                    return
                for i in range(len(route.body)):
                    if site.release.wait(route.drip_s):
                        return
                    try:
                        self.wfile.write(route.body[i:i + 1])
                        self.wfile.flush()
                    except OSError:
                        return

        return Handler


def tls_pair(hostname: str, folder) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(a server context with a certificate for ``hostname`` signed by a fresh CA, a client context
    trusting that CA only); the keys and certificates are written to ``folder``."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject: str, key, issuer: str, issuer_key, ca: bool):
        builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = certificate("test CA", ca_key, "test CA", ca_key, True)
    leaf = certificate(hostname, leaf_key, "test CA", ca_key, False)
    folder = Path(folder)
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (folder / "leaf.key").write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM,
                                                             serialization.PrivateFormat.PKCS8,
                                                             serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "leaf.pem", folder / "leaf.key")
    client = ssl.create_default_context(cafile=str(folder / "ca.pem"))
    return server, client


class TlsSite(Site):
    """A Site over TLS; ``server_names`` holds the SNI name each handshake asked for."""

    def __init__(self, routes: dict[str, Route], context: ssl.SSLContext):
        super().__init__(routes)
        self.server_names: list[str | None] = []
        context.sni_callback = lambda sock, name, ctx: self.server_names.append(name)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.port}"
