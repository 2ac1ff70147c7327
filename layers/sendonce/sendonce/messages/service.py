"""The message use cases: send, read, list, edit, cancel. Pure domain; it speaks only to ports.

A new send is one write: the message with its dedup lock (and key tie, and quota), all or
nothing, on the condition that its recipient is on no suppression list its workspace is subject to
(`sendonce.suppressions`). Its hand-off to the queue follows from that write's record in the table's
stream (`sendonce.messages.handoff`), so the request makes no second call for either. A send from a
template is rendered first, and its message takes a second lock (the template's name and data to the
recipient) in that same write. A refused
recipient has nothing written, and the refusal is raised inside the key's record, so it is never
stored under an Idempotency-Key. A suppression that lands after the write is caught by the
dispatcher, whose claim checks again in its own write. An email to several recipients is one
message: its suppressed recipients are left out (and named), and it is refused only when none is
left; its dedup identity and key tie are those of every recipient the send named (`lock_of`).

Send controls (`sendonce.controls`) ride on the same write: under a frequency cap, the message's
places are counted by that transaction on conditions that keep the cap (`Capped` otherwise, after a
suppression, a tie or a held lock, so a replay or a duplicate never counts); quiet hours move a
message's sendAt before it is written (`held`), and its expiry is written with it. A critical send
is neither held nor counted.

Protections (CONTRACT section 18) come from the same limits, read once per send: a phone recipient
outside the workspace's destination rules is refused before anything is written (`refuse_destination`,
raised inside the key's record, so the key stays unused); an sms takes its segments of the daily sms
budget in the create's own write (`sms_budget_charge`, SmsBudgetSpent otherwise, as the quota); and
the message is kept its workspace's retention.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from msgspec import Struct, field
from msgspec.structs import replace

from sendonce.clock import Clock, utc_now
from sendonce.dedup.identity import campaign_identity, message_identity, template_identity
from sendonce.errors import (
    DependencyUnavailable,
    DestinationNotAllowed,
    IdempotencyKeyReused,
    MessageNotFound,
    QueueUnavailable,
    QuotaExceeded,
    RecipientCapped,
    RecipientSuppressed,
    SmsBudgetExceeded,
    TemplateDataInvalid,
    TooManyCappedRecipients,
    UnknownTemplate,
)
from sendonce.idempotency.keys import tie_identity
from sendonce.keyed_hash import KeyedHash
from sendonce.limits.model import Ledger, Limits, LimitsTimeline, QuotaCharge, seconds_to_next_day
from sendonce.limits.ports import LimitsStore
from sendonce.messages import sms
from sendonce.messages.edits import MessageChanges, edit_message
from sendonce.messages.handoff import handoff_due_at, handoff_of
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import (
    BODY_MAX_CHARACTERS,
    HTML_MAX_CHARACTERS,
    SUBJECT_MAX_CHARACTERS,
    Channel,
    HeldFor,
    Message,
    Priority,
    Status,
    TemplateRef,
)
from sendonce.messages.ports import (
    Capped,
    Created,
    DedupClaim,
    DuplicateOf,
    KeyTie,
    MessageEdit,
    MessageFilter,
    MessageQueue,
    Page,
    QuotaSpent,
    SendingStore,
    SendTemplates,
    SmsBudgetSpent,
    Suppressed,
    TemplateChanged,
    TemplateInForce,
    TemplateUse,
)
from sendonce.messages.recipients import Recipient, tie_destination
from sendonce.observability import logger, metrics
from sendonce.suppressions.model import recipient_key

if TYPE_CHECKING:
    from sendonce.controls.cap import RecipientCap
    from sendonce.templates.model import Template


class SendCommand(Struct, frozen=True):
    """One send. From a template (`template`), its content is the template's render, made at
    acceptance (`rendered`): until then `body` is empty and `subject` None, and once rendered the
    command names the version it rendered."""

    workspace_id: str
    channel: Channel
    recipient: Recipient  # the first recipient: a single-recipient send's only one
    body: str
    subject: str | None = None
    send_at: datetime | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    idempotency_key: str | None = None
    # An item of a batch sent under its own Idempotency-Key: that key (`Message.batch_key`).
    batch_key: str | None = None
    payload_fingerprint: str | None = None
    template: TemplateUse | None = None
    smart_encoding: bool = False  # a rendered sms body's look-alikes replaced (a written one's are already)
    sms: bool = False  # its channel's messages are sms (`channels.ChannelSpec.sms`): counted in segments
    # An email's recipient lists, de-duplicated across them (`recipients.deduplicated`): `to_list`
    # when `to` was a list (None: `recipient` alone, given as a string), `cc` and `bcc` when given.
    to_list: tuple[Recipient, ...] | None = None
    cc: tuple[Recipient, ...] | None = None
    bcc: tuple[Recipient, ...] | None = None
    reply_to: str | None = None
    html: str | None = None
    campaign_id: str | None = None  # a campaign's message (`sendonce.campaigns`)
    # Send controls (`sendonce.controls`): `critical` bypasses quiet hours and the frequency cap;
    # `timezone` the recipient's (IANA, checked); an expiry as an instant or a validity from sendAt.
    priority: Priority = Priority.NORMAL
    timezone: str | None = None
    expires_at: datetime | None = None
    valid_for_seconds: int | None = None

    @property
    def recipients(self) -> tuple[Recipient, ...]:
        """Everyone the send names, once each, in the order to, cc, bcc."""
        to = (self.recipient,) if self.to_list is None else self.to_list
        return (*to, *(self.cc or ()), *(self.bcc or ()))


class SendResult(Struct, frozen=True):
    message: Message | None
    created: bool = False
    duplicate: bool = False
    replayed: bool = False  # the Idempotency-Key had already created this message
    original_age_seconds: int | None = None


def lock_of(command: SendCommand) -> str:
    """The dedup identity a command's message would lock: two commands with the same are one message.
    Made of every recipient the command names, so dropping a suppressed one never changes it."""
    return message_identity(
        command.workspace_id,
        [recipient.dedup_form for recipient in command.recipients],
        command.subject,
        command.body,
        command.html,
    )


def template_lock_of(command: SendCommand) -> str | None:
    """The second identity of a send from a template: its name and data to every recipient the send
    names, whatever version it renders (None for a send written by its sender)."""
    if command.template is None:
        return None
    use = command.template
    recipients = [recipient.dedup_form for recipient in command.recipients]
    return template_identity(command.workspace_id, recipients, use.name, use.data)


# A campaign's lock on a recipient outlives any pause, resume or redelivery of its fan-out.
CAMPAIGN_LOCK_LIFE = timedelta(days=90)


def claim_of(command: SendCommand, expires_at: datetime, keyed: KeyedHash) -> DedupClaim:
    """The locks a rendered command's message takes, until `expires_at` (a campaign's lock on its
    recipient: CAMPAIGN_LOCK_LIFE after its dedup window), each its identity's `keyed` hash."""
    campaign_lock = None
    if command.campaign_id is not None:
        recipients = [recipient.dedup_form for recipient in command.recipients]
        campaign_lock = keyed(campaign_identity(command.workspace_id, command.campaign_id, recipients))
    template_lock = template_lock_of(command)
    return DedupClaim(
        lock_id=keyed(lock_of(command)),
        expires_at=expires_at,
        template_lock_id=keyed(template_lock) if template_lock is not None else None,
        campaign_lock_id=campaign_lock,
        campaign_lock_expires_at=expires_at + CAMPAIGN_LOCK_LIFE if campaign_lock is not None else None,
    )


