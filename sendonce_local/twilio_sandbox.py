"""The provider sandbox playing Twilio's Messages API, on its own port.

Invariant: a message is in Twilio's list (and in the sandbox's deliveries, with `provider:
"twilio"`) if and only if a create call was accepted (201), faults included: `timeout` accepts
then answers late, every other fault accepts nothing.

POST /2010-04-01/Accounts/{Sid}/Messages.json   form `To`, `Body`, `From` or `MessagingServiceSid`,
    `StatusCallback`: 201 with the message ("SM" + 32 hex); our message id is read from the
    StatusCallback URL's `messageId` query parameter (how the dispatcher passes it), else null
GET  /2010-04-01/Accounts/{Sid}/Messages.json   the accepted messages, newest first, filtered by
    `To`, `From`, `DateSent`, `DateSent<` (on or before), `DateSent>` (on or after); `PageSize`,
    `Page`. A message counts as sent when it was created.
GET  /2010-04-01/Accounts/{Sid}/Messages/{MessageSid}.json   one message

Every call needs HTTP basic auth with the local account SID and auth token (else 401, code
20003). Errors are Twilio's `{"code", "message", "more_info", "status"}`. Each connection carries
one answer, so that a `refused` fault (its listening socket closed) refuses every next call.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
import re
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from email.utils import format_datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sendonce.channels import normalise_recipient
from sendonce.messages.recipients import InvalidRecipient

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.faults import TWILIO_CHANNEL, FaultBoard
from sendonce_local.http_server import Answer, JsonHandler, ReopenableServer

log = logging.getLogger("local-stack.sandbox")

API_VERSION = "2010-04-01"
DEFAULT_PROVIDER_TIMEOUT_SECONDS = 10.0
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
_MESSAGES = re.compile(r"^/2010-04-01/Accounts/([^/]+)/Messages\.json$")
_MESSAGE = re.compile(r"^/2010-04-01/Accounts/([^/]+)/Messages/([^/]+)\.json$")


@dataclass(frozen=True)
class TwilioCredentials:
    account_sid: str
    auth_token: str = field(repr=False)

    @classmethod
    def generate(cls) -> TwilioCredentials:
        return cls("AC" + secrets.token_hex(16), secrets.token_hex(16))


@dataclass(frozen=True)
class TwilioMessage:
    sid: str
    account_sid: str
    to: str
    from_: str | None
    messaging_service_sid: str | None
    body: str
    status_callback: str | None
    message_id: str | None
    created_at: datetime

    def as_json(self) -> dict[str, Any]:
        created = twilio_date(self.created_at)
        uri = f"/{API_VERSION}/Accounts/{self.account_sid}/Messages/{self.sid}.json"
        return {
            "account_sid": self.account_sid,
            "api_version": API_VERSION,
            "body": self.body,
            "date_created": created,
            "date_sent": created,  # the sandbox sends what it accepts at once
            "date_updated": created,
            "direction": "outbound-api",
            "error_code": None,
            "error_message": None,
            "from": self.from_,
            "messaging_service_sid": self.messaging_service_sid,
            "num_media": "0",
            "num_segments": "1",
            "price": None,
            "price_unit": "USD",
            "sid": self.sid,
            # Twilio's first status: `queued` from a number, `accepted` through a Messaging Service.
            "status": "queued" if self.from_ else "accepted",
            "subresource_uris": {"media": uri.replace(".json", "/Media.json")},
            "to": self.to,
            "uri": uri,
        }


def twilio_date(moment: datetime) -> str:
    """RFC 2822, as Twilio writes dates: `Mon, 16 Aug 2010 03:45:01 +0000`."""
    return format_datetime(moment.astimezone(UTC).replace(microsecond=0))


def twilio_signature(auth_token: str, url: str, params: Mapping[str, str]) -> str:
    """`X-Twilio-Signature`: base64 HMAC-SHA1, keyed with the auth token, of the full URL followed by
    each POST parameter's name and value, sorted by name."""
    text = url + "".join(name + params[name] for name in sorted(params))
    digest = hmac.new(auth_token.encode("utf-8"), text.encode("utf-8"), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def twilio_error(status: int, code: int, message: str) -> Answer:
    return Answer(
        status,
        {
            "code": code,
            "message": message,
            "more_info": f"https://www.twilio.com/docs/errors/{code}",
            "status": status,
        },
    )


def provider_timeout_seconds() -> float:
    try:
        return float(os.environ.get("SENDONCE_PROVIDER_TIMEOUT_SECONDS") or DEFAULT_PROVIDER_TIMEOUT_SECONDS)
    except ValueError:
        return DEFAULT_PROVIDER_TIMEOUT_SECONDS


class TwilioProvider:
    """Twilio's Messages API with the sandbox's faults; thread-safe."""

    def __init__(
        self,
        deliveries: DeliveryLog,
        faults: FaultBoard,
        credentials: Callable[[], TwilioCredentials],
        on_accepted: Callable[[TwilioMessage], None] | None = None,
    ) -> None:
        """`on_accepted`: called with each message accepted (its status callbacks are planned there)."""
        self._deliveries = deliveries
        self._faults = faults
        self._credentials = credentials
        self._on_accepted = on_accepted
        self._lock = threading.Lock()
        self._messages: list[TwilioMessage] = []

    def messages(self) -> list[TwilioMessage]:
        with self._lock:
            return list(self._messages)

    def create(self, authorization: str | None, account_sid: str, form: Mapping[str, list[str]]) -> Answer:
        refused = self._refuse(authorization, account_sid)
        if refused is not None:
            return refused
        to, body = _one(form, "To"), _one(form, "Body")
        sender, service = _one(form, "From"), _one(form, "MessagingServiceSid")
        callback = _one(form, "StatusCallback")
        if not to:
            return twilio_error(400, 21604, "A 'To' phone number is required.")
        if not body:
            return twilio_error(400, 21602, "Message body is required.")
        if not sender and not service:
            return twilio_error(400, 21603, "A 'From' phone number is required.")
        try:
            to = normalise_recipient(TWILIO_CHANNEL, to).address
        except InvalidRecipient:
            return twilio_error(400, 21211, f"Invalid 'To' Phone Number: {to}")
        self._faults.received("twilio", TWILIO_CHANNEL, to)
        fault = self._faults.take("twilio", TWILIO_CHANNEL, to)
        mode = fault.mode if fault is not None else None
        late = provider_timeout_seconds() + 1
        if mode == "error_500":
            return twilio_error(500, 20500, "Internal Server Error")
        if mode == "error_400":
            return twilio_error(400, 21211, f"Invalid 'To' Phone Number: {to}")
        if mode == "error_403":
            return twilio_error(403, 20403, "Forbidden: the account may not send this message")
        if mode == "timeout_unaccepted":
            return Answer(504, {}, delay_seconds=late, hang=True)
        message = TwilioMessage(
            sid="SM" + secrets.token_hex(16),
            account_sid=account_sid,
            to=to,
            from_=sender or None,
            messaging_service_sid=service or None,
            body=body,
            status_callback=callback or None,
            message_id=_message_id_of(callback),
            created_at=datetime.now(UTC),
        )
        with self._lock:
            self._messages.append(message)
        self._deliveries.record(
            message_id=message.message_id,
            channel=TWILIO_CHANNEL,
            to=to,
            subject=None,
            body=body,
            provider="twilio",
            validity=_validity(form),
        )
        if self._on_accepted is not None:
            try:
                self._on_accepted(message)
            except Exception:
                log.exception("planning the status callbacks of %s failed", message.sid)
        return Answer(201, message.as_json(), delay_seconds=late if mode == "timeout" else 0.0)

    def list(self, authorization: str | None, account_sid: str, query: Mapping[str, list[str]]) -> Answer:
        refused = self._refuse(authorization, account_sid)
        if refused is not None:
            return refused
        try:
            kept = [m for m in self.messages() if _kept(m, query)]
            page_size = min(int(_one(query, "PageSize") or DEFAULT_PAGE_SIZE), MAX_PAGE_SIZE)
            page = int(_one(query, "Page") or 0)
            if page_size < 1 or page < 0:
                raise ValueError("PageSize and Page")
        except ValueError as error:
            return twilio_error(400, 20001, f"Invalid parameter: {error}")
        kept.sort(key=lambda m: m.created_at, reverse=True)
        start = page * page_size
        shown = kept[start : start + page_size]
        uri = f"/{API_VERSION}/Accounts/{account_sid}/Messages.json"

        def page_uri(number: int) -> str:
            return f"{uri}?PageSize={page_size}&Page={number}"

        return Answer(
            200,
            {
                "messages": [m.as_json() for m in shown],
                "end": start + max(len(shown) - 1, 0),
                "first_page_uri": page_uri(0),
                "next_page_uri": page_uri(page + 1) if start + page_size < len(kept) else None,
                "page": page,
                "page_size": page_size,
                "previous_page_uri": page_uri(page - 1) if page > 0 else None,
                "start": start,
                "uri": page_uri(page),
            },
        )

    def fetch(self, authorization: str | None, account_sid: str, sid: str) -> Answer:
        refused = self._refuse(authorization, account_sid)
        if refused is not None:
            return refused
        found = next((m for m in self.messages() if m.sid == sid), None)
        if found is None:
            return twilio_error(404, 20404, f"The requested resource {sid} was not found")
        return Answer(200, found.as_json())

    def _refuse(self, authorization: str | None, account_sid: str) -> Answer | None:
        credentials = self._credentials()
        given = _basic(authorization)
        if given is None or not (
            hmac.compare_digest(given[0], credentials.account_sid)
            and hmac.compare_digest(given[1], credentials.auth_token)
        ):
            return twilio_error(401, 20003, "Authentication Error - invalid username")
        if account_sid != credentials.account_sid:
            return twilio_error(404, 20404, f"The requested resource /Accounts/{account_sid} was not found")
        return None


def _basic(authorization: str | None) -> tuple[str, str] | None:
    scheme, _, encoded = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, colon, password = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if colon else None


def _one(form: Mapping[str, list[str]], name: str) -> str:
    values = form.get(name) or [""]
    return values[-1]


def _validity(form: Mapping[str, list[str]]) -> dict[str, Any] | None:
    """The call's `ValidityPeriod` (seconds), as a delivery names it; None when it gave none."""
    period = _one(form, "ValidityPeriod")
    if not period:
        return None
    return {"validityPeriod": int(period) if period.isdigit() else period}


def _message_id_of(callback: str) -> str | None:
    if not callback:
        return None
    values = parse_qs(urlsplit(callback).query).get("messageId")
    return values[0] if values else None


def _kept(message: TwilioMessage, query: Mapping[str, list[str]]) -> bool:
    to, sender = _one(query, "To"), _one(query, "From")
    if to and message.to != to:
        return False
    if sender and message.from_ != sender:
        return False
    # Twilio compares sent dates to the second: `DateSent>=2024-05-01T10:00:00Z` is written
    # `DateSent>` in a query (the `=` is the parameter's), as its client libraries do.
    sent = message.created_at.replace(microsecond=0)
    for name in ("DateSent", "DateSent<", "DateSent>"):
        value = _one(query, name)
        if not value:
            continue
        low, high = _date_range(value)
        if name == "DateSent" and not low <= sent <= high:
            return False
        if name == "DateSent<" and sent > high:
            return False
        if name == "DateSent>" and sent < low:
            return False
    return True


def _date_range(value: str) -> tuple[datetime, datetime]:
    """A date (its whole day, UTC) or an ISO 8601 moment (that second); ValueError otherwise."""
    try:
        day = date.fromisoformat(value)
    except ValueError:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        moment = moment.astimezone(UTC).replace(microsecond=0)
        return moment, moment
    start = datetime.combine(day, time(0), tzinfo=UTC)
    return start, start + timedelta(days=1, seconds=-1)


class TwilioServer(ReopenableServer):
    def __init__(self, host: str, port: int, provider: TwilioProvider) -> None:
        super().__init__(host, port, TwilioHandler, "sandbox-twilio", provider=provider)


class TwilioHandler(JsonHandler):
    provider: TwilioProvider
    one_answer_per_connection = True

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        raw = self._body()
        found = _MESSAGES.match(path)
        if found is None:
            return self._answer(twilio_error(404, 20404, f"The requested resource {path} was not found"))
        form = parse_qs(raw.decode("utf-8", errors="replace"), keep_blank_values=True)
        self._answer(self.provider.create(self.headers.get("Authorization"), found.group(1), form))

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        authorization = self.headers.get("Authorization")
        listed, one = _MESSAGES.match(parts.path), _MESSAGE.match(parts.path)
        if listed is not None:
            query = parse_qs(parts.query, keep_blank_values=True)
            return self._answer(self.provider.list(authorization, listed.group(1), query))
        if one is not None:
            return self._answer(self.provider.fetch(authorization, one.group(1), one.group(2)))
        self._answer(twilio_error(404, 20404, f"The requested resource {parts.path} was not found"))
