"""The promise made visible: what the service did for a workspace's sends, counted per UTC day.

Each thing is counted where it happens, once: a new message, a duplicate blocked and a message the
dispatcher refused for a suppressed recipient with the event that tells of them (in the same
transaction, from the table's stream: a new send's path makes no call for them, and a change told
twice writes its event and its count once); a replay answered and a send refused as suppressed at
the API, where it answers them (paths that write nothing else; such a count is best effort).

This module imports no event model: the stream's changes (`sendonce.status_webhooks.model`) carry
what they count.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from enum import StrEnum

from msgspec import Struct

from sendonce.messages.model import Message, Status
from sendonce.status_webhooks.rules import EventType


class PromiseKind(StrEnum):
    """What the promise's counts count, each by its name in the API."""

    NEW_MESSAGES = "newMessages"
    REPLAYS = "replays"
    DUPLICATES_BLOCKED = "duplicatesBlocked"
    REFUSED_SUPPRESSED = "refusedSuppressed"


class PromiseCount(Struct, frozen=True):
    """`count` more of `kind` for a workspace on a UTC day; `spread`: what picks the counter's shard
    (a message id, or anything that varies)."""

    workspace_id: str
    day: str  # YYYY-MM-DD, UTC
    kind: PromiseKind
    spread: str
    count: int = 1


class PromiseDay(Struct, frozen=True):
    day: str
    counts: dict[PromiseKind, int]

    def of(self, kind: PromiseKind) -> int:
        return self.counts.get(kind, 0)


def utc_day(moment: datetime) -> str:
    return moment.astimezone(UTC).date().isoformat()


def last_days(today: datetime, days: int) -> list[str]:
    """The `days` UTC days up to today's, newest first."""
    first: date = today.astimezone(UTC).date()
    return [(first - timedelta(days=back)).isoformat() for back in range(days)]


def promise_count_of(
    message: Message, before: Status | None, told: EventType, at: datetime
) -> PromiseCount | None:
    """What the promise counts of a change the stream tells: a message that leaves `accepted` (or is
    created past it) is new, on the day it was created; a duplicate blocked counts on the day it
    was; a message the dispatcher refused for a suppressed recipient, on the day it did."""
    if told is EventType.DUPLICATE_BLOCKED:
        return PromiseCount(
            message.workspace_id, utc_day(at), PromiseKind.DUPLICATES_BLOCKED, f"{message.id}/{at}"
        )
    if before is None or before is Status.ACCEPTED:
        return PromiseCount(
            message.workspace_id, utc_day(message.created_at), PromiseKind.NEW_MESSAGES, message.id
        )
    if (
        message.status is Status.FAILED
        and message.error is not None
        and message.error.code == "recipient_suppressed"
    ):
        return PromiseCount(message.workspace_id, utc_day(at), PromiseKind.REFUSED_SUPPRESSED, message.id)
    return None
