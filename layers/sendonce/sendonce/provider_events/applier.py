"""Apply a provider event once: the event is recorded in the same transaction as its effect."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Protocol

from sendonce.clock import Clock, utc_now
from sendonce.messages.model import Message
from sendonce.observability import logger, metrics
from sendonce.provider_events.model import EventType, ProviderEvent


class EventOutcome(StrEnum):
    APPLIED = "applied"
    REPEATED = "repeated"  # this event took effect before
    IGNORED = "ignored"  # unknown message, or the status would move backwards


ApplyResult = tuple[EventOutcome, Message | None]


class ProviderEventStore(Protocol):
    def apply_provider_event(self, event: ProviderEvent, now: datetime) -> ApplyResult:
        """Record the event and apply its effect in one transaction, once; the message as it was."""
        ...

    def release_dedup_lock(self, message: Message) -> None: ...


def apply_event(store: ProviderEventStore, event: ProviderEvent, clock: Clock = utc_now) -> EventOutcome:
    outcome, message = store.apply_provider_event(event, clock())
    if outcome is EventOutcome.APPLIED and event.type is EventType.FAILED and message is not None:
        store.release_dedup_lock(message)  # a failed message never blocks a deliberate retry
    metrics.add_metric(name=f"ProviderEvent{outcome.value.capitalize()}", unit="Count", value=1)
    logger.info(
        f"message.events.{outcome.value}",
        extra={
            "event": f"message.events.{outcome.value}",
            "provider": event.provider,
            "provider_event_id": event.event_id,
            "message_id": event.message_id,
            "type": event.type.value,
        },
    )
    return outcome
