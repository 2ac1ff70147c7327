"""The provider sandbox: the HTTP provider the README describes, plus what SES and SNS accepted.

POST /messages     the HTTP provider (Bearer token, Idempotency-Key, 201 {"id": "prov_..."})
GET  /deliveries   every message that reached a provider, in order
DELETE /deliveries empties that list (the HTTP provider's idempotency memory stays)
PUT  /faults       the next N HTTP-provider calls for a channel (and recipient) fail
GET  /faults, DELETE /faults   inspect / clear the faults still armed
GET  /events       every delivery event the sandbox reported (webhooks, SES notifications), with
                   the answer it got; DELETE /events empties that list
POST /inbound      a text a recipient sent to the shared number: {"channel": "sms", "from", "body"};
                   an opt-out keyword (STOP, STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT, alone, any case)
                   makes the HTTP provider report `opted_out` for that number; anything else nothing
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from sendonce.channels import UnknownChannel, normalise_recipient
from sendonce.messages.recipients import InvalidRecipient
from sendonce.suppressions.model import is_stop

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.delivery_reporter import ReportLog
from sendonce_local.http_server import BackgroundServer

log = logging.getLogger("local-stack.sandbox")

FAULT_MODES = ("error_500", "error_400", "timeout")
# Replies reach the shared sending number by text: sms, or iMessage from a phone number or Apple ID.
INBOUND_CHANNELS = ("sms", "imessage")
# Reports an opt-out from a normalised recipient; returns the reported event's id.
OptOut = Callable[[str], str]


@dataclass(frozen=True)
class Inbound:
    """A text to the shared number, read: who sent it (normalised), and whether it opts out."""

    sender: str
    opts_out: bool


def read_inbound(request: Any) -> Inbound:
    """`{"channel", "from", "body"}`; ValueError says what is wrong with it."""
    if not isinstance(request, dict):
        raise ValueError('the body must be {"channel": "sms", "from": <phone>, "body": <text>}')
    channel, sender, body = request.get("channel"), request.get("from"), request.get("body")
    if channel not in INBOUND_CHANNELS:
        raise ValueError(f"channel must be one of {', '.join(INBOUND_CHANNELS)}")
    if not isinstance(sender, str) or not isinstance(body, str):
        raise ValueError("from and body must be strings")
    try:
        normalised = normalise_recipient(channel, sender).address
    except (InvalidRecipient, UnknownChannel) as error:
        raise ValueError(f"from {error}") from None
    return Inbound(normalised, is_stop(body))


DEFAULT_PROVIDER_TIMEOUT_SECONDS = 10.0


@dataclass
class Fault:
    channel: str
    to: str | None
    mode: str
    remaining: int

    def matches(self, channel: str | None, to: object) -> bool:
        return (
            self.remaining > 0
            and self.channel == channel
            and (self.to is None or _same_recipient(self.to, to))
        )

    def as_json(self) -> dict[str, Any]:
        return {"channel": self.channel, "to": self.to, "mode": self.mode, "count": self.remaining}


def _same_recipient(a: str, b: object) -> bool:
    """Whether a fault's recipient is the call's (`b`: its `to`, or any address of an email's list)."""
    if isinstance(b, list):
        return any(_same_recipient(a, item) for item in b)
    if not isinstance(b, str):
        return False
    if "@" in a:
        return a.lower() == b.lower()
    return a == b


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    delay_seconds: float = 0.0


class HttpProvider:
    """The HTTP provider of the README, with armed faults; thread-safe."""

    def __init__(self, deliveries: DeliveryLog, token: Callable[[], str]) -> None:
        self._deliveries = deliveries
        self._token = token
        self._lock = threading.Lock()
        self._answers: dict[str, Answer] = {}
        self._faults: list[Fault] = []

    def arm(self, request: dict[str, Any]) -> Fault:
        mode, channel, count = request.get("mode"), request.get("channel"), request.get("count", 1)
        to = request.get("to")
        if mode not in FAULT_MODES:
            raise ValueError(f"mode must be one of {', '.join(FAULT_MODES)}")
        if not isinstance(channel, str) or not channel:
            raise ValueError("channel is required")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError("count must be a positive integer")
        if to is not None and not isinstance(to, str):
            raise ValueError("to must be a string")
        fault = Fault(channel, to, mode, count)
        with self._lock:
            self._faults.append(fault)
        return fault

    def faults(self) -> list[dict[str, Any]]:
        with self._lock:
            return [fault.as_json() for fault in self._faults if fault.remaining > 0]

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def send(self, authorization: str | None, idempotency_key: str | None, raw_body: bytes) -> Answer:
        if authorization != f"Bearer {self._token()}":
            return Answer(401, {"error": "unauthorized"})
        if not idempotency_key:
            return Answer(400, {"error": "missing Idempotency-Key"})
        try:
            message = json.loads(raw_body)
            if not isinstance(message, dict):
                raise TypeError("not an object")
        except (ValueError, TypeError):
            return Answer(400, {"error": "body must be a JSON object"})
        with self._lock:
            first = self._answers.get(idempotency_key)
            if first is not None:
                return Answer(first.status, first.body)
            fault = next(
                (f for f in self._faults if f.matches(message.get("channel"), message.get("to"))), None
            )
            if fault is not None:
                fault.remaining -= 1
                if fault.mode == "error_500":
                    return Answer(500, {"error": "injected fault: error_500"})
                if fault.mode == "error_400":
                    return Answer(400, {"error": "injected fault: error_400"})
            answer = Answer(201, {"id": "prov_" + secrets.token_hex(12)})
            self._answers[idempotency_key] = answer
            self._deliveries.record(
                message_id=message.get("messageId"),
                channel=message.get("channel"),
                to=message.get("to"),
                subject=message.get("subject"),
                body=message.get("body"),
                provider="http",
                email={name: message[name] for name in ("cc", "bcc", "replyTo", "html") if name in message},
            )
        if fault is not None and fault.mode == "timeout":
            return Answer(answer.status, answer.body, delay_seconds=_provider_timeout_seconds() + 1)
        return answer


def _provider_timeout_seconds() -> float:
    try:
        return float(os.environ.get("SENDONCE_PROVIDER_TIMEOUT_SECONDS") or DEFAULT_PROVIDER_TIMEOUT_SECONDS)
    except ValueError:
        return DEFAULT_PROVIDER_TIMEOUT_SECONDS


class SandboxServer(BackgroundServer):
    def __init__(
        self,
        host: str,
        port: int,
        deliveries: DeliveryLog,
        provider: HttpProvider,
        reports: ReportLog | None = None,
        *,
        opt_out: OptOut | None = None,
    ) -> None:
        """`opt_out`: how a STOP is reported (None: delivery events are off, and /inbound answers 503)."""
        super().__init__(
            host,
            port,
            SandboxHandler,
            "sandbox",
            deliveries=deliveries,
            provider=provider,
            reports=reports or ReportLog(),
            # A function as a class attribute would be bound to the handler: kept as it is.
            opt_out=staticmethod(opt_out) if opt_out is not None else None,
        )


class SandboxHandler(BaseHTTPRequestHandler):
    deliveries: DeliveryLog
    provider: HttpProvider
    reports: ReportLog
    opt_out: OptOut | None
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        if path == "/inbound":
            return self._inbound()
        if path != "/messages":
            return self._send(404, {"error": "not found"})
        answer = self.provider.send(
            self.headers.get("Authorization"), self.headers.get("Idempotency-Key"), self._body()
        )
        if answer.delay_seconds:
            time.sleep(answer.delay_seconds)
        self._send(answer.status, answer.body)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/deliveries":
            return self._send(200, {"deliveries": self.deliveries.all()})
        if path == "/faults":
            return self._send(200, {"faults": self.provider.faults()})
        if path == "/events":
            return self._send(200, {"events": self.reports.all()})
        if path == "/health":
            return self._send(200, {"status": "ok"})
        self._send(404, {"error": "not found"})

    def do_DELETE(self) -> None:
        path = self.path.split("?")[0]
        self._body()
        if path == "/deliveries":
            self.deliveries.clear()
            return self._send(200, {"deliveries": []})
        if path == "/faults":
            self.provider.clear_faults()
            return self._send(200, {"faults": []})
        if path == "/events":
            self.reports.clear()
            return self._send(200, {"events": []})
        self._send(404, {"error": "not found"})

    def do_PUT(self) -> None:
        if self.path.split("?")[0] != "/faults":
            return self._send(404, {"error": "not found"})
        try:
            fault = self.provider.arm(json.loads(self._body() or b"{}"))
        except (ValueError, TypeError, AttributeError) as error:
            return self._send(400, {"error": str(error)})
        self._send(200, {"fault": fault.as_json()})

    def _inbound(self) -> None:
        try:
            inbound = read_inbound(json.loads(self._body() or b"null"))
        except ValueError as error:
            return self._send(400, {"error": str(error)})
        if not inbound.opts_out:
            return self._send(200, {"optedOut": False})
        if self.opt_out is None:
            return self._send(503, {"error": "delivery events are off (SENDONCE_SANDBOX_DELIVERY_EVENTS)"})
        self._send(200, {"optedOut": True, "eventId": self.opt_out(inbound.sender)})

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            log.info("the client left before the answer (%s %s)", self.command, self.path)

    def log_message(self, format: str, *args: Any) -> None:
        log.info("sandbox %s", format % args)
