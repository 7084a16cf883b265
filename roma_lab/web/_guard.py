"""The rule for URLs a model chooses: no request reaches this machine's own network.

A URL is fetched only if its scheme is http or https, it carries no credentials, and every address
its host resolves to is globally reachable: loopback, private (RFC 1918, unique-local IPv6),
link-local (169.254.0.0/16 with the cloud metadata services on 169.254.169.254 and
169.254.170.2, fe80::/10), CGNAT (100.64.0.0/10, Alibaba's metadata on 100.100.100.200),
multicast, reserved, unspecified and every other special-purpose block are refused, also when
wrapped in an IPv6 address (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, NAT64
``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo). A host on the user's allow list (``host`` or
``host:port``, e.g. the offline web's ``127.0.0.1:8765``) is exempt. The check runs again on every
redirect (the fetcher follows them itself), and the request then connects to the address that was
checked, never to a second lookup's answer: a DNS server that answers a public address to the check
and a private one to the connection (DNS rebinding) cannot steer it.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._errors import RefusedURLError, WebDeadlineError

__all__ = ["Guard", "Target", "address_refusal"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: host, port -> the addresses it resolves to (as getaddrinfo's text forms).
Resolver = Callable[[str, int], Sequence[str]]

_NET = ipaddress.ip_network
# Named first so a refusal says what the address is; any other address that is not globally
# reachable (ipaddress's IANA special-purpose registries) is refused after them.
_NAMED: tuple[tuple[Any, str], ...] = (
    (_NET("169.254.169.254/32"), "the cloud metadata service"),
    (_NET("169.254.170.2/32"), "the container metadata service"),
    (_NET("100.100.100.200/32"), "a cloud metadata service"),
    (_NET("fd00:ec2::254/128"), "the cloud metadata service"),
    (_NET("100.64.0.0/10"), "a carrier-grade NAT (CGNAT) address"),
)
_NAT64 = _NET("64:ff9b::/96")
_COMPAT = _NET("::/96")  # IPv4-compatible IPv6 (deprecated), ::a.b.c.d


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries to an IPv4 host, if it is one of the forms that does."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]  # (server, client): the client is where traffic ends up
    if ip in _NAT64 or (ip in _COMPAT and int(ip) > 1):  # ::/128 and ::1 are themselves below
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(address: str | IPAddress) -> str | None:
    """Why a request must not go to ``address`` (a sentence naming what it is), or None for a
    globally reachable one."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:  # fe80::1%eth0: a link's own address
            return f"{ip} is a link-local address"
        inner = _embedded_ipv4(ip)
        if inner is not None:
            why = address_refusal(inner)
            return f"{ip} wraps {why}" if why else None
    for network, what in _NAMED:
        if ip.version == network.version and ip in network:
            return f"{ip} is {what}"
    for test, what in (("is_unspecified", "the unspecified address"), ("is_loopback", "a loopback address"),
                       ("is_link_local", "a link-local address"), ("is_multicast", "a multicast address"),
                       ("is_reserved", "a reserved address"), ("is_private", "a private address")):
        if getattr(ip, test):
            return f"{ip} is {what}"
    if not ip.is_global:
        return f"{ip} is not a globally reachable address"
    return None


def _system_resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))  # each address once, in the resolver's order


@dataclass(frozen=True, slots=True)
class Target:
    """A checked URL and where to connect for it: ``address`` is the IP the check passed (the one
    the request must connect to), ``host``/``port`` what the URL names (the Host header, the TLS
    server name)."""

    url: Any  # httpx.URL, parsed once: what is checked is what is requested
    host: str
    port: int
    address: str

    def connect_url(self) -> Any:
        """The URL with its host replaced by the checked address (an IPv6 one in brackets)."""
        return self.url.copy_with(host=self.address)

    def host_header(self) -> str:
        default = 443 if self.url.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def _host_key(host: str, port: int | None = None) -> str:
    host = host.lower().rstrip(".")
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return host if port is None else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class Guard:
    """Checks URLs against the rule above. ``allow_hosts``: hosts exempt from it, as ``host`` (every
    port) or ``host:port``, an IPv6 host in brackets (``[::1]:8765``). ``resolve``: the name lookup
    (the system's getaddrinfo unless given; tests pass a fake DNS)."""

    allow_hosts: tuple[str, ...] = ()
    resolve: Resolver | None = field(default=None, repr=False, compare=False)

    def allows(self, host: str, port: int) -> bool:
        allowed = {a.strip().lower() for a in self.allow_hosts}
        return _host_key(host) in allowed or _host_key(host, port) in allowed

    def check(self, url: str, *, timeout_s: float) -> Target:
        """The :class:`Target` for ``url``; RefusedURLError saying why it is refused. The lookup is
        bounded by ``timeout_s`` (a WebDeadlineError past it: getaddrinfo itself has no timeout)."""
        import httpx

        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError, ValueError) as err:
            raise RefusedURLError(f"{url!r:.200} is not a URL ({err})") from None
        if parsed.scheme not in ("http", "https"):
            raise RefusedURLError(f"{url!r:.200}: only http and https URLs are fetched, not {parsed.scheme or 'no'} scheme")
        if parsed.userinfo:
            raise RefusedURLError(f"{url!r:.200}: URLs with credentials in them are not fetched")
        host = parsed.raw_host.decode("ascii")  # an IDN as punycode: what is looked up and sent
        if not host:
            raise RefusedURLError(f"{url!r:.200} names no host")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        allowed = self.allows(host, port)
        try:
            addresses = [str(ipaddress.ip_address(host))]  # a literal address: no lookup
        except ValueError:
            addresses = self._lookup(host, port, timeout_s)
        if not addresses:
            raise RefusedURLError(f"{host} resolves to no address")
        if not allowed:
            # every address is checked: a name that resolves to a public and a private address is
            # refused, whichever the connection would have picked
            for address in addresses:
                why = address_refusal(address)
                if why is not None:
                    named = "" if address == host else f"{host} resolves to {address}: "
                    raise RefusedURLError(f"{url!r:.200} is refused: {named}{why} (a host the user allows is "
                                          f"fetched: allow_hosts=({_host_key(host, port)!r},))")
        return Target(parsed, host, port, addresses[0])

    def _lookup(self, host: str, port: int, timeout_s: float) -> list[str]:
        resolve = self.resolve or _system_resolve
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = list(resolve(host, port))
            except Exception as err:  # noqa: BLE001 - reported below as a refusal
                box["error"] = err

        worker = threading.Thread(target=run, daemon=True, name="roma_lab-web-dns")
        worker.start()
        worker.join(max(timeout_s, 0.0))
        if worker.is_alive():  # left to end on its own: a lookup cannot be cancelled
            raise WebDeadlineError(f"looking up {host} took longer than the call's deadline")
        if "error" in box:
            raise RefusedURLError(f"{host} cannot be resolved ({box['error']})")
        for address in box["value"]:
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise RefusedURLError(f"{host} resolved to {address!r}, which is not an IP address") from None
        return box["value"]
