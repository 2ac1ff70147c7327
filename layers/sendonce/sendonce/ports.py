"""The ports the domain speaks to. Adapters (DynamoDB, SQS, SES, SNS, HTTP) implement them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sendonce.messages.model import Channel, Message, MessageError, Status


@dataclass(frozen=True, slots=True)
class DedupClaim:
    """The lock a new message takes on its identity, until `expires_at`."""

    lock_id: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class KeyTie:
    """The permanent tie of (workspace, Idempotency-Key, destination) to one message."""

    tie_id: str
    payload_fingerprint: str


@dataclass(frozen=True, slots=True)
class Created:
    message: Message


@dataclass(frozen=True, slots=True)
class DuplicateOf:
    """The dedup lock is held by another message, returned when it still exists."""

    original: Message | None
    locked_at: datetime


@dataclass(frozen=True, slots=True)
class TiedToKey:
    """The Idempotency-Key already created a message for this destination."""

    original: Message | None
    payload_fingerprint: str


CreateOutcome = Created | DuplicateOf | TiedToKey


@dataclass(frozen=True, slots=True)
class Page:
    messages: list[Message]
    next_cursor: str | None


class MessageStore(Protocol):
    def create(
        self, message: Message, claim: DedupClaim, tie: KeyTie | None, handoff_due_at: datetime, now: datetime
    ) -> CreateOutcome:
        """Write the message, its dedup lock and its key tie atomically, or none of them.

        `handoff_due_at`: when the outbox takes the hand-off to the queue over, if still owed.
        """
        ...

    def get(self, workspace_id: str, message_id: str) -> Message | None: ...

    def list(self, workspace_id: str, status: Status | None, limit: int, cursor: str | None) -> Page: ...

    def mark_handoff_failed(self, message: Message, now: datetime) -> None: ...

    def cancel(self, workspace_id: str, message_id: str, now: datetime) -> Message:
        """Cancel a waiting message with no attempt started; raise MessageNotCancelable otherwise."""
        ...

    def claim(
        self, workspace_id: str, message_id: str, now: datetime, claim_seconds: int
    ) -> Message | ClaimRefused:
        """Move a due, waiting message to `sending` and count the attempt, or say why not."""
        ...

    def finish_attempt(
        self,
        message: Message,
        status: Status,
        now: datetime,
        *,
        error: MessageError | None = None,
        provider_message_id: str | None = None,
        handoff_due_at: datetime | None = None,
    ) -> bool:
        """Record how the claimed attempt ended; False if the claim was no longer ours."""
        ...

    def release_dedup_lock(self, message: Message) -> None:
        """Delete the lock this message holds, if it still does; never raises."""
        ...

    def outbox_due(self, now: datetime, limit: int) -> Sequence[OutboxEntry]:
        """Messages whose hand-off or claim deadline has passed, oldest first."""
        ...

    def move_outbox_entry(
        self, entry: OutboxEntry, now: datetime, *, status: Status, due_at: datetime | None
    ) -> bool:
        """Move an entry on (its status, and when it is due again; None: out of the outbox),
        only if nobody moved it since it was read. False if somebody did."""
        ...


@dataclass(frozen=True, slots=True)
class ClaimRefused:
    """Why a message could not be claimed: gone, already claimed or finished, or not yet due."""

    current: Message | None
    not_due_until: datetime | None = None


class Deliverable(Protocol):
    """What a queue record names: a message, or an outbox entry of one."""

    @property
    def id(self) -> str: ...

    @property
    def workspace_id(self) -> str: ...

    @property
    def channel(self) -> Channel: ...


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """A message whose hand-off to its queue, or whose claimed attempt, is overdue."""

    id: str
    workspace_id: str
    channel: Channel
    status: Status
    due_at: datetime
    send_at: datetime | None


class MessageQueue(Protocol):
    def enqueue(self, message: Deliverable, delay_seconds: int = 0) -> None:
        """Hand a message to its channel's queue; raise QueueUnavailable on failure."""
        ...


class Provider(Protocol):
    """Hands one message to the outside world and returns the provider's id for it.

    Raises PermanentFailure, TransientFailure or AmbiguousOutcome. `honours_idempotency_key`:
    the provider dedups on the message id, so an ambiguous attempt may safely be repeated.
    """

    name: str
    honours_idempotency_key: bool

    def send(self, message: Message) -> str: ...


class Redelivery(Protocol):
    def postpone(self, receipt_handle: str, seconds: int) -> None:
        """Bring a queued record back after `seconds` instead of its visibility timeout."""
        ...
