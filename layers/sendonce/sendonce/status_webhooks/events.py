"""From committed changes to events and their deliveries: exactly one event per change.

A change's event id is derived from its stream record, and a message's `Applied` (the last
sequence told, and where in the stream) moves on in the same transaction that writes the event.
So a stream record read again, after a crash anywhere, finds its event already written: it writes
nothing new, and queues again only the deliveries of that event never attempted. Records of one
message arrive in order, so `sequence` counts that message's status changes from 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from msgspec import Struct, field

from sendonce.campaigns.model import Campaign
from sendonce.messages.model import Message
from sendonce.observability import logger
from sendonce.status_webhooks.model import CampaignChange, Change, Delivery, DeliveryStatus, Endpoint, Event
from sendonce.status_webhooks.ports import DeliveryQueue, DeliveryTask, EndpointStore, EventStore

# Reading `Applied` and writing the event race only with another reader of the same record.
MAX_TRIES = 3


class ChangeNotRecorded(RuntimeError):
    """The change could not be told now; the stream brings its record back."""


class _Moved:
    """The message's changes moved on while this one was being written: read them again."""


MOVED = _Moved()


class EventRecorder(Struct):
    events: EventStore
    endpoints: EndpointStore
    queue: DeliveryQueue
    # The message as an event shows it (its payload's `data.message`): given by the composition
    # root (the API's Message, `sendonce.api.message_view.message_shape`), so the domain holds no API shape.
    show_message: Callable[[Message], Mapping[str, Any]]
    # The campaign as a `campaign.completed` event shows it (`sendonce.api.campaign_view`).
    show_campaign: Callable[[Campaign], Mapping[str, Any]] | None = None
    # Endpoints read once per workspace per batch: an endpoint added mid-batch gets later batches.
    _endpoints: dict[str, list[Endpoint]] = field(default_factory=dict)

    def new_batch(self) -> None:
        self._endpoints.clear()

    def record(self, change: Change | CampaignChange) -> Event | None:
        """The change's event, its deliveries queued; None if it was told before and nothing is owed."""
        for _ in range(MAX_TRIES):
            outcome = self._try(change)
            if isinstance(outcome, _Moved):
                continue
            if outcome is not None:
                self._queue(outcome)
            return outcome
        raise ChangeNotRecorded(f"the events of {change.event_id} kept moving")

    def _try(self, change: Change | CampaignChange) -> Event | _Moved | None:
        if isinstance(change, CampaignChange):
            return self._try_campaign(change)
        workspace_id = change.message.workspace_id
        previous = self.events.applied(change.message.id) if change.is_status_change else None
        if previous is not None and previous.position >= change.position:
            return self._already_recorded(change)
        event = Event(
            id=change.event_id,
            workspace_id=workspace_id,
            message_id=change.message.id,
            type=change.type,
            timestamp=change.at,
            message=self.show_message(change.message),
            sequence=(previous.sequence if previous else 0) + 1 if change.is_status_change else None,
            deliveries=tuple(Delivery(e.id) for e in self._subscribers(workspace_id, change)),
        )
        if self.events.record(event, change.position, previous, change.tally, change.promise):
            logger.info(
                "webhook.event.recorded",
                extra={
                    "event": "webhook.event.recorded",
                    "event_id": event.id,
                    "type": event.type.value,
                    "message_id": event.message_id,
                    "deliveries": len(event.deliveries),
                },
            )
            return event
        return self._already_recorded(change) or MOVED

    def _try_campaign(self, change: CampaignChange) -> Event | None:
        """A campaign's completion: its event written once (its id is the record's)."""
        campaign = change.campaign
        if self.show_campaign is None:
            raise ChangeNotRecorded("no way to show a campaign is configured")
        event = Event(
            id=change.event_id,
            workspace_id=campaign.workspace_id,
            message_id=campaign.id,
            type=change.type,
            timestamp=change.at,
            message=self.show_campaign(campaign),
            sequence=None,
            deliveries=tuple(Delivery(e.id) for e in self._subscribers(campaign.workspace_id, change)),
        )
        if self.events.record(event, change.position, None):
            logger.info(
                "webhook.event.recorded",
                extra={"event": "webhook.event.recorded", "event_id": event.id, "type": event.type.value},
            )
            return event
        return self.events.event(campaign.workspace_id, event.id)

    def _already_recorded(self, change: Change) -> Event | None:
        """A record read again: its event, of which only the deliveries never attempted are owed.

        None if there is no such event: the message's changes were told past this record (a
        record older than the last one told), and nothing may be told twice."""
        return self.events.event(change.message.workspace_id, change.event_id)

    def _subscribers(self, workspace_id: str, change: Change | CampaignChange) -> Iterable[Endpoint]:
        if workspace_id not in self._endpoints:
            self._endpoints[workspace_id] = self.endpoints.endpoints(workspace_id)
        return [e for e in self._endpoints[workspace_id] if e.wants(change.type)]

    def _queue(self, event: Event) -> None:
        owed = [
            DeliveryTask(event.workspace_id, event.id, d.endpoint_id)
            for d in event.deliveries
            if d.status is DeliveryStatus.PENDING and d.attempts == 0
        ]
        if owed:
            self.queue.enqueue(owed)
