"""What the API answers, as typed values.

Each model mirrors one schema of the API's OpenAPI document (`GET /openapi.json`), field for
field, under its JSON name; `tests/test_models_match_openapi.py` fails when the two drift. Fields
the API adds later are ignored, so an older client keeps reading newer answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

Channel = Literal["sms", "imessage", "email"]
Status = Literal[
    "accepted",
    "scheduled",
    "queued",
    "sending",
    "sent",
    "delivered",
    "failed",
    "canceled",
    "unknown",
    "expired",
]
EventType = Literal[
    "message.queued",
    "message.scheduled",
    "message.sent",
    "message.delivered",
    "message.failed",
    "message.canceled",
    "message.unknown",
    "message.expired",
    "message.duplicate_blocked",
    "campaign.completed",
]


class Model(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields ignored; frozen."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


class MessageError(Model):
    code: str
    message: str


class MessageTemplate(Model):
    name: str
    version: int


class ProviderAttempt(Model):
    provider: str
    outcome: str  # "accepted", "not_accepted", "unknown" or "failed"
    at: str


class Message(Model):
    id: str
    channel: Channel
    to: str | list[str]  # an email's list when the send gave `to` as a list
    # An email's, when it has them (None otherwise, and from a server before they were shown).
    cc: list[str] | None = None
    bcc: list[str] | None = None
    reply_to: str | None = None
    html: str | None = None
    suppressed_recipients: list[str] | None = None  # left out: on the suppression list
    subject: str | None
    body: str  # empty for an email sent with html alone
    # sms only: "GSM-7" or "UCS-2", and the parts it is sent in (None on other channels, and from a
    # server before they were shown).
    encoding: str | None = None
    segments: int | None = None
    # Sent from a template: its name and the version rendered (None otherwise, and from an older server).
    template: MessageTemplate | None = None
    # A campaign's message: the campaign's id (None otherwise, and from an older server).
    campaign_id: str | None = None
    status: Status
    send_at: str | None
    # Send controls (None when absent, and from an older server): "quiet_hours" when the service
    # moved send_at; the instant after which it is never sent; "critical" when the send said so.
    held_for: str | None = None
    expires_at: str | None = None
    priority: str | None = None
    metadata: dict[str, str]
    idempotency_key: str | None
    attempts: int
    # The provider that accepted it (None while none has, and from an older server), and every
    # provider call made for it, in order.
    provider: str | None = None
    provider_attempts: list[ProviderAttempt] = []
    error: MessageError | None
    created_at: str
    updated_at: str


class BatchItemError(Model):
    code: str
    message: str
    details: list[dict[str, str]] | None = None


class BatchItemResult(Model):
    index: int
    status: int
    duplicate_only: bool | None
    replayed: bool
    message: Message | None
    error: BatchItemError | None


class WebhookEndpoint(Model):
    id: str
    url: str
    event_types: list[EventType] | None
    description: str | None
    created_at: str
    secret: str | None = None  # on creation and rotation only


class CampaignCounts(Model):
    total: int
    accepted: int
    duplicates: int
    suppressed: int
    invalid: int
    sent: int  # its messages that reached sent or delivered
    delivered: int
    failed: int


class Campaign(Model):
    """One content sent to a list of recipients, each of them once (`POST /v1/campaigns`)."""

    id: str
    name: str
    channel: Channel
    status: Literal["draft", "scheduled", "sending", "paused", "completed", "canceled"]
    paused_reason: str | None  # "paused" (by its owner) or "quota_exceeded"
    counts: CampaignCounts
    created_at: str
    started_at: str | None
    completed_at: str | None


class EventData(Model):
    # A message's event carries its message; `campaign.completed` its campaign instead.
    message: Message | None = None
    campaign: Campaign | None = None
    sequence: int | None
    held_for: str | None = None  # message.scheduled: "quiet_hours" when the service moved its sendAt


class EventDelivery(Model):
    endpoint_id: str
    status: Literal["pending", "succeeded", "failed"]
    attempts: int
    last_attempt_at: str | None
    last_response_status: int | None


class Event(Model):
    id: str
    type: EventType
    timestamp: str
    data: EventData
    deliveries: list[EventDelivery]


class RateLimit(Model):
    per_second: int


class Quota(Model):
    daily: int
    used_today: int
    resets_at: str


class FrequencyCap(Model):
    per_recipient: int
    window_seconds: int


class QuietHours(Model):
    hours: str  # "HH:MM-HH:MM", in the recipient's zone


class SendControls(Model):
    frequency_cap: FrequencyCap | None  # None: no cap
    quiet_hours: QuietHours | None  # None: no quiet hours
    timezone: str  # the workspace's zone (IANA)


class TimelineEntry(Model):
    """One thing that happened to a message (`messages.timeline`); the fields after `kind` are its kind's."""

    at: str
    kind: Literal[
        "created", "status", "provider_attempt", "provider_event", "duplicate_blocked", "webhook_delivery"
    ]
    status: str | None = None
    event_id: str | None = None
    provider: str | None = None
    outcome: str | None = None
    type: str | None = None
    endpoint_id: str | None = None
    attempts: int | None = None
    response_status: int | None = None


