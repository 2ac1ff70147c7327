"""The sending context's ports: where a new message, its dedup lock and its key tie are kept,
and the queue a message is handed to. Adapters implement them; the use cases speak only to them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from msgspec import Struct
from msgspec.structs import replace

from sendonce.keyed_hash import KeyedHash
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.recipients import ascii_lower

if TYPE_CHECKING:  # only the API charges a quota: the other functions' cold start needs no limits model
    from sendonce.controls.cap import RecipientCap
    from sendonce.limits.model import QuotaCharge
    from sendonce.templates.model import Template


class DedupClaim(Struct, frozen=True):
    """The lock a new message takes on its identity, until `expires_at`; sent from a template, also
    its second lock, on the template's name and data to the recipient (`template_lock_id`), in the
    same write: either lock held by another message makes the send its duplicate."""

    lock_id: str
    expires_at: datetime
    template_lock_id: str | None = None
    # A campaign's message: its lock on (campaign, recipient), until `campaign_lock_expires_at`.
    campaign_lock_id: str | None = None
    campaign_lock_expires_at: datetime | None = None

    def taken_by(self, message: Message) -> Message:
        """The message as it holds the claim's locks."""
        return replace(
            message,
            dedup_lock_id=self.lock_id,
            template_lock_id=self.template_lock_id,
            campaign_lock_id=self.campaign_lock_id,
        )


class KeyTie(Struct, frozen=True):
    """The permanent tie of (workspace, Idempotency-Key, destination) to one message."""

    tie_id: str
    payload_fingerprint: str


class Created(Struct, frozen=True):
    message: Message


class DuplicateOf(Struct, frozen=True):
    """The dedup lock is held by another message, returned when it still exists."""

    original: Message | None
    locked_at: datetime


class TiedToKey(Struct, frozen=True):
    """The Idempotency-Key already created a message for this destination."""

    original: Message | None
    payload_fingerprint: str


class QuotaSpent(Struct, frozen=True):
    """The workspace's daily quota is used up: nothing was written, and the identity is free."""


class SmsBudgetSpent(Struct, frozen=True):
    """The workspace's daily sms budget has no room for the message's segments: nothing was
    written, and the identity is free."""


class Capped(Struct, frozen=True):
    """The frequency cap of a recipient had no room: nothing was written, and the identity is free.
    A message could take a place in `retry_after_seconds` (`RecipientCap.retry_after`)."""

    retry_after_seconds: int


class Suppressed(Struct, frozen=True):
    """The recipient is on a suppression list the workspace is subject to (`reason`): nothing was
    written. A create's own transaction tells it; a batch's entries learn it from the batch's read."""

    reason: str


class TemplateChanged(Struct, frozen=True):
    """The send's template was deleted, or (a send that asked for the latest) has a newer version,
    since it was read: nothing was written; read it again and render again."""


CreateOutcome = (
    Created | DuplicateOf | TiedToKey | QuotaSpent | SmsBudgetSpent | Capped | Suppressed | TemplateChanged
)


class TemplateInForce(Struct, frozen=True):
    """What a send from a template rendered, for its create to check in the same write: the template
    still live, and, when the send asked for the latest version, `version` still its latest. So a
    version read from this environment's cache is never sent once it is stale."""

    name: str
    version: int
    latest: bool


class NewMessage(Struct, frozen=True):
    """One message of a bulk create: written with its dedup lock, as `create` without a key tie would."""

    message: Message
    claim: DedupClaim
    handoff_due_at: datetime
    segments: int = 0  # its sms segments, taken of the sms budget (0: not sms)


class NotWritten(Struct, frozen=True):
    """The store failed before this message's transaction answered: it may or may not exist. A retry of
    the same send is safe: its dedup lock answers it, and the outbox hands over what was written."""

    reason: str


class GateClosed(Struct, frozen=True):
    """The campaign the entries belong to was paused, canceled or finished (its gate closed) before
    their transaction: nothing of it was written."""


class MadeBefore(Struct, frozen=True):
    """The campaign already holds a message for this recipient (`original`, when it still exists):
    a page read again met its own earlier write. Nothing was written, and nothing is counted."""

    original: Message | None


class CampaignGate(Struct, frozen=True):
    """A bulk create on behalf of a campaign: written only while the campaign's gate is open."""

    workspace_id: str
    campaign_id: str


