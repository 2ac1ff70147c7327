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


# The longest content a message holds, whether its sender wrote it or a template rendered it.
BODY_MAX_CHARACTERS = 10_000
SUBJECT_MAX_CHARACTERS = 998  # RFC 5322's line limit
HTML_MAX_CHARACTERS = 200_000


class TemplateRef(Struct, frozen=True):
    """The template version a message was rendered from: a version never changes, so this names
    exactly what it was rendered from, even after the template is edited or deleted."""

    name: str
    version: int


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
    template: TemplateRef | None = None
    # Sent from a template: its second dedup lock, on the template's name and data to the recipient
    # (`sendonce.dedup.identity.template_identity`), taken and released with the first.
    template_lock_id: str | None = None

    @property
    def lock_ids(self) -> tuple[str, ...]:
        """Every dedup lock the message holds."""
        return tuple(lock for lock in (self.dedup_lock_id, self.template_lock_id) if lock is not None)

    @property
    def mode(self) -> Mode:
        """Test for a message of a test twin: it goes to the simulator, never to a provider."""
        return mode_of(self.workspace_id)

    def with_status(self, status: Status, at: datetime) -> Message:
        return replace(self, status=status, updated_at=at)