TemplatesRead = dict[tuple[str, int | None], "Template | None"]


# Where a send from a template finds it, given on first use: a send without one never loads them.
TemplatesOnFirstUse = Callable[[], SendTemplates]
# Fresh reads of a send's template after its copy turned out stale, before a 503: each follows a
# version published (or a delete) between the read and the write.
TEMPLATE_TRIES = 3


def rendered(
    templates: TemplatesOnFirstUse | None,
    command: SendCommand,
    found: TemplatesRead | None = None,
    *,
    fresh: bool = True,
) -> SendCommand:
    """The command with its template's render as its content, checked as a written one is (its
    version named); a command written by its sender as it is. UnknownTemplate when the workspace has
    no such template (or version) for the command's channel; TemplateDataInvalid when the render is
    refused or a field of it breaks the field's limit. `found`: the templates already read (a batch
    reads each once); not `fresh`: a version this environment read before will do (the create
    checks it is still in force)."""
    use = command.template
    if use is None:
        return command
    if templates is None:
        raise DependencyUnavailable("no template store is configured")
    place = (use.name, use.version)
    if found is None or place not in found:
        template = templates().find(command.workspace_id, use.name, use.version, fresh=fresh)
        if found is not None:
            found[place] = template
    else:
        template = found[place]
    if template is None or template.channel != command.channel:
        raise UnknownTemplate()
    content = templates().render_for_send(template, use.data)
    body = sms.smart_encoded(content.body) if command.smart_encoding else content.body
    _fits("body", body, BODY_MAX_CHARACTERS)
    if content.subject is not None:
        _fits("subject", content.subject, SUBJECT_MAX_CHARACTERS)
    if content.html is not None:
        _fits("html", content.html, HTML_MAX_CHARACTERS)
    return replace(
        command,
        body=body,
        subject=content.subject,
        html=content.html,
        template=replace(use, version=content.version),
    )


