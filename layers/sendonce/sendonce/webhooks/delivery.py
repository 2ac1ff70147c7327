"""One delivery of one event to one endpoint, and its retries: at least once, never in the way of sends.

Each (event, endpoint) is a queue record of its own, so a dead or slow endpoint holds back only
its own deliveries. The body is the event's stored payload, the same bytes on every attempt, and
its `webhook-id` is the event's id, so a receiver deduplicates on it. Every attempt is recorded on
the event before the next is scheduled. A failure is tried again after the retry schedule's next
delay, with jitter; after the last one the delivery is `failed`. An endpoint deleted meanwhile
gets nothing more; the target is checked again before every attempt (the sender's rules).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from sendonce.clock import Clock, utc_now
from sendonce.errors import RetryLater
from sendonce.observability import logger, metrics
from sendonce.webhooks.model import DeliveryStatus, Event
from sendonce.webhooks.ports import Attempt, DeliveryTask, EndpointStore, EventStore
from sendonce.webhooks.signing import signed_headers

DEFAULT_RETRY_SCHEDULE = (5, 300, 1800, 7200, 18000, 36000, 36000)
JITTER = 0.1  # each delay is drawn from ±10% of the schedule's: receivers are not hit in lockstep


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    RETRYING = "retrying"
    FAILED = "failed"
    DROPPED = "dropped"  # nothing to do: the event expired, the endpoint was deleted, or it succeeded


@dataclass(frozen=True, slots=True)
class Answer:
    status: int | None  # None: no answer (refused target, connection error, timeout)
    error: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class Sender(Protocol):
    def __call__(self, url: str, body: bytes, headers: Mapping[str, str]) -> Answer: ...


def body_of(event: Event) -> str:
    return json.dumps(event.payload(), separators=(",", ":"), ensure_ascii=False)


def parse_schedule(value: str) -> tuple[int, ...]:
    delays = tuple(int(part) for part in value.split(",") if part.strip())
    if any(delay < 0 for delay in delays):
        raise ValueError("retry delays are seconds, not negative")
    return delays


@dataclass
class WebhookDeliverer:
    events: EventStore
    endpoints: EndpointStore
    send: Sender
    schedule: Sequence[int] = DEFAULT_RETRY_SCHEDULE
    clock: Clock = utc_now
    jitter: Callable[[float], float] = field(
        default=lambda delay: delay * random.uniform(1 - JITTER, 1 + JITTER)
    )

    def deliver(self, task: DeliveryTask) -> Outcome:
        """Raises RetryLater when the delivery is to be tried again after that many seconds."""
        event = self.events.event(task.workspace_id, task.event_id)
        delivery = event.delivery(task.endpoint_id) if event else None
        if event is None or delivery is None or delivery.status is not DeliveryStatus.PENDING:
            return self._done(task, Outcome.DROPPED)
        endpoint = self.endpoints.endpoint(task.workspace_id, task.endpoint_id)
        now = self.clock()
        if endpoint is None:
            self.events.record_attempt(
                task.workspace_id,
                event.id,
                task.endpoint_id,
                Attempt(now, None, succeeded=False, final=True, made=False),
            )
            return self._done(task, Outcome.DROPPED)
        body = body_of(event)
        answer = self.send(
            endpoint.url, body.encode(), signed_headers(event.id, now, body, endpoint.signing_secrets(now))
        )
        tried = delivery.attempts + 1 - task.base_attempts  # this round's attempts, this one included
        final = not answer.succeeded and tried > len(self.schedule)
        self.events.record_attempt(
            task.workspace_id,
            event.id,
            task.endpoint_id,
            Attempt(now, answer.status, answer.succeeded, final),
        )
        if answer.succeeded:
            return self._done(task, Outcome.SUCCEEDED, answer)
        if final:
            return self._done(task, Outcome.FAILED, answer)
        self._done(task, Outcome.RETRYING, answer)
        raise RetryLater(max(1, round(self.jitter(self.schedule[tried - 1]))))

    @staticmethod
    def _done(task: DeliveryTask, outcome: Outcome, answer: Answer | None = None) -> Outcome:
        metrics.add_metric(name="WebhookDelivery" + outcome.value.capitalize(), unit="Count", value=1)
        logger.info(
            "webhook.delivery." + outcome.value,
            extra={
                "event": "webhook.delivery." + outcome.value,
                "event_id": task.event_id,
                "endpoint_id": task.endpoint_id,
                "response_status": answer.status if answer else None,
                "error": answer.error if answer else None,
            },
        )
        return outcome
