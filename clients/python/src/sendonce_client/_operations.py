"""Every operation of the API, declared once: its request, and how its answer is read.

The synchronous and the asynchronous clients run the same operations; they differ only in how
they wait. A send's Idempotency-Key is fixed here, when the operation is built, so every attempt
of the call carries the same key with the same bytes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from sendonce_client._retry import Call
from sendonce_client.errors import UnexpectedAnswer, error_of
from sendonce_client.models import (
    BatchItemResult,
    BatchResult,
    Erasure,
    Event,
    Message,
    PromiseDay,
    SendOutcome,
    SendResult,
    SimulatedDelivery,
    Suppression,
    TimelineEntry,
    Usage,
    WebhookEndpoint,
    page_items,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """A success: its status, body and headers, and how many attempts the call made."""

    status: int
    body: dict[str, Any]
    headers: Mapping[str, str]
    attempts: int

    @property
    def replayed(self) -> bool:
        return self.headers.get("idempotency-replayed", "").lower() == "true"


@dataclass(frozen=True)
class Operation(Generic[T]):
    call: Call
    read: Callable[[Answer], T]


def answer_of(response: httpx.Response, attempts: int) -> Answer:
    """The answer, or the typed exception of an error answer."""
    try:
        body = response.json()
    except ValueError:
        raise UnexpectedAnswer(response.status_code, response.text) from None
    headers = {name.lower(): value for name, value in response.headers.items()}
    if 200 <= response.status_code < 300 and isinstance(body, dict) and body.get("success") is True:
        return Answer(response.status_code, body, headers, attempts)
    raise error_of(response.status_code, body, headers)


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def _json(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _instant(value: datetime | str | None) -> str | None:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("send_at needs a time zone")
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def _id(value: str) -> str:
    return quote(value, safe="")


def message_body(
    channel: str,
    to: str | Sequence[str],
    body: str | None,
    *,
    subject: str | None = None,
    send_at: datetime | str | None = None,
    metadata: Mapping[str, str] | None = None,
    smart_encoding: bool = False,
    cc: Sequence[str] | None = None,
    bcc: Sequence[str] | None = None,
    reply_to: str | None = None,
    html: str | None = None,
    template: str | None = None,
    template_version: int | None = None,
    data: Mapping[str, Any] | None = None,
    priority: str | None = None,
    timezone: str | None = None,
    expires_at: datetime | str | None = None,
    valid_for_seconds: int | None = None,
) -> dict[str, Any]:
    """The JSON body of one send (and of one batch item, without its key): a written `body`, or a
    `template` rendered with `data` (its latest version, or `template_version`). Email: `to` may be a
    list, and `cc`, `bcc`, `reply_to` and `html` may be given; with `html`, `body` may be None."""
    document: dict[str, Any] = {"channel": channel, "to": to if isinstance(to, str) else list(to)}
    if body is not None:
        document["body"] = body
    for name, value in (("cc", cc), ("bcc", bcc)):
        if value is not None:
            document[name] = list(value)
    if reply_to is not None:
        document["replyTo"] = reply_to
    if html is not None:
        document["html"] = html
    if template is not None:
        document["template"] = {"name": template}
        if template_version is not None:
            document["template"]["version"] = template_version
        document["data"] = dict(data or {})
    if subject is not None:
        document["subject"] = subject
    if send_at is not None:
        document["sendAt"] = _instant(send_at)
    if metadata is not None:
        document["metadata"] = dict(metadata)
    if smart_encoding:
        document["smartEncoding"] = True
    if priority is not None:
        document["priority"] = priority
    if timezone is not None:
        document["timezone"] = timezone
    if valid_for_seconds is not None:
        document["validForSeconds"] = valid_for_seconds
    if expires_at is not None:
        document["expiresAt"] = _instant(expires_at)
    return document


# ---------------------------------------------------------------- messages
def send(document: dict[str, Any], idempotency_key: str | None) -> Operation[SendResult]:
    ours = idempotency_key is None
    key = idempotency_key if idempotency_key is not None else new_idempotency_key()
    call = Call("POST", "/v1/messages", content=_json(document), idempotency_key=key, repeatable=True)

    def read(answer: Answer) -> SendResult:
        body = answer.body
        message = Message.model_validate(body["message"]) if body.get("message") else None
        if body.get("duplicateOnly"):
            outcome = SendOutcome.DUPLICATE
        elif answer.replayed and not (ours or answer.attempts > 1):
            # A replay on the first attempt under the caller's key: an earlier call made it. A
            # replay of our own retry is the answer our earlier attempt lost: this call made it.
            outcome = SendOutcome.REPLAYED
        else:
            outcome = SendOutcome.CREATED
        return SendResult(
            outcome=outcome,
            message=message,
            status=None if body.get("duplicateOnly") else body.get("status"),
            idempotency_key=key,
            attempts=answer.attempts,
            replayed=answer.replayed,
            duplicate_message=body.get("duplicateMessage"),
        )

    return Operation(call, read)


def send_batch(
    items: Sequence[Mapping[str, Any]], validation: str, idempotency_key: str | None
) -> Operation[BatchResult]:
    key = idempotency_key if idempotency_key is not None else new_idempotency_key()
    call = Call(
        "POST",
        "/v1/messages/batch",
        params={"validation": validation},
        content=_json({"messages": [dict(item) for item in items]}),
        idempotency_key=key,
        repeatable=True,
    )

    def read(answer: Answer) -> BatchResult:
        results = [BatchItemResult.model_validate(result) for result in answer.body.get("results") or []]
        return BatchResult(results, key, answer.attempts, answer.replayed)

    return Operation(call, read)


def _message(answer: Answer) -> Message:
    return Message.model_validate(answer.body["message"])


def get_message(message_id: str) -> Operation[Message]:
    return Operation(Call("GET", f"/v1/messages/{_id(message_id)}", repeatable=True), _message)


def list_messages(
    status: str | None,
    limit: int | None,
    cursor: str | None,
    *,
    campaign_id: str | None = None,
    channel: str | None = None,
    to: str | None = None,
) -> Operation[tuple[list[Message], str | None]]:
    params = {
        name: str(value)
        for name, value in (
            ("status", status),
            ("campaignId", campaign_id),
            ("channel", channel),
            ("to", to),
            ("limit", limit),
            ("cursor", cursor),
        )
        if value is not None
    }
    return Operation(
        Call("GET", "/v1/messages", params=params, repeatable=True),
        lambda answer: page_items(answer.body, "messages", Message),
    )


def message_timeline(message_id: str) -> Operation[list[TimelineEntry]]:
    return Operation(
        Call("GET", f"/v1/messages/{_id(message_id)}/timeline", repeatable=True),
        lambda answer: [TimelineEntry.model_validate(entry) for entry in answer.body["timeline"]],
    )


def cancel_message(message_id: str) -> Operation[Message]:
    # Not repeated after a lost answer: a second cancel would answer 409 for the first's success.
    return Operation(Call("DELETE", f"/v1/messages/{_id(message_id)}"), _message)


def edit_message(
    message_id: str,
    body: str | None,
    subject: str | None,
    send_at: datetime | str | None,
    metadata: Mapping[str, str] | None,
) -> Operation[Message]:
    """An edit of what is given; what is None stays as it is."""
    changes: dict[str, Any] = {}
    for name, value in (("body", body), ("subject", subject), ("sendAt", _instant(send_at))):
        if value is not None:
            changes[name] = value
    if metadata is not None:
        changes["metadata"] = dict(metadata)
    # Not repeated after a lost answer either: the API takes no key for an edit.
    return Operation(Call("PATCH", f"/v1/messages/{_id(message_id)}", content=_json(changes)), _message)


# ---------------------------------------------------------------- webhook endpoints
def _endpoint(answer: Answer) -> WebhookEndpoint:
    return WebhookEndpoint.model_validate(answer.body["endpoint"])


def _nothing(answer: Answer) -> None:
    return None


def create_endpoint(
    url: str, event_types: Sequence[str] | None, description: str | None
) -> Operation[WebhookEndpoint]:
    document: dict[str, Any] = {"url": url}
    if event_types is not None:
        document["eventTypes"] = list(event_types)
    if description is not None:
        document["description"] = description
    return Operation(Call("POST", "/v1/webhook-endpoints", content=_json(document)), _endpoint)


def list_endpoints() -> Operation[list[WebhookEndpoint]]:
    return Operation(
        Call("GET", "/v1/webhook-endpoints", repeatable=True),
        lambda answer: [WebhookEndpoint.model_validate(item) for item in answer.body.get("endpoints") or []],
    )


def get_endpoint(endpoint_id: str) -> Operation[WebhookEndpoint]:
    return Operation(Call("GET", f"/v1/webhook-endpoints/{_id(endpoint_id)}", repeatable=True), _endpoint)


def delete_endpoint(endpoint_id: str) -> Operation[None]:
    return Operation(Call("DELETE", f"/v1/webhook-endpoints/{_id(endpoint_id)}"), _nothing)


def rotate_endpoint_secret(endpoint_id: str) -> Operation[WebhookEndpoint]:
    return Operation(Call("POST", f"/v1/webhook-endpoints/{_id(endpoint_id)}/rotate-secret"), _endpoint)


# ---------------------------------------------------------------- events and usage
def list_events(
    message_id: str | None, event_type: str | None, limit: int | None, cursor: str | None
) -> Operation[tuple[list[Event], str | None]]:
    params = {
        name: str(value)
        for name, value in (
            ("messageId", message_id),
            ("type", event_type),
            ("limit", limit),
            ("cursor", cursor),
        )
        if value is not None
    }
    return Operation(
        Call("GET", "/v1/events", params=params, repeatable=True),
        lambda answer: page_items(answer.body, "events", Event),
    )


def get_event(event_id: str) -> Operation[Event]:
    return Operation(
        Call("GET", f"/v1/events/{_id(event_id)}", repeatable=True),
        lambda answer: Event.model_validate(answer.body["event"]),
    )


def redeliver_event(event_id: str, endpoint_id: str | None) -> Operation[None]:
    content = _json({"endpointId": endpoint_id}) if endpoint_id is not None else None
    return Operation(Call("POST", f"/v1/events/{_id(event_id)}/redeliver", content=content), _nothing)


def promise_days(days: int | None) -> Operation[list[PromiseDay]]:
    params = {"days": str(days)} if days is not None else {}
    return Operation(
        Call("GET", "/v1/promise", params=params, repeatable=True),
        lambda answer: [PromiseDay.model_validate(day) for day in answer.body["days"]],
    )


def get_usage() -> Operation[Usage]:
    return Operation(
        Call("GET", "/v1/usage", repeatable=True), lambda answer: Usage.model_validate(answer.body)
    )


# ---------------------------------------------------------------- suppressions and test mode
def _suppression(answer: Answer) -> Suppression:
    return Suppression.model_validate(answer.body["suppression"])


def add_suppression(channel: str, to: str) -> Operation[tuple[Suppression, bool]]:
    """The entry, and whether this call added it (201) or found it there (200). Adding twice is
    harmless, so a lost answer is retried."""
    call = Call("POST", "/v1/suppressions", content=_json({"channel": channel, "to": to}), repeatable=True)
    return Operation(call, lambda answer: (_suppression(answer), answer.status == 201))


def list_suppressions(
    limit: int | None, cursor: str | None
) -> Operation[tuple[list[Suppression], str | None]]:
    params = {name: str(value) for name, value in (("limit", limit), ("cursor", cursor)) if value is not None}
    return Operation(
        Call("GET", "/v1/suppressions", params=params, repeatable=True),
        lambda answer: page_items(answer.body, "suppressions", Suppression),
    )


def get_suppression(to: str) -> Operation[Suppression]:
    return Operation(Call("GET", f"/v1/suppressions/{_id(to)}", repeatable=True), _suppression)


def remove_suppression(to: str) -> Operation[None]:
    # Not repeated after a lost answer: a second removal would answer 404 for the first one's success.
    return Operation(Call("DELETE", f"/v1/suppressions/{_id(to)}"), _nothing)


# ---------------------------------------------------------------- erasures
def _erasure(answer: Answer) -> Erasure:
    return Erasure.model_validate(answer.body["erasure"])


def request_erasure(to: str) -> Operation[Erasure]:
    """Repeated after a lost answer: a second erasure of the same recipient erases nothing more."""
    call = Call("POST", "/v1/erasures", content=_json({"to": to}), repeatable=True)
    return Operation(call, _erasure)


def get_erasure(erasure_id: str) -> Operation[Erasure]:
    return Operation(Call("GET", f"/v1/erasures/{_id(erasure_id)}", repeatable=True), _erasure)


def simulated_deliveries(message_id: str | None) -> Operation[list[SimulatedDelivery]]:
    params = {"messageId": message_id} if message_id is not None else {}
    return Operation(
        Call("GET", "/v1/test/deliveries", params=params, repeatable=True),
        lambda answer: [
            SimulatedDelivery.model_validate(item) for item in answer.body.get("deliveries") or []
        ],
    )