def in_force(command: SendCommand, asked: TemplateUse | None) -> TemplateInForce | None:
    """What a rendered command's create checks of its template."""
    use = command.template
    if use is None or use.version is None or asked is None:
        return None
    return TemplateInForce(use.name, use.version, latest=asked.version is None)


def _fits(name: str, text: str, limit: int) -> None:
    if not text.strip():
        raise TemplateDataInvalid(f"The template's {name} is empty once rendered.", field=name)
    if len(text) > limit:
        raise TemplateDataInvalid(
            f"The template's {name} is {len(text)} characters once rendered, over its {limit}.", field=name
        )


def quota_charge(timeline: LimitsTimeline | None, workspace_id: str, now: datetime) -> QuotaCharge | None:
    """What a new message takes of its workspace's quota today (`timeline`: its limits, None when it
    has none read); None when nothing is counted."""
    if timeline is None:
        return None
    return QuotaCharge.of(workspace_id, timeline, now)


def segments_of(command: SendCommand, message: Message) -> int:
    """The sms segments a rendered command's message takes of the sms budget (0: not sms)."""
    return sms.count(message.body).segments if command.sms else 0


def sms_budget_charge(
    timeline: LimitsTimeline | None, workspace_id: str, now: datetime, segments: int
) -> QuotaCharge | None:
    """What a message of `segments` sms segments takes of its workspace's sms budget today; None
    when it takes nothing (not sms, or no budget)."""
    if timeline is None or segments == 0:
        return None
    charge = QuotaCharge.of(workspace_id, timeline, now, Ledger.SMS_SEGMENTS)
    return charge.taking(segments) if charge is not None else None


def destination_refusal(command: SendCommand, limits: Limits | None) -> DestinationNotAllowed | None:
    """The refusal of a command to a phone number its workspace's destination rules exclude (sms,
    and iMessage to a phone number: E.164 addresses); None when it may go. Decided from the limits
    already read for the send: no call."""
    if limits is None:
        return None
    phones = [recipient.address for recipient in command.recipients if recipient.address.startswith("+")]
    reason = limits.destinations.refusal(phones) if phones else None
    if reason is None:
        return None
    metrics.add_metric(name="DestinationNotAllowed", unit="Count", value=1)
    logger.info(
        "message.api.destination_not_allowed",
        extra={
            "event": "message.api.destination_not_allowed",
            "workspace_id": command.workspace_id,
            "reason": reason.value,
        },
    )
    return DestinationNotAllowed(reason.value)