class PromiseDay(Model):
    """What the service did for the workspace's sends in one UTC day (`promise`)."""

    date: str
    new_messages: int
    replays: int
    duplicates_blocked: int
    refused_suppressed: int


class SmsBudget(Model):
    daily_segments: int
    used_today: int


class Protections(Model):
    sms_countries: list[str]  # ISO 3166 alpha-2; empty: every country
    allow_premium_numbers: bool
    sms_budget: SmsBudget | None  # None: no sms budget
    retention_days: int


class Usage(Model):
    rate_limit: RateLimit
    quota: Quota
    send_controls: SendControls
    protections: Protections


class Suppression(Model):
    """A recipient the workspace never sends to, until it removes them."""

    to: str
    reason: Literal["opted_out", "bounced", "complained", "manual"]
    created_at: str
    message_id: str | None


class Erasure(Model):
    """A recipient's erasure from the workspace (`POST /v1/erasures`): pending, then done within a
    minute. It never names the recipient: `to` is always None."""

    id: str
    status: Literal["pending", "done"]
    to: None


class SimulatedDelivery(Model):
    """Test mode: one call the simulator accepted (`GET /v1/test/deliveries`)."""

    message_id: str
    channel: Channel
    to: str | list[str]  # an email's list when its send gave one
    cc: list[str] | None = None
    bcc: list[str] | None = None
    subject: str | None
    body: str
    at: str


class WebhookEvent(Model):
    """A status webhook's payload, verified (`sendonce_client.webhooks.verify`)."""

    type: EventType
    timestamp: str
    data: EventData


class SendOutcome(Enum):
    """What a send did."""

    CREATED = "created"  # a new message; this call made it (on one of its attempts)
    REPLAYED = "replayed"  # the key's earlier answer, from an earlier call: nothing new was made
    DUPLICATE = "duplicate"  # the dedup guard caught it: the same message went out already


@dataclass(frozen=True)
class SendResult:
    """A send's outcome, with the message it is about (None: a duplicate whose original is gone)."""

    outcome: SendOutcome
    message: Message | None
    status: Status | None  # the 201's status: queued, scheduled or accepted; None for a duplicate
    idempotency_key: str
    attempts: int  # how many requests this call made
    replayed: bool  # the API answered `Idempotency-Replayed: true`
    duplicate_message: str | None = None  # the API's sentence about the duplicate

    @property
    def created(self) -> bool:
        return self.outcome is SendOutcome.CREATED


@dataclass(frozen=True)
class BatchResult:
    """One result per item, in the items' order; an item's failure is in its result, not raised."""

    results: list[BatchItemResult]
    idempotency_key: str
    attempts: int
    replayed: bool


def page_items(body: dict[str, Any], name: str, model: type[Model]) -> tuple[list[Any], str | None]:
    """A page's items and its next cursor."""
    items = [model.model_validate(item) for item in body.get(name) or []]
    cursor = body.get("nextCursor")
    return items, cursor if isinstance(cursor, str) and cursor else None
