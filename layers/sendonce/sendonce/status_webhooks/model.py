"""Webhook endpoints, events and their deliveries.

An event is derived from one committed change of a message and never changes afterwards except
for the record of its deliveries. Its id is the `webhook-id` of every delivery of it, forever.

An endpoint signs with its current secret and with each secret it replaced within
ROTATION_OVERLAP, at most MAX_REPLACED_SECRETS of them at once. Its `version` moves on with every
write of it, so a rotation is written only over the endpoint it was made from, never over another
one's.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from sendonce.activity.counts import PromiseCount
from sendonce.campaigns.model import Campaign
from sendonce.clock import rfc3339
from sendonce.messages.ids import ulid
from sendonce.messages.model import Message, Status
from sendonce.status_webhooks.rules import MAX_REPLACED_SECRETS, ROTATION_OVERLAP, EventType

ENDPOINT_PREFIX = "whep_"
EVENT_PREFIX = "evt_"
SECRET_PREFIX = "whsec_"  # noqa: S105 (the prefix Standard Webhooks secrets carry, not a secret)
MAX_ENDPOINTS = 10
EVENT_RETENTION = timedelta(days=30)


# The statuses a customer is told about; `accepted` and `sending` are the service's own steps.
STATUS_EVENTS: Mapping[Status, EventType] = {
    Status.QUEUED: EventType.QUEUED,
    Status.SCHEDULED: EventType.SCHEDULED,
    Status.SENT: EventType.SENT,
    Status.DELIVERED: EventType.DELIVERED,
    Status.FAILED: EventType.FAILED,
    Status.CANCELED: EventType.CANCELED,
    Status.UNKNOWN: EventType.UNKNOWN,
    Status.EXPIRED: EventType.EXPIRED,
}


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


def new_endpoint_id(now: datetime) -> str:
    return ENDPOINT_PREFIX + ulid(int(now.timestamp() * 1000))


def new_secret() -> str:
    """24 random bytes, base64: what Standard Webhooks libraries take as `whsec_…`."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode("ascii")


class SigningSecret(Struct, frozen=True):
    value: str
    expires_at: datetime | None = None  # a rotated-out secret signs until then


class Endpoint(Struct, frozen=True):
    id: str
    workspace_id: str
    url: str
    event_types: tuple[EventType, ...] | None  # None: every type
    description: str | None
    created_at: datetime
    secrets: tuple[SigningSecret, ...]  # the current one first
    # Moved on by the store with every replacement: a replacement is written only over the version
    # it was made from. An endpoint stored before versions existed reads as 0.
    version: int = 1

    def wants(self, event_type: EventType) -> bool:
        return self.event_types is None or event_type in self.event_types

    def signing_secrets(self, now: datetime) -> tuple[str, ...]:
        return tuple(s.value for s in self.secrets if s.expires_at is None or s.expires_at > now)

    def rotation_refused_until(self, now: datetime) -> datetime | None:
        """None when a rotation may happen now; else when enough replaced secrets will have stopped
        signing to leave MAX_REPLACED_SECRETS - 1 of them."""
        replaced = sorted(
            s.expires_at for s in self.secrets if s.expires_at is not None and s.expires_at > now
        )
        if len(replaced) < MAX_REPLACED_SECRETS:
            return None
        return replaced[len(replaced) - MAX_REPLACED_SECRETS]

    def rotated(self, new_value: str, now: datetime) -> Endpoint:
        """`new_value` current; the current one, and every replaced one still signing, kept until
        its expiry (the current one's: ROTATION_OVERLAP from now). The version is the one read:
        the store moves it on when it writes the result."""
        kept = tuple(
            replace(s, expires_at=s.expires_at or now + ROTATION_OVERLAP)
            for s in self.secrets
            if s.expires_at is None or s.expires_at > now
        )
        return replace(self, secrets=(SigningSecret(new_value), *kept))


class Delivery(Struct, frozen=True):
    endpoint_id: str
    status: DeliveryStatus = DeliveryStatus.PENDING
    attempts: int = 0
    last_attempt_at: datetime | None = None
    last_response_status: int | None = None


class Event(Struct, frozen=True):
    id: str
    workspace_id: str
    message_id: str
    type: EventType
    timestamp: datetime
    # The message as shown outside (the API's Message), as it stood right after the change: given by
    # the recorder's `show_message`, and sent as it was stored.
    message: Mapping[str, Any]
    sequence: int | None  # None for message.duplicate_blocked: not a change of the message
    deliveries: tuple[Delivery, ...] = field(default=())

    def payload(self) -> dict[str, Any]:
        """What every endpoint receives, byte for byte the same on every attempt: a campaign's event
        carries its campaign (`message` holds it) where a message's carries its message."""
        subject = "campaign" if self.type is EventType.CAMPAIGN_COMPLETED else "message"
        data: dict[str, Any] = {subject: dict(self.message), "sequence": self.sequence}
        if self.type is EventType.SCHEDULED and "heldFor" in self.message:
            data["heldFor"] = self.message["heldFor"]  # why the service moved its sendAt
        return {"type": self.type.value, "timestamp": rfc3339(self.timestamp), "data": data}

    def delivery(self, endpoint_id: str) -> Delivery | None:
        return next((d for d in self.deliveries if d.endpoint_id == endpoint_id), None)


class CampaignTally(Struct, frozen=True):
    """What a campaign's message's change adds to its campaign's delivery counts, in the write that
    records its event: so each change is counted once, as it is told once."""

    workspace_id: str
    campaign_id: str
    message_id: str  # which of the campaign's counters takes it: spread by message
    sent: int = 0
    delivered: int = 0
    failed: int = 0


_REACHED_SENT = frozenset({Status.SENT, Status.DELIVERED})


def tally_of(message: Message, before: Status | None) -> CampaignTally | None:
    """The counts a campaign's message adds by moving from `before` to its status (None: nothing)."""
    if message.campaign_id is None:
        return None
    now = message.status
    tally = CampaignTally(
        message.workspace_id,
        message.campaign_id,
        message.id,
        sent=int(now in _REACHED_SENT and before not in _REACHED_SENT),
        delivered=int(now is Status.DELIVERED and before is not Status.DELIVERED),
        failed=int(now is Status.FAILED and before is not Status.FAILED),
    )
    return tally if tally.sent or tally.delivered or tally.failed else None


class Change(Struct, frozen=True):
    message: Message  # as it stood right after the change
    type: EventType
    at: datetime
    position: str  # the stream record's sequence number, padded: increases with every write of the message
    tally: CampaignTally | None = None  # a campaign's message: what its campaign counts of it
    promise: PromiseCount | None = None  # what the promise's daily counts count of it

    @property
    def is_status_change(self) -> bool:
        return self.type is not EventType.DUPLICATE_BLOCKED

    @property
    def event_id(self) -> str:
        """The same for every copy of the stream record: a record read twice is one event."""
        return event_id_of(self.message.id, self.position, self.at)


def event_id_of(subject_id: str, position: str, at: datetime) -> str:
    digest = hashlib.sha256(f"{subject_id}/{position}".encode()).digest()
    return EVENT_PREFIX + ulid(int(at.timestamp() * 1000), int.from_bytes(digest[:10], "big"))


class CampaignChange(Struct, frozen=True):
    """A campaign's completion, from the stream: told once, as `campaign.completed`."""

    campaign: Campaign  # as it stood right after the change
    at: datetime
    position: str
    type: EventType = EventType.CAMPAIGN_COMPLETED

    @property
    def event_id(self) -> str:
        return event_id_of(self.campaign.id, self.position, self.at)
