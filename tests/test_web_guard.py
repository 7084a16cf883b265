"""roma_lab.web's URL guard: a URL a model chose never reaches this machine's network (checked after
name resolution, on every redirect, connecting to the checked address), unless the user allows the host."""

from __future__ import annotations

import pytest
from web_site import Route, Site, TlsSite, redirect, tls_pair

from roma_lab.web import Guard, RefusedURLError, Web, WebConnectionError, WebSettings, address_refusal

REFUSED = {
    "127.0.0.1": "loopback", "127.8.9.10": "loopback", "0.0.0.0": "unspecified", "10.1.2.3": "private",
    "172.16.0.1": "private", "192.168.1.1": "private", "169.254.169.254": "the cloud metadata service",
    "169.254.170.2": "the container metadata service", "169.254.1.1": "link-local",
    "100.64.0.1": "carrier-grade NAT", "100.100.100.200": "a cloud metadata service", "224.0.0.1": "multicast",
    "239.255.255.250": "multicast", "240.0.0.1": "reserved", "255.255.255.255": "reserved", "192.0.2.1": "private",
    "198.18.0.1": "private", "::1": "loopback", "::": "unspecified", "fe80::1": "link-local", "fe80::1%1": "link-local",
    "fc00::1": "private", "fd12:3456::1": "private", "fd00:ec2::254": "the cloud metadata service", "ff02::1": "multicast",
    "::ffff:127.0.0.1": "wraps 127.0.0.1 is a loopback", "::ffff:169.254.169.254": "wraps 169.254.169.254 is the cloud",
    "::ffff:10.0.0.1": "wraps 10.0.0.1 is a private", "::127.0.0.1": "wraps 127.0.0.1", "64:ff9b::7f00:1": "wraps 127.0.0.1",
    "64:ff9b::a9fe:a9fe": "wraps 169.254.169.254", "2002:7f00:1::": "wraps 127.0.0.1",
    "2001:0:4136:e378:8000:63bf:80ff:fffe": "wraps 127.0.0.1",  # Teredo, client 127.0.0.1
    "2001:db8::1": "private",
}
PUBLIC = ("93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808")


@pytest.mark.parametrize("address", sorted(REFUSED))
def test_every_private_special_or_wrapped_address_is_refused_saying_what_it_is(address):
    assert REFUSED[address] in (address_refusal(address) or "")


@pytest.mark.parametrize("address", PUBLIC)
def test_globally_reachable_addresses_pass(address):
    assert address_refusal(address) is None


def fake_dns(table: dict[str, list[str]], asked: list[str] | None = None):
    def resolve(host: str, port: int) -> list[str]:
        if asked is not None:
            asked.append(host)
        if host not in table:
            raise OSError(f"unknown host {host}")
        return table[host]
    return resolve


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/", "http://localhost:8080/admin", "https://[::1]/", "http://[::ffff:127.0.0.1]:80/",
    "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/", "http://0.0.0.0:22/",
    "http://2130706433/", "http://0x7f.1/", "http://0177.0.0.1/", "http://10.0.0.1.nip.io.internal/",
    "http://internal.corp/", "http://mixed.example/", "http://100.100.100.200/latest/meta-data/",
])
def test_urls_naming_or_resolving_to_private_addresses_are_refused(url):
    dns = fake_dns({"internal.corp": ["10.20.30.40"], "mixed.example": ["93.184.216.34", "192.168.0.10"],
                    "10.0.0.1.nip.io.internal": ["10.0.0.1"], "localhost": ["127.0.0.1", "::1"]})
    real = url.split("/")[2] in ("2130706433", "0x7f.1", "0177.0.0.1")  # inet_aton forms: the system resolver's job
    with pytest.raises(RefusedURLError, match="is refused|is not a URL"):  # httpx refuses 0177.0.0.1 itself
        Guard(resolve=None if real else dns).check(url, timeout_s=5)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/", "gopher://x/", "javascript:alert(1)",
                                 "data:text/html,hi", "http://user:pass@example.com/", "http:///nohost", "not a url"])
def test_other_schemes_credentials_and_non_urls_are_refused(url):
    with pytest.raises(RefusedURLError):
        Guard(resolve=fake_dns({"example.com": ["93.184.216.34"]})).check(url, timeout_s=5)


def test_a_public_host_passes_and_is_pinned_to_its_checked_address():
    target = Guard(resolve=fake_dns({"public.example": ["93.184.216.34"]})).check("https://public.example:8443/a?b=1",
                                                                                   timeout_s=5)
    assert (target.host, target.port, target.address) == ("public.example", 8443, "93.184.216.34")
    assert str(target.connect_url()) == "https://93.184.216.34:8443/a?b=1" and target.host_header() == "public.example:8443"
    v6 = Guard(resolve=fake_dns({"six.example": ["2606:4700:4700::1111"]})).check("http://six.example/", timeout_s=5)
    assert str(v6.connect_url()) == "http://[2606:4700:4700::1111]/" and v6.host_header() == "six.example"


