"""A loopback proxy in front of the local stack's API that plays the network's worst moments.

Armed with a fault for the next N requests to a path, it:
- `drop`: forwards the request, lets the API answer, then closes the connection without a word:
  the request reached the API and the caller never learns its answer;
- `delay`: forwards the request and holds the API's answer past the caller's timeout;
- `unavailable`: answers `503 unavailable` (Retry-After: 1) itself, without forwarding.
Every other request passes through untouched. It counts what reached the API per path.
"""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tests.support.http_server import Reply, Request, Respond, serving

UNAVAILABLE = b'{"success":false,"error":{"code":"unavailable","message":"played by the fault proxy"}}'
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


@dataclass
class Faults:
    lock: threading.Lock = field(default_factory=threading.Lock)
    armed: dict[str, list[str]] = field(default_factory=dict)  # path -> faults, the next first
    forwarded: Counter[str] = field(default_factory=Counter)
    delay_seconds: float = 3.0

    def arm(self, path: str, *faults: str) -> None:
        with self.lock:
            self.armed.setdefault(path, []).extend(faults)

    def take(self, path: str) -> str | None:
        with self.lock:
            waiting = self.armed.get(path)
            return waiting.pop(0) if waiting else None


def _relay(upstream: str, faults: Faults) -> Respond:
    target = urlsplit(upstream)

    def relay(request: Request) -> Reply | None:
        path = urlsplit(request.path).path
        fault = faults.take(path)
        if fault == "unavailable":
            return Reply(503, UNAVAILABLE, {"Content-Type": "application/json", "Retry-After": "1"})
        headers = {name: value for name, value in request.headers.items() if name not in HOP_BY_HOP}
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        try:
            connection.request(request.method, request.path, body=request.body or None, headers=headers)
            response = connection.getresponse()
            answer = response.read()
            answer_headers = {
                name: value for name, value in response.getheaders() if name.lower() not in HOP_BY_HOP
            }
        finally:
            connection.close()
        with faults.lock:
            faults.forwarded[path] += 1
        if fault == "drop":
            return None  # the API answered; the caller hears nothing
        if fault == "delay":
            request.hold(faults.delay_seconds)
        return Reply(response.status, answer, answer_headers)

    return relay


@contextmanager
def fault_proxy(upstream: str) -> Iterator[tuple[str, Faults]]:
    faults = Faults()
    with serving(_relay(upstream, faults), keep_alive=True) as server:
        yield server.url, faults
