"""The delivery context's ports: claiming and finishing attempts, settling an `unknown` message, the
outbox, providers, redelivery."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, Self

from msgspec import Struct

from sendonce.errors import TransientFailure
from sendonce.keyed_hash import KeyedHash
from sendonce.messages.model import Channel, Message, MessageFailure, ProviderAttempt, Status
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
    # The deployment's keyed hash (`sendonce.keyed_hash`): the suppression keys', and the logs'.
    keyed_hash: KeyedHash

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
        provider: str | None = None,
        provider_attempts: tuple[ProviderAttempt, ...] | None = None,
    ) -> bool:
        """Record how the claimed attempt ended (`throttled`: the provider throttled it, counted apart;
        `provider`: the one that accepted it; `provider_attempts`: the message's whole list as it now
        stands); False if the claim was no longer ours."""
        ...

    def next_attempt(
        self,
        message: ClaimedMessage,
        now: datetime,
        claim_seconds: int,
        provider_attempts: tuple[ProviderAttempt, ...],
    ) -> ClaimedMessage | None:
        """Keep the claim for one more provider call, at once: the attempt counted, its deadline and
        its throttling budget started afresh, `provider_attempts` recorded; only while the claim that
        made `message` is still ours (None when it is not: somebody else drives the message now)."""
        ...

    def record_taken(
        self, message: ClaimedMessage, provider: str, provider_attempts: tuple[ProviderAttempt, ...]
    ) -> bool:
        """The provider's own event ended the message while its call was under way (its claim is no
        longer ours): record that `provider` took it, and the attempts, only while the message was
        moved by nothing but that event (no claim since, no attempt recorded since). False if not."""
        ...

    def settle_unknown(self, message_id: str, status: Status, now: datetime) -> Message | SettleRefused:
        """Move an `unknown` message to `status` (what an operator learned), only while it is `unknown`."""
        ...


class ProviderHealth(Protocol):
    """Each provider's run of messages it failed to accept, shared by every execution environment: a
    run long enough puts the provider in a cool-off, when it is skipped (never the last of a list)."""

    def cooling(self, providers: Collection[str], now: datetime) -> frozenset[str]:
        """Those of `providers` in a cool-off at `now`."""
        ...

    def not_accepted(self, provider: str, now: datetime) -> bool:
        """One more message in a row the provider failed to accept; True when this one started a
        cool-off."""
        ...

    def accepted(self, provider: str, now: datetime) -> None:
        """The provider took a message: its run of failures ends."""
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
    ambiguous attempt may safely be repeated. A provider that takes a validity period gives it the
    message's time left (`message.expires_at`, read against its own clock at the call); the
    dispatcher never calls one for a message already past it.
    """

    name: str
    honours_idempotency_key: bool

    def send(self, message: Message) -> str: ...


class AskableProvider(Provider, Protocol):
    """A provider that can be asked whether it took a message whose answer was lost (Twilio: its
    message list). `visibility_seconds`: how long after a call its answer to the question can be
    trusted; asked earlier, a message it took may not show yet."""

    visibility_seconds: float

    def find(self, message: Message, since: datetime) -> str | None:
        """The provider's id for `message` if it took it at or after `since`; None if it did not.
        Raises DispatchFailure when it cannot tell."""
        ...


def askable(provider: Provider) -> AskableProvider | None:
    """`provider` as one that can be asked, or None when it cannot be."""
    return provider if callable(getattr(provider, "find", None)) else None  # type: ignore[return-value]
