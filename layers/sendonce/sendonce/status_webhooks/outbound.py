"""The outbound half of status webhooks (docs/guarantees.md, "Status webhooks"): which URLs may be
called, and the call.

Invariant: a webhook POST only ever goes to an address that `check_url` classified as safe, and
the call connects to that very address. The host is resolved once, every address it resolves to
is checked (one unsafe answer refuses the URL), and `post` connects to the checked IP: TLS SNI,
the certificate's hostname and the Host header still carry the customer's hostname, so a second
DNS answer (rebinding) can never steer the call elsewhere. No redirect is followed, no proxy is
used, the body read back is capped, and the whole call, first byte to last, ends by its timeout.

`allow_private` (SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS, the local stack's default) lifts the
https rule and the address rule, so `http://127.0.0.1:<port>/` works locally; the cloud metadata
addresses stay refused even then. Outcomes are values: `check_url` raises `UnsafeTarget` with a
reason fit for the customer, `post` never raises for the network and answers an `HttpAnswer`.
The standard library's client keeps the call off the cold start, and it ignores proxy settings.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import ipaddress
import re
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Mapping

from msgspec import Struct

MAX_URL_CHARS = 2048
MAX_ANSWER_BYTES = 4096
_DEFAULT_PORTS = {"https": 443, "http": 80}

Resolver = Callable[[str, int], list[str]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Named for a clear reason; every link-local address is refused anyway. These stay refused even
# when private targets are allowed: no webhook is ever meant for the host's own credentials.
_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",  # EC2/GCP/Azure instance metadata
        "169.254.170.2",  # ECS task metadata and credentials
        "169.254.170.23",  # EKS pod identity
        "fd00:ec2::254",  # EC2 instance metadata over IPv6
        "fd00:ec2::23",  # EKS pod identity over IPv6
        "100.100.100.200",  # Alibaba Cloud metadata
        "168.63.129.16",  # Azure wire server
    )
)
_SHARED = ipaddress.IPv4Network("100.64.0.0/10")  # carrier-grade NAT (RFC 6598)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # well-known NAT64 prefix: the IPv4 is the last 32 bits
_NAT64_BITS = 0xFFFFFFFF
# IANA's special-purpose ranges that are not globally reachable, listed here as well because
# `ipaddress`'s own tables differ between Python patch releases (192.0.0.0/24, for one).
_SPECIAL_PURPOSE = tuple(
    ipaddress.ip_network(network)
    for network in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/127",
        "::ffff:0:0/96",
        "64:ff9b:1::/48",
        "100::/64",
        "2001::/23",
        "2001:db8::/32",
        "3fff::/20",
        "5f00::/16",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    )
)

# A DNS name: dot-separated labels of letters, digits, '-' and '_' (ASCII only: IDNs in xn-- form).
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_MAX_HOST_CHARS = 253
# An IPv4 part as inet_aton and URL parsers read it: decimal, 0-prefixed octal, 0x-prefixed hex.
_NUMERIC_PART = re.compile(r"0x[0-9a-f]*|[0-9]+")
_MAX_IPV4_PARTS = 4


class UnsafeTarget(Exception):
    """A URL that is not called. `reason` is human readable and safe to show to the customer."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Unresolvable(UnsafeTarget):
    """The host did not resolve (now): at delivery time a retry may succeed, unlike other refusals."""


class Target(Struct, frozen=True):
    """A checked URL: `addresses` are the classified IPs, the first is the one `post` connects to."""

    url: str
    scheme: str
    host: str  # lower case, IPv6 without brackets, an IP literal in its canonical form
    port: int
    path_and_query: str
    addresses: tuple[str, ...]

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == _DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"


