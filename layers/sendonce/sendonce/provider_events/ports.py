"""The provider events context's port: an event recorded and applied in one step, once."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Protocol

from sendonce.messages.model import Message
from sendonce.messages.ports import DedupLocks
from sendonce.provider_events.model import ProviderEvent


class EventOutcome(StrEnum):
    APPLIED = "applied"
    REPEATED = "repeated"  # this event took effect before
    IGNORED = "ignored"  # unknown message, or the status would move backwards


ApplyResult = tuple[EventOutcome, Message | None]


class ProviderEventStore(DedupLocks, Protocol):
    def apply_provider_event(self, event: ProviderEvent, now: datetime) -> ApplyResult:
        """Record the event and apply its effect in one transaction, once; the message as it was."""
        ...


class EventQueue(Protocol):
    def publish(self, event: ProviderEvent, delay_seconds: int = 0) -> None:
        """Queue the event for the status function, to be applied no sooner than `delay_seconds`
        from now; raise DependencyUnavailable on failure."""
        ...
