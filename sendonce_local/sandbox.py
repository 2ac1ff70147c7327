"""The provider sandbox: the HTTP provider the README describes, Twilio (`twilio_sandbox`), plus
what SES and SNS accepted.

Invariant: `deliveries` holds one entry per call a provider accepted, naming the `provider` and our
`messageId`; a faulted call that accepts nothing (every mode but `timeout`) leaves none.

Ports: the main one serves the endpoints below; the HTTP provider also has its own port, and so
has Twilio, so that a `refused` fault can close a provider's listening socket (`faults`).

POST /messages     the HTTP provider (Bearer token, Idempotency-Key, 201 {"id": "prov_..."}); on
                   its own port too, which is the one the dispatchers are given
GET  /deliveries   every message that reached a provider, in order
DELETE /deliveries empties that list (the providers' idempotency memory and Twilio's list stay)
PUT  /faults       {"provider": "http"|"twilio", "channel", "to"?, "mode", "count"?}: the next N
                   calls of that provider for a channel (and recipient) fail (`faults`)
GET  /faults, DELETE /faults   inspect / clear the faults still armed (clearing reopens ports)
GET  /events       every delivery event the sandbox reported (webhooks, Twilio's status callbacks,
                   SES notifications), with the answer it got; DELETE /events empties that list
POST /inbound      a text a recipient sent to the shared number: {"channel": "sms", "from", "body"};
                   an opt-out keyword (STOP, STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT, alone, any case)
                   makes the HTTP provider report `opted_out` for that number; anything else nothing
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sendonce.channels import UnknownChannel, normalise_recipient
from sendonce.messages.recipients import InvalidRecipient
from sendonce.suppressions.model import is_stop

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.delivery_reporter import ReportLog
from sendonce_local.faults import Fault, FaultBoard
from sendonce_local.http_server import Answer, BackgroundServer, JsonHandler, ReopenableServer
from sendonce_local.twilio_sandbox import provider_timeout_seconds

log = logging.getLogger("local-stack.sandbox")

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


class HttpProvider:
    """The HTTP provider of the README, with the faults armed for it; thread-safe."""

    def __init__(
        self, deliveries: DeliveryLog, token: Callable[[], str], faults: FaultBoard | None = None
    ) -> None:
        """`faults`: the board shared with the sandbox's other providers (its own, if none)."""
        self._deliveries = deliveries
        self._token = token
        self._lock = threading.Lock()
        self._answers: dict[str, Answer] = {}
        self.faults_board = faults if faults is not None else FaultBoard()

    def arm(self, request: dict[str, Any]) -> Fault:
        return self.faults_board.arm(request)

    def faults(self) -> list[dict[str, Any]]:
        return self.faults_board.faults()

    def clear_faults(self) -> None:
        self.faults_board.clear()

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
        channel, to = message.get("channel"), message.get("to")
        self.faults_board.received("http", channel, to)
        late = provider_timeout_seconds() + 1
        with self._lock:
            first = self._answers.get(idempotency_key)
            if first is not None:
                return Answer(first.status, first.body)
            fault = self.faults_board.take("http", channel, to)
            mode = fault.mode if fault is not None else None
            if mode in _REFUSALS:
                status = _REFUSALS[mode]
                return Answer(status, {"error": f"injected fault: {mode}"})
            if mode == "timeout_unaccepted":
                # Nothing remembered: the same key later is a first call, as the provider never saw it.
                return Answer(504, {}, delay_seconds=late, hang=True)
            answer = Answer(201, {"id": "prov_" + secrets.token_hex(12)})
            self._answers[idempotency_key] = answer
            self._deliveries.record(
                message_id=message.get("messageId"),
                channel=channel,
                to=to,
                subject=message.get("subject"),
                body=message.get("body"),
                provider="http",
                email={name: message[name] for name in ("cc", "bcc", "replyTo", "html") if name in message},
                validity={"expiresAt": message["expiresAt"]} if "expiresAt" in message else None,
            )
        if mode == "timeout":
            return Answer(answer.status, answer.body, delay_seconds=late)
        return answer


# Faults that answer at once and accept nothing: the status the HTTP provider answers with.
_REFUSALS = {"error_500": 500, "error_400": 400, "error_403": 403}


class SandboxServer(BackgroundServer):
    """The sandbox's main port: its control endpoints, and the HTTP provider as it always was there."""

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


class HttpProviderServer(ReopenableServer):
    """The HTTP provider on its own port, which a `refused` fault closes."""

    def __init__(self, host: str, port: int, provider: HttpProvider) -> None:
        super().__init__(host, port, HttpProviderHandler, "sandbox-http-provider", provider=provider)


class HttpProviderHandler(JsonHandler):
    provider: HttpProvider
    one_answer_per_connection = True

    def do_POST(self) -> None:
        raw = self._body()
        if self.path.split("?")[0] != "/messages":
            return self._send(404, {"error": "not found"})
        answer = self.provider.send(
            self.headers.get("Authorization"), self.headers.get("Idempotency-Key"), raw
        )
        self._answer(answer)


class SandboxHandler(JsonHandler):
    deliveries: DeliveryLog
    provider: HttpProvider
    reports: ReportLog
    opt_out: OptOut | None

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        if path == "/inbound":
            return self._inbound()
        if path != "/messages":
            return self._send(404, {"error": "not found"})
        # The HTTP provider's first address, kept for whoever still posts here; `refused` cannot
        # close this port (the control endpoints live on it): only the provider's own port.
        answer = self.provider.send(
            self.headers.get("Authorization"), self.headers.get("Idempotency-Key"), self._body()
        )
        self._answer(answer)

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
            self.provider.clear_faults()  # and every port a `refused` fault closed opens again
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