CreateManyOutcome = (
    Created | DuplicateOf | NotWritten | QuotaSpent | SmsBudgetSpent | Capped | GateClosed | MadeBefore
)


class MessageEdit(Struct, frozen=True):
    """An edit planned on the message as it was read (`seen`). The store writes it only while the
    message is as read and still scheduled, whether or not it was handed to its queue: the claim
    sends a record's copy only while the message is still as copied."""

    seen: Message
    edited: Message
    claim: DedupClaim | None  # the new content's lock; None: the identity is unchanged, the lock stays
    tie: KeyTie | None  # the message's key tie, to carry the edited payload's fingerprint
    # When the outbox hands the edited message over, for a new sendAt; None: sendAt is unchanged,
    # and so is the due time (whatever record or outbox entry covered the message still covers it).
    handoff_due_at: datetime | None


class Edited(Struct, frozen=True):
    message: Message


class ContentHeld(Struct, frozen=True):
    """The edited content's dedup lock is held by another message: nothing was written."""

    message_id: str


class EditRaced(Struct, frozen=True):
    """The message changed since it was read (another edit): read it again and plan again."""


class NotEditable(Struct, frozen=True):
    """No longer scheduled (its delivery was claimed, or it was canceled): nothing was written."""

    status: Status


EditOutcome = Edited | ContentHeld | EditRaced | NotEditable


# A page filtered by what only the items hold reads at most this many messages: a recipient with
# few messages among many is found page by page, each within a request's time.
MAX_FILTERED_READS = 2000


class MessageFilter(Struct, frozen=True):
    """Which of a workspace's messages a listing shows: each field given narrows it. `recipient`: a
    normalised address's key (`recipient_key`), matched against everyone the send named."""

    status: Status | None = None
    campaign_id: str | None = None
    channel: str | None = None
    recipient: str | None = None

    @property
    def reads_items(self) -> bool:
        """Whether only the items can tell (no listing index holds the channel or the recipient)."""
        return self.channel is not None or self.recipient is not None

    def admits(self, message: Message) -> bool:
        return (
            (self.status is None or message.status is self.status)
            and (self.campaign_id is None or message.campaign_id == self.campaign_id)
            and (self.channel is None or message.channel == self.channel)
            and (
                self.recipient is None
                or any(ascii_lower(address) == self.recipient for address in message.requested_recipients)
            )
        )


class Page(Struct, frozen=True):
    messages: list[Message]
    next_cursor: str | None

    def cut(self, kept: int) -> Page:
        """The first `kept` messages (one at least), and the cursor that resumes right after them."""
        return Page(self.messages[:kept], self.messages[kept - 1].id)


class DedupLocks(Protocol):
    def release_dedup_lock(self, message: Message) -> None:
        """Delete the lock this message holds, if it still does; never raises."""
        ...


