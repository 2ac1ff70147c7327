"""The outbox: no accepted message is left behind.

Every message carries an outbox due time while something is still owed to it: its hand-off to
the queue (the API's direct hand-off failed, or a scheduled send comes within SQS's 15-minute
reach), or the end of a claimed attempt (a dispatcher that died mid-send). A scheduled function
reads the due entries from a sparse index and drives each to its end under the delivery rules.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime

from sendonce.clock import Clock, utc_now
from sendonce.delivery.ports import OutboxEntry, OutboxStore
from sendonce.errors import DependencyUnavailable, QueueUnavailable
from sendonce.messages.model import Channel, Status
from sendonce.messages.ports import MessageQueue
from sendonce.messages.service import HANDOFF_GRACE, MAX_QUEUE_DELAY
from sendonce.observability import logger, metrics


class OutboxSweeper:
    def __init__(
        self,
        store: OutboxStore,
        queue: MessageQueue,
        provider_honours_key: Callable[[Channel], bool],
        clock: Clock = utc_now,
        batch_limit: int = 200,
    ) -> None:
        self._store = store
        self._queue = queue
        self._honours_key = provider_honours_key
        self._clock = clock
        self._limit = batch_limit

    def sweep(self) -> dict[str, int]:
        now = self._clock()
        report: Counter[str] = Counter()
        for entry in self._store.outbox_due(now, self._limit):
            try:
                report[self._drive(entry, now)] += 1
            except (QueueUnavailable, DependencyUnavailable):
                logger.warning(
                    "message.outbox.retry_later",
                    extra={"event": "message.outbox.retry_later", "message_id": entry.id},
                )
                report["deferred"] += 1
        for outcome, count in report.items():
            metrics.add_metric(name=f"Outbox{outcome.capitalize()}", unit="Count", value=count)
        if report:
            logger.info("message.outbox.swept", extra={"event": "message.outbox.swept", **report})
        return dict(report)

    def _drive(self, entry: OutboxEntry, now: datetime) -> str:
        if entry.status in (Status.ACCEPTED, Status.QUEUED):
            self._queue.enqueue(entry)
            self._store.move_outbox_entry(entry, now, status=Status.QUEUED, due_at=now + HANDOFF_GRACE)
            return "handed_off"
        if entry.status is Status.SCHEDULED:
            send_at = entry.send_at or now
            delay = max(0.0, min((send_at - now).total_seconds(), MAX_QUEUE_DELAY.total_seconds()))
            self._queue.enqueue(entry, delay_seconds=int(delay) + (1 if delay % 1 else 0))
            self._store.move_outbox_entry(
                entry, now, status=Status.SCHEDULED, due_at=max(send_at, now) + HANDOFF_GRACE
            )
            return "scheduled"
        if entry.status is Status.SENDING:
            return self._recover_stranded_claim(entry, now)
        self._store.move_outbox_entry(entry, now, status=entry.status, due_at=None)
        return "cleared"

    def _recover_stranded_claim(self, entry: OutboxEntry, now: datetime) -> str:
        """The claim's deadline outlived any Lambda that could hold it: that attempt is dead.

        Whether it reached the provider cannot be known. Through a provider that dedups on the
        message id it is repeated with the same key; through any other it could deliver twice,
        so the message ends `unknown` and is never retried automatically.
        """
        if self._honours_key(entry.channel):
            if self._store.move_outbox_entry(entry, now, status=Status.QUEUED, due_at=now + HANDOFF_GRACE):
                self._queue.enqueue(entry)
            outcome = "reclaimed"
        else:
            self._store.move_outbox_entry(entry, now, status=Status.UNKNOWN, due_at=None)
            metrics.add_metric(name="MessageUnknown", unit="Count", value=1)
            outcome = "unknown"
        logger.warning(
            f"message.outbox.stranded_{outcome}",
            extra={"event": f"message.outbox.stranded_{outcome}", "message_id": entry.id},
        )
        return outcome
