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
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

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


def _handler(upstream: str, faults: Faults) -> type[BaseHTTPRequestHandler]:
    target = urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return

        def _relay(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            path = urlsplit(self.path).path
            fault = faults.take(path)
            if fault == "unavailable":
                self._answer(503, {"Content-Type": "application/json", "Retry-After": "1"}, UNAVAILABLE)
                return
            headers = {name: value for name, value in self.headers.items() if name.lower() not in HOP_BY_HOP}
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            try:
                connection.request(self.command, self.path, body=body, headers=headers)
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
                self.close_connection = True  # the API answered; the caller hears nothing
                return
            if fault == "delay":
                time.sleep(faults.delay_seconds)
            try:
                self._answer(response.status, answer_headers, answer)
            except OSError:
                self.close_connection = True  # the caller gave up waiting

        def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = do_PATCH = _relay

    return Handler


@contextmanager
def fault_proxy(upstream: str) -> Iterator[tuple[str, Faults]]:
    faults = Faults()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream, faults))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", faults
    finally:
        server.shutdown()
        server.server_close()
