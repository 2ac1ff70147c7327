"""A message's timeline, and the promise's counts per UTC day.

A timeline is assembled only from what the service records anyway: the message (its creation and
its provider attempts), its events (each status change told, each duplicate blocked, each event's
status-webhook deliveries) and the provider events recorded against it. Nothing is written for it.

The promise's daily counts are `sendonce.activity.counts`'.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum

from msgspec import Struct

from sendonce.messages.model import Message, Status
from sendonce.status_webhooks.model import Event
from sendonce.status_webhooks.rules import EventType

# A message's events read for its timeline: far more than any message has (one per status, one per
# duplicate blocked, which are few within a dedup window).
TIMELINE_EVENTS = 500


class EntryKind(StrEnum):
    CREATED = "created"
    STATUS = "status"
    PROVIDER_ATTEMPT = "provider_attempt"
    PROVIDER_EVENT = "provider_event"
    DUPLICATE_BLOCKED = "duplicate_blocked"
    WEBHOOK_DELIVERY = "webhook_delivery"


class TimelineEntry(Struct, frozen=True):
    """One thing that happened to a message, at `at`; which fields it has depends on its `kind`."""

    at: datetime
    kind: EntryKind
    status: str | None = None  # created: the status it was created in; status; webhook_delivery
    event_id: str | None = None  # status, duplicate_blocked, webhook_delivery
    provider: str | None = None  # provider_attempt, provider_event
    outcome: str | None = None  # provider_attempt
    type: str | None = None  # provider_event: sent, delivered, failed, opted_out
    endpoint_id: str | None = None  # webhook_delivery
    attempts: int | None = None  # webhook_delivery
    response_status: int | None = None  # webhook_delivery: the last attempt's


class MessageTimeline(Struct, frozen=True):
    message: Message
    entries: list[TimelineEntry]


class RecordedProviderEvent(Struct, frozen=True):
    """A provider event as recorded against its message (never its raw body)."""

    provider: str
    type: str
    recorded_at: datetime
    occurred_at: str | None = None  # as the provider said it


# Among entries at the same instant, the order things happen in.
_ORDER = {kind: rank for rank, kind in enumerate(EntryKind)}


def timeline(
    message: Message, events: Iterable[Event], provider_events: Iterable[RecordedProviderEvent]
) -> list[TimelineEntry]:
    """Everything that happened to `message`, oldest first."""
    entries = [TimelineEntry(message.created_at, EntryKind.CREATED, status=_created_status(message, events))]
    entries.extend(
        TimelineEntry(
            attempt.at, EntryKind.PROVIDER_ATTEMPT, provider=attempt.provider, outcome=attempt.outcome
        )
        for attempt in message.provider_attempts
    )
    entries.extend(
        TimelineEntry(seen.recorded_at, EntryKind.PROVIDER_EVENT, provider=seen.provider, type=seen.type)
        for seen in provider_events
    )
    for event in events:
        if event.type is EventType.DUPLICATE_BLOCKED:
            entries.append(TimelineEntry(event.timestamp, EntryKind.DUPLICATE_BLOCKED, event_id=event.id))
        else:
            status = event.type.value.removeprefix("message.")
            entries.append(TimelineEntry(event.timestamp, EntryKind.STATUS, status=status, event_id=event.id))
        entries.extend(
            TimelineEntry(
                delivery.last_attempt_at or event.timestamp,
                EntryKind.WEBHOOK_DELIVERY,
                status=delivery.status.value,
                event_id=event.id,
                endpoint_id=delivery.endpoint_id,
                attempts=delivery.attempts,
                response_status=delivery.last_response_status,
            )
            for delivery in event.deliveries
        )
    return sorted(entries, key=lambda entry: (entry.at, _ORDER[entry.kind]))


def _created_status(message: Message, events: Iterable[Event]) -> str:
    """The status a message was created in: the status told at its creation's instant; else, none
    told yet, the one it waits in; else `accepted` (never told: its next status came later)."""
    told = [e for e in events if e.type is not EventType.DUPLICATE_BLOCKED]
    at_creation = [e for e in told if e.timestamp == message.created_at]
    if at_creation:
        return at_creation[0].type.value.removeprefix("message.")
    if not told and message.status in (Status.SCHEDULED, Status.QUEUED):
        return message.status.value
    return Status.ACCEPTED.value
