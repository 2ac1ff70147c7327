"""A threaded HTTP server with a listen backlog deep enough for bursts of concurrent clients."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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