class HttpAnswer(Struct, frozen=True):
    """What came back: `status` None means no answer (connection error, TLS failure, timeout).

    `timed_out`: no answer because the timeout ran out (a connection, a handshake or an answer
    too slow), as against one refused or broken: the endpoint may be there, only slow.
    """

    status: int | None
    error: str | None = None
    body: bytes = b""
    timed_out: bool = False

    def __repr__(self) -> str:
        # The endpoint's body stays out of every repr (and so of any log line that shows one).
        return f"HttpAnswer(status={self.status!r}, error={self.error!r}, timed_out={self.timed_out!r})"

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to for a TCP connection, in the system's preference order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos if info[0] in (socket.AddressFamily.AF_INET, socket.AF_INET6)]


def check_url(url: str, *, allow_private: bool, resolve: Resolver = system_resolver) -> Target:
    """Parse, resolve and classify `url`; raises `UnsafeTarget` (or `Unresolvable`) with the reason."""
    scheme, host, port, path_and_query = _parse(url, allow_private=allow_private)
    literal = _ip_literal(host)
    if literal is not None:
        # An IP in any spelling is classified as such, without DNS, and called in canonical form.
        address = _canonical(literal)
        _refuse_unsafe([address], allow_private=allow_private, what=f"the address {address} is")
        return Target(url, scheme, str(address), port, path_and_query, (str(address),))
    _check_name(host, allow_private=allow_private)
    addresses = _resolve(resolve, host, port)
    _refuse_unsafe(addresses, allow_private=allow_private, what=f"the host {host} resolves to")
    unique = tuple(dict.fromkeys(str(address) for address in addresses))
    return Target(url, scheme, host, port, path_and_query, unique)


def post(
    target: Target,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float,
    max_body: int = MAX_ANSWER_BYTES,
    tls_context: ssl.SSLContext | None = None,
) -> HttpAnswer:
    """POST `body` to `target.addresses[0]`: its answer within `timeout` s, or an HttpAnswer saying why not.

    `tls_context` defaults to the system's trust store with hostname checking; tests and private
    CAs pass their own. The caller's headers are sent as given, except Host, which is the target's.
    """
    connection = _PinnedConnection(target, timeout=timeout, tls_context=tls_context)
    # The socket timeout bounds each wait; the watchdog bounds the whole call, slow drips included.
    watchdog = threading.Timer(timeout, connection.abort)
    watchdog.daemon = True
    watchdog.start()
    try:
        sent = {name: value for name, value in headers.items() if name.lower() != "host"}
        sent["Host"] = target.host_header
        try:
            connection.request("POST", target.path_and_query, body=body, headers=sent)
            response = connection.getresponse()
            if connection.aborted:  # the watchdog's shutdown can read as a (truncated) end of headers
                raise TimeoutError("aborted")
        except (OSError, http.client.HTTPException) as error:
            late = connection.aborted or isinstance(error, TimeoutError)
            if late:
                return HttpAnswer(None, f"no answer within {timeout:g} s", timed_out=True)
            return HttpAnswer(None, _describe(error))
        # The status is the answer; the body is a courtesy, cut at the cap or at the deadline.
        return HttpAnswer(response.status, None, _read_capped(response, max_body))
    finally:
        watchdog.cancel()
        connection.close()


def _parse(url: str, *, allow_private: bool) -> tuple[str, str, int, str]:
    if len(url) > MAX_URL_CHARS:
        raise UnsafeTarget(f"the URL is longer than {MAX_URL_CHARS} characters")
    # urlsplit silently drops tabs and newlines and strips spaces: refuse them before it can.
    if not url.isascii() or any(ord(char) <= 0x20 or ord(char) == 0x7F for char in url):
        raise UnsafeTarget("the URL must be ASCII without spaces or control characters (IDNs in xn-- form)")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise UnsafeTarget("the URL is not valid") from None
    allowed = ("https", "http") if allow_private else ("https",)
    if parts.scheme not in allowed:
        raise UnsafeTarget("the URL must start with https://")
    if "@" in parts.netloc:
        raise UnsafeTarget("the URL must not carry a user name or password")
    host = (parts.hostname or "").removesuffix(".")
    if not host:
        raise UnsafeTarget("the URL has no host")
    if port == 0:
        raise UnsafeTarget("the URL's port must be between 1 and 65535")
    path = parts.path or "/"
    if not path.startswith("/"):
        raise UnsafeTarget("the URL is not valid")
    path_and_query = f"{path}?{parts.query}" if parts.query else path
    return parts.scheme, host, port or _DEFAULT_PORTS[parts.scheme], path_and_query


