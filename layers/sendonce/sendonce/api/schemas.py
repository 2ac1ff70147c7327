"""Request and response bodies of the HTTP API, as pydantic models (they also make the OpenAPI).

A model is built (its validator and serializer) when it is defined, or, with `defer_build`, when it
first validates a body: only what a send needs is built on a cold start.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from sendonce import channels
from sendonce.messages.model import Status
from sendonce.messages.recipients import InvalidRecipient
from sendonce.webhooks.model import EventType

MAX_SCHEDULE_AHEAD = timedelta(days=30)
MAX_METADATA_KEYS = 20
# Stripe's limits, as the contract sets them.
MAX_METADATA_KEY_LENGTH = 40
MAX_METADATA_VALUE_LENGTH = 500


def _channel_names(schema: dict[str, Any]) -> None:
    """The channels as registered when the document is built: the registry is their one list."""
    schema["enum"] = list(channels.names())


# A message's metadata, on a send as on an edit.
Metadata = Annotated[
    dict[
        Annotated[str, Field(min_length=1, max_length=MAX_METADATA_KEY_LENGTH)],
        Annotated[str, Field(max_length=MAX_METADATA_VALUE_LENGTH)],
    ],
    Field(max_length=MAX_METADATA_KEYS),
]


def registered_channel(value: str) -> str:
    if value not in channels.names():
        raise ValueError(f"must be one of {', '.join(channels.names())}")
    return value


def recipient_for_channel(value: str, info: ValidationInfo) -> str:
    """`to`, normalised as the body's (already checked) channel reads it."""
    channel = info.data.get("channel")
    if channel is None:
        return value  # the channel's own error says what is wrong
    try:
        return channels.normalise_recipient(channel, value).address
    except InvalidRecipient as error:
        raise ValueError(str(error)) from None


