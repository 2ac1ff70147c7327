"""Twilio's REST API played in process: an opener that answers the real `TwilioProvider` as Twilio
would, or fails the way a classification signal describes, with no socket opened.

`twilio_fault(signal)` makes the provider's `send` meet what a `twilio` row of
`classification.TABLE` names, and returns what it raised: the table's test holds every row to it.
"""

from __future__ import annotations

import http.client
import io
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sendonce.messages.model import Channel, Message, Status
from sendonce.providers.twilio_provider import TwilioCredentials, TwilioProvider

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ACCOUNT_SID = "AC" + "0" * 32
AUTH_TOKEN = "tok_unit"
CREDENTIALS = TwilioCredentials(ACCOUNT_SID, AUTH_TOKEN)
BASE_URL = "https://api.twilio.test"
SENDER = "+15550100999"
CALLBACK_URL = "https://api.sendonce.test/v1/webhooks/twilio"
SID = "SM" + "a" * 32


def sms(
    body: str = "hello", to: str = "+15550100000", message_id: str = "msg_01JDZ0000000000000000000000"
) -> Message:
    return Message(
        id=message_id,
        workspace_id="ws_a",
        channel=Channel("sms"),
        to=to,
        body=body,
        status=Status.SENDING,
        created_at=NOW,
        updated_at=NOW,
        attempts=1,
    )


class Answer(io.BytesIO):
    """A 2xx response as urllib's opener returns it."""

    def __init__(self, body: bytes, status: int = 201) -> None:
        super().__init__(body)
        self.status = status


@dataclass
class Seen:
    """One request the opener was handed, as Twilio would read it."""

    method: str
    url: str
    headers: dict[str, str]
    form: dict[str, list[str]]
    timeout: float

    @property
    def path(self) -> str:
        return urlsplit(self.url).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.url).query)


# What the opener does with a request: answer it (an Answer) or raise (an HTTPError, a timeout...).
Reply = Callable[[urllib.request.Request], Answer]


@dataclass
class FakeOpener:
    replies: list[Reply] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)

    def open(self, request: urllib.request.Request, timeout: float) -> Answer:
        data = request.data if isinstance(request.data, bytes) else b""
        self.seen.append(
            Seen(
                request.get_method(),
                request.full_url,
                {name.lower(): value for name, value in request.header_items()},
                parse_qs(data.decode("utf-8"), keep_blank_values=True),
                timeout,
            )
        )
        return self.replies.pop(0)(request)


def answering(body: Any, status: int = 201) -> Reply:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return lambda request: Answer(raw, status)


def refusing(status: int, body: Any = b"") -> Reply:
    """An HTTP error answer, with a body (Twilio's error JSON, when a dict)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()

    def reply(request: urllib.request.Request) -> Answer:
        raise urllib.error.HTTPError(
            request.full_url, status, "error", http.client.HTTPMessage(), io.BytesIO(raw)
        )

    return reply


def raising(error: BaseException) -> Reply:
    def reply(request: urllib.request.Request) -> Answer:
        raise error

    return reply


def provider(opener: FakeOpener, *, sender: str = SENDER, callback: str = CALLBACK_URL) -> TwilioProvider:
    return TwilioProvider(
        CREDENTIALS,
        base_url=BASE_URL,
        sender=sender,
        status_callback_url=callback,
        timeout_seconds=5.0,
        visibility_seconds=10.0,
        opener=opener,
    )


def twilio_error(code: int, status: int) -> dict[str, Any]:
    """Twilio's error body (its REST API's error JSON)."""
    return {
        "code": code,
        "message": f"error {code}",
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
        "status": status,
    }


# The HTTP status Twilio answers each error code of the table with (its error dictionary).
_CODE_STATUS = {20003: 401, 20404: 404, 20429: 429}


def _fault_reply(signal: str) -> Reply:
    kind, _, value = signal.partition(":")
    if signal == "connect_failed":  # refused before the request was written
        return raising(urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")))
    if signal == "timeout":  # written; no answer in time
        return raising(TimeoutError("timed out"))
    if signal == "unreadable_answer":  # an answer that is no HTTP
        return raising(http.client.BadStatusLine("garbage"))
    if kind == "code":
        code = int(value)
        status = _CODE_STATUS.get(code, 400)
        return refusing(status, twilio_error(code, status))
    if kind == "status":
        # A status with no Twilio error body: an exact one (`status:400`), or one of its class that
        # has no row of its own (`status:4xx`: 403; `status:5xx`: 503).
        status = {"3xx": 302, "4xx": 403, "5xx": 503}.get(value) or int(value)
        return refusing(status, b"<html>not json</html>")
    raise ValueError(f"no fault for the signal {signal!r}")


def twilio_fault(signal: str) -> Exception:
    """What `TwilioProvider.send` raises when Twilio fails the way `signal` describes."""
    opener = FakeOpener([_fault_reply(signal)])
    try:
        provider(opener).send(sms())
    except Exception as error:  # the failure itself is the answer
        return error
    raise AssertionError(f"the send went through despite {signal}")
