"""Failover between a channel's providers, against in-memory ports: a message goes to the next
provider only when the current one provably did not accept it; a lost answer is repeated where the
provider dedups on the id, asked where it can be asked, else `unknown`; a cool-off skips a provider,
never the last; and redelivered records, racing, never call two providers for one message."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from sendonce.dedup.identity import dedup_identity
from sendonce.dispatch.dispatcher import ASK_SLACK, Dispatcher, DispatchOutcome, DispatchRequest
from sendonce.dispatch.ports import ProviderThrottled
from sendonce.dispatch.retry_policy import RetryPolicy
from sendonce.entrypoints.shared.provider_registry import Providers
from sendonce.errors import (
    AmbiguousOutcome,
    DispatchFailure,
    PermanentFailure,
    ProviderRefused,
    ProviderUnreachable,
    RetryLater,
    TransientFailure,
)
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import AttemptOutcome, Channel, Message, Status
from sendonce.messages.ports import DedupClaim
from sendonce.modes import Mode
from sendonce.settings import DispatcherSettings, InvalidSettings

from tests.unit.provider_fakes import AskableFake, FakeProvider
from tests.unit.unit_fakes import InMemoryProviderHealth, InMemoryStore, ManualClock

REFUSED = ProviderUnreachable("provider_unreachable", "connection refused")
FORBIDDEN = ProviderRefused("provider_rejected", "403: the sender is not the account's")
BAD_RECIPIENT = PermanentFailure("provider_rejected", "400: invalid 'To'")
TIMEOUT = AmbiguousOutcome("provider_timeout", "no answer in time")
SERVER_ERROR = TransientFailure("provider_unavailable", "500")


def _queued(store: InMemoryStore, clock: ManualClock, to: str = "+15550100000") -> Message:
    message = Message(
        id=new_message_id(),
        workspace_id="ws_a",
        channel=Channel("sms"),
        to=to,
        body="hello",
        status=Status.QUEUED,
        created_at=clock.now,
        updated_at=clock.now,
    )
    claim = DedupClaim(dedup_identity("ws_a", to, None, "hello"), clock.now + timedelta(minutes=15))
    created = store.create(message, claim, None, clock.now, clock.now)
    return created.message  # type: ignore[union-attr]


def _dispatcher(
    store: InMemoryStore,
    clock: ManualClock,
    *providers: FakeProvider,
    health: InMemoryProviderHealth | None = None,
    call_seconds: float = 0.0,
) -> Dispatcher:
    return Dispatcher(
        store,
        lambda message: providers,
        RetryPolicy(max_attempts=3),
        claim_seconds=70,
        clock=clock,
        health=health,
        call_seconds=call_seconds,
    )


def _dispatch(dispatcher: Dispatcher, message: Message, time_left: float = 30.0) -> DispatchOutcome | int:
    """The outcome, or the seconds after which the record comes back (RetryLater)."""
    try:
        return dispatcher.dispatch(DispatchRequest(message.workspace_id, message.id), lambda: time_left)
    except RetryLater as later:
        return later.seconds


def _attempts(store: InMemoryStore, message: Message) -> list[tuple[str, str]]:
    return [(a.provider, a.outcome.value) for a in store.messages[message.id].provider_attempts]


# ---------------------------------------------------------------------------- provably not accepted
@pytest.mark.parametrize("failure", [REFUSED, FORBIDDEN], ids=["refused", "error_403"])
def test_given_the_first_provider_did_not_accept_then_the_next_sends_it_at_once(
    store: InMemoryStore, clock: ManualClock, failure: DispatchFailure
) -> None:
    message = _queued(store, clock)
    twilio, http = (
        FakeProvider("twilio", script=[failure]),
        FakeProvider("http", honours_idempotency_key=True),
    )

    outcome = _dispatch(_dispatcher(store, clock, twilio, http), message)

    assert outcome is DispatchOutcome.SENT
    assert (twilio.taken, http.taken) == ([], [message.id])
    stored = store.messages[message.id]
    assert stored.provider == "http"
    assert stored.provider_message_id == "http-1"
    assert _attempts(store, message) == [("twilio", "not_accepted"), ("http", "accepted")]
    assert stored.attempts == 2


def test_given_the_recipient_is_refused_then_failed_and_no_other_provider_is_tried(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    twilio, http = FakeProvider("twilio", script=[BAD_RECIPIENT]), FakeProvider("http")

    assert _dispatch(_dispatcher(store, clock, twilio, http), message) is DispatchOutcome.FAILED
    assert http.calls == []
    assert store.messages[message.id].provider is None
    assert _attempts(store, message) == [("twilio", "failed")]
    assert message.id in store.released  # a failed message's lock is released


def test_given_the_last_provider_refuses_the_account_then_failed(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    first, last = FakeProvider("twilio", script=[FORBIDDEN]), FakeProvider("http", script=[FORBIDDEN])

    assert _dispatch(_dispatcher(store, clock, first, last), message) is DispatchOutcome.FAILED
    assert _attempts(store, message) == [("twilio", "not_accepted"), ("http", "not_accepted")]


def test_given_the_last_provider_cannot_be_reached_then_retried_there_and_the_first_not_again(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    first = FakeProvider("twilio", script=[REFUSED])
    last = FakeProvider("http", honours_idempotency_key=True, script=[REFUSED])
    dispatcher = _dispatcher(store, clock, first, last)

    assert isinstance(_dispatch(dispatcher, message), int)  # back through the queue
    clock.advance(seconds=30)
    assert _dispatch(dispatcher, message) is DispatchOutcome.SENT

    assert (len(first.calls), len(last.calls), last.taken) == (1, 2, [message.id])
    assert _attempts(store, message) == [
        ("twilio", "not_accepted"),
        ("http", "not_accepted"),
        ("http", "accepted"),
    ]


def test_given_throttling_past_its_budget_then_the_next_provider(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    throttled = ProviderThrottled("provider_throttled", "429")
    first, last = FakeProvider("twilio", script=[throttled] * 100), FakeProvider("http")
    dispatcher = _dispatcher(store, clock, first, last)

    assert isinstance(_dispatch(dispatcher, message), int)  # within its budget: retried there
    assert last.calls == []
    clock.advance(seconds=3601)
    assert _dispatch(dispatcher, message) is DispatchOutcome.SENT
    assert last.taken == [message.id]
    assert _attempts(store, message) == [("twilio", "not_accepted"), ("http", "accepted")]


# ---------------------------------------------------------------------------- lost answers
def test_given_a_5xx_from_a_provider_that_dedups_then_retried_there_never_failed_over(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    http = FakeProvider("http", honours_idempotency_key=True, script=[SERVER_ERROR])
    twilio = FakeProvider("twilio")
    health = InMemoryProviderHealth(after=1)
    dispatcher = _dispatcher(store, clock, http, twilio, health=health)

    assert isinstance(_dispatch(dispatcher, message), int)
    health.cool_until["http"] = clock.now + timedelta(hours=1)  # even a cool-off does not move it
    clock.advance(seconds=30)
    assert _dispatch(dispatcher, message) is DispatchOutcome.SENT

    assert twilio.calls == []
    assert _attempts(store, message) == [("http", "unknown"), ("http", "accepted")]


def test_given_a_timeout_where_twilio_did_accept_then_asked_and_sent_with_no_second_call(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    twilio = AskableFake("twilio", script=[TIMEOUT], takes_on_failure=True)
    http = FakeProvider("http", honours_idempotency_key=True)
    dispatcher = _dispatcher(store, clock, twilio, http)

    assert _dispatch(dispatcher, message) == 10  # asked once its list can be trusted
    assert store.messages[message.id].status is Status.QUEUED
    called_at = clock.now
    clock.advance(seconds=10)
    assert _dispatch(dispatcher, message) is DispatchOutcome.SENT

    assert (len(twilio.calls), http.calls) == (1, [])
    assert twilio.asked == [called_at - ASK_SLACK]
    stored = store.messages[message.id]
    assert (stored.provider, stored.provider_message_id) == ("twilio", "twilio-found")
    assert _attempts(store, message) == [("twilio", "accepted")]  # a lost answer learned by asking


def test_given_a_timeout_where_twilio_did_not_accept_then_asked_and_the_next_provider_sends_it(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    twilio = AskableFake("twilio", script=[TIMEOUT])
    http = FakeProvider("http", honours_idempotency_key=True)
    dispatcher = _dispatcher(store, clock, twilio, http)

    assert _dispatch(dispatcher, message) == 10
    clock.advance(seconds=10)
    assert _dispatch(dispatcher, message) is DispatchOutcome.SENT

    assert (twilio.taken, http.taken) == ([], [message.id])
    assert _attempts(store, message) == [("twilio", "not_accepted"), ("http", "accepted")]


def test_given_twilios_own_event_ends_the_message_before_its_answer_is_lost_then_the_call_is_accepted(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)

    class CalledBack(AskableFake):
        def send(self, sent: Message) -> str:
            # Its status callback, applied while the call is still under way: the message delivered.
            store.messages[sent.id] = store.messages[sent.id].with_status(Status.DELIVERED, clock.now)
            return super().send(sent)

    twilio = CalledBack("twilio", script=[TIMEOUT], takes_on_failure=True)
    http = FakeProvider("http")

    assert _dispatch(_dispatcher(store, clock, twilio, http), message) is DispatchOutcome.SKIPPED
    stored = store.messages[message.id]
    assert (stored.status, stored.provider) == (Status.DELIVERED, "twilio")
    assert _attempts(store, message) == [("twilio", "accepted")]
    assert http.calls == []


def test_given_a_record_back_before_the_list_can_be_trusted_then_nothing_is_asked_or_sent_yet(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    twilio = AskableFake("twilio", script=[TIMEOUT])
    http = FakeProvider("http")
    dispatcher = _dispatcher(store, clock, twilio, http)

    assert _dispatch(dispatcher, message) == 10
    clock.advance(seconds=3)
    assert _dispatch(dispatcher, message) == 7  # a second copy of the record, early

    assert (twilio.asked, http.calls) == ([], [])
    assert _attempts(store, message) == [("twilio", "unknown")]


def test_given_the_provider_cannot_be_asked_then_unknown_and_nothing_else_is_called(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    twilio = AskableFake("twilio", script=[TIMEOUT], lookup_fails=True)
    http = FakeProvider("http")
    dispatcher = _dispatcher(store, clock, twilio, http)

    _dispatch(dispatcher, message)
    clock.advance(seconds=10)
    assert _dispatch(dispatcher, message) is DispatchOutcome.UNKNOWN
    assert http.calls == []
    assert _attempts(store, message) == [("twilio", "unknown")]


def test_given_a_lost_answer_from_a_provider_that_cannot_be_asked_then_unknown(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    sns, http = FakeProvider("sns", script=[TIMEOUT]), FakeProvider("http")

    assert _dispatch(_dispatcher(store, clock, sns, http), message) is DispatchOutcome.UNKNOWN
    assert http.calls == []
    assert _attempts(store, message) == [("sns", "unknown")]


# ---------------------------------------------------------------------------- cool-off
def test_given_a_provider_that_failed_to_accept_in_a_row_then_it_is_skipped_until_its_cool_off_ends(
    store: InMemoryStore, clock: ManualClock
) -> None:
    health = InMemoryProviderHealth(after=2)
    twilio = FakeProvider("twilio", script=[FORBIDDEN, FORBIDDEN])
    http = FakeProvider("http")
    dispatcher = _dispatcher(store, clock, twilio, http, health=health)
    for n in range(2):
        assert _dispatch(dispatcher, _queued(store, clock, to=f"+1555010000{n}")) is DispatchOutcome.SENT

    third = _queued(store, clock, to="+15550100009")
    assert _dispatch(dispatcher, third) is DispatchOutcome.SENT
    assert len(twilio.calls) == 2  # cooling off: skipped
    assert _attempts(store, third) == [("http", "accepted")]
    clock.advance(seconds=61)
    fourth = _queued(store, clock, to="+15550100008")
    assert _dispatch(dispatcher, fourth) is DispatchOutcome.SENT
    assert twilio.taken == [fourth.id]


def test_given_every_provider_cooling_off_then_the_last_is_still_tried_and_then_the_skipped_one(
    store: InMemoryStore, clock: ManualClock
) -> None:
    health = InMemoryProviderHealth(after=1)
    health.cool_until = {"twilio": clock.now + timedelta(minutes=1), "http": clock.now + timedelta(minutes=1)}
    twilio, http = FakeProvider("twilio"), FakeProvider("http", script=[FORBIDDEN])
    message = _queued(store, clock)

    assert _dispatch(_dispatcher(store, clock, twilio, http, health=health), message) is DispatchOutcome.SENT
    # The last is never skipped; once it refused, the skipped one is the only chance left, and safe.
    assert _attempts(store, message) == [("http", "not_accepted"), ("twilio", "accepted")]


# ---------------------------------------------------------------------------- time and races
def test_given_too_little_time_for_another_call_then_the_next_provider_takes_it_from_the_queue(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)
    twilio, http = FakeProvider("twilio", script=[REFUSED]), FakeProvider("http")
    dispatcher = _dispatcher(store, clock, twilio, http, call_seconds=15)

    assert _dispatch(dispatcher, message, time_left=10) == 1
    assert http.calls == []
    assert _dispatch(dispatcher, message, time_left=30) is DispatchOutcome.SENT
    assert len(twilio.calls) == 1
    assert _attempts(store, message) == [("twilio", "not_accepted"), ("http", "accepted")]


def test_given_the_claim_was_taken_over_during_a_failover_then_the_next_provider_is_not_called(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock)

    class Reclaimed(FakeProvider):
        def send(self, sent: Message) -> str:
            # The outbox found the claim dead meanwhile, and another dispatcher claimed it.
            current = store.messages[sent.id]
            store.messages[sent.id] = current.__class__(
                **{**{n: getattr(current, n) for n in current.__struct_fields__}, "attempts": 9}
            )
            raise REFUSED

    http = FakeProvider("http")
    assert _dispatch(_dispatcher(store, clock, Reclaimed("twilio"), http), message) is DispatchOutcome.SKIPPED
    assert http.calls == []


def test_given_redelivered_records_racing_a_failover_then_one_delivery_in_all(
    store: InMemoryStore, clock: ManualClock
) -> None:
    messages = [_queued(store, clock, to=f"+1555010{n:04d}") for n in range(20)]
    lock = threading.Lock()

    @dataclass
    class Counting(FakeProvider):
        def send(self, message: Message) -> str:
            with lock:
                return super().send(message)

    twilio = Counting("twilio", script=[REFUSED] * 20)
    http = Counting("http", honours_idempotency_key=True)
    dispatcher = _dispatcher(store, clock, twilio, http)

    def deliver(message: Message) -> None:
        _dispatch(dispatcher, message)

    threads = [threading.Thread(target=deliver, args=(m,)) for m in messages for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    delivered = twilio.taken + http.taken
    assert sorted(delivered) == sorted(m.id for m in messages)  # each once, and only once
    for message in messages:
        assert store.messages[message.id].status is Status.SENT
        assert [a.outcome for a in store.messages[message.id].provider_attempts][
            -1
        ] is AttemptOutcome.ACCEPTED


# ---------------------------------------------------------------------------- settings and registry
@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"SENDONCE_SMS_PROVIDER": "twilio"}, ("twilio",)),
        ({"SENDONCE_SMS_PROVIDERS": "twilio, sms-v2,http"}, ("twilio", "sms-v2", "http")),
        # When both are set, the list wins.
        ({"SENDONCE_SMS_PROVIDER": "sns", "SENDONCE_SMS_PROVIDERS": "http,twilio"}, ("http", "twilio")),
        ({}, ("sns",)),
    ],
)
def test_a_channels_providers_are_its_list_or_its_one_provider(
    environ: dict[str, str], expected: tuple[str, ...]
) -> None:
    settings = DispatcherSettings.from_environment(
        {"MESSAGES_TABLE": "t", "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret", **environ}
    )

    assert settings.providers_for("sms") == expected


@pytest.mark.parametrize(
    "listed",
    ["twilio,twilio", "twilio,ses", "carrier-pigeon", ","],
    ids=["twice", "not sms", "unknown", "empty"],
)
def test_a_list_naming_a_provider_twice_or_one_its_channel_cannot_use_is_refused(listed: str) -> None:
    with pytest.raises(InvalidSettings, match="SENDONCE_SMS_PROVIDERS"):
        DispatcherSettings.from_environment(
            {
                "MESSAGES_TABLE": "t",
                "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
                "SENDONCE_SMS_PROVIDERS": listed,
            }
        )


def test_a_dead_claim_is_repeated_only_when_every_provider_of_the_list_dedups() -> None:
    def built(name: str, dedups: bool) -> Callable[[DispatcherSettings], FakeProvider]:
        return lambda settings: FakeProvider(name, honours_idempotency_key=dedups)

    live = {"http": built("http", True), "twilio": built("twilio", False)}
    for listed, repeatable in (("http", True), ("twilio,http", False), ("http,twilio", False)):
        settings = DispatcherSettings.from_environment(
            {
                "MESSAGES_TABLE": "t",
                "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
                "SENDONCE_SMS_PROVIDERS": listed,
            }
        )
        providers = Providers(settings, live=live, test=lambda settings: FakeProvider("simulator"))

        assert providers.honour_idempotency_key("sms", Mode.LIVE) is repeatable, listed
