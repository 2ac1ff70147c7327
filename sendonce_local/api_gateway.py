"""The emulated API Gateway HTTP API: routes requests to the template's handlers as payload 2.0 events."""

from __future__ import annotations

import logging
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from sendonce_local.http_api_events import (
    HttpRequest,
    HttpResponse,
    gateway_error,
    lambda_response,
    proxy_event,
    request_context,
)
from sendonce_local.http_server import BackgroundServer
from sendonce_local.lambda_runtime import FunctionRegistry
from sendonce_local.routing import Router
from sendonce_local.template import HttpRoute

log = logging.getLogger("local-stack.api")

MAX_BODY_BYTES = 10 * 1024 * 1024
DRAIN_LIMIT_BYTES = 64 * 1024 * 1024


class HttpApi:
    """Everything API Gateway does between the socket and the Lambda, minus the socket."""

    def __init__(self, routes: list[HttpRoute], functions: FunctionRegistry) -> None:
        self._router = Router(routes)
        self._functions = functions

    def handle(self, request: HttpRequest) -> HttpResponse:
        # As API Gateway: the route is matched on the path URL-decoded once (so `a%2Fb` is two
        # segments), and each path parameter is decoded once more before it is passed on (so
        # `a%252Fb` is the parameter `a/b`); `rawPath` stays as the client sent it.
        found = self._router.match(request.method, unquote(request.raw_path))
        if found is None:
            return gateway_error(404, "Not Found")
        route = found.route
        context = request_context(request, route.route_key)
        parameters = {name: unquote(value) for name, value in found.path_parameters.items()}
        event = proxy_event(request, route.route_key, parameters, context)
        try:
            result = self._functions[route.function_id].invoke(event)
            response = lambda_response(result)
        except Exception:
            log.exception(
                "HANDLER %s RAISED: API Gateway answers 500 (handlers must never raise)", route.function_id
            )
            return gateway_error(500, "Internal Server Error")
        response.headers.append(("Apigw-Requestid", context["requestId"]))
        return response


class ApiServer(BackgroundServer):
    def __init__(self, host: str, port: int, api: HttpApi) -> None:
        super().__init__(host, port, ApiRequestHandler, "http-api", api=api)


class ApiRequestHandler(BaseHTTPRequestHandler):
    api: HttpApi
    protocol_version = "HTTP/1.1"
    server_version = "sendonce-local"

    def do_GET(self) -> None:
        self._serve()

    def __getattr__(self, name: str) -> Any:
        # Any method reaches a route, as at API Gateway: one that no route takes (TRACE, QUERY, ...)
        # reaches `$default`, whose function answers 405 or 404; http.server would answer 501.
        if name.startswith("do_"):
            return self.do_GET
        raise AttributeError(name)

    def _serve(self) -> None:
        started = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            response = gateway_error(413, "Request Entity Too Large")
            self._discard(length)
        else:
            body = self.rfile.read(length) if length > 0 else b""
            path, _, query = self.path.partition("?")
            request = HttpRequest(
                method=self.command,
                raw_path=path,
                raw_query_string=query,
                headers=list(self.headers.items()),
                body=body,
                source_ip=self.client_address[0],
                protocol=self.request_version,
            )
            response = self.api.handle(request)
        self._write(response)
        log.info(
            "%s %s -> %d (%.0f ms)",
            self.command,
            self.path,
            response.status,
            (time.monotonic() - started) * 1000,
        )

    def _discard(self, length: int) -> None:
        """Read (and drop) an oversized body, so the client gets to read the 413."""
        if length > DRAIN_LIMIT_BYTES:
            self.close_connection = True
            return
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 20))
            if not chunk:
                break
            length -= len(chunk)

    def _write(self, response: HttpResponse) -> None:
        try:
            self.send_response(response.status)
            for name, value in response.headers:
                if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(response.body)
        except (BrokenPipeError, ConnectionResetError):
            log.info("the client left before the answer (%s %s)", self.command, self.path)

    def log_message(self, format: str, *args: Any) -> None:
        """Silenced: `_serve` logs one line per request itself."""
