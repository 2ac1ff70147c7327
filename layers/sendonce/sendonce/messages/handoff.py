"""A message's hand-off to its channel's queue: when it is owed, and with what delay.

A new message is handed over from the MessagesTable's stream, never by the request that created
it (`sendonce.entrypoints.handoff`): the stream holds every committed write and nothing else,
so a message is handed over only once its creation committed, and the request pays one call. The
outbox's entry, written with the message (`handoff_due_at`), is the backstop for a record the
stream never brings. A message handed over twice is claimed once by its dispatcher.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sendonce.messages.model import Message
from sendonce.messages.ports import Handoff

# SQS can hold a message back at most 15 minutes; later sends wait in the outbox.
MAX_QUEUE_DELAY = timedelta(minutes=15)
# How long a message may wait for its dispatcher before the outbox hands it over again.
HANDOFF_GRACE = timedelta(minutes=2)


def handoff_due_at(now: datetime, send_at: datetime | None) -> datetime:
    """When the outbox takes a new message's hand-off over, should the stream's not arrive."""
    if send_at is None or send_at <= now:
        return now + HANDOFF_GRACE
    if send_at - now <= MAX_QUEUE_DELAY:
        return send_at + HANDOFF_GRACE
    return send_at - MAX_QUEUE_DELAY


def handoff_of(message: Message, now: datetime) -> Handoff | None:
    """The hand-off a message is owed now: held back until its `sendAt`, or None when that is
    beyond SQS's reach (the outbox hands it over when it comes due)."""
    delay = timedelta(0)
    if message.send_at is not None and message.send_at > now:
        delay = message.send_at - now
        if delay > MAX_QUEUE_DELAY:
            return None
    return Handoff(message, delay_seconds=ceil_seconds(delay))


def ceil_seconds(delta: timedelta) -> int:
    seconds = delta.total_seconds()
    whole = int(seconds)
    return whole + (1 if seconds > whole else 0)
