"""WSGI middleware around moto: records provider sends, and makes moto safe under concurrency.

- Every successful SES v2 SendEmail and SNS Publish to a phone number becomes a sandbox delivery.
- moto's DynamoDB and SQS backends are not thread-safe (a conditional write is a read then a
  write), so each service's requests are serialised by a lock. A long-poll ReceiveMessage must
  not hold that lock while it waits, so it is emulated here as repeated short polls.
"""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.provider_calls import SES_SEND_EMAIL_PATH, ProviderCall, ses_send_email, sns_publish

log = logging.getLogger("local-stack.emulator")

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Response = tuple[str, list[tuple[str, str]], bytes]
SHORT_POLL_INTERVAL_SECONDS = 0.05


def signing_service(environ: dict[str, Any]) -> str | None:
    """The service named in a SigV4 Authorization header's credential scope."""
    auth = environ.get("HTTP_AUTHORIZATION") or ""
    try:
        scope = auth.split(",")[0].split()[1]
        return scope.split("/")[3].lower()
    except IndexError:
        return None


class EmulatorMiddleware:
    def __init__(self, app: WsgiApp, deliveries: DeliveryLog) -> None:
        self._app = app
        self._deliveries = deliveries
        self._locks = {"dynamodb": threading.Lock(), "sqs": threading.Lock()}
        self._sqs_activity = threading.Condition()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        body = _read_body(environ)
        service = signing_service(environ)
        target = environ.get("HTTP_X_AMZ_TARGET") or ""
        if service == "sqs" and target.endswith(".ReceiveMessage"):
            status, headers, payload = self._receive_message(environ, body)
        else:
            lock = self._locks.get(service or "")
            if lock is None:
                status, headers, payload = self._call(environ, body)
            else:
                with lock:
                    status, headers, payload = self._call(environ, body)
            if service == "sqs":
                with self._sqs_activity:
                    self._sqs_activity.notify_all()
        if status.startswith("2"):
            self._record(service, environ, body)
        start_response(status, headers)
        return [payload]

    def _call(self, environ: dict[str, Any], body: bytes) -> Response:
        environ = dict(environ)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        captured: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            captured["status"], captured["headers"] = status, headers

        chunks = self._app(environ, start_response)
        try:
            payload = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(payload))))
        return captured["status"], headers, payload

    def _receive_message(self, environ: dict[str, Any], body: bytes) -> Response:
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            with self._locks["sqs"]:
                return self._call(environ, body)
        wait_seconds = float(request.get("WaitTimeSeconds") or 0)
        request["WaitTimeSeconds"] = 0
        short_poll = json.dumps(request).encode("utf-8")
        deadline = time.monotonic() + wait_seconds
        while True:
            with self._locks["sqs"]:
                status, headers, payload = self._call(environ, short_poll)
            remaining = deadline - time.monotonic()
            if not status.startswith("2") or remaining <= 0 or _has_messages(payload):
                return status, headers, payload
            with self._sqs_activity:
                self._sqs_activity.wait(min(remaining, SHORT_POLL_INTERVAL_SECONDS * 4))

    def _record(self, service: str | None, environ: dict[str, Any], body: bytes) -> None:
        call: ProviderCall | None = None
        try:
            if service == "ses" and environ.get("PATH_INFO") == SES_SEND_EMAIL_PATH:
                call = ses_send_email(body)
            elif service == "sns":
                call = sns_publish(body, environ.get("CONTENT_TYPE") or "")
        except (ValueError, KeyError, TypeError, AttributeError):
            log.exception("could not read a %s provider call; not recorded", service)
            return
        if call is not None:
            self._deliveries.record(
                message_id=call.message_id,
                channel=call.channel,
                to=call.to,
                subject=call.subject,
                body=call.body,
                provider=call.provider,
            )
            log.info("%s accepted message %s for %s", call.provider.upper(), call.message_id, call.to)


def _read_body(environ: dict[str, Any]) -> bytes:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    stream = environ.get("wsgi.input")
    if stream is None:
        return b""
    if length > 0:
        return bytes(stream.read(length))
    if environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked" or environ.get("wsgi.input_terminated"):
        return bytes(stream.read())
    return b""


def _has_messages(payload: bytes) -> bool:
    try:
        return bool(json.loads(payload or b"{}").get("Messages"))
    except ValueError:
        return True
