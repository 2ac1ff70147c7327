"""What more than one router shows or reads, as pydantic models (they also make the OpenAPI).

Each router's own request and response models are in its module (`sendonce.api.routers.*`);
here are those several share: a message as the API shows it, a suppression entry, the bare
acknowledgement, and a request's recipient, metadata and RFC 3339 instants. This module imports no
router, nor Powertools (import-linter's `api-shapes-alone` contract keeps it so). A message's values
as the API shows them are `sendonce.api.message_view`'s, from which `MessageModel` validates: what
shows a message outside the API (a status webhook's `data.message`) reads them there, without
pydantic.

Response models are the only serializer of the API's answers: a handler builds one from domain
values (`of`), and `to_json` writes it. The domain carries no API shape.

A model is built (its validator and serializer) when it is defined, or, with `defer_build`, when it
first validates or serializes: only what a request needs is built on a cold start.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from sendonce import channels
from sendonce.api.message_view import message_shape
from sendonce.clock import rfc3339
from sendonce.messages.model import Message, Status

if TYPE_CHECKING:  # a campaign's model loads with the first campaign
    from sendonce.campaigns.model import Campaign
from sendonce.messages.recipients import InvalidRecipient
from sendonce.suppressions.model import Suppression

MAX_SCHEDULE_AHEAD = timedelta(days=30)
MAX_METADATA_KEYS = 20
# Stripe's limits, as docs/api.md states them.
MAX_METADATA_KEY_LENGTH = 40
MAX_METADATA_VALUE_LENGTH = 500
MESSAGE_ID_PATTERN = r"^msg_[0-9A-HJKMNP-TV-Z]{26}$"  # `msg_` and a ULID


def channel_names(schema: dict[str, Any]) -> None:
    """The channels as registered when the document is built: the registry is their one list."""
    schema["enum"] = list(channels.names())


# ---------------------------------------------------------------------------- requests
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


class RecipientRequest(BaseModel):
    """`channel` and `to`, `to` normalised as its channel reads it: what a send and a suppression
    name their recipient by. Unknown fields are rejected, so a typo never silently changes a request."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    channel: str = Field(json_schema_extra=channel_names)
    to: str = Field(min_length=1, max_length=320, description="Phone number with country code, or email")

    @field_validator("channel")
    @classmethod
    def _registered(cls, value: str) -> str:
        return registered_channel(value)

    @field_validator("to")
    @classmethod
    def _normalise_to(cls, value: str, info: ValidationInfo) -> str:
        return recipient_for_channel(value, info)


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


def send_at_within_window(value: str | None) -> str | None:
    """A `sendAt`: an RFC 3339 instant at most MAX_SCHEDULE_AHEAD from now."""
    if value is not None and parse_rfc3339(value) - datetime.now(UTC) > MAX_SCHEDULE_AHEAD:
        raise ValueError("must be at most 30 days ahead")
    return value


# ---------------------------------------------------------------------------- answers
class ResponseModel(BaseModel):
    """A response body: built (its validator and serializer) with the first answer that uses it."""

    model_config = ConfigDict(defer_build=True)


def to_json(model: BaseModel, *, compact: bool = False) -> str:
    """A response model's JSON text: pydantic's serialization of it, its fields in their order, no
    character escaped that JSON does not require; `compact` (no spaces) for an answer that is stored
    and replayed (a send's, a batch's)."""
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False, separators=separators)


class MessageError(ResponseModel):
    code: str
    message: str


def _absent(value: object) -> bool:
    return value is None


class MessageTemplate(ResponseModel):
    name: str
    version: int


class ProviderAttemptModel(ResponseModel):
    provider: str
    outcome: Literal["accepted", "not_accepted", "unknown", "failed"]
    at: str


