"""What the webhooks context needs from the outside: endpoints, events, and a queue of deliveries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from msgspec import Struct

from sendonce.activity.counts import PromiseCount
from sendonce.status_webhooks.model import (
    CampaignTally,
    Endpoint,
    Event,
)
from sendonce.status_webhooks.rules import (
    EventType,
)


class TooManyEndpoints(Exception):
    pass


class Replaced(Struct, frozen=True):
    """Written, every copy: `endpoint` as stored, its version moved on."""

    endpoint: Endpoint


class Changed(Struct, frozen=True):
    """Nothing written: another write replaced the endpoint since the version the replacement was
    made from. `current` is the endpoint as that write left it, as the store saw it when it refused."""

    current: Endpoint


class Gone(Struct, frozen=True):
    """Nothing written: there is no such endpoint (deleted meanwhile, or another workspace's)."""


Replacement = Replaced | Changed | Gone


class Applied(Struct, frozen=True):
    """How far a message's changes have been told: the last sequence and its stream position."""

    sequence: int
    position: str


class EventPage(Struct, frozen=True):
    events: list[Event]
    next_cursor: str | None


class Attempt(Struct, frozen=True):
    at: datetime
    response_status: int | None
    succeeded: bool
    final: bool  # no attempt follows: a failure that ends the delivery `failed`
    made: bool = (
        True  # False: the delivery ends without a request (its endpoint was deleted), counted as none
    )


class DeliveryTask(Struct, frozen=True):
    """One delivery of one event to one endpoint: a queue record of its own."""

    workspace_id: str
    event_id: str
    endpoint_id: str
    # Attempts the delivery had when this task was queued: its retry schedule counts from there,
    # so a redelivery starts a schedule of its own.
    base_attempts: int = 0


class EndpointStore(Protocol):
    def add_endpoint(self, endpoint: Endpoint, limit: int) -> None:
        """Raises TooManyEndpoints when the workspace has `limit` already."""
        ...

    def endpoints(self, workspace_id: str) -> list[Endpoint]: ...

    def endpoint(self, workspace_id: str, endpoint_id: str) -> Endpoint | None: ...

    def delete_endpoint(self, workspace_id: str, endpoint_id: str) -> bool:
        """False if there was no such endpoint."""
        ...

    def replace_endpoint(self, endpoint: Endpoint) -> Replacement:
        """Stores `endpoint` (every copy, with its version plus one) only over the version it carries,
        the one it was made from: a concurrent write is never overwritten, nor a deleted endpoint
        brought back."""
        ...


class EndpointLanes(Protocol):
    """What a delivery reads of its endpoint, and the slow lane's flag (`webhooks.delivery`)."""

    def endpoint_and_lane(
        self, workspace_id: str, endpoint_id: str
    ) -> tuple[Endpoint | None, datetime | None]:
        """The endpoint (None if deleted) and, in the same round trip, until when it is in the slow
        lane (None: not flagged; a time passed: the flag has run out)."""
        ...

    def put_in_slow_lane(self, workspace_id: str, endpoint_id: str, until: datetime) -> None: ...

    def take_out_of_slow_lane(self, workspace_id: str, endpoint_id: str) -> None: ...


class EventStore(Protocol):
    def applied(self, message_id: str) -> Applied | None: ...

    def record(
        self,
        event: Event,
        position: str,
        previous: Applied | None,
        tally: CampaignTally | None = None,
        promise: PromiseCount | None = None,
    ) -> bool:
        """Writes the event and moves the message's `Applied` on, together, with what `tally` adds
        to a campaign's counts and `promise` to the promise's daily counts; False (nothing written)
        if the event exists already or the message's changes moved on since `previous` was read."""
        ...

    def event(self, workspace_id: str, event_id: str) -> Event | None: ...

    def events(
        self,
        workspace_id: str,
        *,
        message_id: str | None,
        event_type: EventType | None,
        limit: int,
        cursor: str | None,
    ) -> EventPage: ...

    def record_attempt(
        self, workspace_id: str, event_id: str, endpoint_id: str, attempt: Attempt
    ) -> None: ...

    def reopen(self, workspace_id: str, event_id: str, endpoint_ids: Sequence[str]) -> Event | None:
        """Marks the deliveries to `endpoint_ids` pending again (adding any the event lacks)."""
        ...


class DeliveryQueue(Protocol):
    def enqueue(self, tasks: Sequence[DeliveryTask]) -> None:
        """Raises QueueUnavailable if any task could not be queued."""
        ...
