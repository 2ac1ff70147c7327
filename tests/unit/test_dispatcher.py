"""The Dispatcher against in-memory ports: claim before send, what each provider answer leads to, a
record that comes before its message's sendAt (handed back, or dropped), and the batch that never
starts a call its invocation could not finish."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace
from sendonce import channels
from sendonce.adapters.sqs_queue import queue_body
from sendonce.dispatch import retry_policy
from sendonce.dispatch.dispatcher import EARLY_RECEIVES, Dispatcher, DispatchOutcome, DispatchRequest
from sendonce.dispatch.ports import ClaimedMessage, ProviderThrottled
from sendonce.dispatch.retry_policy import RetryPolicy
from sendonce.entrypoints.dispatch import DispatcherDependencies, dispatch_request, handle_batch
from sendonce.errors import AmbiguousOutcome, DispatchFailure, PermanentFailure, RetryLater, TransientFailure
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status
from sendonce.settings import DispatcherSettings
from sendonce.suppressions.model import Reason, Suppression

from sendonce_local.template import load_template
from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import T0, InMemoryStore, ManualClock, queued_message


@dataclass
class ScriptedProvider:
    """Answers each call with the next failure of its script, or success."""

    name: str = "http"
    honours_idempotency_key: bool = True
    script: list[DispatchFailure] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    def send(self, message: Message) -> str:
        self.calls.append(message.id)
        if self.script:
            raise self.script.pop(0)
        return f"prov-{len(self.calls)}"


def _queued(store: InMemoryStore, clock: ManualClock, **changes: object) -> Message:
    return queued_message(store, clock, **changes)


def _dispatcher(
    store: InMemoryStore, provider: ScriptedProvider, clock: ManualClock, attempts: int = 3
) -> Dispatcher:
    return Dispatcher(
        store=store,
        providers_for=lambda message: (provider,),
        retry_policy=RetryPolicy(max_attempts=attempts),
        claim_seconds=70,
        clock=clock,
    )


def _request(message: Message) -> DispatchRequest:
    return DispatchRequest(workspace_id=message.workspace_id, message_id=message.id)


def test_given_a_queued_message_when_the_provider_accepts_then_sent_after_one_attempt(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    provider = ScriptedProvider()

    outcome = _dispatcher(store, provider, clock).dispatch(_request(message))

    assert outcome is DispatchOutcome.SENT
    assert provider.calls == [message.id]
    stored = store.messages[message.id]
    assert stored.status is Status.SENT
    assert stored.attempts == 1
    assert stored.provider_message_id == "prov-1"
    assert stored.error is None
    assert message.id not in store.released  # a sent message keeps its lock


def test_given_the_provider_refuses_4xx_then_failed_at_once_with_the_cause_and_the_lock_released(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    provider = ScriptedProvider(script=[PermanentFailure("provider_rejected", "refused (400)")])

    outcome = _dispatcher(store, provider, clock).dispatch(_request(message))

    assert outcome is DispatchOutcome.FAILED
    stored = store.messages[message.id]
    assert stored.status is Status.FAILED
    assert stored.error is not None
    assert stored.error.code == "provider_rejected"
    assert store.released == [message.id]
    assert not store.locks


def test_given_a_5xx_then_retry_later_until_the_last_attempt_then_failed(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    provider = ScriptedProvider(script=[TransientFailure("provider_unavailable", "503")] * 3)
    dispatcher = _dispatcher(store, provider, clock, attempts=3)

    for attempt in (1, 2):
        with pytest.raises(RetryLater) as retry:
            dispatcher.dispatch(_request(message))
        assert retry.value.seconds >= 1
        stored = store.messages[message.id]
        assert stored.status is Status.QUEUED
        assert stored.attempts == attempt
        assert stored.error is not None
        assert stored.error.code == "provider_unavailable"
        clock.advance(retry.value.seconds)

    assert dispatcher.dispatch(_request(message)) is DispatchOutcome.FAILED
    stored = store.messages[message.id]
    assert stored.status is Status.FAILED
    assert stored.attempts == 3
    assert stored.error is not None
    assert stored.error.code == "provider_unavailable"
    assert len(provider.calls) == 3
    assert store.released == [message.id]


def test_given_a_5xx_then_a_success_then_sent_on_the_second_attempt(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    provider = ScriptedProvider(script=[TransientFailure("provider_unreachable", "refused")])
    dispatcher = _dispatcher(store, provider, clock)

    with pytest.raises(RetryLater):
        dispatcher.dispatch(_request(message))
    assert dispatcher.dispatch(_request(message)) is DispatchOutcome.SENT

    assert store.messages[message.id].attempts == 2
    assert store.messages[message.id].error is None


def test_given_an_ambiguous_outcome_with_a_provider_without_idempotency_then_unknown_and_never_retried(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    provider = ScriptedProvider(
        name="ses", honours_idempotency_key=False, script=[AmbiguousOutcome("provider_timeout", "timed out")]
    )
    dispatcher = _dispatcher(store, provider, clock)

    assert dispatcher.dispatch(_request(message)) is DispatchOutcome.UNKNOWN
    stored = store.messages[message.id]
    assert stored.status is Status.UNKNOWN
    assert stored.error is not None
    assert stored.error.code == "provider_timeout"
    assert store.locks  # unknown keeps its lock

    # a redelivered record finds the message finished: no second call
    assert dispatcher.dispatch(_request(message)) is DispatchOutcome.SKIPPED
    assert len(provider.calls) == 1


def test_given_an_ambiguous_outcome_with_the_http_provider_then_retried_with_the_same_message(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    provider = ScriptedProvider(script=[AmbiguousOutcome("provider_timeout", "timed out")])
    dispatcher = _dispatcher(store, provider, clock)

    with pytest.raises(RetryLater):
        dispatcher.dispatch(_request(message))
    assert store.messages[message.id].status is Status.QUEUED
    assert dispatcher.dispatch(_request(message)) is DispatchOutcome.SENT
    assert provider.calls == [message.id, message.id]


def test_given_the_claim_is_refused_then_skipped_without_a_provider_call(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    store.refuse_claims = True
    provider = ScriptedProvider()

    assert _dispatcher(store, provider, clock).dispatch(_request(message)) is DispatchOutcome.SKIPPED
    assert provider.calls == []


def test_given_the_same_record_twice_then_one_provider_call(store: InMemoryStore, clock: ManualClock) -> None:
    message = _queued(store, clock)
    provider = ScriptedProvider()
    dispatcher = _dispatcher(store, provider, clock)

    assert dispatcher.dispatch(_request(message)) is DispatchOutcome.SENT
    assert dispatcher.dispatch(_request(message)) is DispatchOutcome.SKIPPED
    assert provider.calls == [message.id]


@pytest.mark.parametrize(
    "status", [Status.CANCELED, Status.SENDING, Status.SENT, Status.FAILED, Status.UNKNOWN]
)
def test_given_a_message_not_waiting_then_skipped(
    store: InMemoryStore, clock: ManualClock, status: Status
) -> None:
    message = _queued(store, clock)
    store.messages[message.id] = message.with_status(status, clock.now)
    provider = ScriptedProvider()

    assert _dispatcher(store, provider, clock).dispatch(_request(message)) is DispatchOutcome.SKIPPED
    assert provider.calls == []


def test_given_an_unknown_message_or_another_workspace_then_skipped(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    provider = ScriptedProvider()
    dispatcher = _dispatcher(store, provider, clock)

    assert dispatcher.dispatch(DispatchRequest("ws_a", new_message_id())) is DispatchOutcome.SKIPPED
    assert dispatcher.dispatch(DispatchRequest("ws_other", message.id)) is DispatchOutcome.SKIPPED
    assert provider.calls == []


def test_given_a_scheduled_message_not_yet_due_then_retry_later_until_send_at(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, send_at=clock.now + timedelta(seconds=300))
    provider = ScriptedProvider()

    with pytest.raises(RetryLater) as retry:
        _dispatcher(store, provider, clock).dispatch(_request(message))

    assert 300 <= retry.value.seconds <= 301
    assert provider.calls == []


def test_given_a_record_whose_message_is_not_due_for_more_than_15_minutes_then_dropped(
    store: InMemoryStore, clock: ManualClock
) -> None:
    # Its sendAt was edited later, beyond SQS's reach: the outbox hands it over 15 minutes ahead.
    message = _queued(store, clock, status=Status.SCHEDULED, send_at=clock.now + timedelta(minutes=40))
    provider = ScriptedProvider()

    outcome = _dispatcher(store, provider, clock).dispatch(_request(message))

    assert outcome is DispatchOutcome.SKIPPED  # no RetryLater: the record is deleted, not postponed
    assert provider.calls == []
    assert store.messages[message.id].status is Status.SCHEDULED
    assert store.messages[message.id].attempts == 0


def test_given_a_record_whose_message_is_due_within_15_minutes_then_postponed_to_its_send_at(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, status=Status.SCHEDULED, send_at=clock.now + timedelta(minutes=15))
    provider = ScriptedProvider()

    with pytest.raises(RetryLater) as retry:
        _dispatcher(store, provider, clock).dispatch(_request(message))

    assert retry.value.seconds == 901
    assert provider.calls == []
    assert store.messages[message.id].attempts == 0


@pytest.mark.parametrize(
    ("receive_count", "postponed"),
    [(1, True), (EARLY_RECEIVES - 1, True), (EARLY_RECEIVES, False), (40, False)],
)
def test_given_a_record_that_keeps_arriving_early_then_dropped_before_it_nears_the_dead_letter_queue(
    store: InMemoryStore, clock: ManualClock, receive_count: int, postponed: bool
) -> None:
    message = _queued(store, clock, status=Status.SCHEDULED, send_at=clock.now + timedelta(minutes=3))
    request = DispatchRequest(message.workspace_id, message.id, receive_count=receive_count)
    dispatcher = _dispatcher(store, ScriptedProvider(), clock)

    if postponed:
        with pytest.raises(RetryLater):
            dispatcher.dispatch(request)
    else:
        assert dispatcher.dispatch(request) is DispatchOutcome.SKIPPED
    assert store.messages[message.id].status is Status.SCHEDULED


def test_given_a_record_postponed_for_an_edited_send_at_then_delivered_once_with_the_content_at_its_claim(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, status=Status.SCHEDULED, send_at=clock.now + timedelta(seconds=30))
    provider = ScriptedProvider()
    dispatcher = _dispatcher(store, provider, clock)
    clock.advance(30)
    # Edited just before: 60 s later, and a new body. The record that came at the old sendAt waits.
    store.messages[message.id] = replace(
        store.messages[message.id], body="edited", send_at=clock.now + timedelta(seconds=60)
    )
    with pytest.raises(RetryLater) as retry:
        dispatcher.dispatch(_request(message))
    clock.advance(retry.value.seconds)

    assert (
        dispatcher.dispatch(DispatchRequest(message.workspace_id, message.id, receive_count=2))
        is DispatchOutcome.SENT
    )
    assert (
        dispatcher.dispatch(_request(message)) is DispatchOutcome.SKIPPED
    )  # the edit's own record: nothing to do
    assert provider.calls == [message.id]
    assert store.messages[message.id].body == "edited"


@given(attempts=st.integers(min_value=1, max_value=40))
def test_property_retry_delays_stay_within_one_second_and_the_cap(attempts: int) -> None:
    policy = RetryPolicy(max_attempts=5, base_seconds=2.0, cap_seconds=300.0)
    ceiling = min(300.0, 2.0 * 2 ** (attempts - 1))

    delay = policy.delay_seconds(attempts)

    assert 1 <= delay <= 300
    assert max(1, round(ceiling / 2)) <= delay <= round(ceiling)


def test_given_the_retry_policy_then_retries_stop_at_max_attempts() -> None:
    policy = RetryPolicy(max_attempts=3)

    assert [policy.may_retry(n) for n in (0, 1, 2, 3, 4)] == [True, True, True, False, False]


# ---------------------------------------------------------------------------- throttling, on time
def _throttled() -> ProviderThrottled:
    return ProviderThrottled("provider_throttled", "sns throttled the message: Throttling")


def test_given_a_provider_that_keeps_throttling_then_retried_for_an_hour_from_the_first_attempt_then_failed(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    provider = ScriptedProvider(name="sns", honours_idempotency_key=False, script=[_throttled()] * 1000)
    dispatcher = _dispatcher(store, provider, clock, attempts=3)
    first_attempt = clock.now
    delays: list[int] = []

    while True:
        try:
            outcome = dispatcher.dispatch(_request(message))
        except RetryLater as retry:
            delays.append(retry.seconds)
            assert store.messages[message.id].status is Status.QUEUED
            clock.advance(retry.seconds)
            continue
        break

    assert outcome is DispatchOutcome.FAILED
    stored = store.messages[message.id]
    assert stored.status is Status.FAILED
    assert stored.error is not None
    assert stored.error.code == "provider_throttled"
    # The last attempt, the one that failed the message, came a full hour after the first.
    assert clock.now - first_attempt >= timedelta(hours=1)
    assert all(1 <= delay <= 300 for delay in delays)  # backoff, capped
    assert delays[0] <= 2 < max(delays)
    assert stored.attempts == len(provider.calls) == len(delays) + 1 > 3  # the attempt count does not apply
    assert store.released == [message.id]  # failed: a deliberate retry may send


def test_given_throttling_then_a_5xx_then_the_5xx_is_counted_apart_from_the_throttled_attempts(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    unavailable = TransientFailure("provider_unavailable", "503")
    provider = ScriptedProvider(script=[_throttled()] * 5 + [unavailable, unavailable])
    dispatcher = _dispatcher(store, provider, clock, attempts=2)

    for _ in range(6):  # five throttled attempts, then one 5xx: each is retried
        with pytest.raises(RetryLater) as retry:
            dispatcher.dispatch(_request(message))
        clock.advance(retry.value.seconds)

    assert (
        dispatcher.dispatch(_request(message)) is DispatchOutcome.FAILED
    )  # the second 5xx: 2 attempts counted
    stored = store.messages[message.id]
    assert stored.attempts == 7
    assert stored.error is not None
    assert stored.error.code == "provider_unavailable"


def test_given_a_throttled_attempt_then_the_claim_keeps_the_first_attempts_time_and_counts_it(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    first = clock.now
    dispatcher = _dispatcher(store, ScriptedProvider(script=[_throttled()]), clock)
    with pytest.raises(RetryLater):
        dispatcher.dispatch(_request(message))
    clock.advance(120)

    claimed = store.claim("ws_a", message.id, clock.now, 70)

    assert isinstance(claimed, ClaimedMessage)
    assert (claimed.first_attempt_at, claimed.throttled_attempts, claimed.attempts) == (first, 1, 2)


def test_given_the_retry_policy_then_throttling_is_retried_until_the_budget_has_passed() -> None:
    policy = RetryPolicy(max_attempts=1, throttle_budget_seconds=3600)
    first = T0

    assert policy.may_retry_throttled(first, first)
    assert policy.may_retry_throttled(first, first + timedelta(seconds=3599))
    assert not policy.may_retry_throttled(first, first + timedelta(seconds=3600))


@given(throttled=st.integers(min_value=1, max_value=100_000))
def test_property_throttle_delays_grow_and_stay_capped_whatever_the_count(throttled: int) -> None:
    policy = RetryPolicy(base_seconds=2.0, throttle_cap_seconds=300.0)
    ceiling = min(300.0, 2.0 * 2 ** min(throttled - 1, 62))

    delay = policy.throttle_delay_seconds(throttled)

    assert max(1, round(ceiling / 2)) <= delay <= round(ceiling)


# ---------------------------------------------------------------------------- the batch's time budget
def clocked_context(clock: ManualClock, deadline: datetime) -> FakeLambdaContext:
    """A Lambda context whose time left runs out as the manual clock moves."""
    return FakeLambdaContext(
        function_name="sendonce-DispatchImessageFunction",
        aws_request_id="req-1",
        time_left=lambda: max(0, int((deadline - clock.now).total_seconds() * 1000)),
    )


@dataclass
class SlowProvider(ScriptedProvider):
    """Each call takes `seconds` of the clock."""

    clock: ManualClock = field(default_factory=ManualClock)
    seconds: float = 8.0

    def send(self, message: Message) -> str:
        self.clock.advance(self.seconds)
        return super().send(message)


@dataclass
class NoRedelivery:
    postponed: list[tuple[str, int]] = field(default_factory=list)

    def postpone(self, receipt_handle: str, seconds: int) -> None:
        self.postponed.append((receipt_handle, seconds))


def _sqs_event(messages: list[Message]) -> dict[str, object]:
    return {
        "Records": [
            {
                "messageId": f"record-{index}",
                "receiptHandle": f"handle-{index}",
                "body": json.dumps({"workspaceId": message.workspace_id, "messageId": message.id}),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:ImessageQueue",
                "awsRegion": "us-east-1",
            }
            for index, message in enumerate(messages)
        ]
    }


def test_given_time_running_out_mid_batch_then_the_rest_goes_back_untouched(
    store: InMemoryStore, clock: ManualClock
) -> None:
    settings = DispatcherSettings.from_environment(
        {
            "MESSAGES_TABLE": "MessagesTable",
            "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
            "SENDONCE_PROVIDER_TIMEOUT_SECONDS": "10",
        }
    )
    messages = [_queued(store, clock, to=f"+1555010000{i}") for i in range(6)]
    provider = SlowProvider(clock=clock, seconds=8.0)
    dependencies = DispatcherDependencies(settings, _dispatcher(store, provider, clock), NoRedelivery())
    # 40 s left: calls start at 40, 32, 24 and 16 s left; at 8 s, less than 10 + 5, the batch stops.
    context = clocked_context(clock, deadline=clock.now + timedelta(seconds=40))

    result = handle_batch(dependencies, _sqs_event(messages), context)  # type: ignore[arg-type]

    assert result == {"batchItemFailures": [{"itemIdentifier": "record-4"}, {"itemIdentifier": "record-5"}]}
    assert provider.calls == [message.id for message in messages[:4]]
    for message in messages[4:]:  # nothing claimed, no attempt counted
        assert store.messages[message.id].status is Status.QUEUED
        assert store.messages[message.id].attempts == 0
    assert dependencies.redelivery.postponed == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(("receive_count", "postponed"), [("1", True), (str(EARLY_RECEIVES), False)])
def test_a_record_early_for_its_message_is_postponed_on_its_first_receives_and_dropped_after(
    store: InMemoryStore, clock: ManualClock, receive_count: str, postponed: bool
) -> None:
    settings = DispatcherSettings.from_environment(
        {"MESSAGES_TABLE": "MessagesTable", "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret"}
    )
    message = _queued(store, clock, status=Status.SCHEDULED, send_at=clock.now + timedelta(seconds=90))
    dependencies = DispatcherDependencies(
        settings, _dispatcher(store, ScriptedProvider(), clock), NoRedelivery()
    )
    event = _sqs_event([message])
    event["Records"][0]["attributes"]["ApproximateReceiveCount"] = receive_count  # type: ignore[index]
    context = clocked_context(clock, deadline=clock.now + timedelta(seconds=60))

    result = handle_batch(dependencies, event, context)  # type: ignore[arg-type]

    if postponed:  # back on its queue until its sendAt
        assert result == {"batchItemFailures": [{"itemIdentifier": "record-0"}]}
        assert dependencies.redelivery.postponed == [("handle-0", 91)]  # type: ignore[attr-defined]
    else:  # deleted: a fresher record or the outbox covers the message
        assert result == {"batchItemFailures": []}
        assert dependencies.redelivery.postponed == []  # type: ignore[attr-defined]
    assert store.messages[message.id].status is Status.SCHEDULED


def test_given_too_little_time_for_even_one_call_then_the_whole_batch_goes_back(
    store: InMemoryStore, clock: ManualClock
) -> None:
    settings = DispatcherSettings.from_environment(
        {
            "MESSAGES_TABLE": "MessagesTable",
            "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
            "SENDONCE_PROVIDER_TIMEOUT_SECONDS": "10",
        }
    )
    messages = [_queued(store, clock, to=f"+1555010000{i}") for i in range(2)]
    provider = ScriptedProvider()
    dependencies = DispatcherDependencies(settings, _dispatcher(store, provider, clock), NoRedelivery())
    context = clocked_context(clock, deadline=clock.now + timedelta(seconds=14.9))

    result = handle_batch(dependencies, _sqs_event(messages), context)  # type: ignore[arg-type]

    assert len(result["batchItemFailures"]) == 2
    assert provider.calls == []
    assert sum(store.messages[message.id].attempts for message in messages) == 0


# ---------------------------------------------------------------------------- the dead-letter queue's margin
@pytest.mark.parametrize("spec", channels.all_specs(), ids=lambda spec: spec.name)
def test_the_most_receives_a_record_takes_in_normal_use_stay_under_its_queues_max_receive_count(
    monkeypatch: pytest.MonkeyPatch, spec: channels.ChannelSpec
) -> None:
    """A record early for its sendAt (handed back at most EARLY_RECEIVES - 1 times), then claimed
    and throttled for the whole hour with every backoff at its shortest, then the other transient
    failures' retries: still under the queue's maxReceiveCount, so edits never walk it to the DLQ."""
    template = load_template(Path(__file__).resolve().parents[2] / "template.yaml")
    queue = template.resources[f"{spec.resource_name}Queue"]["Properties"]
    max_receive_count = int(queue["RedrivePolicy"]["maxReceiveCount"])
    policy = RetryPolicy(max_attempts=int(template.parameters["MaxDeliveryAttempts"]["Default"]))
    monkeypatch.setattr(retry_policy.random, "uniform", lambda low, high: low)  # the shortest backoffs
    throttled, elapsed = 1, 0.0
    while policy.may_retry_throttled(T0, T0 + timedelta(seconds=elapsed)):
        elapsed += policy.throttle_delay_seconds(throttled)
        throttled += 1

    receives = (EARLY_RECEIVES - 1) + throttled + (policy.max_attempts - 1)

    assert throttled == 32
    assert receives < max_receive_count


# ---------------------------------------------------------------------------- the record's copy
_TEXT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40)
_MOMENT = st.datetimes(
    min_value=datetime(2025, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(T0.tzinfo)
).map(lambda moment: moment.replace(microsecond=moment.microsecond // 1000 * 1000))


@given(
    body=_TEXT,
    subject=st.none() | _TEXT,
    metadata=st.dictionaries(_TEXT, _TEXT, max_size=3),
    send_at=st.none() | _MOMENT,
    updated_at=_MOMENT,
    key=st.none() | _TEXT,
)
def test_property_a_records_copy_reads_back_as_the_message_it_copied(
    body: str,
    subject: str | None,
    metadata: dict[str, str],
    send_at: datetime | None,
    updated_at: datetime,
    key: str | None,
) -> None:
    """What the claim conditions on and sends: every field a message has before its first attempt,
    at the table's precision (milliseconds)."""
    message = Message(
        id=new_message_id(),
        workspace_id="ws_a",
        channel=Channel("email"),
        to="ann@x.io",
        body=body,
        subject=subject,
        status=Status.SCHEDULED if send_at else Status.QUEUED,
        created_at=updated_at,
        updated_at=updated_at,
        send_at=send_at,
        metadata=metadata,
        idempotency_key=key,
        dedup_lock_id="lock-1",
    )

    request = dispatch_request(queue_body(message))

    assert request.seen == message
    assert (request.workspace_id, request.message_id) == ("ws_a", message.id)