class SendingStore(DedupLocks, Protocol):
    # What the store holds in place of an identity (a lock's, a key tie's, a capped recipient's): its
    # HMAC under the deployment's hashing key, so no stored key can be recomputed from an address.
    keyed_hash: KeyedHash

    def create(
        self,
        message: Message,
        claim: DedupClaim,
        tie: KeyTie | None,
        handoff_due_at: datetime,
        now: datetime,
        *,
        quota: QuotaCharge | None = None,
        template: TemplateInForce | None = None,
        cap: RecipientCap | None = None,
        sms_budget: QuotaCharge | None = None,
    ) -> CreateOutcome:
        """Write the message, its dedup lock, its key tie, one unit of its quota and its places under
        the frequency `cap` atomically, or none of them (Capped when a frame has no room: after a
        suppression, a tie, a held lock or a changed template, so a replay or a duplicate never
        counts), while its recipient is on no suppression list its workspace is subject to (checked in
        the same write: Suppressed, before a tie or a held lock). An email's recipients are each
        checked: the suppressed ones are dropped (Created's message names them in
        `suppressed_recipients`; the lock and tie stay as given), and with nobody left, Suppressed
        (the first recipient's reason). A held lock or tie is answered before the quota: a duplicate
        or a replay is never QuotaSpent. With `sms_budget`, also its segments (`sms_budget.units`) of
        the day's sms budget in the same write (SmsBudgetSpent when no shard has room, as the quota's
        QuotaSpent, after a tie or a held lock). With `template`, also while the template is as the send
        rendered it (checked in the same write: TemplateChanged, after a tie or a held lock).

        `handoff_due_at`: when the outbox takes the hand-off to the queue over, if still owed.
        """
        ...

    def get(self, workspace_id: str, message_id: str) -> Message | None: ...

    def list(self, workspace_id: str, which: MessageFilter, limit: int, cursor: str | None) -> Page:
        """Newest first, `limit` of the messages `which` admits whenever that many more exist; with a
        filter only the items can tell (`MessageFilter.reads_items`), fewer once MAX_FILTERED_READS
        messages were read for the page, its cursor then resuming after the last one read."""
        ...

    def create_many(
        self,
        entries: Sequence[NewMessage],
        now: datetime,
        quota: QuotaCharge | None = None,
        gate: CampaignGate | None = None,
        sms_budget: QuotaCharge | None = None,
    ) -> Sequence[CreateManyOutcome]:
        """Each entry written with its lock (and its unit of quota, and its `segments` of the
        `sms_budget`: SmsBudgetSpent past it) as `create` writes it, in as few
        transactions as the store allows; one outcome per entry, in order. The entries' locks are
        distinct. A lock held by another message is its DuplicateOf, counted on the original as
        `create` counts it; an entry past the quota is QuotaSpent. With `gate`: each transaction
        also checks the campaign's gate is open (GateClosed, for every entry it held, when not), and
        an entry whose campaign lock is held is MadeBefore, whatever else it meets."""
        ...

    def count_duplicate(
        self,
        workspace_id: str,
        message_id: str,
        answered_under: str | None = None,
        batch_key: str | None = None,
    ) -> Message | None:
        """Record one duplicate caught against this message (as `create` does); the message, if it
        exists. `answered_under`: the duplicate's Idempotency-Key, `batch_key` its batch's: their
        stored answers show this message, so both are kept on it for an erasure to find."""
        ...

    def edit(self, edit: MessageEdit, now: datetime) -> EditOutcome:
        """Write the edited message, move its dedup lock and update its key tie atomically, or none
        of them. Raise MessageNotFound when the message is gone (or another workspace's)."""
        ...

    def owe_handoff(self, edit: MessageEdit, now: datetime) -> bool:
        """The hand-off a written edit with a new sendAt planned is owed at once (its enqueue
        failed): the outbox due time moves to `now`, while the message is still scheduled with the
        sendAt and due time the edit wrote. False when it has moved on since (nothing written)."""
        ...

    def cancel(self, workspace_id: str, message_id: str, now: datetime) -> Message:
        """Cancel a waiting message with no attempt started; raise MessageNotCancelable otherwise."""
        ...


class Deliverable(Protocol):
    """What a queue record names: a message, or an outbox entry of one."""

    @property
    def id(self) -> str: ...

    @property
    def workspace_id(self) -> str: ...

    @property
    def channel(self) -> Channel: ...


class Handoff(Struct, frozen=True):
    """One message for its channel's queue, held back `delay_seconds` there."""

    message: Deliverable
    delay_seconds: int = 0


class MessageQueue(Protocol):
    def enqueue(self, message: Deliverable, delay_seconds: int = 0) -> None:
        """Hand a message to its channel's queue; raise QueueUnavailable on failure."""
        ...

    def enqueue_batch(self, handoffs: Sequence[Handoff]) -> list[Handoff]:
        """Hand several messages to their channels' queues; return those that were not handed over."""
        ...


class TemplateUse(Struct, frozen=True):
    """A send's template: its name, the version asked for (None: the latest), and the data it is
    rendered with. Once rendered, the send's command names the version it rendered."""

    name: str
    data: Mapping[str, Any]
    version: int | None = None


class TemplatedContent(Struct, frozen=True):
    """What a template rendered for a send, with the version it was."""

    version: int
    body: str
    subject: str | None = None
    html: str | None = None


class SendTemplates(Protocol):
    """Where a send finds its template and has it rendered (`sendonce.templates.service`)."""

    def find(self, workspace_id: str, name: str, version: int | None, *, fresh: bool) -> Template | None:
        """That version of a live template of the workspace (the latest when None); None when the
        name, or the version, is unknown or deleted. Not `fresh`: possibly as this environment last
        read it (the create checks it: `TemplateInForce`)."""
        ...

    def render_for_send(self, template: Template, data: Mapping[str, Any]) -> TemplatedContent:
        """The version rendered with `data`; TemplateDataInvalid when the render is refused."""
        ...
