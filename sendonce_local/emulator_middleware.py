"""WSGI middleware around moto: records provider sends, and makes moto safe under concurrency.

- Every successful SES v2 SendEmail and SNS Publish to a phone number becomes a sandbox delivery.
- moto's DynamoDB and SQS backends are not thread-safe (a conditional write is a read then a
  write), so each service's requests are serialised by a lock. A long-poll ReceiveMessage must
  not hold that lock while it waits, so it is emulated here as short polls: one at once, then one
  after each change to its queue (`sqs_changes`: any request naming the queue but a receive; one
  naming no queue changes them all), and one when the queue's next hidden or delayed message comes
  due, until the wait time is over. An empty queue costs one short poll per long poll, not one
  every few milliseconds, and a burst of sends to one queue wakes that queue's pollers only.
- Every DynamoDB request that may write marks `table_writes`: the stream pollers wait on it when
  they find nothing new, since a stream record only ever comes from a write.
- An S3 PUT sent as a form (`curl --data-binary` to a presigned URL, with no Content-Type of its
  own, says application/x-www-form-urlencoded) keeps its body: moto would read it as form fields
  and store an empty object, where S3 stores the bytes as they came.
"""

from __future__ import annotations

import io
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlparse

from moto.sqs.models import sqs_backends

from sendonce_local.changes import Changes
from sendonce_local.deliveries import DeliveryLog
from sendonce_local.provider_calls import SES_SEND_EMAIL_PATH, ProviderCall, ses_send_email, sns_publish

log = logging.getLogger("local-stack.emulator")

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Response = tuple[str, list[tuple[str, str]], bytes]
# How soon a waiting receive polls again when it cannot tell when the queue's next message is due.
REPOLL_SECONDS = 0.2
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
# What S3 calls an object stored without a content type.
S3_DEFAULT_CONTENT_TYPE = "binary/octet-stream"
# The DynamoDB requests that never write (so never add a stream record); any other may.
DYNAMODB_READS = frozenset(
    {
        "BatchGetItem",
        "DescribeContinuousBackups",
        "DescribeTable",
        "DescribeTimeToLive",
        "GetItem",
        "ListTables",
        "ListTagsOfResource",
        "Query",
        "Scan",
        "TransactGetItems",
    }
)


def _credential_scope(environ: dict[str, Any]) -> list[str]:
    """A SigV4 Authorization header's credential scope: key id, date, region, service, terminator."""
    auth = environ.get("HTTP_AUTHORIZATION") or ""
    try:
        return auth.split(",")[0].split()[1].split("/")
    except IndexError:
        return []


def signing_service(environ: dict[str, Any]) -> str | None:
    """The service named in a SigV4 Authorization header's credential scope."""
    scope = _credential_scope(environ)
    return scope[3].lower() if len(scope) > 3 else None


def is_s3_form_put(environ: dict[str, Any], service: str | None) -> bool:
    """A PUT, signed for S3 or not signed in a header (a presigned URL), whose body is typed as a
    form: no other AWS request that reaches the emulator is a PUT of a form."""
    content_type = str(environ.get("CONTENT_TYPE") or "").lower()
    return (
        environ.get("REQUEST_METHOD") == "PUT"
        and service in (None, "s3")
        and content_type.startswith(FORM_CONTENT_TYPE)
    )


def writes_to_a_table(service: str | None, target: str) -> bool:
    """Whether a request may write a DynamoDB item (the streams API and the reads never do)."""
    if service != "dynamodb" or not target.startswith("DynamoDB_"):
        return False
    return target.partition(".")[2] not in DYNAMODB_READS


def _queue_name(url: Any) -> str | None:
    """The queue a request's QueueUrl names (`.../<account>/<name>`), None when it names none."""
    if not isinstance(url, str) or not url:
        return None
    return urlparse(url).path.rstrip("/").rsplit("/", 1)[-1] or None


def _named_queue(body: bytes) -> str | None:
    """The queue an SQS request (JSON protocol) names, None when it names none or is not JSON."""
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        return None
    return _queue_name(request.get("QueueUrl")) if isinstance(request, dict) else None


class QueueChanges:
    """A `Changes` per queue: a waiting receive wakes on its own queue's changes only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, Changes] = {}

    def of(self, queue: str | None) -> Changes:
        with self._lock:
            return self._queues.setdefault(queue or "", Changes())

    def mark(self, queue: str | None) -> None:
        """A change to `queue`; None: to every queue (a request that names none)."""
        if queue is not None:
            self.of(queue).mark()
            return
        with self._lock:
            every = list(self._queues.values())
        for changes in every:
            changes.mark()


class EmulatorMiddleware:
    def __init__(self, app: WsgiApp, deliveries: DeliveryLog) -> None:
        self._app = app
        self._deliveries = deliveries
        self._locks = {"dynamodb": threading.Lock(), "sqs": threading.Lock()}
        self.sqs_changes = QueueChanges()
        self.table_writes = Changes()
        self._releasing = threading.Event()

    def release_waits(self) -> None:
        """End every waiting receive now, and let none wait from here on; wake every stream reader
        waiting for a write, to see its stop (the stack is stopping)."""
        self._releasing.set()
        self.sqs_changes.mark(None)
        self.table_writes.mark()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        body = _read_body(environ)
        service = signing_service(environ)
        if is_s3_form_put(environ, service):
            environ["CONTENT_TYPE"] = S3_DEFAULT_CONTENT_TYPE
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
                self.sqs_changes.mark(_named_queue(body))
            elif writes_to_a_table(service, target):
                self.table_writes.mark()
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
        headers = list(captured["headers"])
        if environ.get("REQUEST_METHOD") != "HEAD":
            # A HEAD's Content-Length is its GET's (S3's HeadObject: the object's size), not its own.
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
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
        changes = self.sqs_changes.of(_queue_name(request.get("QueueUrl")))
        while True:
            seen = changes.seen()
            with self._locks["sqs"]:
                status, headers, payload = self._call(environ, short_poll)
                due = _next_message_due_in(environ, request)
            remaining = deadline - time.monotonic()
            done = remaining <= 0 or self._releasing.is_set()
            if done or not status.startswith("2") or _has_messages(payload):
                return status, headers, payload
            changes.wait_after(seen, min(remaining, due))

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
                email=call.email,
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


def _next_message_due_in(environ: dict[str, Any], request: dict[str, Any]) -> float:
    """Seconds until the queue's next hidden (in flight) or delayed message can be received again,
    read from moto's queue (under the SQS lock); infinite when it holds none. A receive that found
    nothing sees no message receivable now; should the queue hold one all the same, or not be found,
    the answer is REPOLL_SECONDS, as a plain short-poll loop would wait."""
    scope = _credential_scope(environ)
    try:
        account, name = urlparse(str(request["QueueUrl"])).path.strip("/").split("/")[-2:]
        queue = sqs_backends[account][scope[2]].queues[name]
        messages = list(queue._messages)
    except (KeyError, IndexError, ValueError, AttributeError):
        return REPOLL_SECONDS
    now_ms = time.time() * 1000
    due_ms = math.inf
    for message in messages:
        receivable_at = max(float(message.visible_at), float(message.delayed_until))
        if receivable_at <= now_ms:
            return REPOLL_SECONDS
        due_ms = min(due_ms, receivable_at)
    # moto's clock has milliseconds: a moment past the due time, the message is visible.
    return (due_ms - now_ms) / 1000 + 0.005


def _has_messages(payload: bytes) -> bool:
    try:
        return bool(json.loads(payload or b"{}").get("Messages"))
    except ValueError:
        return True
