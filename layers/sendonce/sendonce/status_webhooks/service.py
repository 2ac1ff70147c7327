"""The customer's side of webhooks: endpoints (add, read, delete, rotate) and events (read, redeliver).

Every operation is scoped by workspace; another workspace's endpoint or event does not exist. A
secret is shown when it is made (on adding and rotating) and never again. A target is checked
when it is added, and again before every delivery.

Rotations of one endpoint apply one after another: each is written only over the endpoint it was
made from, and one that finds another written first is made again from that one. So every secret
a rotation answers is stored, and every secret it replaced keeps signing for ROTATION_OVERLAP.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from msgspec import Struct

from sendonce.clock import Clock, utc_now
from sendonce.errors import (
    EndpointNotFound,
    EventNotFound,
    InvalidEndpoint,
    RotationConflict,
    TooManyRotations,
)
from sendonce.observability import logger
from sendonce.status_webhooks.model import (
    MAX_ENDPOINTS,
    Endpoint,
    Event,
    SigningSecret,
    new_endpoint_id,
    new_secret,
)
from sendonce.status_webhooks.ports import (
    DeliveryQueue,
    DeliveryTask,
    EndpointStore,
    EventPage,
    EventStore,
    Gone,
    Replaced,
    TooManyEndpoints,
)
from sendonce.status_webhooks.rules import (
    MAX_REPLACED_SECRETS,
    EventType,
)

# Raises an exception with a `reason` when the URL may not be a target.
CheckTarget = Callable[[str], object]
# A rotation's write loses only to another rotation's, and each of those leaves one more replaced
# secret: after MAX_REPLACED_SECRETS losses the cap refuses it (429). So this many tries apply
# every rotation the cap allows, however many race; 409 only if secrets expire during the race.
MAX_ROTATION_TRIES = MAX_REPLACED_SECRETS + 1


class WebhookService(Struct):
    endpoints: EndpointStore
    events: EventStore
    queue: DeliveryQueue
    check_target: CheckTarget
    clock: Clock = utc_now
    max_endpoints: int = MAX_ENDPOINTS

    # -- endpoints
    def add_endpoint(
        self, workspace_id: str, url: str, event_types: Sequence[EventType] | None, description: str | None
    ) -> Endpoint:
        try:
            self.check_target(url)
        except Exception as error:  # the checker's refusal, in words the customer can act on
            raise InvalidEndpoint("url", str(getattr(error, "reason", error))) from None
        now = self.clock()
        endpoint = Endpoint(
            id=new_endpoint_id(now),
            workspace_id=workspace_id,
            url=url,
            event_types=tuple(dict.fromkeys(event_types)) if event_types is not None else None,
            description=description,
            created_at=now,
            secrets=(SigningSecret(new_secret()),),
        )
        try:
            self.endpoints.add_endpoint(endpoint, self.max_endpoints)
        except TooManyEndpoints:
            raise InvalidEndpoint("url", f"a workspace has at most {self.max_endpoints} endpoints") from None
        return endpoint

    def list_endpoints(self, workspace_id: str) -> list[Endpoint]:
        return sorted(self.endpoints.endpoints(workspace_id), key=lambda e: e.id)

    def endpoint(self, workspace_id: str, endpoint_id: str) -> Endpoint:
        endpoint = self.endpoints.endpoint(workspace_id, endpoint_id)
        if endpoint is None:
            raise EndpointNotFound(endpoint_id)
        return endpoint

    def delete_endpoint(self, workspace_id: str, endpoint_id: str) -> None:
        if not self.endpoints.delete_endpoint(workspace_id, endpoint_id):
            raise EndpointNotFound(endpoint_id)

    def rotate_secret(self, workspace_id: str, endpoint_id: str) -> Endpoint:
        """The endpoint as stored with a new current secret, applied after every rotation written
        before it. TooManyRotations past the cap, RotationConflict after MAX_ROTATION_TRIES lost
        races: nothing rotated by this request, either way."""
        secret = new_secret()
        endpoint = self.endpoint(workspace_id, endpoint_id)
        for tries in range(1, MAX_ROTATION_TRIES + 1):
            now = self.clock()
            refused_until = endpoint.rotation_refused_until(now)
            if refused_until is not None:
                wait = max(1, math.ceil((refused_until - now).total_seconds()))
                self._log_refusal(workspace_id, endpoint_id, "too_many_rotations", tries)
                raise TooManyRotations(MAX_REPLACED_SECRETS, wait)
            outcome = self.endpoints.replace_endpoint(endpoint.rotated(secret, now))
            if isinstance(outcome, Replaced):
                return outcome.endpoint
            if isinstance(outcome, Gone):
                raise EndpointNotFound(endpoint_id)
            # Another rotation was written first: made again from it, so it is replaced, not lost.
            endpoint = outcome.current
        self._log_refusal(workspace_id, endpoint_id, "rotation_conflict", MAX_ROTATION_TRIES)
        raise RotationConflict(MAX_ROTATION_TRIES)

    @staticmethod
    def _log_refusal(workspace_id: str, endpoint_id: str, reason: str, tries: int) -> None:
        logger.info(
            "webhooks.rotation.refused",
            extra={
                "event": "webhooks.rotation.refused",
                "workspace_id": workspace_id,
                "endpoint_id": endpoint_id,
                "reason": reason,
                "tries": tries,
            },
        )

    # -- events
    def list_events(
        self,
        workspace_id: str,
        message_id: str | None,
        event_type: EventType | None,
        limit: int,
        cursor: str | None,
    ) -> EventPage:
        return self.events.events(
            workspace_id, message_id=message_id, event_type=event_type, limit=limit, cursor=cursor
        )

    def event(self, workspace_id: str, event_id: str) -> Event:
        event = self.events.event(workspace_id, event_id)
        if event is None:
            raise EventNotFound(event_id)
        return event

    def redeliver(self, workspace_id: str, event_id: str, endpoint_id: str | None) -> None:
        """Delivered again to one endpoint, or to every endpoint the event had, with the same id."""
        event = self.event(workspace_id, event_id)
        if endpoint_id is not None:
            self.endpoint(workspace_id, endpoint_id)  # another workspace's or a deleted one: 404
            targets = [endpoint_id]
        else:
            live = {e.id for e in self.endpoints.endpoints(workspace_id)}
            targets = [d.endpoint_id for d in event.deliveries if d.endpoint_id in live]
        reopened = self.events.reopen(workspace_id, event_id, targets)
        if reopened is None:
            raise EventNotFound(event_id)
        attempts = {d.endpoint_id: d.attempts for d in reopened.deliveries}
        self.queue.enqueue(
            [
                DeliveryTask(workspace_id, event_id, target, base_attempts=attempts.get(target, 0))
                for target in targets
            ]
        )
