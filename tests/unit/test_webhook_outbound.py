"""The SSRF guard of status webhooks (docs/guarantees.md, Status webhooks): which URLs are called, and how.

A URL is refused when it is not https, carries a user, or its host is (or resolves to) an address
that is not public, in any spelling: dotted, decimal, octal, hex, short, IPv4-mapped, 6to4, NAT64.
`post` connects to the checked IP only (no second resolution), with TLS and Host for the original
hostname, never follows a redirect, caps the body it reads and ends by its timeout. The calls go
to servers on 127.0.0.1 in this process, with `allow_private`; TLS is a real handshake against a
certificate made here for a name that resolves nowhere, which only pinning can reach.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given
from hypothesis import strategies as st
from sendonce.status_webhooks.outbound import (
    MAX_URL_CHARS,
    HttpAnswer,
    Target,
    Unresolvable,
    UnsafeTarget,
    check_url,
    post,
    system_resolver,
    unsafe_reason,
)

from tests.support.ports import free_port

PUBLIC_V4 = "93.184.215.14"
PUBLIC_V6 = "2606:4700:4700::1111"
HOOK_HOST = "hooks.example.test"


def public(host: str, port: int) -> list[str]:
    return [PUBLIC_V4]


def no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"{host} was resolved, though it spells an IP")


def answering(*addresses: str) -> Callable[[str, int], list[str]]:
    return lambda host, port: list(addresses)


def refused(
    url: str, resolve: Callable[[str, int], list[str]] = no_dns, *, allow_private: bool = False
) -> str:
    with pytest.raises(UnsafeTarget) as caught:
        check_url(url, allow_private=allow_private, resolve=resolve)
    return caught.value.reason


# ---------------------------------------------------------------- address classes


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("0.1.2.3", "private"),  # "this network"
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("100.64.0.1", "shared"),
        ("100.127.255.254", "shared"),
        ("169.254.169.254", "metadata"),
        ("169.254.170.2", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("192.0.2.1", "private"),  # documentation
        ("198.18.0.1", "private"),  # benchmarking
        ("192.0.0.8", "special-purpose"),  # IETF protocol assignments
        ("192.88.99.1", "special-purpose"),  # 6to4 relay anycast
        ("3fff::1", "special-purpose"),  # documentation (2024)
        ("2001:db8::1", "private"),  # documentation
        ("fec0::1", "site-local"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "metadata"),
        ("::ffff:10.0.0.1", "private"),
        ("::127.0.0.1", "reserved"),  # IPv4-compatible (deprecated)
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("2002:a9fe:a9fe::1", "metadata"),  # 6to4 of 169.254.169.254
        ("2002:c0a8:101::", "private"),  # 6to4 of 192.168.1.1
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "metadata"),  # NAT64 of 169.254.169.254
        ("64:ff9b:1::1", "reserved"),  # local-use NAT64
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "private"),  # Teredo
    ],
)
def test_given_an_address_that_is_not_public_then_it_is_refused_with_its_class(
    address: str, reason: str
) -> None:
    found = unsafe_reason(ipaddress.ip_address(address))

    assert found is not None
    assert reason in found
    literal = f"[{address}]" if ":" in address else address
    assert reason in refused(f"https://{literal}/hook")
    assert reason in refused("https://hooks.example.com/", answering(address))


@pytest.mark.parametrize(
    "address",
    [PUBLIC_V4, "8.8.8.8", "1.1.1.1", PUBLIC_V6, "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"],
)
def test_given_a_public_address_then_it_is_called(address: str) -> None:
    assert unsafe_reason(ipaddress.ip_address(address)) is None
    target = check_url("https://hooks.example.com/", allow_private=False, resolve=answering(address))

    # A mapped IPv4 is called as the IPv4 it is.
    assert target.addresses == (address.removeprefix("::ffff:"),)


@pytest.mark.parametrize(
    ("host", "meant"),
    [
        ("2130706433", "127.0.0.1"),  # decimal
        ("0x7f000001", "127.0.0.1"),  # hex
        ("0X7F000001", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),  # octal
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),  # short
        ("127.0.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),  # trailing dot
        ("0", "0.0.0.0"),
        ("0x", "0.0.0.0"),
        ("2852039166", "169.254.169.254"),
        ("0xa9fea9fe", "169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("169.254.43518", "169.254.169.254"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        ("012.0.0.1", "10.0.0.1"),
        ("[::ffff:7f00:1]", "127.0.0.1"),
        ("[::FFFF:127.0.0.1]", "127.0.0.1"),
        ("[0:0:0:0:0:ffff:a9fe:a9fe]", "169.254.169.254"),
    ],
)
def test_given_an_ip_spelled_oddly_when_checked_then_it_is_classified_without_dns(
    host: str, meant: str
) -> None:
    reason = refused(f"https://{host}/hook", no_dns)

    assert meant in reason


@pytest.mark.parametrize(
    "host", ["1.2.3.4.5", "256.0.0.1", "1.2.65536", "4294967296", "08.0.0.1", "example.123"]
)
def test_given_a_host_that_ends_in_a_number_but_is_no_ip_then_it_is_refused(host: str) -> None:
    assert "neither a name nor a valid IP" in refused(f"https://{host}/", no_dns)


def test_given_an_oddly_spelled_public_ip_then_it_is_called_in_canonical_form() -> None:
    target = check_url("https://0x08.8.2056:8443/hook", allow_private=False, resolve=no_dns)

    assert (target.host, target.addresses, target.host_header) == ("8.8.8.8", ("8.8.8.8",), "8.8.8.8:8443")


# Every address of each network, in each spelling a client would accept, is refused.
_V4_UNSAFE = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
]
_V6_UNSAFE = [
    "::/128",
    "::1/128",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
    "2001:db8::/32",
    "2001::/32",
]


def _in(network: str) -> st.SearchStrategy[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    net = ipaddress.ip_network(network)
    return st.integers(int(net.network_address), int(net.broadcast_address)).map(
        lambda number: ipaddress.ip_address(number) if net.version == 4 else ipaddress.IPv6Address(number)
    )


def _spellings(address: ipaddress.IPv4Address) -> list[str]:
    number = int(address)
    octets = address.packed
    return [
        str(address),
        str(number),
        hex(number),
        "0" + oct(number)[2:],
        ".".join("0" + oct(octet)[2:] for octet in octets),
        ".".join(hex(octet) for octet in octets),
        f"{octets[0]}.{number & 0xFFFFFF}",
        f"{octets[0]}.{octets[1]}.{number & 0xFFFF}",
        f"[::ffff:{address}]",
        f"[64:ff9b::{address}]",
        f"[2002:{octets[0]:02x}{octets[1]:02x}:{octets[2]:02x}{octets[3]:02x}::1]",
    ]


@given(st.one_of(*(_in(network) for network in _V4_UNSAFE)))
def test_every_ipv4_address_of_an_unsafe_network_in_every_spelling_is_refused(
    address: ipaddress.IPv4Address,
) -> None:
    assert isinstance(address, ipaddress.IPv4Address)
    for spelling in _spellings(address):
        refused(f"https://{spelling}/", no_dns)
    refused("https://hooks.example.com/", answering(str(address)))
    refused("https://hooks.example.com/", answering(f"::ffff:{address}"))


@given(st.one_of(*(_in(network) for network in _V6_UNSAFE)))
def test_every_ipv6_address_of_an_unsafe_network_is_refused(address: ipaddress.IPv6Address) -> None:
    refused(f"https://[{address}]/", no_dns)
    refused("https://hooks.example.com/", answering(str(address)))


@given(st.one_of(_in("8.0.0.0/8"), _in("93.184.0.0/16"), _in("151.101.0.0/16")))
def test_every_address_of_a_public_network_is_called(address: ipaddress.IPv4Address) -> None:
    target = check_url(f"https://{address}/", allow_private=False, resolve=no_dns)

    assert target.addresses == (str(address),)


# ---------------------------------------------------------------- resolution


@pytest.mark.parametrize(
    "answers",
    [
        [PUBLIC_V4, "127.0.0.1"],
        ["10.0.0.1", PUBLIC_V4],
        [PUBLIC_V4, PUBLIC_V6, "fd00:ec2::254"],
        [PUBLIC_V6, "::ffff:192.168.0.1"],
        [PUBLIC_V4, "fe80::1%eth0"],
        [PUBLIC_V4, "not-an-address"],
    ],
)
def test_given_a_host_resolving_to_any_unsafe_address_then_it_is_refused(answers: list[str]) -> None:
    assert "hooks.example.com" in refused("https://hooks.example.com/", answering(*answers))


def test_given_a_host_resolving_to_public_addresses_then_all_are_kept_in_order_without_repeats() -> None:
    resolve = answering(PUBLIC_V6, PUBLIC_V4, "::ffff:" + PUBLIC_V4)

    target = check_url("https://Hooks.Example.com./in?a=1#frag", allow_private=False, resolve=resolve)

    assert target == Target(
        url="https://Hooks.Example.com./in?a=1#frag",
        scheme="https",
        host="hooks.example.com",
        port=443,
        path_and_query="/in?a=1",
        addresses=(PUBLIC_V6, PUBLIC_V4),
    )
    assert target.host_header == "hooks.example.com"


def test_given_the_resolver_is_asked_then_it_gets_the_host_and_the_port() -> None:
    asked: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return [PUBLIC_V4]

    check_url("https://hooks.example.com:8443/", allow_private=False, resolve=resolve)

    assert asked == [("hooks.example.com", 8443)]


@pytest.mark.parametrize(
    "resolve",
    [
        answering(),
        pytest.param(
            lambda host, port: (_ for _ in ()).throw(socket.gaierror(-2, "Name unknown")), id="gaierror"
        ),
    ],
)
def test_given_a_host_that_does_not_resolve_then_it_is_unresolvable(
    resolve: Callable[[str, int], list[str]],
) -> None:
    with pytest.raises(Unresolvable, match="could not be resolved"):
        check_url("https://hooks.example.com/", allow_private=False, resolve=resolve)


def test_the_system_resolver_answers_addresses() -> None:
    assert "127.0.0.1" in system_resolver("127.0.0.1", 443)


# ---------------------------------------------------------------- the URL itself


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://hooks.example.com/", "https://"),
        ("HTTP://hooks.example.com/", "https://"),
        ("ftp://hooks.example.com/", "https://"),
        ("file:///etc/passwd", "https://"),
        ("javascript:alert(1)", "https://"),
        ("hooks.example.com/in", "https://"),
        ("https://user:pass@hooks.example.com/", "user name or password"),
        ("https://user@hooks.example.com/", "user name or password"),
        ("https://@hooks.example.com/", "user name or password"),
        ("https://hooks.example.com\\@127.0.0.1/", "user name or password"),
        ("https:///in", "no host"),
        ("https://:443/in", "no host"),
        ("https://hooks.example.com:0/", "port"),
        ("https://hooks.example.com:65536/", "not valid"),
        ("https://hooks.example.com:8a/", "not valid"),
        ("https://hooks.example.com:443:80/", "not valid"),
        ("https://[::1/", "not valid"),
        ("https://hooks.example.com /", "control characters"),
        ("https://hooks.example.com/\r\nX-Injected: 1", "control characters"),
        ("https://hooks.exa\tmple.com/", "control characters"),
        ("https://hooks.exämple.com/", "ASCII"),
        ("https://%31%32%37.0.0.1/", "neither a name nor a valid IP"),
        ("https://%6c%6f.example.com/", "not a valid name"),
        ("https://hooks_.exa$mple.com/", "not a valid name"),
        ("https://" + "a" * 64 + ".example.com/", "not a valid name"),
        ("https://[fe80::1%25eth0]/", "zone"),
        ("https://localhost/", "fully qualified"),
        ("https://metadata/", "fully qualified"),
        ("https://api.localhost/", "fully qualified"),
        ("https://hooks.example.com/" + "a" * MAX_URL_CHARS, "longer than"),
    ],
)
def test_given_a_url_that_is_not_acceptable_then_it_is_refused_with_why(url: str, reason: str) -> None:
    assert reason in refused(url, public)


def test_given_a_url_of_the_maximum_length_then_it_is_accepted() -> None:
    url = "https://hooks.example.com/"
    url += "a" * (MAX_URL_CHARS - len(url))

    assert check_url(url, allow_private=False, resolve=public).path_and_query.endswith("a")


@pytest.mark.parametrize(
    ("url", "port", "path_and_query", "host_header"),
    [
        ("https://hooks.example.com", 443, "/", "hooks.example.com"),
        ("https://hooks.example.com:443/a", 443, "/a", "hooks.example.com"),
        ("https://hooks.example.com:8443/a?b=c&d", 8443, "/a?b=c&d", "hooks.example.com:8443"),
        ("https://hooks.example.com:/a", 443, "/a", "hooks.example.com"),
        ("https://hooks.example.com?x=1", 443, "/?x=1", "hooks.example.com"),
    ],
)
def test_given_an_acceptable_url_then_port_path_and_host_header_are_read_from_it(
    url: str, port: int, path_and_query: str, host_header: str
) -> None:
    target = check_url(url, allow_private=False, resolve=public)

    assert (target.port, target.path_and_query, target.host_header) == (port, path_and_query, host_header)


# ---------------------------------------------------------------- allow_private (the local stack)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8080/hook", "https://10.0.0.1/", "http://[::1]:8080/", "http://localhost:9000/"],
)
def test_given_private_targets_are_allowed_then_http_and_private_addresses_are_called(url: str) -> None:
    target = check_url(url, allow_private=True, resolve=answering("127.0.0.1"))

    assert target.addresses[0] in {"127.0.0.1", "10.0.0.1", "::1"}


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://[::ffff:169.254.169.254]/", "metadata"),
        ("http://imds.example.com/", "metadata"),
        ("ftp://127.0.0.1/", "https://"),
        ("http://u:p@127.0.0.1/", "user name"),
    ],
)
def test_given_private_targets_are_allowed_then_metadata_schemes_and_users_are_still_refused(
    url: str, reason: str
) -> None:
    assert reason in refused(url, answering("169.254.169.254"), allow_private=True)


# ---------------------------------------------------------------- post: local servers


@dataclass
class Seen:
    requests: list[bytes] = field(default_factory=list)
    sni: list[str | None] = field(default_factory=list)


Script = Callable[[socket.socket], None]


class LocalServer:
    """A server on 127.0.0.1 that reads one request per connection, then runs `script` on the socket."""

    def __init__(
        self, script: Script, tls: ssl.SSLContext | None = None, *, read_request: bool = True
    ) -> None:
        self.seen = Seen()
        self._script = script
        self._tls = tls
        self._read_request = read_request
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        if tls is not None:
            tls.sni_callback = lambda sock, name, context: self.seen.sni.append(name)  # type: ignore[assignment]
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            if self._tls is not None and self._read_request:
                conn = self._tls.wrap_socket(conn, server_side=True)
            if self._read_request:
                self.seen.requests.append(_read_request(conn))
            self._script(conn)
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._accepting.join()
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=5)


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def answer(raw: bytes) -> Script:
    return lambda conn: conn.sendall(raw)


def wait_until_closed(conn: socket.socket) -> None:
    conn.settimeout(10)
    while conn.recv(1):
        pass


@pytest.fixture
def serve() -> Iterator[Callable[..., LocalServer]]:
    servers: list[LocalServer] = []

    def start(script: Script, tls: ssl.SSLContext | None = None, *, read_request: bool = True) -> LocalServer:
        server = LocalServer(script, tls, read_request=read_request)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def local_target(port: int, path: str = "/hook") -> Target:
    return check_url(f"http://127.0.0.1:{port}{path}", allow_private=True)


HEADERS = {"Content-Type": "application/json", "webhook-id": "evt_1", "Host": "evil.example.com"}


def test_given_a_listening_endpoint_when_posted_then_it_gets_the_body_headers_and_host(
    serve: Callable[..., LocalServer],
) -> None:
    server = serve(answer(b"HTTP/1.1 204 No Content\r\n\r\n"))

    result = post(local_target(server.port, "/hook?x=1"), b'{"a":1}', HEADERS, timeout=5)

    assert result == HttpAnswer(status=204, error=None, body=b"")
    assert result.ok
    (request,) = server.seen.requests
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /hook?x=1 HTTP/1.1"
    assert body == b'{"a":1}'
    headers = [line.lower() for line in lines[1:]]
    # The caller's Host is replaced by the target's, never sent twice.
    assert [line for line in headers if line.startswith("host:")] == [f"host: 127.0.0.1:{server.port}"]
    assert "webhook-id: evt_1" in headers
    assert "content-length: 7" in headers


def test_given_a_redirect_when_posted_then_it_is_the_answer_and_not_followed(
    serve: Callable[..., LocalServer],
) -> None:
    server = serve(answer(b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n"))

    result = post(local_target(server.port), b"{}", {}, timeout=5)

    assert (result.status, result.ok) == (302, False)
    time.sleep(0.2)
    assert len(server.seen.requests) == 1


def test_given_an_error_answer_when_posted_then_its_status_and_body_are_kept(
    serve: Callable[..., LocalServer],
) -> None:
    server = serve(answer(b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy"))

    assert post(local_target(server.port), b"{}", {}, timeout=5) == HttpAnswer(503, None, b"busy")


def test_given_a_huge_body_when_posted_then_only_the_cap_is_read(serve: Callable[..., LocalServer]) -> None:
    big = b"x" * (1024 * 1024)
    server = serve(answer(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(big), big)))

    result = post(local_target(server.port), b"{}", {}, timeout=5, max_body=100)

    assert (result.status, result.body) == (200, b"x" * 100)


def test_given_an_endless_body_when_posted_then_the_cap_ends_it_at_once(
    serve: Callable[..., LocalServer],
) -> None:
    def endless(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
        while True:
            conn.sendall(b"y" * 1024)

    server = serve(endless)
    started = time.monotonic()

    result = post(local_target(server.port), b"{}", {}, timeout=5)

    assert (result.status, len(result.body)) == (200, 4096)
    assert time.monotonic() - started < 2


def test_given_a_body_that_stops_coming_then_the_status_stands_with_what_arrived(
    serve: Callable[..., LocalServer],
) -> None:
    def stalls(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        wait_until_closed(conn)

    server = serve(stalls)

    result = post(local_target(server.port), b"{}", {}, timeout=0.5)

    assert result == HttpAnswer(200, None, b"partial")


def test_given_a_silent_endpoint_when_posted_then_no_answer_within_the_timeout(
    serve: Callable[..., LocalServer],
) -> None:
    server = serve(wait_until_closed)
    started = time.monotonic()

    result = post(local_target(server.port), b"{}", {}, timeout=0.5)

    assert result.status is None
    assert result.error == "no answer within 0.5 s"
    assert result.timed_out  # a timeout, not a refusal: the endpoint may only be slow
    assert time.monotonic() - started < 2


def test_given_an_endpoint_dripping_its_headers_then_the_timeout_bounds_the_whole_call(
    serve: Callable[..., LocalServer],
) -> None:
    def drips(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        for _ in range(100):
            conn.sendall(b"X")
            time.sleep(0.1)

    server = serve(drips)
    started = time.monotonic()

    # Every byte comes well within the socket timeout; only the deadline of the call ends it.
    result = post(local_target(server.port), b"{}", {}, timeout=1)

    assert (result.status, result.error, result.timed_out) == (None, "no answer within 1 s", True)
    assert time.monotonic() - started < 3


def test_given_a_closed_port_when_posted_then_the_refusal_is_the_answer() -> None:
    port = free_port()

    assert post(local_target(port), b"{}", {}, timeout=2) == HttpAnswer(None, "connection refused")


def test_given_garbage_instead_of_http_then_it_is_no_answer(serve: Callable[..., LocalServer]) -> None:
    server = serve(answer(b"SSH-2.0-OpenSSH\r\n"))

    result = post(local_target(server.port), b"{}", {}, timeout=2)

    assert result.status is None
    assert result.error is not None
    assert "not an HTTP answer" in result.error


def test_given_a_checked_target_when_posted_then_nothing_is_resolved_again(
    serve: Callable[..., LocalServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # DNS rebinding: the first answer is checked, a second one would point elsewhere.
    answers = iter([["127.0.0.1"], ["169.254.169.254"]])
    asked: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)
        return next(answers)

    server = serve(answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
    target = check_url(f"http://rebind.example.com:{server.port}/", allow_private=True, resolve=rebinding)
    looked_up: list[str] = []
    real_getaddrinfo = socket.getaddrinfo

    def recording(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        looked_up.append(host)
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", recording)

    result = post(target, b"{}", {}, timeout=5)

    assert result.status == 200
    assert asked == ["rebind.example.com"]
    assert looked_up in ([], ["127.0.0.1"])  # the connection is to the checked IP literal
    assert server.seen.requests[0].lower().count(f"host: rebind.example.com:{server.port}".encode()) == 1


# ---------------------------------------------------------------- post: TLS to the pinned IP


@dataclass(frozen=True)
class Certificates:
    ca_pem: bytes
    server: ssl.SSLContext


def _certificates(tmp_path_factory: pytest.TempPathFactory, name: str) -> Certificates:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sendonce test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    return Certificates(ca.public_bytes(serialization.Encoding.PEM), server)


@pytest.fixture
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return _certificates(tmp_path_factory, HOOK_HOST)


def tls_target(host: str, port: int) -> Target:
    # The name resolves nowhere: only a connection pinned to the checked IP can reach the server.
    return check_url(f"https://{host}:{port}/hook", allow_private=True, resolve=answering("127.0.0.1"))


def test_given_https_when_posted_then_the_checked_ip_is_dialled_with_sni_and_cert_check_for_the_host(
    serve: Callable[..., LocalServer], certificates: Certificates
) -> None:
    server = serve(answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), certificates.server)
    trusting = ssl.create_default_context(cadata=certificates.ca_pem.decode())

    result = post(tls_target(HOOK_HOST, server.port), b"{}", {}, timeout=5, tls_context=trusting)

    assert result == HttpAnswer(200, None, b"ok")
    assert server.seen.sni == [HOOK_HOST]
    assert f"host: {HOOK_HOST}:{server.port}".encode() in server.seen.requests[0].lower()


def test_given_https_to_a_host_the_certificate_does_not_name_then_no_request_is_sent(
    serve: Callable[..., LocalServer], certificates: Certificates
) -> None:
    server = serve(answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), certificates.server)
    trusting = ssl.create_default_context(cadata=certificates.ca_pem.decode())

    result = post(tls_target("other.example.test", server.port), b"{}", {}, timeout=5, tls_context=trusting)

    assert result.status is None
    assert result.error is not None
    assert result.error.startswith("TLS certificate rejected")
    assert "other.example.test" in server.seen.sni
    assert server.seen.requests == []


def test_given_https_by_default_then_the_system_trust_store_decides(
    serve: Callable[..., LocalServer], certificates: Certificates
) -> None:
    server = serve(answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), certificates.server)

    result = post(tls_target(HOOK_HOST, server.port), b"{}", {}, timeout=5)

    assert result.status is None
    assert result.error is not None
    assert result.error.startswith("TLS certificate rejected")


def test_given_a_tls_handshake_that_never_ends_then_the_timeout_ends_it(
    serve: Callable[..., LocalServer],
) -> None:
    server = serve(wait_until_closed, read_request=False)
    started = time.monotonic()

    result = post(tls_target(HOOK_HOST, server.port), b"{}", {}, timeout=0.5)

    assert (result.status, result.error, result.timed_out) == (None, "no answer within 0.5 s", True)
    assert time.monotonic() - started < 2


def test_an_answers_body_stays_out_of_its_repr() -> None:
    """An endpoint's body may hold anything; a log line that shows an answer never shows it."""
    answer = HttpAnswer(status=500, error="http 500", body=b"card 4242 4242 4242 4242")

    assert "4242" not in repr(answer)
    assert repr(answer) == "HttpAnswer(status=500, error='http 500', timed_out=False)"
