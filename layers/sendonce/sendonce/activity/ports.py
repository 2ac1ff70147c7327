"""The activity context's ports: where a message's timeline and the promise's counts are read from,
and where a count is added. Adapters implement them; the use cases speak only to them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sendonce.activity.counts import PromiseCount, PromiseDay
from sendonce.activity.model import RecordedProviderEvent
from sendonce.messages.model import Message
from sendonce.status_webhooks.ports import EventPage
from sendonce.status_webhooks.rules import EventType


class MessageReader(Protocol):
    def get(self, workspace_id: str, message_id: str) -> Message:
        """The workspace's message; MessageNotFound for an unknown id and another workspace's alike."""
        ...


class MessageEvents(Protocol):
    def events(
        self,
        workspace_id: str,
        *,
        message_id: str | None,
        event_type: EventType | None,
        limit: int,
        cursor: str | None,
    ) -> EventPage: ...


class ProviderEventLog(Protocol):
    def of_message(self, message_id: str) -> list[RecordedProviderEvent]:
        """The provider events recorded against a message, oldest first."""
        ...


class PromiseCounts(Protocol):
    def add(self, count: PromiseCount) -> None:
        """Count it; raises DependencyUnavailable when it could not be written."""
        ...

    def days(self, workspace_id: str, days: Sequence[str]) -> list[PromiseDay]:
        """The counts of each of `days` (YYYY-MM-DD), in their order; a day with none has no counts."""
        ...
