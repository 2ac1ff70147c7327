"""The delivery context's ports: claiming and finishing attempts, settling an `unknown` message, the
outbox, providers, redelivery."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, Self

from msgspec import Struct

from sendonce.errors import TransientFailure
from sendonce.messages.model import Channel, Message, MessageFailure, Status
from sendonce.messages.ports import DedupLocks


class ProviderThrottled(TransientFailure):
    """The provider refused the call for its rate or quota: nothing was taken, and it is retried on a
    time budget (at least an hour from the first attempt) rather than an attempt count."""


class ClaimedMessage(Message, frozen=True):
    """A message as its claim left it, with what its earlier attempts say about its retries."""

    first_attempt_at: datetime | None = None  # set by the first claim, kept by every later one
    throttled_attempts: int = 0  # earlier attempts the provider throttled (this one not counted)

    @classmethod
    def of(cls, message: Message, first_attempt_at: datetime, throttled_attempts: int = 0) -> Self:
        # Message's own fields only, as `message` may be a ClaimedMessage already.
        values: dict[str, Any] = {name: getattr(message, name) for name in Message.__struct_fields__}
        return cls(**values, first_attempt_at=first_attempt_at, throttled_attempts=throttled_attempts)


class ClaimRefused(Struct, frozen=True):
    """Why a message could not be claimed: gone, already claimed or finished, or not yet due."""

    current: Message | None
    not_due_until: datetime | None = None


class ClaimSuppressed(Struct, frozen=True):
    """The message's recipient is on a suppression list its workspace is subject to (`reason`): not
    claimed, found in the same write that would have claimed it."""

    reason: str


class SettleRefused(Struct, frozen=True):
    """Why a message could not be settled: there is no such message (None), or it is not `unknown`."""

    current: Message | None


class OutboxEntry(Struct, frozen=True):
    """A message whose hand-off to its queue, or whose claimed attempt, is overdue."""

    id: str
    workspace_id: str
    channel: Channel
    status: Status
    due_at: datetime
    send_at: datetime | None


class DispatchStore(DedupLocks, Protocol):
    def claim(
        self,
        workspace_id: str,
        message_id: str,
        now: datetime,
        claim_seconds: int,
        *,
        seen: Message | None = None,
        unless_suppressed: bool = True,
    ) -> ClaimedMessage | ClaimRefused | ClaimSuppressed:
        """Move a due, waiting message to `sending` and count the attempt, or say why not; in the same
        write, unless its recipient is suppressed (`unless_suppressed`; False claims it regardless,
        to end it). `seen`: the message as its queue record carried it, what the claim sends when the
        message is still as it was then (its `updatedAt` and attempts); otherwise it is read."""
        ...

    def finish_attempt(
        self,
        message: Message,
        status: Status,
        now: datetime,
        *,
        error: MessageFailure | None = None,
        provider_message_id: str | None = None,
        handoff_due_at: datetime | None = None,
        throttled: bool = False,
    ) -> bool:
        """Record how the claimed attempt ended (`throttled`: the provider throttled it, counted apart);
        False if the claim was no longer ours."""
        ...

    def settle_unknown(self, message_id: str, status: Status, now: datetime) -> Message | SettleRefused:
        """Move an `unknown` message to `status` (what an operator learned), only while it is `unknown`."""
        ...


class Reclaim(StrEnum):
    """How reclaiming a stranded claim ended."""

    RECLAIMED = "reclaimed"  # back to `queued`, its reclaims counted
    CAP_REACHED = "cap_reached"  # reclaimed as often as allowed already: left as it was
    SUPERSEDED = "superseded"  # somebody moved the entry since it was read: left to them


class OutboxStore(Protocol):
    def due_pages(self, now: datetime, statuses: Collection[Status]) -> Iterator[Sequence[OutboxEntry]]:
        """Every entry due by `now` whose status is one of `statuses`, page by page, through every
        shard to its end; oldest first within a shard, the shards taken in turns."""
        ...

    def move_outbox_entry(
        self, entry: OutboxEntry, now: datetime, *, status: Status, due_at: datetime | None
    ) -> bool:
        """Move an entry on (its status, and when it is due again; None: out of the outbox),
        only if nobody moved it since it was read. False if somebody did."""
        ...

    def reclaim(self, entry: OutboxEntry, now: datetime, *, due_at: datetime, max_reclaims: int) -> Reclaim:
        """Move a stranded claim back to `queued`, due again at `due_at`, and count the reclaim on the
        message; unless it was reclaimed `max_reclaims` times already, or moved since it was read."""
        ...


class Provider(Protocol):
    """Hands one message to the outside world and returns the provider's id for it.

    Raises PermanentFailure, TransientFailure (ProviderThrottled for a rate or quota refusal) or
    AmbiguousOutcome. `honours_idempotency_key`: the provider dedups on the message id, so an
    ambiguous attempt may safely be repeated.
    """

    name: str
    honours_idempotency_key: bool

    def send(self, message: Message) -> str: ...