class _Recipient(BaseModel):
    """`channel` and `to`, `to` normalised as its channel reads it: what a send and a suppression
    name their recipient by. Unknown fields are rejected, so a typo never silently changes a request."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    channel: str = Field(json_schema_extra=_channel_names)
    to: str = Field(min_length=1, max_length=320, description="Phone number with country code, or email")

    @field_validator("channel")
    @classmethod
    def _registered(cls, value: str) -> str:
        return registered_channel(value)

    @field_validator("to")
    @classmethod
    def _normalise_to(cls, value: str, info: ValidationInfo) -> str:
        return recipient_for_channel(value, info)


class SendMessageRequest(_Recipient):
    """POST /v1/messages. Unknown fields are rejected, so a typo never silently changes a send."""

    # Built at import, unlike the other requests: a function's first request is most often a send.
    model_config = ConfigDict(defer_build=False)

    body: str = Field(min_length=1, max_length=10_000)
    subject: str | None = Field(
        default=None, min_length=1, max_length=998, validate_default=True, description="Email only; required"
    )
    sendAt: str | None = Field(default=None, description="RFC 3339 timestamp, at most 30 days ahead")
    metadata: Metadata | None = None

    @field_validator("subject")
    @classmethod
    def _subject_as_the_channel_says(cls, value: str | None, info: ValidationInfo) -> str | None:
        channel = info.data.get("channel")
        if channel is None:
            return value
        rule = channels.spec(channel).subject
        if rule == "required" and value is None:
            raise ValueError(f"is required for {channel}")
        if rule == "forbidden" and value is not None:
            raise ValueError(f"is not allowed for {channel}")
        return value

    @field_validator("sendAt")
    @classmethod
    def _rfc3339_within_window(cls, value: str | None) -> str | None:
        if value is None:
            return None
        moment = parse_rfc3339(value)
        if moment - datetime.now(UTC) > MAX_SCHEDULE_AHEAD:
            raise ValueError("must be at most 30 days ahead")
        return value

    def send_at(self) -> datetime | None:
        return parse_rfc3339(self.sendAt) if self.sendAt is not None else None


def parse_rfc3339(value: str) -> datetime:
    """An RFC 3339 date-time with its offset; anything vaguer is refused."""
    text = value.strip()
    if len(text) < 20 or text[10] not in "Tt" or text[4] != "-" or text[7] != "-":
        raise ValueError("must be an RFC 3339 timestamp, such as 2026-01-31T09:00:00Z")
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1] in "Zz" else text)
    except ValueError:
        raise ValueError("must be an RFC 3339 timestamp, such as 2026-01-31T09:00:00Z") from None
    if moment.tzinfo is None:
        raise ValueError("must carry a time zone offset, such as Z or +02:00")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+01:00, 9999-12-31T23:59:59-01:00: no real instant
        raise ValueError("must be a real instant, between the years 0001 and 9999 in UTC") from None


class EditMessageRequest(BaseModel):
    """PATCH /v1/messages/{id}: one or more of these, each by the rules of POST /v1/messages; any
    other field, or an explicit null, is refused. Whether a subject is allowed is the message's
    channel's to say: the edit checks it against the stored message."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    body: str | None = Field(default=None, min_length=1, max_length=10_000)
    subject: str | None = Field(default=None, min_length=1, max_length=998, description="Email only")
    sendAt: str | None = Field(default=None, description="RFC 3339 timestamp, at most 30 days ahead")
    metadata: Metadata | None = Field(default=None, description="Replaces the message's metadata")

    @field_validator("body", "subject", "sendAt", "metadata", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        # Only a given field is validated: null would read as "leave it", which it does not say.
        if value is None:
            raise ValueError("must not be null; leave the field out to keep it")
        return value

    @field_validator("sendAt")
    @classmethod
    def _rfc3339_within_window(cls, value: str | None) -> str | None:
        if value is not None and parse_rfc3339(value) - datetime.now(UTC) > MAX_SCHEDULE_AHEAD:
            raise ValueError("must be at most 30 days ahead")
        return value

    def send_at(self) -> datetime | None:
        return parse_rfc3339(self.sendAt) if self.sendAt is not None else None


class AddWebhookEndpointRequest(BaseModel):
    """POST /v1/webhook-endpoints."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    url: str = Field(
        min_length=1, max_length=2048, description="https:// (http:// only where private targets are allowed)"
    )
    eventTypes: list[EventType] | None = Field(
        default=None, min_length=1, max_length=len(EventType), description="Omitted: every type"
    )
    description: str | None = Field(default=None, max_length=500)

    @field_validator("eventTypes", mode="before")
    @classmethod
    def _known_types(cls, value: Any) -> Any:
        # strict mode takes enum members only: a known type's name is as good as its member.
        if isinstance(value, list):
            known = {t.value: t for t in EventType}
            unknown = [v for v in value if not isinstance(v, str) or v not in known]
            if unknown:
                raise ValueError(f"unknown event types: {', '.join(map(str, unknown))}")
            return [known[v] for v in value]
        return value


class RedeliverRequest(BaseModel):
    """POST /v1/events/{id}/redeliver: one endpoint, or every endpoint the event had."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    endpointId: str | None = Field(default=None, min_length=1, max_length=64)


class AddSuppressionRequest(_Recipient):
    """POST /v1/suppressions: a recipient as its channel reads it (an entry covers every channel)."""


# ---------------------------------------------------------------------------- responses
class _Documented(BaseModel):
    """A response body: its schema is built only when the OpenAPI document is (off the cold start)."""

    model_config = ConfigDict(defer_build=True)


class MessageError(_Documented):
    code: str
    message: str


class MessageModel(_Documented):
    id: str
    channel: str = Field(json_schema_extra=_channel_names)
    to: str
    subject: str | None
    body: str
    status: Status
    sendAt: str | None
    metadata: dict[str, str]
    idempotencyKey: str | None
    attempts: int
    error: MessageError | None
    createdAt: str
    updatedAt: str


class SendAccepted(_Documented):
    success: Literal[True]
    status: Status
    duplicateOnly: Literal[False]
    message: MessageModel


class DuplicateCaught(_Documented):
    success: Literal[True]
    duplicateOnly: Literal[True]
    duplicateMessage: str
    message: MessageModel | None


class MessageEnvelope(_Documented):
    success: Literal[True]
    message: MessageModel


class MessagePage(_Documented):
    success: Literal[True]
    messages: list[MessageModel]
    nextCursor: str | None


class Acknowledged(_Documented):
    success: Literal[True]


class RateLimitModel(_Documented):
    perSecond: int


class QuotaModel(_Documented):
    daily: int = Field(description="New messages a UTC day; 0: none")
    usedToday: int
    resetsAt: str = Field(description="RFC 3339: the next 00:00 UTC")


class UsageReport(_Documented):
    success: Literal[True]
    rateLimit: RateLimitModel
    quota: QuotaModel


class Health(_Documented):
    success: Literal[True]
    status: Literal["ok"]


class SimulatedDeliveryModel(_Documented):
    messageId: str
    channel: str = Field(json_schema_extra=_channel_names)
    to: str
    subject: str | None
    body: str
    at: str = Field(description="RFC 3339: when the simulator accepted the call")


class SimulatedDeliveries(_Documented):
    success: Literal[True]
    deliveries: list[SimulatedDeliveryModel] = Field(
        description="One entry per call the simulator accepted: a repeat of an Idempotency-Key adds none"
    )


class ErrorDetail(_Documented):
    code: str
    message: str
    # validation_error: one {"field", "message"} per wrong field; duplicate_content: {"messageId"};
    # recipient_suppressed: {"reason"}.
    details: list[dict[str, str]] | dict[str, str] | None = None


class ErrorBody(_Documented):
    success: Literal[False]
    error: ErrorDetail


class WebhookEndpointModel(_Documented):
    id: str
    url: str
    eventTypes: list[EventType] | None
    description: str | None
    createdAt: str
    secret: str | None = Field(
        default=None, description="Only when the endpoint is added and when its secret is rotated"
    )


class WebhookEndpointEnvelope(_Documented):
    success: Literal[True]
    endpoint: WebhookEndpointModel


class WebhookEndpointList(_Documented):
    success: Literal[True]
    endpoints: list[WebhookEndpointModel]


class EventData(_Documented):
    message: MessageModel
    sequence: int | None


class EventDelivery(_Documented):
    endpointId: str
    status: Literal["pending", "succeeded", "failed"]
    attempts: int
    lastAttemptAt: str | None
    lastResponseStatus: int | None


class EventModel(_Documented):
    id: str
    type: EventType
    timestamp: str
    data: EventData
    deliveries: list[EventDelivery]


class EventEnvelope(_Documented):
    success: Literal[True]
    event: EventModel


class EventPageModel(_Documented):
    success: Literal[True]
    events: list[EventModel]
    nextCursor: str | None


class SuppressionModel(_Documented):
    to: str = Field(description="The normalised recipient: E.164, or the address with its domain lower-cased")
    reason: Literal["opted_out", "bounced", "complained", "manual"]
    createdAt: str
    messageId: str | None = Field(description="The message whose event caused it, if any")


class SuppressionEnvelope(_Documented):
    success: Literal[True]
    suppression: SuppressionModel


class SuppressionPageModel(_Documented):
    success: Literal[True]
    suppressions: list[SuppressionModel]
    nextCursor: str | None


class BatchRequest(BaseModel):
    """POST /v1/messages/batch: the envelope. Its handler checks each item on its own, as a body of
    POST /v1/messages, so that a bad item gets its own Result."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    messages: list[Any] = Field(
        min_length=1,
        max_length=500,
        description=(
            "Each: the body of POST /v1/messages, plus an optional idempotencyKey (the rules of the "
            "Idempotency-Key header). An item that is not an object gets its own 400 Result."
        ),
    )


class BatchItemError(_Documented):
    code: str
    message: str
    details: list[dict[str, str]] | dict[str, str] | None = None


class BatchItemResult(_Documented):
    index: int
    status: int = Field(description="The status code the item alone would get from POST /v1/messages")
    duplicateOnly: bool | None
    replayed: bool = Field(description="The item's idempotencyKey replayed an earlier answer")
    message: MessageModel | None
    error: BatchItemError | None


class BatchResults(_Documented):
    success: Literal[True]
    results: list[BatchItemResult]
