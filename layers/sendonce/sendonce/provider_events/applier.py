"""Apply a provider event once: the event is recorded in the same transaction as its effects (a status
change; for an opt-out, a permanent bounce or a complaint, the recipient's suppression)."""

from __future__ import annotations

from sendonce.clock import Clock, utc_now
from sendonce.observability import logger, metrics
from sendonce.provider_events.model import ProviderEvent, ProviderEventType
from sendonce.provider_events.ports import EventOutcome, ProviderEventStore


def apply_event(store: ProviderEventStore, event: ProviderEvent, clock: Clock = utc_now) -> EventOutcome:
    outcome, message = store.apply_provider_event(event, clock())
    if outcome is EventOutcome.APPLIED and event.type is ProviderEventType.FAILED and message is not None:
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
            "suppression": event.suppression_reason.value if event.suppression_reason else None,
        },
    )
    return outcome
