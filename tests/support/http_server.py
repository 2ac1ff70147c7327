"""One HTTP server for the tests and the bench: on a free loopback port, on threads of its own, each
request answered by a function the caller gives.

`serving(respond)` runs it for the span of a `with` block. `respond` is given each request (its
method, path, lower-cased headers and body) and returns the reply, or None to close the connection
without one, as a network that drops it would. A request may be held (`Request.hold`): the server
lets every held request go when it stops, so nothing waits out a hold after its test. A reply the
client no longer waits for is dropped quietly.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from sendonce_local.http_server import BurstHTTPServer
from tests.support.ports import LOOPBACK


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # with its query, as sent
    headers: dict[str, str]  # lower-case names
    body: bytes
    arrived_at: float  # epoch seconds: its head had arrived, its body not yet read
    _stopping: threading.Event = field(repr=False, compare=False)

    def json(self) -> Any:
        return json.loads(self.body)

    def hold(self, seconds: float) -> None:
        """Wait `seconds` before replying, or less should the server stop meanwhile."""
        self._stopping.wait(seconds)


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)  # Content-Length is the server's

    @classmethod
    def json(cls, status: int, value: Any) -> Reply:
        return cls(status, json.dumps(value).encode(), {"Content-Type": "application/json"})


Respond = Callable[[Request], Reply | None]


@dataclass(frozen=True)
class RunningServer:
    port: int

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


@contextmanager
def serving(respond: Respond, *, keep_alive: bool = False) -> Iterator[RunningServer]:
    """The server, until the block ends. `keep_alive`: HTTP/1.1, a connection kept for the next
    request (HTTP/1.0 otherwise: one request a connection)."""
    stopping = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _answer(self) -> None:
            arrived_at = time.time()
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = respond(Request(self.command, self.path, headers, body, arrived_at, stopping))
            if reply is None:
                self.close_connection = True  # not a word: the caller learns nothing
                return
            try:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except OSError:
                self.close_connection = True  # the caller gave up waiting

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    server = BurstHTTPServer((LOOPBACK, 0), Handler)
    threading.Thread(target=server.serve_forever, name="test-http-server", daemon=True).start()
    try:
        yield RunningServer(server.server_address[1])
    finally:
        stopping.set()  # every held request replies now
        server.shutdown()
        server.server_close()