def _ip_literal(host: str) -> IPAddress | None:
    """The IP `host` spells, in any form a client would accept, or None for a name."""
    if ":" in host:
        if "%" in host:  # a zone: only link-local addresses have one
            raise UnsafeTarget("the URL's host must not carry an IPv6 zone")
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            raise UnsafeTarget("the URL's host is not a valid IPv6 address") from None
    return _ipv4_literal(host)


def _ipv4_literal(host: str) -> ipaddress.IPv4Address | None:
    """inet_aton's (and the URL standard's) reading: 127.1, 2130706433, 0177.0.0.1, 0x7f.1 are all IPs.

    A host whose last label is a number is an IP or nothing: no DNS name ends in a number, and a
    resolver may still read it as an address.
    """
    parts = host.split(".")
    if not _NUMERIC_PART.fullmatch(parts[-1]):
        return None
    if len(parts) > _MAX_IPV4_PARTS or not all(_NUMERIC_PART.fullmatch(part) for part in parts):
        raise UnsafeTarget("the URL's host is neither a name nor a valid IP address")
    values = [_numeric_part(part) for part in parts]
    *leading, last = values
    if any(value > 0xFF for value in leading) or last >= 256 ** (_MAX_IPV4_PARTS + 1 - len(parts)):
        raise UnsafeTarget("the URL's host is neither a name nor a valid IP address")
    number = last
    for index, value in enumerate(leading):
        number += value << (8 * (_MAX_IPV4_PARTS - 1 - index))
    return ipaddress.IPv4Address(number)


def _numeric_part(part: str) -> int:
    if part.startswith("0x"):
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part.startswith("0"):
        try:
            return int(part, 8)
        except ValueError:
            raise UnsafeTarget("the URL's host is neither a name nor a valid IP address") from None
    return int(part)


def _check_name(host: str, *, allow_private: bool) -> None:
    if len(host) > _MAX_HOST_CHARS or not all(_LABEL.fullmatch(label) for label in host.split(".")):
        raise UnsafeTarget("the URL's host is not a valid name")
    if allow_private:
        return
    # A single label is a name on the local network (a search domain's, or localhost's).
    if "." not in host or host.endswith(".localhost"):
        raise UnsafeTarget("the URL's host must be a public, fully qualified name")


def _resolve(resolve: Resolver, host: str, port: int) -> list[IPAddress]:
    try:
        answers = resolve(host, port)
    except (OSError, UnicodeError):
        raise Unresolvable(f"the host {host} could not be resolved") from None
    if not answers:
        raise Unresolvable(f"the host {host} could not be resolved")
    addresses = []
    for answer in answers:
        if "%" in answer:  # a scoped answer is link-local
            raise UnsafeTarget(f"the host {host} resolves to a link-local address")
        try:
            addresses.append(_canonical(ipaddress.ip_address(answer)))
        except ValueError:
            raise UnsafeTarget(f"the host {host} resolves to something that is not an address") from None
    return addresses


def _canonical(address: IPAddress) -> IPAddress:
    # ::ffff:a.b.c.d is a.b.c.d on a dual-stack socket: classify and call it as the IPv4 it is.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _refuse_unsafe(addresses: list[IPAddress], *, allow_private: bool, what: str) -> None:
    """`what` reads "the address X is" or "the host X resolves to", then the reason."""
    for address in addresses:
        reason = _metadata_reason(address) if allow_private else unsafe_reason(address)
        if reason is not None:
            raise UnsafeTarget(f"{what} {reason}")


