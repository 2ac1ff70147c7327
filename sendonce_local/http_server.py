"""A threaded HTTP server with a listen backlog deep enough for bursts of concurrent clients."""

from __future__ import annotations

from http.server import ThreadingHTTPServer


class BurstHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the default (5) resets connections when 50 clients arrive at once
