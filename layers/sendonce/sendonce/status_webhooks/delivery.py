"""One delivery of one event to one endpoint, and its retries: at least once, never in the way of sends.

Each (event, endpoint) is a queue record of its own. The body is the event's stored payload, the
same bytes on every attempt, and its `webhook-id` is the event's id, so a receiver deduplicates on
it. Every attempt is recorded on the event before the next is scheduled. A failure is tried again
after the retry schedule's next delay, with jitter; after the last one the delivery is `failed`. An
endpoint deleted meanwhile gets nothing more; the target is checked again before every attempt
(the sender's rules).

Two lanes, so that no endpoint waits behind another (docs/guarantees.md: a slow or dead endpoint
never delays other endpoints). The delivery function's concurrency is capped (its event sources'
MaximumConcurrency, a reservation, the account), and an endpoint that takes its 15 seconds would
otherwise hold every execution environment while the healthy endpoints' deliveries queue behind it:

- The fast lane (`WebhookDeliveryQueue`, where every delivery starts) gives an endpoint
  FAST_LANE_PATIENCE_SECONDS. An answer within it is recorded as always (a success, or a failure on
  the retry schedule, retried in this lane). No answer within it (a timeout, not a refusal) puts
  the endpoint in the slow lane for SLOW_LANE_SECONDS, and the task moves to the slow lane's queue
  at once, its attempt not counted: the same event and `webhook-id` (a receiver that did get the
  request deduplicates on it). A fast-lane task whose endpoint is in the slow lane moves there
  without calling it. The flag is read with the endpoint, in the same round trip.
- The slow lane (`WebhookSlowLaneQueue`, its own event source with its own, small,
  MaximumConcurrency) gives the endpoint the full 15 seconds (docs/guarantees.md). A 2xx within
  the fast patience takes the endpoint out of the slow lane; an answer slower than it (or none) keeps it in
  (the flag is renewed once less than half its time is left, not on every delivery). A retry stays
  in the lane it is in: its record is postponed in its own queue.

Why the patience is 1 second. Records of a batch are delivered side by side
(`sendonce.entrypoints.webhook_delivery`), so a slow record holds the others of its batch no longer
than its patience, but it holds the batch, and so one of the fast lane's few invocations, that long.
Until the first of a hanging endpoint's deliveries has waited out its patience, nothing says the
endpoint is slow: every batch taken in the meantime holds its invocation a patience too. A healthy
endpoint's delivery can so wait up to two patiences for an invocation, plus the path from the change
to the queue and its own answer. The issue's bound is 5 s from the change
(tests/e2e/test_e2e_webhook_lanes.py, with the function capped at 5): 1 s leaves 3 s for the rest,
which a loaded 2-core machine needs (2 s left about 1 s, and missed now and then). A receiver that
acknowledges and works later answers well within 1 s, TLS and a far region's round trips included;
one slower than that is still delivered, in the slow lane, with its promised 15 s. Raise
WebhookSlowLaneMaxConcurrency if many endpoints answer that slowly.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from msgspec import Struct, field

from sendonce.clock import Clock, utc_now
from sendonce.errors import RetryLater
from sendonce.observability import logger, metrics
from sendonce.status_webhooks.model import DeliveryStatus, Event
from sendonce.status_webhooks.ports import Attempt, DeliveryQueue, DeliveryTask, EndpointLanes, EventStore
from sendonce.status_webhooks.signing import signed_headers

DEFAULT_RETRY_SCHEDULE = (5, 300, 1800, 7200, 18000, 36000, 36000)
JITTER = 0.1  # each delay is drawn from ±10% of the schedule's: receivers are not hit in lockstep
# The fast lane's patience: an endpoint that has not answered by then is moved to the slow lane
# (the module's docstring says why 1 s).
FAST_LANE_PATIENCE_SECONDS = 1.0
# How long an endpoint stays in the slow lane after its last slow answer, unless a quick 2xx there
# takes it out first; renewed once less than half of it is left.
SLOW_LANE_SECONDS = 300
# Powertools' metric set is not safe for threads, and a batch's records are delivered side by side.
_METRICS = threading.Lock()


class Lane(StrEnum):
    FAST = "fast"
    SLOW = "slow"


class DeliveryOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    RETRYING = "retrying"
    FAILED = "failed"
    DROPPED = "dropped"  # nothing to do: the event expired, the endpoint was deleted, or it succeeded
    MOVED = "moved"  # to the slow lane, no attempt counted: the endpoint is slow


class EndpointAnswer(Struct, frozen=True):
    status: int | None  # None: no answer (refused target, connection error, timeout)
    error: str | None = None
    timed_out: bool = False  # no answer within the timeout (not a refusal): the endpoint may be slow

    @property
    def succeeded(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class Sender(Protocol):
    def __call__(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> EndpointAnswer:
        """The answer within `timeout` seconds, first byte to last, or an EndpointAnswer saying why not."""
        ...


def body_of(event: Event) -> str:
    return json.dumps(event.payload(), separators=(",", ":"), ensure_ascii=False)


def parse_schedule(value: str) -> tuple[int, ...]:
    delays = tuple(int(part) for part in value.split(",") if part.strip())
    if any(delay < 0 for delay in delays):
        raise ValueError("retry delays are seconds, not negative")
    return delays


class WebhookDeliverer(Struct):
    events: EventStore
    endpoints: EndpointLanes
    send: Sender
    slow_lane: DeliveryQueue  # the slow lane's queue: a task moved there is delivered from it
    schedule: Sequence[int] = DEFAULT_RETRY_SCHEDULE
    clock: Clock = utc_now
    jitter: Callable[[float], float] = field(
        default=lambda delay: delay * random.uniform(1 - JITTER, 1 + JITTER)
    )
    timeout_seconds: float = 15.0  # docs/guarantees.md's 15 s: the slow lane's patience
    patience_seconds: float = FAST_LANE_PATIENCE_SECONDS  # the fast lane's
    timer: Callable[[], float] = time.monotonic  # how long an answer took

    def deliver(self, task: DeliveryTask, lane: Lane = Lane.FAST) -> DeliveryOutcome:
        """Raises RetryLater when the delivery is to be tried again after that many seconds, in
        `lane`; answers MOVED once the task is on the slow lane's queue."""
        endpoint, slow_until = self.endpoints.endpoint_and_lane(task.workspace_id, task.endpoint_id)
        now = self.clock()
        flagged = slow_until is not None and slow_until > now
        if lane is Lane.FAST and flagged and endpoint is not None:
            # Moved before the event is read: a backlog of a slow endpoint's tasks drains at one
            # read and one send each (the slow lane reads the event, and drops a task done meanwhile).
            return self._move(task, "in_slow_lane")
        event = self.events.event(task.workspace_id, task.event_id)
        delivery = event.delivery(task.endpoint_id) if event else None
        if event is None or delivery is None or delivery.status is not DeliveryStatus.PENDING:
            return self._done(task, DeliveryOutcome.DROPPED, lane)
        if endpoint is None:
            self.events.record_attempt(
                task.workspace_id,
                event.id,
                task.endpoint_id,
                Attempt(now, None, succeeded=False, final=True, made=False),
            )
            return self._done(task, DeliveryOutcome.DROPPED, lane)
        patience = min(self.patience_seconds, self.timeout_seconds)
        body = body_of(event)
        started = self.timer()
        answer = self.send(
            endpoint.url,
            body.encode(),
            signed_headers(event.id, now, body, endpoint.signing_secrets(now)),
            self.timeout_seconds if lane is Lane.SLOW else patience,
        )
        quick = not answer.timed_out and self.timer() - started <= patience
        if lane is Lane.FAST and answer.timed_out:
            self._flag(task, None)
            return self._move(task, "timed_out")
        tried = delivery.attempts + 1 - task.base_attempts  # this round's attempts, this one included
        final = not answer.succeeded and tried > len(self.schedule)
        self.events.record_attempt(
            task.workspace_id,
            event.id,
            task.endpoint_id,
            Attempt(now, answer.status, answer.succeeded, final),
        )
        if lane is Lane.SLOW:
            if answer.succeeded and quick:
                if flagged:
                    self._unflag(task)
            elif not quick:
                self._flag(task, slow_until)
        if answer.succeeded:
            return self._done(task, DeliveryOutcome.SUCCEEDED, lane, answer)
        if final:
            return self._done(task, DeliveryOutcome.FAILED, lane, answer)
        self._done(task, DeliveryOutcome.RETRYING, lane, answer)
        raise RetryLater(max(1, round(self.jitter(self.schedule[tried - 1]))))

    def _move(self, task: DeliveryTask, reason: str) -> DeliveryOutcome:
        """The task onto the slow lane's queue (QueueUnavailable if it could not be: its record then
        fails, and comes back to the fast lane after its visibility timeout)."""
        self.slow_lane.enqueue([task])
        return self._done(task, DeliveryOutcome.MOVED, Lane.FAST, reason=reason)

    def _flag(self, task: DeliveryTask, slow_until: datetime | None) -> None:
        """In the slow lane for SLOW_LANE_SECONDS from now, unless more than half of that is left.

        A flag not written only costs the next fast-lane task its patience: logged, not raised."""
        now = self.clock()
        if slow_until is not None and slow_until - now > timedelta(seconds=SLOW_LANE_SECONDS / 2):
            return
        try:
            self.endpoints.put_in_slow_lane(
                task.workspace_id, task.endpoint_id, now + timedelta(seconds=SLOW_LANE_SECONDS)
            )
        except Exception:
            logger.warning(
                "webhook.lane.flag_failed",
                extra={"event": "webhook.lane.flag_failed", "endpoint_id": task.endpoint_id},
            )

    def _unflag(self, task: DeliveryTask) -> None:
        try:
            self.endpoints.take_out_of_slow_lane(task.workspace_id, task.endpoint_id)
        except Exception:  # the flag runs out by itself
            logger.warning(
                "webhook.lane.unflag_failed",
                extra={"event": "webhook.lane.unflag_failed", "endpoint_id": task.endpoint_id},
            )
            return
        logger.info(
            "webhook.lane.recovered",
            extra={"event": "webhook.lane.recovered", "endpoint_id": task.endpoint_id},
        )

    @staticmethod
    def _done(
        task: DeliveryTask,
        outcome: DeliveryOutcome,
        lane: Lane,
        answer: EndpointAnswer | None = None,
        reason: str | None = None,
    ) -> DeliveryOutcome:
        with _METRICS:
            metrics.add_metric(name="WebhookDelivery" + outcome.value.capitalize(), unit="Count", value=1)
        logger.info(
            "webhook.delivery." + outcome.value,
            extra={
                "event": "webhook.delivery." + outcome.value,
                "event_id": task.event_id,
                "endpoint_id": task.endpoint_id,
                "lane": lane.value,
                "response_status": answer.status if answer else None,
                "error": answer.error if answer else None,
                **({"reason": reason} if reason else {}),
            },
        )
        return outcome
