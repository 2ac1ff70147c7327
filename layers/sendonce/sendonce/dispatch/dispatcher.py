"""Deliver one message, at most once.

Claim before sending: a conditional update moves the message to `sending` and counts the attempt
before the provider is called, so a second copy of the queue record, or a concurrent dispatcher,
finds the claim and sends nothing. What happens after the call is decided by what the provider
can promise: an ambiguous attempt is repeated only through a provider that dedups on the message id.
Throttling is retried on time (the retry policy's budget from the first attempt), any other
transient failure on the count of attempts that were not throttled. The providers are chosen from
the claimed message itself, so a test message's mode decides them (the simulator, and nothing else).

A channel may have several providers, tried in order, and a message moves to the next one only when
the current one provably did not accept it (`NotAccepted`: the request never left, or the provider
refused it for the sender or the account; or it throttled past its budget). Each call is recorded on
the message (`providerAttempts`), in the write that ends it or that keeps the claim for the next
provider, both conditioned on the claim: a redelivered record or a reclaim never calls a provider the
message already went past, nor two at once. A provider whose answer was lost is never left by itself:
one that dedups on the id is called again; one that can be asked is asked once its list can be
trusted (the queue brings the message back then), and the message is `sent` if it took it, or goes
to the next provider if it did not; any other leaves the message `unknown`. A provider in a cool-off
(`ProviderHealth`) is skipped, never the last of a list, and never one whose answer is still owed.

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

A message past its `expiresAt` is never handed to a provider: it ends `expired` (error `expired`),
its dedup locks released, and no provider is called. The claim does not look at the expiry: it is
made as for any message (its conditional write), and the dispatcher then ends the claimed message
`expired` before any call, through the write that ends an attempt, conditioned on that claim; so a
message that sat in its queue, waited for its `sendAt` or on the outbox, or came back for a retry
after its expiry is ended by whoever holds its claim, once. The expiry is checked again before each
next provider (a failover); and a retry whose next try would come at or after `expiresAt` ends the
message `expired` at once (not `failed`, not queued again). A provider whose answer was lost is
still asked or left `unknown` as above: it may have taken the message, which is then not `expired`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TypeVar

from msgspec import Struct
from msgspec.structs import replace

from sendonce.clock import Clock, TimeLeft, utc_now
from sendonce.dispatch.ports import (
    AskableProvider,
    ClaimedMessage,
    ClaimRefused,
    ClaimSuppressed,
    DispatchStore,
    Provider,
    ProviderHealth,
    ProviderThrottled,
    askable,
)
from sendonce.dispatch.retry_policy import RetryPolicy
from sendonce.errors import (
    AmbiguousOutcome,
    DependencyUnavailable,
    DispatchFailure,
    NotAccepted,
    PermanentFailure,
    RetryLater,
    TransientFailure,
)
from sendonce.keyed_hash import logged_recipient
from sendonce.messages.handoff import MAX_QUEUE_DELAY
from sendonce.messages.model import AttemptOutcome, Message, MessageFailure, ProviderAttempt, Status
from sendonce.observability import logger, metrics
from sendonce.suppressions.model import recipient_key


class DispatchOutcome(StrEnum):
    SENT = "sent"
    FAILED = "failed"
    UNKNOWN = "unknown"
    EXPIRED = "expired"  # past its expiresAt before any provider took it: never handed over
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


# Asking a provider whether it took a message: from a little before the call whose answer was lost,
# as its clock and ours may differ.
ASK_SLACK = timedelta(seconds=60)
_UNLISTED = AmbiguousOutcome(
    "provider_unlisted", "the provider that may have taken it is no longer among its channel's providers"
)
_NOT_YET_VISIBLE = AmbiguousOutcome("provider_timeout", "the provider's answer was lost; it is asked later")
_NOT_FOUND = TransientFailure(
    "provider_not_accepted", "the provider's answer was lost, and asked, it had not taken the message"
)
# What an expired message says: it was never handed to a provider.
_EXPIRED = PermanentFailure("expired", "not handed to a provider before its expiresAt")
_T = TypeVar("_T")


def _unlimited() -> float:
    return math.inf


def _untried(attempts: Sequence[ProviderAttempt], providers: Sequence[Provider]) -> list[Provider]:
    """The providers not yet found unwilling to take the message, in their order."""
    refused = {a.provider for a in attempts if a.outcome is AttemptOutcome.NOT_ACCEPTED}
    return [provider for provider in providers if provider.name not in refused]


def _pending_answer(
    message: Message, providers: Sequence[Provider]
) -> tuple[AskableProvider, ProviderAttempt] | DispatchOutcome | None:
    """A lost answer still to be learned: the provider to ask, and the attempt whose answer was lost;
    DispatchOutcome.UNKNOWN when that provider is no longer listed (nobody else may be tried)."""
    last = message.provider_attempts[-1] if message.provider_attempts else None
    if last is None or last.outcome is not AttemptOutcome.UNKNOWN:
        return None
    provider = next((p for p in providers if p.name == last.provider), None)
    if provider is None:
        return DispatchOutcome.UNKNOWN
    asked = askable(provider)
    if asked is None or provider.honours_idempotency_key:
        return None  # repeated there, with the same key (`_choose` sticks to it)
    return asked, last


def _expired_by(message: Message, moment: datetime) -> bool:
    """Whether `message` may no longer be handed to a provider at `moment` (its expiresAt passed)."""
    return message.expires_at is not None and moment >= message.expires_at


def _ended(attempts: tuple[ProviderAttempt, ...] | None) -> tuple[ProviderAttempt, ...] | None:
    """Retries ran out: the last call, which left the message retryable, failed it after all."""
    if not attempts or attempts[-1].outcome is AttemptOutcome.ACCEPTED:
        return attempts
    return (*attempts[:-1], replace(attempts[-1], outcome=AttemptOutcome.FAILED))


class Dispatcher:
    def __init__(
        self,
        store: DispatchStore,
        providers_for: Callable[[Message], Sequence[Provider]],
        retry_policy: RetryPolicy,
        claim_seconds: int,
        clock: Clock = utc_now,
        *,
        health: ProviderHealth | None = None,
        call_seconds: float = 0.0,
    ) -> None:
        """`providers_for`: a message's providers, in the order they are tried. `health`: their runs
        of failures and cool-offs (None: never skipped). `call_seconds`: the time one more provider
        call needs; with less left, a failover goes through the queue instead of at once."""
        self._store = store
        self._providers_for = providers_for
        self._retry = retry_policy
        self._claim_seconds = claim_seconds
        self._clock = clock
        self._health = health
        self._call_seconds = call_seconds

    def dispatch(self, request: DispatchRequest, time_left: TimeLeft = _unlimited) -> DispatchOutcome:
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
        return self._deliver(claimed, tuple(self._providers_for(claimed)), time_left)

    # ------------------------------------------------------------------ one provider after another
    def _deliver(
        self, message: ClaimedMessage, providers: tuple[Provider, ...], time_left: TimeLeft
    ) -> DispatchOutcome:
        """Call the providers in turn while each provably did not accept the message; stop at the
        first that took it, refused it for good, or may have taken it."""
        while True:
            pending = _pending_answer(message, providers)
            if isinstance(pending, DispatchOutcome):
                return self._finish(message, Status.UNKNOWN, _UNLISTED, attempts=message.provider_attempts)
            provider: Provider
            if pending is not None:
                asked_provider, asked = pending
                provider = asked_provider
                learned = self._ask(message, asked_provider, asked, providers)
                if not isinstance(learned, tuple):
                    return learned
                attempts = learned
            else:
                if _expired_by(message, self._clock()):  # before any call: never handed over
                    return self._finish(message, Status.EXPIRED, _EXPIRED)
                provider = self._choose(message, providers)
                result = self._call(message, provider, providers)
                if not isinstance(result, tuple):
                    return result
                attempts = result
            # `provider` provably did not take it, and another may: on to it, now or through the queue.
            if _expired_by(message, self._clock()):
                return self._finish(message, Status.EXPIRED, _EXPIRED, attempts=attempts)
            if time_left() < self._call_seconds:
                return self._fail_over_later(message, attempts)
            following = self._store.next_attempt(message, self._clock(), self._claim_seconds, attempts)
            if following is None:
                return DispatchOutcome.SKIPPED  # the claim was taken over: its new holder goes on
            logger.info(
                "message.dispatch.failover",
                extra={
                    "event": "message.dispatch.failover",
                    "message_id": message.id,
                    "from_provider": provider.name,
                    "attempts": following.attempts,
                },
            )
            metrics.add_metric(name="DeliveryFailedOver", unit="Count", value=1)
            message = following

    def _choose(self, message: Message, providers: tuple[Provider, ...]) -> Provider:
        """The provider whose answer was lost, when it dedups on the id (repeated there, whatever
        else); else the first not yet found unwilling, skipping those in a cool-off (never the last
        of the list); when every one was, the last."""
        last = message.provider_attempts[-1] if message.provider_attempts else None
        if last is not None and last.outcome is AttemptOutcome.UNKNOWN:
            stuck = next((p for p in providers if p.name == last.provider), None)
            if stuck is not None:
                return stuck
        candidates = _untried(message.provider_attempts, providers) or [providers[-1]]
        if len(candidates) == 1 or self._health is None:
            return candidates[0]
        skippable = [p.name for p in candidates if p is not providers[-1]]
        cooling: frozenset[str] = self._guarded(
            lambda health: health.cooling(skippable, self._clock()), frozenset()
        )
        return next((p for p in candidates if p.name not in cooling), candidates[-1])

    def _call(
        self, message: ClaimedMessage, provider: Provider, providers: tuple[Provider, ...]
    ) -> DispatchOutcome | tuple[ProviderAttempt, ...]:
        """One provider call; the attempts as they stand when the next provider should be tried."""

        def attempts(outcome: AttemptOutcome) -> tuple[ProviderAttempt, ...]:
            return (*message.provider_attempts, ProviderAttempt(provider.name, outcome, self._clock()))

        def not_taken(
            failure: DispatchFailure, *, retry: bool
        ) -> DispatchOutcome | tuple[ProviderAttempt, ...]:
            """`provider` provably did not take it: the attempts, for the next provider; with none
            left, retried here (`retry`) or failed."""
            made = attempts(AttemptOutcome.NOT_ACCEPTED)
            self._count_failure(provider)
            if _untried(made, providers):
                return made
            if retry:
                return self._retry_or_fail(message, failure, attempts=made)
            return self._finish(message, Status.FAILED, failure, attempts=made)

        try:
            provider_id = provider.send(message)
        except AmbiguousOutcome as failure:
            made = attempts(AttemptOutcome.UNKNOWN)
            if provider.honours_idempotency_key:
                return self._retry_or_fail(message, failure, attempts=made)
            if askable(provider) is not None:
                return self._ask_later(message, provider, failure, made)
            return self._finish(message, Status.UNKNOWN, failure, attempts=made)
        except NotAccepted as failure:
            # The last provider: retried later when the request never left, else failed.
            return not_taken(failure, retry=isinstance(failure, TransientFailure))
        except ProviderThrottled as failure:
            now = self._clock()
            if self._retry.may_retry_throttled(message.first_attempt_at or now, now):
                return self._retry_or_fail(message, failure, throttled=True)
            # Throttled past its budget: it did not take the message, and will not soon.
            return not_taken(failure, retry=False)
        except TransientFailure as failure:
            # Retried here alone: it may have been taken, and this provider dedups on the id.
            return self._retry_or_fail(message, failure, attempts=attempts(AttemptOutcome.UNKNOWN))
        except PermanentFailure as failure:
            return self._finish(message, Status.FAILED, failure, attempts=attempts(AttemptOutcome.FAILED))
        self._guarded(lambda health: health.accepted(provider.name, self._clock()), None)
        return self._finish(
            message,
            Status.SENT,
            provider_message_id=provider_id,
            provider=provider.name,
            attempts=attempts(AttemptOutcome.ACCEPTED),
        )

    def _ask_later(
        self,
        message: ClaimedMessage,
        provider: Provider,
        failure: DispatchFailure,
        made: tuple[ProviderAttempt, ...],
        wait: timedelta | None = None,
    ) -> DispatchOutcome:
        """The answer was lost where the provider can be asked: asked once its list can be trusted
        (after `wait`; by default its whole visibility delay), by the claim the queue brings back
        then. Nothing else is called meanwhile."""
        visible = askable(provider)
        seconds = wait.total_seconds() if wait is not None else (visible.visibility_seconds if visible else 1)
        delay = max(1, math.ceil(seconds))
        if self._requeue(message, delay, made, failure):
            logger.info(
                "message.dispatch.asking_later",
                extra={
                    "event": "message.dispatch.asking_later",
                    "message_id": message.id,
                    "provider": provider.name,
                    "ask_in_seconds": delay,
                    "cause": failure.code,
                },
            )
            raise RetryLater(delay, failure.code)
        self._record_taken(message, made)
        return DispatchOutcome.SKIPPED

    def _record_taken(self, message: ClaimedMessage, attempts: tuple[ProviderAttempt, ...]) -> None:
        """The claim was no longer ours when the call ended: if the provider's own event ended the
        message meanwhile (it reports only what it took), its attempt is recorded as accepted."""
        last = attempts[-1]
        taken = (*attempts[:-1], replace(last, outcome=AttemptOutcome.ACCEPTED))
        if last.outcome in {AttemptOutcome.ACCEPTED, AttemptOutcome.UNKNOWN} and self._store.record_taken(
            message, last.provider, taken
        ):
            logger.info(
                "message.dispatch.taken_per_event",
                extra={
                    "event": "message.dispatch.taken_per_event",
                    "message_id": message.id,
                    "provider": last.provider,
                },
            )

    def _ask(
        self,
        message: ClaimedMessage,
        provider: AskableProvider,
        asked_after: ProviderAttempt,
        providers: tuple[Provider, ...],
    ) -> DispatchOutcome | tuple[ProviderAttempt, ...]:
        """Whether `provider` took the message whose answer was lost: settled on what it says."""
        earlier = message.provider_attempts[:-1]
        wait = asked_after.at + timedelta(seconds=provider.visibility_seconds) - self._clock()
        if wait > timedelta(0):
            # Early (a second copy of the record): its list may not show the message yet.
            return self._ask_later(message, provider, _NOT_YET_VISIBLE, message.provider_attempts, wait)
        try:
            provider_id = provider.find(message, asked_after.at - ASK_SLACK)
        except DispatchFailure as failure:
            return self._finish(message, Status.UNKNOWN, failure, attempts=message.provider_attempts)
        learned = ProviderAttempt(provider.name, AttemptOutcome.ACCEPTED, asked_after.at)
        if provider_id is not None:
            self._guarded(lambda health: health.accepted(provider.name, self._clock()), None)
            return self._finish(
                message,
                Status.SENT,
                provider_message_id=provider_id,
                provider=provider.name,
                attempts=(*earlier, learned),
            )
        self._count_failure(provider)
        made = (*earlier, replace(learned, outcome=AttemptOutcome.NOT_ACCEPTED))
        if _untried(made, providers):
            return made
        # It was the last provider: the message is what a call refused before sending leaves.
        return self._retry_or_fail(message, _NOT_FOUND, attempts=made)

    def _fail_over_later(
        self, message: ClaimedMessage, attempts: tuple[ProviderAttempt, ...]
    ) -> DispatchOutcome:
        """Too little time left for another call now: the next provider takes it from the queue."""
        if self._requeue(message, 1, attempts):
            raise RetryLater(1, "failover")
        return DispatchOutcome.SKIPPED

    def _requeue(
        self,
        message: ClaimedMessage,
        delay: int,
        attempts: tuple[ProviderAttempt, ...] | None,
        failure: DispatchFailure | None = None,
        *,
        throttled: bool = False,
    ) -> bool:
        """End the claimed attempt `queued`, due again in `delay` seconds; False if the claim was no
        longer ours."""
        now = self._clock()
        return self._store.finish_attempt(
            message,
            Status.QUEUED,
            now,
            error=MessageFailure(failure.code, failure.message) if failure else None,
            # Should the queue lose the record, the outbox brings the message back.
            handoff_due_at=now + timedelta(seconds=delay) + timedelta(minutes=2),
            throttled=throttled,
            provider_attempts=attempts,
        )

    def _count_failure(self, provider: Provider) -> None:
        self._guarded(lambda health: health.not_accepted(provider.name, self._clock()), False)

    def _guarded(self, act: Callable[[ProviderHealth], _T], otherwise: _T) -> _T:
        """The cool-off is advice: when its store fails, the message is delivered as if none applied."""
        if self._health is None:
            return otherwise
        try:
            return act(self._health)
        except DependencyUnavailable as error:
            logger.warning(
                "provider.health.unavailable",
                extra={"event": "provider.health.unavailable", "cause": str(error)},
            )
            return otherwise

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
        self,
        message: ClaimedMessage,
        failure: DispatchFailure,
        *,
        throttled: bool = False,
        attempts: tuple[ProviderAttempt, ...] | None = None,
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
            return self._finish(message, Status.FAILED, failure, attempts=_ended(attempts))
        if _expired_by(message, now + timedelta(seconds=delay)):
            # Its validity ends before the next try: it is never handed over, and says what stopped it.
            expired = PermanentFailure(_EXPIRED.code, f"{_EXPIRED.message} (last attempt: {failure.code})")
            return self._finish(message, Status.EXPIRED, expired, attempts=attempts)
        if self._requeue(message, delay, attempts, failure, throttled=throttled):
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

    def _finish(  # noqa: PLR0917 (each outcome names what it records)
        self,
        message: Message,
        status: Status,
        failure: DispatchFailure | None = None,
        provider_message_id: str | None = None,
        provider: str | None = None,
        attempts: tuple[ProviderAttempt, ...] | None = None,
    ) -> DispatchOutcome:
        now: datetime = self._clock()
        error = MessageFailure(failure.code, failure.message) if failure else None
        recorded = self._store.finish_attempt(
            message,
            status,
            now,
            error=error,
            provider_message_id=provider_message_id,
            provider=provider,
            provider_attempts=attempts,
        )
        if not recorded and attempts and isinstance(message, ClaimedMessage):
            self._record_taken(message, attempts)
        if recorded and status in {Status.FAILED, Status.EXPIRED}:
            self._store.release_dedup_lock(message)  # a deliberate retry may send again
        outcome = {
            Status.SENT: DispatchOutcome.SENT,
            Status.FAILED: DispatchOutcome.FAILED,
            Status.UNKNOWN: DispatchOutcome.UNKNOWN,
            Status.EXPIRED: DispatchOutcome.EXPIRED,
        }[status]
        metrics.add_metric(name=f"Message{outcome.value.capitalize()}", unit="Count", value=1)
        log = logger.warning if status is not Status.SENT else logger.info
        log(
            f"message.dispatch.{outcome.value}",
            extra={
                "event": f"message.dispatch.{outcome.value}",
                "message_id": message.id,
                "channel": message.channel.value,
                "recipient": logged_recipient(self._store.keyed_hash, recipient_key(message.to)),
                "attempts": message.attempts,
                "provider": provider,
                "cause": failure.code if failure else None,
                "recorded": recorded,
            },
        )
        return outcome
