"""A threaded HTTP server with a listen backlog deep enough for bursts of concurrent clients, and one
whose listening socket can be closed and opened again (a provider that refuses connections)."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger("local-stack.sandbox")


class BurstHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the default (5) resets connections when 50 clients arrive at once


class BackgroundServer:
    """A BurstHTTPServer on its own thread; `bound` become class attributes of its handler."""

    def __init__(
        self, host: str, port: int, handler: type[BaseHTTPRequestHandler], name: str, **bound: Any
    ) -> None:
        bound_handler = type(f"Bound{handler.__name__}", (handler,), bound)
        self._server = BurstHTTPServer((host, port), bound_handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)
        self.host, self.port = host, port

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


REOPEN_TRIES = 50
REOPEN_PAUSE_SECONDS = 0.1
POLL_SECONDS = 0.05  # how soon a close takes effect: serve_forever checks for shutdown this often


class ReopenableServer:
    """A server whose listening socket can be closed (connections to its port are then refused, as
    by a host with nothing listening) and opened again on the same port; `bound` as BackgroundServer.

    Its handler should close each connection after one answer: a kept-alive connection would
    carry requests past a closed listening socket."""

    def __init__(
        self, host: str, port: int, handler: type[BaseHTTPRequestHandler], name: str, **bound: Any
    ) -> None:
        self._handler: type[BaseHTTPRequestHandler] = type(f"Bound{handler.__name__}", (handler,), bound)
        self._name = name
        self._lock = threading.Lock()
        self._server: BurstHTTPServer | None = None
        self._stopped = False  # stopped for good: a late open (a fault cleared) leaves it closed
        self.host, self.port = host, port

    def start(self) -> None:
        with self._lock:
            if self._server is None:
                self._open()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._close()

    @property
    def listening(self) -> bool:
        with self._lock:
            return self._server is not None

    def close_listener(self) -> None:
        with self._lock:
            self._close()

    def open_listener(self) -> None:
        with self._lock:
            if self._server is None and not self._stopped:
                self._open()

    def _open(self) -> None:
        # Another socket may hold the port a moment after it was closed (a client's own port
        # picked from the same range): tried again a while, as a restarted provider would be.
        for attempt in range(REOPEN_TRIES):
            try:
                server = BurstHTTPServer((self.host, self.port), self._handler)
                break
            except OSError:
                if attempt == REOPEN_TRIES - 1:
                    raise
                time.sleep(REOPEN_PAUSE_SECONDS)
        self.port = server.server_address[1]  # port 0: the system's pick, kept for the reopen
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, name=self._name, daemon=True
        )
        thread.start()
        self._server = server

    def _close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@dataclass(frozen=True)
class Answer:
    """What a sandbox provider answers: after `delay_seconds`, this status and body, or (`hang`)
    nothing at all: the connection is closed unanswered."""

    status: int
    body: dict[str, Any]
    delay_seconds: float = 0.0
    hang: bool = False


class JsonHandler(BaseHTTPRequestHandler):
    """Reads request bodies and answers JSON; a `one_answer_per_connection` handler closes each
    connection after its answer (a provider's port, which may be closed: see ReopenableServer)."""

    protocol_version = "HTTP/1.1"
    one_answer_per_connection = False

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _answer(self, answer: Answer) -> None:
        if answer.delay_seconds:
            time.sleep(answer.delay_seconds)
        if answer.hang:
            self.close_connection = True
            return
        self._send(answer.status, answer.body)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if self.one_answer_per_connection:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            log.info("the client left before the answer (%s %s)", self.command, self.path)

    def log_message(self, format: str, *args: Any) -> None:
        log.info("sandbox %s", format % args)