class MessageModel(ResponseModel):
    id: str
    channel: str = Field(json_schema_extra=channel_names)
    to: str | list[str] = Field(
        description="The normalised recipient; an email's list when the send gave `to` as a list"
    )
    # An email's, present only when it has them: a message without them looks as before they existed.
    cc: list[str] | None = Field(default=None, exclude_if=_absent, description="Email: as accepted")
    bcc: list[str] | None = Field(default=None, exclude_if=_absent, description="Email: as accepted")
    replyTo: str | None = Field(default=None, exclude_if=_absent, description="Email: where replies go")
    html: str | None = Field(default=None, exclude_if=_absent, description="Email: the html part")
    suppressedRecipients: list[str] | None = Field(
        default=None,
        exclude_if=_absent,
        description="Email: the recipients left out because they are on the suppression list "
        "(normalised), at acceptance or before the provider call",
    )
    subject: str | None
    body: str = Field(description="The text; an empty string for an email sent with html alone")
    # A default: an event recorded before messages carried them still shows its message.
    encoding: Literal["GSM-7", "UCS-2"] | None = Field(
        default=None,
        description="sms only: GSM-7 when every character is in GSM 03.38's alphabet or its extension "
        "table, else UCS-2",
    )
    segments: int | None = Field(
        default=None,
        description="sms only: the parts it is sent in (160 GSM-7 septets or 70 UCS-2 units in one, "
        "153 or 67 each when it takes more)",
    )
    template: MessageTemplate | None = Field(
        default=None,
        exclude_if=_absent,
        description="Sent from a template: the template's name and the version it rendered",
    )
    campaignId: str | None = Field(
        default=None, exclude_if=_absent, description="A campaign's message: the campaign's id"
    )
    status: Status
    sendAt: str | None
    heldFor: Literal["quiet_hours"] | None = Field(
        default=None,
        exclude_if=_absent,
        description="Present when the service moved sendAt: `quiet_hours`, to the end of the "
        "recipient's quiet hours",
    )
    expiresAt: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="When given: not handed to a provider by then, it ends `expired` and is never sent",
    )
    priority: Literal["critical"] | None = Field(
        default=None, exclude_if=_absent, description="`critical` when the send said so; absent otherwise"
    )
    metadata: dict[str, str]
    idempotencyKey: str | None
    attempts: int
    # Defaults: an event recorded before messages carried them still shows its message.
    provider: str | None = Field(
        default=None, description="The provider that accepted it; null while none has"
    )
    providerAttempts: list[ProviderAttemptModel] = Field(
        default_factory=list,
        description="Every provider call made for it, in the order made; an answer that was lost and "
        "then learned by asking the provider is `accepted`",
    )
    error: MessageError | None
    createdAt: str
    updatedAt: str

    @classmethod
    def of(cls, message: Message) -> MessageModel:
        """The message as the API shows it: validated from its one mapping to JSON values."""
        return cls.model_validate(message_shape(message))


class CampaignCounts(ResponseModel):
    total: int
    accepted: int
    duplicates: int
    suppressed: int
    invalid: int
    sent: int
    delivered: int
    failed: int


class CampaignModel(ResponseModel):
    id: str
    name: str
    channel: str = Field(json_schema_extra=channel_names)
    status: Literal["draft", "scheduled", "sending", "paused", "completed", "canceled"]
    pausedReason: str | None
    counts: CampaignCounts
    createdAt: str
    startedAt: str | None
    completedAt: str | None

    @classmethod
    def of(cls, campaign: Campaign) -> CampaignModel:
        from sendonce.api.campaign_view import campaign_shape  # noqa: PLC0415  # with the first campaign

        return cls.model_validate(campaign_shape(campaign))


class SuppressionModel(ResponseModel):
    to: str = Field(description="The normalised recipient: E.164, or the address with its domain lower-cased")
    reason: Literal["opted_out", "bounced", "complained", "manual"]
    createdAt: str
    messageId: str | None = Field(description="The message whose event caused it, if any")

    @classmethod
    def of(cls, entry: Suppression) -> SuppressionModel:
        return cls(
            to=entry.to,
            reason=entry.reason.value,
            createdAt=rfc3339(entry.created_at),
            messageId=entry.message_id,
        )


class Acknowledged(ResponseModel):
    success: Literal[True]
