"""The delivery context's ports: claiming and finishing attempts, the outbox, providers, redelivery."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sendonce.messages.model import Channel, Message, MessageError, Status
from sendonce.messages.ports import DedupLocks


@dataclass(frozen=True, slots=True)
class ClaimRefused:
    """Why a message could not be claimed: gone, already claimed or finished, or not yet due."""

    current: Message | None
    not_due_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """A message whose hand-off to its queue, or whose claimed attempt, is overdue."""

    id: str
    workspace_id: str
    channel: Channel
    status: Status
    due_at: datetime
    send_at: datetime | None


class DeliveryStore(DedupLocks, Protocol):
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


class OutboxStore(Protocol):
    def outbox_due(self, now: datetime, limit: int) -> Sequence[OutboxEntry]:
        """Messages whose hand-off or claim deadline has passed, oldest first."""
        ...

    def move_outbox_entry(
        self, entry: OutboxEntry, now: datetime, *, status: Status, due_at: datetime | None
    ) -> bool:
        """Move an entry on (its status, and when it is due again; None: out of the outbox),
        only if nobody moved it since it was read. False if somebody did."""
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
