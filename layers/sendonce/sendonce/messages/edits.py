"""Editing a scheduled message: the edit is planned on the message as read, and written only if the
message is still as read and still scheduled, so an edit racing a cancel, another edit or the
dispatcher's claim either wins completely or loses.

A message stays editable until its delivery is claimed, whether or not it was already handed to its
queue: the claim (one conditional write that moves it from `scheduled` to `sending`, sending a queue
record's copy only while the message is still as copied) is the one moment that fixes what is sent.
Every edit moves `updatedAt` on, so a copy from before an edit is never what is sent. The edit is
one conditional write on the same item, so one of the two comes first: an edit after the claim is
refused (`409 message_not_editable`), and the provider gets the content of the last edit before
it, never a mix.

An edit that keeps `sendAt` leaves the message's hand-off as it is: whatever record or outbox entry
covered it still does. A new `sendAt` moves the outbox due time (`handoff_due_at`) and, within SQS's
reach, the service hands the message over again (the outbox at once, should SQS refuse). A record
that arrives before the new `sendAt` is handed back by the dispatcher; one left from before an
earlier `sendAt` finds the message sent, and nothing to do.

The dedup lock follows the content: when the identity changes, the old lock is released and the new
one taken in the same write, and a new identity another message holds refuses the edit. The key
tie takes the edited payload's fingerprint, so past the idempotency window the key and the original
payload no longer replay a message that was since edited.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from sendonce import channels
from sendonce.clock import Clock, rfc3339
from sendonce.dedup.identity import message_identity
from sendonce.errors import DependencyUnavailable, DuplicateContent, InvalidEdit, MessageNotEditable
from sendonce.idempotency.keys import payload_fingerprint, tie_identity
from sendonce.keyed_hash import KeyedHash
from sendonce.messages.handoff import handoff_due_at
from sendonce.messages.model import Message, Status
from sendonce.messages.ports import (
    ContentHeld,
    DedupClaim,
    Edited,
    KeyTie,
    MessageEdit,
    NotEditable,
    SendingStore,
)
from sendonce.messages.recipients import tie_destination
from sendonce.observability import logger

# Another edit committed between a read and a write: read again, a bounded number of times.
MAX_EDIT_RACES = 5
# Every edit moves updatedAt forward, even within one millisecond: it is the version an edit checks.
_TICK = timedelta(milliseconds=1)


class MessageChanges(Struct, frozen=True):
    """The fields an edit sets; None leaves a field as it is (the API refuses an explicit null)."""

    body: str | None = None
    subject: str | None = None
    send_at: datetime | None = None
    metadata: dict[str, str] | None = None


def edited_payload(message: Message) -> dict[str, Any]:
    """The `POST /v1/messages` body that would create the message as it now is."""
    to: str | list[str] = message.to if message.to_list is None else list(message.to_list)
    payload: dict[str, Any] = {
        "channel": message.channel.value,
        "to": to,
        "body": message.body,
        **message.email_fields(),
    }
    if message.subject is not None:
        payload["subject"] = message.subject
    if message.send_at is not None:
        payload["sendAt"] = rfc3339(message.send_at)
    if message.metadata:
        payload["metadata"] = dict(message.metadata)
    return payload


# A new sendAt's hold past quiet hours (`sendonce.messages.service.held`): the message as it goes.
Hold = Callable[[Message, datetime], Message]


def plan_edit(
    current: Message,
    changes: MessageChanges,
    now: datetime,
    *,
    dedup_window: timedelta,
    keyed: KeyedHash,
    hold: Hold | None = None,
) -> MessageEdit:
    """The edit of `current`; raises InvalidEdit or MessageNotEditable before anything is written. A
    new sendAt within quiet hours is moved to their end (`hold`); one outside them drops `heldFor`."""
    if changes.subject is not None and channels.spec(current.channel).subject == "forbidden":
        raise InvalidEdit("subject", f"is not allowed for {current.channel.value}")
    if current.status is not Status.SCHEDULED:
        raise MessageNotEditable(current.status.value)
    edited = replace(
        current,
        body=current.body if changes.body is None else changes.body,
        subject=current.subject if changes.subject is None else changes.subject,
        send_at=current.send_at if changes.send_at is None else changes.send_at,
        metadata=dict(current.metadata if changes.metadata is None else changes.metadata),
        updated_at=max(now, current.updated_at + _TICK),
    )
    if changes.send_at is not None:
        edited = replace(edited, held_for=None)
        if hold is not None:
            edited = hold(edited, now)
    # Every recipient the send named, suppressed ones included: the identity it was created with.
    requested = current.requested_recipients
    lock_id = keyed(
        message_identity(
            current.workspace_id,
            [channels.normalise_recipient(current.channel, address).dedup_form for address in requested],
            edited.subject,
            edited.body,
            edited.html,
        )
    )
    claim = None
    if lock_id != current.dedup_lock_id:
        claim = DedupClaim(lock_id=lock_id, expires_at=now + dedup_window)
        edited = replace(edited, dedup_lock_id=lock_id)
    tie = None
    if current.idempotency_key is not None:
        tie = KeyTie(
            tie_id=keyed(
                tie_identity(current.workspace_id, current.idempotency_key, tie_destination(requested))
            ),
            payload_fingerprint=keyed(payload_fingerprint(edited_payload(edited))),
        )
    due = None
    if edited.send_at != current.send_at:
        due = handoff_due_at(now, edited.send_at)
    return MessageEdit(seen=current, edited=edited, claim=claim, tie=tie, handoff_due_at=due)


def edit_message(
    store: SendingStore,
    *,
    clock: Clock,
    dedup_window: timedelta,
    read: Callable[[], Message],
    changes: MessageChanges,
    hold: Hold | None = None,
) -> tuple[MessageEdit, datetime]:
    """The edit as written (its `edited` message is the answer), and the time it was written at.

    `read()`: the message as it is now (raises MessageNotFound). Raises DuplicateContent when another
    message holds the new content, MessageNotEditable once the message is no longer scheduled.
    """
    for _ in range(MAX_EDIT_RACES):
        now = clock()
        current = read()
        plan = plan_edit(current, changes, now, dedup_window=dedup_window, keyed=store.keyed_hash, hold=hold)
        outcome = store.edit(plan, now)
        if isinstance(outcome, Edited):
            logger.info(
                "message.api.edited",
                extra={
                    "event": "message.api.edited",
                    "message_id": current.id,
                    "content_changed": plan.claim is not None,
                    "send_at_changed": plan.handoff_due_at is not None,
                },
            )
            return plan, now
        if isinstance(outcome, ContentHeld):
            raise DuplicateContent(outcome.message_id)
        if isinstance(outcome, NotEditable):
            raise MessageNotEditable(outcome.status.value)
    raise DependencyUnavailable("the message kept changing while it was being edited")
