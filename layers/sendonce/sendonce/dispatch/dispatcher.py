"""Deliver one message, at most once.

Claim before sending: a conditional update moves the message to `sending` and counts the attempt
before the provider is called, so a second copy of the queue record, or a concurrent dispatcher,
finds the claim and sends nothing. What happens after the call is decided by what the provider
can promise: an ambiguous attempt is repeated only through a provider that dedups on the message id.
Throttling is retried on time (the retry policy's budget from the first attempt), any other
transient failure on the count of attempts that were not throttled. The provider is chosen from the
claimed message itself, so a test message's mode decides it (the simulator, and nothing else).

A message whose recipient is suppressed fails with `recipient_suppressed`, and no provider is
called; an email's suppressed recipients are left out by the claim (and named), and it fails only
when none is left. The check is a condition of the claim's own write, so a suppression committed before the
attempt started (the claim) is always seen, whatever raced the send's own check. The claim sends
the message as its queue record carried it while the message is still as it was then; a record that
carries none (the outbox's) costs one read more.

The claim is never made before the message's `sendAt`, and it fixes what is sent: a scheduled
message stays editable until then, so the content is the claimed item's, never the record's. A record
that arrives early (its message's `sendAt` was edited later) goes back to its queue until that
`sendAt` when it is within SQS's 15 minutes, and is dropped when it is further off: the outbox owns
such a message and hands it over 15 minutes ahead. A record that keeps arriving early (every edit of
`sendAt` hands the message over again) is dropped after EARLY_RECEIVES receives, so edits never walk
a record to the dead-letter queue; the freshest record, or the outbox, still covers the message.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from enum import StrEnum

from msgspec import Struct

from sendonce.clock import Clock, utc_now
from sendonce.dispatch.ports import (
    ClaimedMessage,
    ClaimRefused,
    ClaimSuppressed,
    DispatchStore,
    Provider,
    ProviderThrottled,
)
from sendonce.dispatch.retry_policy import RetryPolicy
from sendonce.errors import (
    AmbiguousOutcome,
    DispatchFailure,
    PermanentFailure,
    RetryLater,
    TransientFailure,
)
from sendonce.messages.handoff import MAX_QUEUE_DELAY
from sendonce.messages.model import Message, MessageFailure, Status
from sendonce.messages.recipients import masked
from sendonce.observability import logger, metrics


class DispatchOutcome(StrEnum):
    SENT = "sent"
    FAILED = "failed"
    UNKNOWN = "unknown"
    RETRYING = "retrying"
    SKIPPED = "skipped"  # already claimed, finished or canceled, or not due: nothing to do now


# The receives of one record that may find its message not yet due before it is dropped: at most
# EARLY_RECEIVES - 1 postponements a record, against the queue's maxReceiveCount (template.yaml).
EARLY_RECEIVES = 3


class DispatchRequest(Struct, frozen=True):
    workspace_id: str
    message_id: str
    receive_count: int = 1  # how often the queue has handed this record over, this time included
    seen: Message | None = None  # the message as the record carried it, if it did


class Dispatcher:
    def __init__(
        self,
        store: DispatchStore,
        provider_for: Callable[[Message], Provider],
        retry_policy: RetryPolicy,
        claim_seconds: int,
        clock: Clock = utc_now,
    ) -> None:
        self._store = store
        self._provider_for = provider_for
        self._retry = retry_policy
        self._claim_seconds = claim_seconds
        self._clock = clock

    def dispatch(self, request: DispatchRequest) -> DispatchOutcome:
        now = self._clock()
        claimed = self._store.claim(
            request.workspace_id, request.message_id, now, self._claim_seconds, seen=request.seen
        )
        if isinstance(claimed, ClaimSuppressed):
            return self._end_suppressed(request, claimed, now)
        if isinstance(claimed, ClaimRefused):
            if claimed.not_due_until is not None:
                return self._not_due(request, claimed.not_due_until, now)
            logger.info(
                "message.dispatch.skipped",
                extra={
                    "event": "message.dispatch.skipped",
                    "message_id": request.message_id,
                    "status": claimed.current.status.value if claimed.current else None,
                },
            )
            return DispatchOutcome.SKIPPED
        provider = self._provider_for(claimed)
        try:
            provider_id = provider.send(claimed)
        except AmbiguousOutcome as failure:
            if provider.honours_idempotency_key:
                return self._retry_or_fail(claimed, failure)
            return self._finish(claimed, Status.UNKNOWN, failure)
        except ProviderThrottled as failure:
            return self._retry_or_fail(claimed, failure, throttled=True)
        except TransientFailure as failure:
            return self._retry_or_fail(claimed, failure)
        except PermanentFailure as failure:
            return self._finish(claimed, Status.FAILED, failure)
        return self._finish(claimed, Status.SENT, provider_message_id=provider_id, provider=provider.name)

    def _not_due(self, request: DispatchRequest, send_at: datetime, now: datetime) -> DispatchOutcome:
        """A record that arrived before its message's sendAt: back to its queue until then, or
        dropped when the outbox or a fresher record covers the message."""
        wait = send_at - now
        if wait <= MAX_QUEUE_DELAY and request.receive_count < EARLY_RECEIVES:
            raise RetryLater(int(wait.total_seconds()) + 1, "scheduled for later")
        # Beyond SQS's reach the outbox hands it over 15 minutes ahead (its due time since the
        # edit); a record early this often was overtaken by the record each sendAt edit hands over.
        reason = "outbox_owns" if wait > MAX_QUEUE_DELAY else "early_too_often"
        logger.info(
            "message.dispatch.not_due_dropped",
            extra={
                "event": "message.dispatch.not_due_dropped",
                "message_id": request.message_id,
                "reason": reason,
                "due_in_seconds": int(wait.total_seconds()),
                "receive_count": request.receive_count,
            },
        )
        return DispatchOutcome.SKIPPED

    def _end_suppressed(
        self, request: DispatchRequest, refused: ClaimSuppressed, now: datetime
    ) -> DispatchOutcome:
        """The claim found the recipient suppressed: the message is claimed regardless, to end it
        `failed` (its lock released, as any failure's), and no provider is called."""
        claimed = self._store.claim(
            request.workspace_id, request.message_id, now, self._claim_seconds, unless_suppressed=False
        )
        if not isinstance(claimed, ClaimedMessage):
            return DispatchOutcome.SKIPPED  # another dispatcher, or a cancel, got there first
        failure = PermanentFailure(
            "recipient_suppressed",
            f"the recipient is on the workspace's suppression list ({refused.reason})",
        )
        return self._finish(claimed, Status.FAILED, failure)

    def _retry_or_fail(
        self, message: ClaimedMessage, failure: DispatchFailure, *, throttled: bool = False
    ) -> DispatchOutcome:
        now = self._clock()
        if throttled:
            throttled_attempts = message.throttled_attempts + 1
            may_retry = self._retry.may_retry_throttled(message.first_attempt_at or now, now)
            delay = self._retry.throttle_delay_seconds(throttled_attempts)
        else:
            counted = message.attempts - message.throttled_attempts
            may_retry = self._retry.may_retry(counted)
            delay = self._retry.delay_seconds(counted)
        if not may_retry:
            return self._finish(message, Status.FAILED, failure)
        if self._store.finish_attempt(
            message,
            Status.QUEUED,
            now,
            error=MessageFailure(failure.code, failure.message),
            # Should the queue lose the record, the outbox brings the message back.
            handoff_due_at=now + timedelta(seconds=delay) + timedelta(minutes=2),
            throttled=throttled,
        ):
            metrics.add_metric(name="DeliveryRetried", unit="Count", value=1)
            logger.info(
                "message.dispatch.retrying",
                extra={
                    "event": "message.dispatch.retrying",
                    "message_id": message.id,
                    "attempts": message.attempts,
                    "retry_in_seconds": delay,
                    "throttled": throttled,
                    "cause": failure.code,
                },
            )
            raise RetryLater(delay, failure.code)
        return DispatchOutcome.SKIPPED

    def _finish(
        self,
        message: Message,
        status: Status,
        failure: DispatchFailure | None = None,
        provider_message_id: str | None = None,
        provider: str | None = None,
    ) -> DispatchOutcome:
        now: datetime = self._clock()
        error = MessageFailure(failure.code, failure.message) if failure else None
        recorded = self._store.finish_attempt(
            message, status, now, error=error, provider_message_id=provider_message_id
        )
        if recorded and status is Status.FAILED:
            self._store.release_dedup_lock(message)  # a deliberate retry may send again
        outcome = {
            Status.SENT: DispatchOutcome.SENT,
            Status.FAILED: DispatchOutcome.FAILED,
            Status.UNKNOWN: DispatchOutcome.UNKNOWN,
        }[status]
        metrics.add_metric(name=f"Message{outcome.value.capitalize()}", unit="Count", value=1)
        log = logger.warning if status is not Status.SENT else logger.info
        log(
            f"message.dispatch.{outcome.value}",
            extra={
                "event": f"message.dispatch.{outcome.value}",
                "message_id": message.id,
                "channel": message.channel.value,
                "to": masked(message.to),
                "attempts": message.attempts,
                "provider": provider,
                "cause": failure.code if failure else None,
                "recorded": recorded,
            },
        )
        return outcome
