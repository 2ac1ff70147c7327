"""The message and its statuses."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from enum import StrEnum

from msgspec import Struct, field
from msgspec.structs import replace

from sendonce.messages.recipients import ascii_lower
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
    EXPIRED = "expired"  # not handed to a provider before its expiresAt: never delivered


# A message may still be canceled, or claimed by a dispatcher, from these.
WAITING_STATUSES = frozenset({Status.ACCEPTED, Status.SCHEDULED, Status.QUEUED})
FINAL_STATUSES = frozenset(
    {Status.SENT, Status.DELIVERED, Status.FAILED, Status.CANCELED, Status.UNKNOWN, Status.EXPIRED}
)


class Priority(StrEnum):
    """A send's priority: `critical` (one-time codes) bypasses quiet hours and the frequency cap."""

    NORMAL = "normal"
    CRITICAL = "critical"


class HeldFor(StrEnum):
    """Why a message's sendAt was moved by the service (`message.scheduled`'s `data.heldFor`)."""

    QUIET_HOURS = "quiet_hours"


class MessageFailure(Struct, frozen=True):
    code: str
    message: str


# The longest content a message holds, whether its sender wrote it or a template rendered it.
BODY_MAX_CHARACTERS = 10_000
SUBJECT_MAX_CHARACTERS = 998  # RFC 5322's line limit
HTML_MAX_CHARACTERS = 200_000


class AttemptOutcome(StrEnum):
    """What one provider did with a message (docs/api.md, `providerAttempts`)."""

    ACCEPTED = "accepted"  # it took it (an answer that was lost and then learned by asking, too)
    NOT_ACCEPTED = "not_accepted"  # provably not taken: the next provider may be tried
    UNKNOWN = "unknown"  # the answer was lost: it may have taken it
    FAILED = "failed"  # it refused the recipient or the content, or its retries ran out


class ProviderAttempt(Struct, frozen=True):
    provider: str
    outcome: AttemptOutcome
    at: datetime


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
    # Email as senders write it (docs/api.md): `to` above is always the first recipient left (what
    # logs mask and a single-recipient message holds alone). `to_list`: the `to` field when the send
    # gave a list (None: it gave one address as a string); `cc`, `bcc` (None: not given), `reply_to`
    # and `html` as accepted, after de-duplication; `suppressed_recipients`: the recipients dropped
    # because they are suppressed, at acceptance or at the claim.
    to_list: tuple[str, ...] | None = None
    cc: tuple[str, ...] | None = None
    bcc: tuple[str, ...] | None = None
    reply_to: str | None = None
    html: str | None = None
    suppressed_recipients: tuple[str, ...] = ()
    template: TemplateRef | None = None
    # Sent from a template: its second dedup lock, on the template's name and data to the recipient
    # (`sendonce.dedup.identity.template_identity`), taken and released with the first.
    template_lock_id: str | None = None
    # A campaign's message: its campaign, and its lock on (campaign, recipient) (`campaign_identity`),
    # which, unlike the dedup locks, a cancel keeps: a campaign sends a recipient one message at most.
    campaign_id: str | None = None
    campaign_lock_id: str | None = None
    # Sent as an item of a batch under its own Idempotency-Key: that key, whose stored answer shows
    # this message (an erasure of its recipient erases that answer too).
    batch_key: str | None = None
    # The provider that accepted it (None: none has), and every provider call made for it, in order.
    provider: str | None = None
    provider_attempts: tuple[ProviderAttempt, ...] = ()
    # Send controls (docs/guarantees.md, "Send controls"): not handed to a provider after
    # `expires_at`, it ends `expired`; `held_for`: why the service moved its sendAt (quiet hours).
    expires_at: datetime | None = None
    priority: Priority = Priority.NORMAL
    held_for: HeldFor | None = None
    timezone: str | None = None  # the recipient's zone as the send gave it (IANA): its quiet hours'
    # Kept this many days (its `expiresAt`), its workspace's retention when it was accepted; None:
    # the stack's (`SENDONCE_MESSAGE_RETENTION_DAYS`).
    retention_days: int | None = None

    def email_fields(self) -> dict[str, object]:
        """`cc`, `bcc`, `replyTo` and `html` under their API names, each only when the message has it
        (what a send's body and the HTTP provider's payload carry besides `to` and `body`)."""
        fields: dict[str, object] = {}
        for name, value in (("cc", self.cc), ("bcc", self.bcc)):
            if value is not None:
                fields[name] = list(value)
        if self.reply_to is not None:
            fields["replyTo"] = self.reply_to
        if self.html is not None:
            fields["html"] = self.html
        return fields

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

    @property
    def to_addresses(self) -> tuple[str, ...]:
        """The `to` field's addresses: the one given as a string, or the list."""
        return (self.to,) if self.to_list is None else self.to_list

    @property
    def recipients(self) -> tuple[str, ...]:
        """Everyone the message goes to, once each, in the order to, cc, bcc."""
        return (*self.to_addresses, *(self.cc or ()), *(self.bcc or ()))

    @property
    def requested_recipients(self) -> tuple[str, ...]:
        """Everyone the send named, suppressed ones included: what its dedup identity and key tie
        are made of, so that dropping a recipient never changes either."""
        return (*self.recipients, *self.suppressed_recipients)

    def without(self, keys: Collection[str]) -> Message | None:
        """The message without the recipients whose key (`recipient_key`) is in `keys`, each named in
        `suppressed_recipients`; None when nobody would be left."""
        dropped = tuple(address for address in self.recipients if ascii_lower(address) in keys)
        if not dropped:
            return self

        def kept(addresses: tuple[str, ...] | None) -> tuple[str, ...] | None:
            return None if addresses is None else tuple(a for a in addresses if a not in dropped)

        left = [address for address in self.recipients if address not in dropped]
        if not left:
            return None
        # A `to` given as a string that is dropped becomes the empty list: the string is no one now.
        to_list = kept(self.to_list) if self.to_list is not None else (() if self.to in dropped else None)
        return replace(
            self,
            to=left[0],
            to_list=to_list,
            cc=kept(self.cc),
            bcc=kept(self.bcc),
            suppressed_recipients=(*self.suppressed_recipients, *dropped),
        )