@pytest.mark.parametrize(
    "copy", [None, "nope", {}, {"channel": "sms"}, {"channel": "sms", "to": "+1", "status": "lost"}]
)
def test_given_a_record_without_a_readable_copy_then_it_still_names_its_message(copy: object) -> None:
    """An outbox record carries no copy, and one this code cannot read is as good as none: the claim
    reads the message instead."""
    message_id = new_message_id()
    body = {"workspaceId": "ws_a", "messageId": message_id, **({"message": copy} if copy is not None else {})}

    request = dispatch_request(json.dumps(body))

    assert (request.workspace_id, request.message_id, request.seen) == ("ws_a", message_id, None)


def test_given_a_record_whose_recipient_was_suppressed_since_then_failed_without_a_provider_call(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    store.suppressions.put("ws_a", Suppression(message.to, Reason.BOUNCED, clock.now))
    provider = ScriptedProvider()
    request = dispatch_request(queue_body(message))

    outcome = _dispatcher(store, provider, clock).dispatch(request)

    assert outcome is DispatchOutcome.FAILED
    assert provider.calls == []
    ended = store.messages[message.id]
    assert ended.status is Status.FAILED
    assert ended.error is not None
    assert ended.error.code == "recipient_suppressed"
    assert "bounced" in ended.error.message
    assert message.id in store.released
