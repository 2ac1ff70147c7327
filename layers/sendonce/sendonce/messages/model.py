"""The message and its statuses."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from msgspec import Struct, field
from msgspec.structs import replace

from sendonce.modes import Mode, mode_of


class Channel(str):
    """A channel's name. Which channels exist, and their rules, is `sendonce.channels`' to say."""

    __slots__ = ()

    @property
    def value(self) -> str:
        return str(self)


class Status(StrEnum):
    ACCEPTED = "accepted"  # stored; its hand-off to the queue is still owed
    SCHEDULED = "scheduled"  # waiting for sendAt
    QUEUED = "queued"  # on its channel's queue
    SENDING = "sending"  # a dispatcher claimed it and is calling the provider
    SENT = "sent"
    DELIVERED = "delivered"
    FAILED = "failed"
    CANCELED = "canceled"
    UNKNOWN = "unknown"  # the provider may or may not have it; never retried automatically


# A message may still be canceled, or claimed by a dispatcher, from these.
WAITING_STATUSES = frozenset({Status.ACCEPTED, Status.SCHEDULED, Status.QUEUED})
FINAL_STATUSES = frozenset({Status.SENT, Status.DELIVERED, Status.FAILED, Status.CANCELED, Status.UNKNOWN})


class MessageFailure(Struct, frozen=True):
    code: str
    message: str


class Message(Struct, frozen=True):
    id: str
    workspace_id: str
    channel: Channel
    to: str
    body: str
    status: Status
    created_at: datetime
    updated_at: datetime
    subject: str | None = None
    send_at: datetime | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    idempotency_key: str | None = None
    attempts: int = 0
    error: MessageFailure | None = None
    provider_message_id: str | None = None
    dedup_lock_id: str | None = None

    @property
    def mode(self) -> Mode:
        """Test for a message of a test twin: it goes to the simulator, never to a provider."""
        return mode_of(self.workspace_id)

    def with_status(self, status: Status, at: datetime) -> Message:
        return replace(self, status=status, updated_at=at)