def refused(workspace_id: str, reasons: Sequence[str]) -> None:
    """Sends refused for their suppressed recipients: counted, and logged without the recipients."""
    metrics.add_metric(name="RecipientSuppressed", unit="Count", value=len(reasons))
    logger.info(
        "message.api.recipient_suppressed",
        extra={
            "event": "message.api.recipient_suppressed",
            "workspace_id": workspace_id,
            "reasons": sorted(set(reasons)),
        },
    )


def new_message(command: SendCommand, now: datetime, limits: Limits | None = None) -> Message:
    """The message a command creates, alone (`MessageService.send`) or in a batch, under its
    workspace's send controls in force (`limits`): held past quiet hours, and with its expiry."""
    message = _new_message(command, now)
    valid_from = command.send_at if command.send_at is not None else now
    expires_at = command.expires_at
    if expires_at is None and command.valid_for_seconds is not None:
        expires_at = valid_from + timedelta(seconds=command.valid_for_seconds)
    message = replace(
        message,
        expires_at=expires_at,
        priority=command.priority,
        timezone=command.timezone,
        retention_days=limits.retention_days if limits is not None else None,
    )
    return held(message, limits, max(valid_from, now))


def held(message: Message, limits: Limits | None, goes_out_at: datetime) -> Message:
    """The message held past its workspace's quiet hours when it would go out within them, at
    `goes_out_at`, in its recipient's zone (`scheduled`, `sendAt` their end, `heldFor`); as it is
    when it would not, when none are set, or when it is critical."""
    if limits is None or not limits.quiet_hours or message.priority is Priority.CRITICAL:
        return message
    from sendonce.controls.quiet_hours import QuietHours, recipient_zone  # noqa: PLC0415  # when set

    phone = message.to if message.to.startswith("+") else None
    zone = recipient_zone(message.timezone, phone, limits.timezone)
    until = QuietHours.parse(limits.quiet_hours).held_until(goes_out_at, zone)
    if until is None:
        return message
    return replace(message, status=Status.SCHEDULED, send_at=until, held_for=HeldFor.QUIET_HOURS)


def recipient_cap(
    command: SendCommand, limits: Limits | None, now: datetime, keyed: KeyedHash
) -> RecipientCap | None:
    """The frequency cap a command's message counts against (its recipients by their `keyed` hashes);
    None without one, or for a critical send."""
    if limits is None or not limits.per_recipient or command.priority is Priority.CRITICAL:
        return None
    from sendonce.controls.cap import MAX_CAPPED_RECIPIENTS, RecipientCap  # noqa: PLC0415  # when set

    recipients = tuple(
        dict.fromkeys(keyed(recipient_key(recipient.address)) for recipient in command.recipients)
    )
    if len(recipients) > MAX_CAPPED_RECIPIENTS:
        raise TooManyCappedRecipients(MAX_CAPPED_RECIPIENTS)
    return RecipientCap(
        command.workspace_id,
        recipients,
        limits.per_recipient,
        limits.per_recipient_window,
        now,
    )


def _new_message(command: SendCommand, now: datetime) -> Message:
    scheduled = command.send_at is not None and command.send_at > now
    use = command.template
    return Message(
        id=new_message_id(),
        workspace_id=command.workspace_id,
        channel=command.channel,
        to=command.recipients[0].address,
        subject=command.subject,
        body=command.body,
        to_list=_addresses(command.to_list),
        cc=_addresses(command.cc),
        bcc=_addresses(command.bcc),
        reply_to=command.reply_to,
        html=command.html,
        status=Status.SCHEDULED if scheduled else Status.QUEUED,
        send_at=command.send_at,
        metadata=dict(command.metadata),
        idempotency_key=command.idempotency_key,
        created_at=now,
        updated_at=now,
        template=TemplateRef(use.name, use.version) if use is not None and use.version is not None else None,
        campaign_id=command.campaign_id,
        batch_key=command.batch_key,
    )


def _addresses(recipients: tuple[Recipient, ...] | None) -> tuple[str, ...] | None:
    return None if recipients is None else tuple(recipient.address for recipient in recipients)


