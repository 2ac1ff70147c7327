"""Twilio's status callbacks to /v1/webhooks/twilio: their signature, and what they say of a message.

Twilio signs a callback with the account's auth token: base64 HMAC-SHA1 over the URL it called,
followed by each form parameter's name and value, sorted by name (its "Webhooks security"). That
URL is the StatusCallback our send gave, which carries our message id (`messageId`): the id is
signed with the rest, and nothing unsigned names a message. Twilio is not consistent about writing
the default port into what it signs, so the URL is checked with it and without it, as Twilio's own
helper library does.

A callback's event id is its message's sid and status: a repeated callback is the same event, and
takes effect once. Only `sent`, `delivered`, `undelivered` and `failed` change a message; every
other status is acknowledged and changes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from datetime import datetime
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from sendonce.clock import rfc3339
from sendonce.messages.model import MessageFailure
from sendonce.messages.recipients import InvalidRecipient, normalise_phone_or_email
from sendonce.provider_events.model import ProviderEvent, ProviderEventType
from sendonce.suppressions.model import Reason

PROVIDER = "twilio"
# Twilio's callback has about 15 parameters; a form of many more is no callback of its.
MAX_FIELDS = 100
MAX_MESSAGE_ID_CHARS = 64
MAX_SID_CHARS = 64
# The recipient replied STOP (Twilio's error 21610): the message failed and the recipient opted out.
OPTED_OUT_CODE = "21610"
_TYPES = {
    "sent": ProviderEventType.SENT,
    "delivered": ProviderEventType.DELIVERED,
    "undelivered": ProviderEventType.FAILED,
    "failed": ProviderEventType.FAILED,
}
_DEFAULT_PORTS = {"https": 443, "http": 80}


class InvalidCallback(ValueError):
    """A callback that cannot be read: `field` names what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field} {message}")
        self.field = field
        self.message = message


def parse_form(body: bytes) -> list[tuple[str, str]]:
    """The form's parameters, in order, repeats kept; InvalidCallback when it is no UTF-8 form."""
    try:
        return parse_qsl(
            body.decode("utf-8"),
            keep_blank_values=True,
            strict_parsing=False,
            errors="strict",
            max_num_fields=MAX_FIELDS,
        )
    except (UnicodeDecodeError, ValueError):
        raise InvalidCallback("body", "is not a UTF-8 form") from None


def called_url(scheme: str, host: str, raw_path: str, raw_query: str) -> str:
    """The URL Twilio called, as it sent it: the query exactly as it came, since it is signed so."""
    return f"{scheme}://{host}{raw_path}" + (f"?{raw_query}" if raw_query else "")


def signature(auth_token: str, url: str, parameters: Sequence[tuple[str, str]]) -> str:
    """Twilio's signature of a form callback to `url`."""
    values: dict[str, set[str]] = {}
    for name, value in parameters:
        values.setdefault(name, set()).add(value)
    # Twilio's helper library signs each distinct value of a repeated name, in order.
    signed = url + "".join(name + value for name in sorted(values) for value in sorted(values[name]))
    digest = hmac.new(auth_token.encode("utf-8"), signed.encode("utf-8"), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def signature_matches(
    auth_token: str, url: str, parameters: Sequence[tuple[str, str]], given: str | None
) -> bool:
    """Whether `given` (X-Twilio-Signature) signs the callback, its URL with or without the port."""
    if not given or not auth_token:
        return False
    return any(
        hmac.compare_digest(signature(auth_token, candidate, parameters).encode(), given.encode())
        for candidate in _with_and_without_port(url)
    )


def _with_and_without_port(url: str) -> tuple[str, ...]:
    parts = urlsplit(url)
    default = _DEFAULT_PORTS.get(parts.scheme)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # no port Twilio could have called: the URL as it is, alone
        return (url,)
    userinfo = parts.netloc.rpartition("@")[0]
    prefix = f"{userinfo}@" if userinfo else ""
    if port is None:
        with_port = f"{prefix}{host}:{default}" if default else None
        return (url, urlunsplit(parts._replace(netloc=with_port))) if with_port else (url,)
    return (url, urlunsplit(parts._replace(netloc=f"{prefix}{host}")))


def message_id_of(raw_query: str) -> str | None:
    """Our message id, from the callback URL's `messageId` (signed with it); None when absent."""
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        if name == "messageId":
            if not 0 < len(value) <= MAX_MESSAGE_ID_CHARS:
                raise InvalidCallback("messageId", f"must be 1 to {MAX_MESSAGE_ID_CHARS} characters")
            return value
    return None


def status_event(
    parameters: Mapping[str, str], message_id: str | None, received_at: datetime
) -> ProviderEvent | None:
    """The event a callback makes of its message; None for a status that changes nothing, or a
    callback that names no message of ours (one sent by other means than this service)."""
    sid = parameters.get("MessageSid") or parameters.get("SmsSid") or ""
    status = parameters.get("MessageStatus") or parameters.get("SmsStatus") or ""
    if not 0 < len(sid) <= MAX_SID_CHARS:
        raise InvalidCallback("MessageSid", f"is required: 1 to {MAX_SID_CHARS} characters")
    if not status:
        raise InvalidCallback("MessageStatus", "is required")
    event_type = _TYPES.get(status)
    if event_type is None or message_id is None:
        return None
    error, suppress = None, None
    if event_type is ProviderEventType.FAILED:
        code = parameters.get("ErrorCode", "").strip()
        code = code if code.isdigit() and len(code) <= 10 else ""
        message = parameters.get("ErrorMessage") or f"Twilio reported the message {status}" + (
            f" (error {code})" if code else ""
        )
        error = MessageFailure(f"twilio_{code or status}", message[:2000])
        suppress = Reason.OPTED_OUT if code == OPTED_OUT_CODE else None
    return ProviderEvent(
        provider=PROVIDER,
        event_id=f"{sid}:{status}",
        message_id=message_id,
        type=event_type,
        occurred_at=rfc3339(received_at),  # a callback carries no time of its own: when it came
        error=error,
        suppress=suppress,
        to=_recipient(parameters.get("To")),
    )


def _recipient(raw: str | None) -> str | None:
    """The recipient Twilio names, normalised; None (the message's own) when it names none we read."""
    if not raw:
        return None
    try:
        return normalise_phone_or_email(raw).address
    except InvalidRecipient:
        return None
