"""The activity's use cases: a message's timeline, the promise's last days, and a count where the API
answers what it counts (a replay, a send refused as suppressed).

A count the API adds never changes its answer: a count that cannot be written is logged and
measured (`PromiseCountsLost`), and the answer goes out as it would have.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from uuid import uuid4

from msgspec import Struct

from sendonce.activity.counts import PromiseCount, PromiseDay, PromiseKind, last_days, utc_day
from sendonce.activity.model import TIMELINE_EVENTS, MessageTimeline, timeline
from sendonce.activity.ports import MessageEvents, MessageReader, PromiseCounts, ProviderEventLog
from sendonce.clock import utc_now
from sendonce.errors import DependencyUnavailable
from sendonce.observability import logger, metrics
from sendonce.status_webhooks.model import Event

# Pages of a message's events read for its timeline, at most.
_EVENT_PAGE = 100


class ActivityService(Struct, frozen=True):
    messages: MessageReader
    events: MessageEvents
    provider_events: ProviderEventLog
    counts: PromiseCounts
    clock: Callable[[], datetime] = utc_now

    def timeline(self, workspace_id: str, message_id: str) -> MessageTimeline:
        message = self.messages.get(workspace_id, message_id)  # the workspace's, or MessageNotFound
        events: list[Event] = []
        cursor: str | None = None
        while len(events) < TIMELINE_EVENTS:
            page = self.events.events(
                workspace_id, message_id=message.id, event_type=None, limit=_EVENT_PAGE, cursor=cursor
            )
            events.extend(page.events)
            cursor = page.next_cursor
            if cursor is None:
                break
        return MessageTimeline(
            message, timeline(message, events, self.provider_events.of_message(message.id))
        )

    def days(self, workspace_id: str, days: int) -> list[PromiseDay]:
        """The last `days` UTC days, today's first, each with its counts (zeros included)."""
        return self.counts.days(workspace_id, last_days(self.clock(), days))

    def count(self, workspace_id: str, kind: PromiseKind, count: int = 1) -> None:
        """`count` more of `kind` today; never raises."""
        if count <= 0:
            return
        try:
            self.counts.add(PromiseCount(workspace_id, utc_day(self.clock()), kind, uuid4().hex, count))
        except DependencyUnavailable:
            metrics.add_metric(name="PromiseCountsLost", unit="Count", value=count)
            logger.warning("activity.count_lost", extra={"event": "activity.count_lost", "kind": kind.value})