class MessageService:
    def __init__(
        self,
        store: SendingStore,
        queue: MessageQueue,
        dedup_window: timedelta,
        clock: Clock = utc_now,
        limits: LimitsStore | None = None,
        *,
        templates: TemplatesOnFirstUse | None = None,
    ) -> None:
        """`limits`: where a workspace's daily quota is read; None counts no quota. `templates`:
        where a send from a template finds and renders it."""
        self._store = store
        self._queue = queue
        self._dedup_window = dedup_window
        self._clock = clock
        self._limits = limits
        self._templates = templates

    def send(self, command: SendCommand) -> SendResult:
        """Rendered first when it names a template: inside an Idempotency-Key's record, so a keyed
        retry replays the first answer whatever versions came since, and a refused render is never
        stored under the key. The version may be this environment's copy: the create checks it is
        still in force, and a stale one is read again and rendered again."""
        for fresh in (False, *[True] * TEMPLATE_TRIES):
            result = self._send(rendered(self._templates, command, fresh=fresh), command.template)
            if result is not None:
                return result
        raise DependencyUnavailable("the template kept changing while it was sent")

    def _send(self, command: SendCommand, asked: TemplateUse | None) -> SendResult | None:
        """The send of a rendered command (`asked`: its template as the request named it); None when
        its template changed since it was read."""
        now = self._clock()
        keyed = self._store.keyed_hash
        claim = claim_of(command, now + self._dedup_window, keyed)
        tie = None
        if command.idempotency_key is not None and command.payload_fingerprint is not None:
            tie = KeyTie(
                tie_id=keyed(
                    tie_identity(
                        command.workspace_id,
                        command.idempotency_key,
                        tie_destination([recipient.address for recipient in command.recipients]),
                    )
                ),
                payload_fingerprint=keyed(command.payload_fingerprint),
            )

        try:
            # The workspace's limits, read once: its quota, and the send controls the message is made under.
            timeline = self._limits.timeline(command.workspace_id) if self._limits is not None else None
            limits = timeline.at(now) if timeline is not None else None
            refusal = destination_refusal(command, limits)
            if refusal is not None:
                raise refusal  # inside the key's record: never stored under the key
            message = new_message(command, now, limits)
            budget = sms_budget_charge(timeline, command.workspace_id, now, segments_of(command, message))
            outcome = self._store.create(
                message,
                claim,
                tie,
                handoff_due_at(now, message.send_at),
                now,
                quota=quota_charge(timeline, command.workspace_id, now),
                template=in_force(command, asked),
                cap=recipient_cap(command, limits, now, keyed),
                sms_budget=budget,
            )
        except DependencyUnavailable:
            # Nothing was written: unlike a guard that falls through, no send goes unguarded.
            logger.exception(
                "message.api.duplicate_guard_error",
                extra={"event": "message.api.duplicate_guard_error", "workspace_id": command.workspace_id},
            )
            metrics.add_metric(name="DuplicateGuardError", unit="Count", value=1)
            raise
        if isinstance(outcome, Created):
            # Handed to its queue from the table's stream once the write committed: no second call.
            return SendResult(message=outcome.message, created=True)
        if isinstance(outcome, TemplateChanged):
            return None
        if isinstance(outcome, Suppressed):
            refused(command.workspace_id, [outcome.reason])
            raise RecipientSuppressed(outcome.reason)
        if isinstance(outcome, Capped):
            # Raised inside the key's record, as a spent quota is: the key stays unused.
            metrics.add_metric(name="RecipientCapped", unit="Count", value=1)
            logger.info(
                "message.api.recipient_capped",
                extra={"event": "message.api.recipient_capped", "workspace_id": command.workspace_id},
            )
            raise RecipientCapped(outcome.retry_after_seconds)
        if isinstance(outcome, QuotaSpent):
            # Raised inside the key's record, so no 429 is ever stored under a key.
            metrics.add_metric(name="QuotaExceeded", unit="Count", value=1)
            raise QuotaExceeded(seconds_to_next_day(now))
        if isinstance(outcome, SmsBudgetSpent):
            # As a spent quota: raised inside the key's record, never stored under it.
            metrics.add_metric(name="SmsBudgetExceeded", unit="Count", value=1)
            raise SmsBudgetExceeded(seconds_to_next_day(now))
        if isinstance(outcome, DuplicateOf):
            age = max(0, int((now - outcome.locked_at).total_seconds()))
            logger.info(
                "message.api.duplicate_blocked",
                extra={
                    "event": "message.api.duplicate_blocked",
                    "original_message_id": outcome.original.id if outcome.original else None,
                    "original_age_seconds": age,
                    "workspace_id": command.workspace_id,
                },
            )
            metrics.add_metric(name="DuplicateBlocked", unit="Count", value=1)
            return SendResult(message=outcome.original, duplicate=True, original_age_seconds=age)
        # The key created a message before, for this destination; its 24-hour record is gone.
        original = outcome.original
        if (
            original is None
            or outcome.payload_fingerprint != keyed(command.payload_fingerprint or "")
            or original.status is Status.CANCELED
        ):
            raise IdempotencyKeyReused()
        return SendResult(message=original, replayed=True)

    def _hand_off(self, edit: MessageEdit, now: datetime) -> None:
        """The hand-off of an edit that moved sendAt (an edit is no creation: the stream's hand-off
        skips it). Beyond SQS's reach the outbox hands it over 15 minutes ahead. Should the queue
        refuse it, the outbox owes it at once, so its next sweep (every minute) hands it over rather
        than the grace after sendAt."""
        handoff = handoff_of(edit.edited, now)
        if handoff is None:
            return
        try:
            self._queue.enqueue(edit.edited, delay_seconds=handoff.delay_seconds)
        except QueueUnavailable:
            logger.warning(
                "message.api.handoff_failed",
                extra={"event": "message.api.handoff_failed", "message_id": edit.edited.id},
            )
            metrics.add_metric(name="HandoffFailed", unit="Count", value=1)
            try:
                self._store.owe_handoff(edit, now)
            except Exception:  # still owed by the outbox after its grace: no message is left behind
                logger.exception(
                    "message.api.handoff_mark_failed",
                    extra={"event": "message.api.handoff_mark_failed", "message_id": edit.edited.id},
                )

    def get(self, workspace_id: str, message_id: str) -> Message:
        message = self._store.get(workspace_id, message_id)
        if message is None:
            raise MessageNotFound(message_id)
        return message

    def list(self, workspace_id: str, which: MessageFilter, limit: int, cursor: str | None) -> Page:
        """A page of `limit` messages whenever that many more exist (its cursor resumes after its last
        one; `Page.cut` keeps fewer, as the API does to keep its answer's size), of those `which`
        admits (a filter by channel or recipient: see `SendingStore.list`)."""
        return self._store.list(workspace_id, which, limit, cursor)

    def edit(self, workspace_id: str, message_id: str, changes: MessageChanges) -> Message:
        """Edit a scheduled message until its delivery is claimed (`sendonce.messages.edits`); a new
        sendAt within SQS's reach is handed over at once, as a new send's is."""
        limits = self._limits

        def hold(edited: Message, now: datetime) -> Message:
            """A new sendAt within quiet hours moves to their end, as a new send's does."""
            timeline = limits.timeline(workspace_id).at(now) if limits is not None else None
            return held(edited, timeline, max(edited.send_at or now, now))

        edit, now = edit_message(
            self._store,
            clock=self._clock,
            dedup_window=self._dedup_window,
            read=lambda: self.get(workspace_id, message_id),
            changes=changes,
            hold=hold,
        )
        if edit.handoff_due_at is not None:
            self._hand_off(edit, now)
        return edit.edited

    def cancel(self, workspace_id: str, message_id: str) -> Message:
        message = self._store.cancel(workspace_id, message_id, self._clock())
        self._store.release_dedup_lock(message)
        logger.info("message.api.canceled", extra={"event": "message.api.canceled", "message_id": message_id})
        return message