def test_the_allow_list_exempts_exactly_the_hosts_it_names():
    guard = Guard(allow_hosts=("127.0.0.1:8765", "LocalHost", "[::1]:9000"),
                  resolve=fake_dns({"localhost": ["127.0.0.1"]}))
    assert guard.check("http://127.0.0.1:8765/doc/x", timeout_s=5).address == "127.0.0.1"
    assert guard.check("http://localhost:1234/", timeout_s=5).address == "127.0.0.1"  # a host without a port: every port
    assert guard.check("http://[::1]:9000/", timeout_s=5).address == "::1"
    for url in ("http://127.0.0.1:8766/", "http://127.0.0.1/", "http://[::1]:9001/", "http://169.254.169.254/"):
        with pytest.raises(RefusedURLError):
            guard.check(url, timeout_s=5)


def test_a_redirect_to_a_private_address_is_refused_and_never_requested():
    with Site({"/secret": Route(200, b"internal")}) as inside:
        targets = {"/to-loopback": redirect(f"{inside.base}/secret"),
                   "/to-localhost": redirect(f"http://localhost:{inside.port}/secret", 301),
                   "/to-metadata": redirect("http://169.254.169.254/latest/meta-data/iam/", 307),
                   "/to-v6-mapped": redirect(f"http://[::ffff:127.0.0.1]:{inside.port}/secret", 308),
                   "/to-file": redirect("file:///etc/passwd"),
                   "/hop": redirect("/to-loopback")}
        with Site(targets) as outside:
            # the first hop is a host the user allows (a public site stands in here for one): what follows is not
            settings = WebSettings(search="wikipedia", allow_hosts=(f"public.example:{outside.port}",), deadline_s=10)
            dns = fake_dns({"public.example": ["127.0.0.1"], "localhost": ["127.0.0.1"]})
            with Web(settings, resolve=dns) as web:
                for path in targets:
                    with pytest.raises(RefusedURLError, match="is refused|only http and https"):
                        web.read(f"http://public.example:{outside.port}{path}")
        assert inside.requests == []


def test_the_request_goes_to_the_checked_address_with_the_name_as_host_header():
    """DNS rebinding: the check's answer is the one connected to. The name below does not resolve on this
    machine, so a second lookup by the HTTP client would fail the read."""
    asked: list[str] = []
    with Site({"/page": Route(200, b"plain words", {"Content-Type": "text/plain"})}) as site:
        settings = WebSettings(allow_hosts=("rebind.example",), deadline_s=10)
        with Web(settings, resolve=fake_dns({"rebind.example": ["127.0.0.1"]}, asked)) as web:
            page = web.read(f"http://rebind.example:{site.port}/page")
    assert page.text == "plain words" and page.url == f"http://rebind.example:{site.port}/page"
    assert site.requests == [("/page", f"rebind.example:{site.port}")] and asked == ["rebind.example"]


def test_a_name_that_does_not_resolve_is_refused():
    with pytest.raises(RefusedURLError, match="cannot be resolved"):
        Guard(resolve=fake_dns({})).check("http://nowhere.example/", timeout_s=5)


def test_https_connects_to_the_checked_address_with_the_name_as_tls_server_name(tmp_path, monkeypatch):
    """The certificate is checked against the URL's name although the connection is to an address."""
    import httpx

    server_context, client_context = tls_pair("pinned.example", tmp_path)
    real_client = httpx.Client
    monkeypatch.setattr(httpx, "Client", lambda **kw: real_client(verify=client_context, **kw))  # trust the test CA
    dns = fake_dns({"pinned.example": ["127.0.0.1"], "impostor.example": ["127.0.0.1"]})
    with TlsSite({"/page": Route(200, b"over tls", {"Content-Type": "text/plain"})}, server_context) as site:
        allowed = ("pinned.example", "impostor.example")
        with Web(WebSettings(allow_hosts=allowed, deadline_s=10, retries=0), resolve=dns) as web:
            page = web.read(f"https://pinned.example:{site.port}/page")
            assert page.text == "over tls" and site.server_names == ["pinned.example"]
            assert site.requests == [("/page", f"pinned.example:{site.port}")]
            with pytest.raises(WebConnectionError, match="certificate"):  # its certificate names pinned.example only
                web.read(f"https://impostor.example:{site.port}/page")