def _metadata_reason(address: IPAddress) -> str | None:
    embedded = _embedded_ipv4(address)
    if address in _METADATA_ADDRESSES or (embedded is not None and embedded in _METADATA_ADDRESSES):
        return "a cloud metadata address"
    return None


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 an IPv6 address carries and reaches: mapped, NAT64 (well-known prefix) or 6to4."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & _NAT64_BITS)
    return address.sixtofour


def unsafe_reason(address: IPAddress) -> str | None:
    """Why a webhook must not be sent to `address` (e.g. "a loopback address"), None when it may."""
    metadata = _metadata_reason(address)
    if metadata is not None:
        return metadata
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return unsafe_reason(address.ipv4_mapped)
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        reason = unsafe_reason(embedded)
        if reason is not None:
            return reason
        if address in _NAT64:  # the prefix is reserved, but a NAT64 of a public IPv4 is public
            return None
    return _address_class_reason(address)


def _address_class_reason(address: IPAddress) -> str | None:
    checks: tuple[tuple[bool, str], ...] = (
        (address.is_loopback, "a loopback address"),
        (address.is_unspecified, "an unspecified address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
        (isinstance(address, ipaddress.IPv4Address) and address in _SHARED, "a shared (CGNAT) address"),
        (address.is_reserved, "a reserved address"),
        (address.is_private, "a private address"),
        (isinstance(address, ipaddress.IPv6Address) and address.is_site_local, "a site-local address"),
        (any(address in network for network in _SPECIAL_PURPOSE), "a special-purpose address"),
        (not address.is_global, "not a public address"),
    )
    return next((reason for unsafe, reason in checks if unsafe), None)


class _PinnedConnection(http.client.HTTPConnection):
    """An HTTP(S) connection to the checked IP, with TLS and Host for the original hostname.

    `abort` (the watchdog) shuts the socket down from another thread, whatever the connection is
    waiting for; a socket that arrives after it is closed at once.
    """

    def __init__(self, target: Target, *, timeout: float, tls_context: ssl.SSLContext | None) -> None:
        super().__init__(target.addresses[0], target.port, timeout=timeout)
        self._server_hostname = target.host
        self._tls = target.scheme == "https"
        self._tls_context = tls_context
        self._lock = threading.Lock()
        self.aborted = False

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        self._adopt(raw)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls:
            context = self._tls_context or _default_tls_context()
            # SNI and the certificate check are for the customer's host, not for the IP dialled.
            # The handshake runs after adoption, so the watchdog can cut a slow one short too.
            wrapped = context.wrap_socket(
                raw, server_hostname=self._server_hostname, do_handshake_on_connect=False
            )
            self._adopt(wrapped)
            wrapped.do_handshake()

    def _adopt(self, sock: socket.socket) -> None:
        with self._lock:
            if self.aborted:
                sock.close()
                raise TimeoutError("aborted")
            self.sock = sock

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            sock = self.sock
            if sock is None:
                return
            # The plain socket's shutdown: it leaves the TLS object alone, which another thread
            # may be using, and wakes whatever read or write is waiting.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


@functools.cache
def _default_tls_context() -> ssl.SSLContext:
    # Loading the trust store costs milliseconds: once per execution environment, not per call.
    return ssl.create_default_context()


def _read_capped(response: http.client.HTTPResponse, max_body: int) -> bytes:
    body = bytearray()
    try:
        while len(body) < max_body:
            chunk = response.read1(max_body - len(body))
            if not chunk:
                break
            body.extend(chunk)
    except (OSError, ValueError, http.client.HTTPException):
        pass  # cut short (the watchdog, or a broken stream): what arrived is what there is
    return bytes(body)


def _describe(error: OSError | http.client.HTTPException) -> str:
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"TLS certificate rejected: {error.verify_message}"
    if isinstance(error, ssl.SSLError):
        return f"TLS failed: {error.reason or type(error).__name__}"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, ConnectionResetError):
        return "connection reset"
    if isinstance(error, OSError):
        return f"connection failed: {error.strerror or type(error).__name__}"
    return f"not an HTTP answer: {type(error).__name__}"
