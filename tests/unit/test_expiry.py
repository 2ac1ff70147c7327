"""A message's `expiresAt` on the delivery side, against in-memory ports (no socket).

- A message past its expiry when a dispatcher would hand it to a provider is never handed over: it
  ends `expired` (error `expired`), its dedup lock released, told as `message.expired`; whether it
  sat in its queue, waited for its sendAt, or came back for a retry.
- A retry whose next try would come at or after the expiry (a transient failure, throttling) ends
  the message `expired`, never `failed`, and it is not queued again; a failover after the expiry
  calls no next provider.
- A lost answer is not turned `expired`: the provider may have taken the message.
- Providers that take a validity period get the time left at the call: Twilio's `ValidityPeriod`,
  AWS's `TimeToLive`, the HTTP provider's `expiresAt`; without an expiry they get none.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from botocore.stub import Stubber
from msgspec.structs import replace
from sendonce.adapters.dynamodb_items import to_item
from sendonce.adapters.dynamodb_message_stream import change_of
from sendonce.clock import rfc3339
from sendonce.dispatch.dispatcher import Dispatcher, DispatchOutcome, DispatchRequest
from sendonce.dispatch.ports import ProviderThrottled
from sendonce.dispatch.retry_policy import RetryPolicy
from sendonce.errors import (
    AmbiguousOutcome,
    ProviderUnreachable,
    RetryLater,
    TransientFailure,
)
from sendonce.messages.model import AttemptOutcome, HeldFor, Message, Status
from sendonce.providers.http_provider import HttpProvider
from sendonce.providers.sms_v2_provider import SmsV2Provider
from sendonce.providers.twilio_provider import TwilioProvider
from sendonce.providers.validity import seconds_left
from sendonce.status_webhooks.model import STATUS_EVENTS, Change
from sendonce.status_webhooks.rules import EventType

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.faults import FaultBoard
from sendonce_local.sandbox import HttpProvider as SandboxHttpProvider
from sendonce_local.twilio_sandbox import TwilioCredentials as SandboxCredentials
from sendonce_local.twilio_sandbox import TwilioProvider as SandboxTwilio
from tests.unit.aws_faults import client, sms_message
from tests.unit.provider_fakes import AskableFake, FakeProvider
from tests.unit.twilio_fakes import (
    BASE_URL,
    CALLBACK_URL,
    CREDENTIALS,
    SENDER,
    SID,
    FakeOpener,
    answering,
    sms,
)
from tests.unit.twilio_fakes import NOW as TWILIO_NOW
from tests.unit.unit_fakes import InMemoryStore, ManualClock, queued_message

SERVER_ERROR = TransientFailure("provider_unavailable", "500")
REFUSED = ProviderUnreachable("provider_unreachable", "connection refused")
TIMEOUT = AmbiguousOutcome("provider_timeout", "no answer in time")
THROTTLED = ProviderThrottled("provider_throttled", "429")


def _http(**fields: Any) -> FakeProvider:
    """The HTTP provider: it dedups on the message id, so a lost answer is tried again there."""
    return FakeProvider("http", honours_idempotency_key=True, **fields)


def _queued(store: InMemoryStore, clock: ManualClock, valid_for: float | None, **changes: Any) -> Message:
    """A message created now through the store, valid for `valid_for` seconds (None: no expiry)."""
    expires_at = clock.now + timedelta(seconds=valid_for) if valid_for is not None else None
    return queued_message(store, clock, timedelta(hours=2), expires_at=expires_at, **changes)


def _dispatcher(store: InMemoryStore, clock: ManualClock, *providers: FakeProvider) -> Dispatcher:
    return Dispatcher(
        store, lambda message: providers, RetryPolicy(max_attempts=5), claim_seconds=70, clock=clock
    )


def _dispatch(dispatcher: Dispatcher, message: Message) -> DispatchOutcome | int:
    """The outcome, or the seconds after which the record comes back (RetryLater)."""
    try:
        return dispatcher.dispatch(DispatchRequest(message.workspace_id, message.id), lambda: 30.0)
    except RetryLater as later:
        return later.seconds


def _assert_expired(store: InMemoryStore, message: Message) -> Message:
    """Ended `expired` with its cause, its lock released, out of the outbox (nothing owed)."""
    stored = store.messages[message.id]
    assert stored.status is Status.EXPIRED
    assert stored.error is not None
    assert stored.error.code == "expired"
    assert "not handed to a provider before its expiresAt" in stored.error.message
    assert message.id in store.released
    assert not store.locks
    assert message.id not in store.outbox_due
    return stored


# ---------------------------------------------------------------------------- at the claim
def test_a_message_that_sat_in_its_queue_past_its_expiry_ends_expired_and_no_provider_is_called(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, valid_for=60)
    provider = _http()
    clock.advance(61)

    outcome = _dispatch(_dispatcher(store, clock, provider), message)

    assert outcome is DispatchOutcome.EXPIRED
    assert provider.calls == []
    stored = _assert_expired(store, message)
    assert stored.attempts == 1  # claimed once, to end it
    assert stored.provider is None
    assert stored.provider_attempts == ()


def test_a_message_whose_expiry_is_this_very_instant_is_not_handed_over(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, valid_for=60)
    provider = _http()
    clock.advance(60)

    assert _dispatch(_dispatcher(store, clock, provider), message) is DispatchOutcome.EXPIRED
    assert provider.calls == []


def test_a_message_still_valid_is_sent_as_any_other(store: InMemoryStore, clock: ManualClock) -> None:
    message = _queued(store, clock, valid_for=60)
    provider = _http()
    clock.advance(59)

    assert _dispatch(_dispatcher(store, clock, provider), message) is DispatchOutcome.SENT
    assert provider.calls == [message.id]
    assert store.messages[message.id].status is Status.SENT
    assert message.id not in store.released


def test_a_message_held_past_its_expiry_until_its_send_at_ends_expired_at_its_claim(
    store: InMemoryStore, clock: ManualClock
) -> None:
    send_at = clock.now + timedelta(hours=9)  # quiet hours moved its sendAt past its validity
    message = _queued(
        store, clock, valid_for=3600, status=Status.SCHEDULED, send_at=send_at, held_for=HeldFor.QUIET_HOURS
    )
    provider = _http()
    clock.now = send_at

    assert _dispatch(_dispatcher(store, clock, provider), message) is DispatchOutcome.EXPIRED
    assert provider.calls == []
    _assert_expired(store, message)


def test_a_second_copy_of_the_record_after_the_expiry_changes_nothing(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, valid_for=60)
    provider = _http()
    clock.advance(120)
    dispatcher = _dispatcher(store, clock, provider)
    assert _dispatch(dispatcher, message) is DispatchOutcome.EXPIRED

    assert _dispatch(dispatcher, message) is DispatchOutcome.SKIPPED
    assert store.finished == [(message.id, Status.EXPIRED)]
    assert provider.calls == []


def test_an_expired_message_is_told_as_message_expired(store: InMemoryStore, clock: ManualClock) -> None:
    message = _queued(store, clock, valid_for=60)
    clock.advance(61)
    before = store.messages[message.id]
    _dispatch(_dispatcher(store, clock, _http()), message)
    after = store.messages[message.id]
    keys = {"pk": to_item(after, None)["pk"], "sk": to_item(after, None)["sk"]}
    record = {
        "eventName": "MODIFY",
        "dynamodb": {
            "Keys": keys,
            "NewImage": to_item(after, None),
            "OldImage": to_item(before, None),
            "SequenceNumber": "7",
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }

    told = change_of(record)

    assert STATUS_EVENTS[Status.EXPIRED] is EventType.EXPIRED
    assert EventType.EXPIRED.value == "message.expired"
    assert isinstance(told, Change)
    assert told.type is EventType.EXPIRED
    assert told.message.status is Status.EXPIRED
    assert told.message.expires_at == message.expires_at


# ---------------------------------------------------------------------------- retries
def test_a_transient_failure_whose_retry_would_come_after_the_expiry_ends_expired_not_failed(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, valid_for=1)  # any backoff (at least 1 s) ends after it
    provider = _http(script=[SERVER_ERROR])

    outcome = _dispatch(_dispatcher(store, clock, provider), message)

    assert outcome is DispatchOutcome.EXPIRED  # not a RetryLater: not queued again
    assert provider.calls == [message.id]
    stored = _assert_expired(store, message)
    assert stored.error is not None
    assert "provider_unavailable" in stored.error.message  # what stopped it, named
    assert [(a.provider, a.outcome) for a in stored.provider_attempts] == [("http", AttemptOutcome.UNKNOWN)]


def test_a_retry_that_comes_back_after_the_expiry_is_ended_expired_at_its_claim(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, valid_for=600)
    provider = _http(script=[SERVER_ERROR])
    dispatcher = _dispatcher(store, clock, provider)
    retry_in = _dispatch(dispatcher, message)
    assert isinstance(retry_in, int)
    assert store.messages[message.id].status is Status.QUEUED
    clock.advance(601)  # the record came back late (the queue, the outbox)

    assert _dispatch(dispatcher, message) is DispatchOutcome.EXPIRED
    assert provider.calls == [message.id]  # the first attempt only
    _assert_expired(store, message)


def test_throttling_whose_next_try_would_come_after_the_expiry_ends_expired_not_failed(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, valid_for=1)
    provider = _http(script=[THROTTLED])

    assert _dispatch(_dispatcher(store, clock, provider), message) is DispatchOutcome.EXPIRED
    stored = _assert_expired(store, message)
    assert stored.error is not None
    assert "provider_throttled" in stored.error.message


def test_a_message_throttled_until_its_expiry_ends_expired_within_its_validity_never_failed(
    store: InMemoryStore, clock: ManualClock
) -> None:
    valid_for = 20 * 60  # within throttling's hour: only the expiry ends its retries
    message = _queued(store, clock, valid_for=valid_for)
    provider = _http(script=[THROTTLED] * 1000)
    dispatcher = _dispatcher(store, clock, provider)
    started = clock.now

    outcomes: list[DispatchOutcome | int] = []
    while not outcomes or isinstance(outcomes[-1], int):
        outcomes.append(_dispatch(dispatcher, message))
        if isinstance(outcomes[-1], int):
            clock.advance(outcomes[-1])

    assert outcomes[-1] is DispatchOutcome.EXPIRED
    assert clock.now - started < timedelta(seconds=valid_for)  # ended before, not retried past it
    assert len(provider.calls) == len(outcomes)  # each claim called once while it was valid
    _assert_expired(store, message)


def test_a_provider_that_did_not_accept_after_the_expiry_passed_hands_it_to_no_next_provider(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, valid_for=5)
    first = FakeProvider("twilio", script=[REFUSED])
    first.during_call = lambda: clock.advance(6)  # the refusal came once its validity had ended
    second = _http()

    outcome = _dispatch(_dispatcher(store, clock, first, second), message)

    assert outcome is DispatchOutcome.EXPIRED
    assert (first.calls, second.calls) == ([message.id], [])
    stored = _assert_expired(store, message)
    assert [(a.provider, a.outcome) for a in stored.provider_attempts] == [
        ("twilio", AttemptOutcome.NOT_ACCEPTED)
    ]


def test_a_provider_that_did_not_accept_while_still_valid_fails_over_as_before(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, valid_for=60)
    first = FakeProvider("twilio", script=[REFUSED])
    second = _http()

    assert _dispatch(_dispatcher(store, clock, first, second), message) is DispatchOutcome.SENT
    assert second.taken == [message.id]


# ---------------------------------------------------------------------------- lost answers
def test_a_lost_answer_near_the_expiry_stays_unknown_and_keeps_its_lock(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, valid_for=1)
    provider = FakeProvider("sns", script=[TIMEOUT])

    outcome = _dispatch(_dispatcher(store, clock, provider), message)

    assert outcome is DispatchOutcome.UNKNOWN
    stored = store.messages[message.id]
    assert stored.status is Status.UNKNOWN
    assert stored.error is not None
    assert stored.error.code == "provider_timeout"
    assert message.id not in store.released


def test_a_lost_answer_asked_after_the_expiry_is_sent_when_the_provider_took_it(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, valid_for=5)
    twilio = AskableFake("twilio", script=[TIMEOUT], takes_on_failure=True)
    dispatcher = _dispatcher(store, clock, twilio)
    ask_in = _dispatch(dispatcher, message)
    assert isinstance(ask_in, int)
    clock.advance(ask_in)  # past the expiry: asked all the same

    assert _dispatch(dispatcher, message) is DispatchOutcome.SENT
    assert twilio.calls == [message.id]
    assert store.messages[message.id].status is Status.SENT


def test_a_lost_answer_asked_after_the_expiry_ends_expired_when_the_provider_had_not_taken_it(
    store: InMemoryStore, clock: ManualClock
) -> None:
    message = _queued(store, clock, valid_for=5)
    twilio = AskableFake("twilio", script=[TIMEOUT])
    dispatcher = _dispatcher(store, clock, twilio)
    ask_in = _dispatch(dispatcher, message)
    assert isinstance(ask_in, int)
    clock.advance(ask_in)

    assert _dispatch(dispatcher, message) is DispatchOutcome.EXPIRED
    assert twilio.calls == [message.id]  # asked, never called again
    _assert_expired(store, message)


# ---------------------------------------------------------------------------- the time left
@pytest.mark.parametrize(
    ("left", "seconds"),
    [(90.7, 90), (36_000.0, 36_000), (0.4, 1), (-3.0, 1)],
    ids=["rounded down", "whole", "under a second", "already past"],
)
def test_the_time_left_is_whole_seconds_rounded_down_and_at_least_one(left: float, seconds: int) -> None:
    message = replace(sms(), expires_at=TWILIO_NOW + timedelta(seconds=left))

    assert seconds_left(message, TWILIO_NOW) == seconds


def test_a_message_without_an_expiry_has_no_time_left_to_give() -> None:
    assert seconds_left(sms(), TWILIO_NOW) is None


def _twilio_form(expires_in: float | None) -> dict[str, list[str]]:
    opener = FakeOpener([answering({"sid": SID})])
    provider = TwilioProvider(
        CREDENTIALS,
        base_url=BASE_URL,
        sender=SENDER,
        status_callback_url=CALLBACK_URL,
        timeout_seconds=5.0,
        visibility_seconds=10.0,
        opener=opener,
        clock=lambda: TWILIO_NOW,
    )
    expires_at = TWILIO_NOW + timedelta(seconds=expires_in) if expires_in is not None else None
    assert provider.send(replace(sms(), expires_at=expires_at)) == SID
    return opener.seen[0].form


@pytest.mark.parametrize(
    ("expires_in", "period"),
    [(600.9, "600"), (36_000.0, "36000"), (0.2, "1")],
    ids=["ten minutes", "twilio's most", "under a second"],
)
def test_twilio_is_given_the_time_left_as_its_validity_period(expires_in: float, period: str) -> None:
    assert _twilio_form(expires_in)["ValidityPeriod"] == [period]


@pytest.mark.parametrize("expires_in", [36_001.0, None], ids=["more than ten hours", "no expiry"])
def test_twilio_is_given_no_validity_period_beyond_its_range_or_without_an_expiry(
    expires_in: float | None,
) -> None:
    assert "ValidityPeriod" not in _twilio_form(expires_in)


@pytest.mark.parametrize(
    ("expires_in", "ttl"),
    [(600.9, 600), (3.0, 5), (4 * 86_400.0, 259_200), (None, 259_200)],
    ids=["ten minutes", "under aws's least", "over aws's most", "no expiry"],
)
def test_sms_v2_is_given_the_time_left_as_its_time_to_live(expires_in: float | None, ttl: int) -> None:
    message = replace(
        sms_message(),
        expires_at=TWILIO_NOW + timedelta(seconds=expires_in) if expires_in is not None else None,
    )
    sms_v2 = client("pinpoint-sms-voice-v2")
    provider = SmsV2Provider(sms_v2, clock=lambda: TWILIO_NOW)
    with Stubber(sms_v2) as stubber:
        stubber.add_response(
            "send_text_message",
            {"MessageId": "m-1"},
            expected_params={
                "DestinationPhoneNumber": message.to,
                "MessageBody": message.body,
                "MessageType": "TRANSACTIONAL",
                "TimeToLive": ttl,
                "Context": {"sendonce_message_id": message.id},
            },
        )
        assert provider.send(message) == "m-1"
        stubber.assert_no_pending_responses()


@dataclass
class RecordingOpener:
    requests: list[Any] = field(default_factory=list)

    def open(self, request: Any, timeout: float) -> Any:
        self.requests.append(request)
        return answering({"id": "prov_1"})(request)


@pytest.mark.parametrize("expires", [True, False], ids=["with an expiry", "without"])
def test_the_http_provider_is_given_the_expiry_as_rfc_3339_only_when_there_is_one(expires: bool) -> None:
    expires_at = TWILIO_NOW + timedelta(minutes=10) if expires else None
    opener = RecordingOpener()

    HttpProvider("http://provider.test", "token", 5.0, opener=opener).send(
        replace(sms(), expires_at=expires_at)
    )

    payload = json.loads(opener.requests[0].data)
    if expires_at is not None:
        assert payload["expiresAt"] == rfc3339(expires_at) == "2026-11-30T12:10:00.000Z"
    else:
        assert "expiresAt" not in payload


# ---------------------------------------------------------------------------- the local sandbox
def test_the_sandboxs_http_provider_records_the_expiry_it_was_given() -> None:
    log = DeliveryLog()
    provider = SandboxHttpProvider(log, lambda: "t0k")
    body = {"messageId": "m1", "channel": "sms", "to": "+15550100001", "body": "hi"}

    provider.send("Bearer t0k", "m1", json.dumps({**body, "expiresAt": "2026-11-30T12:10:00.000Z"}).encode())
    provider.send("Bearer t0k", "m2", json.dumps({**body, "messageId": "m2"}).encode())

    first, second = log.all()
    assert first["expiresAt"] == "2026-11-30T12:10:00.000Z"
    assert "expiresAt" not in second


def test_the_sandboxs_twilio_records_the_validity_period_it_was_given() -> None:
    log = DeliveryLog()
    credentials = SandboxCredentials("AC" + "0" * 32, "auth-token-for-tests")
    twilio = SandboxTwilio(log, FaultBoard(), lambda: credentials)
    auth = (
        "Basic " + base64.b64encode(f"{credentials.account_sid}:{credentials.auth_token}".encode()).decode()
    )
    form = {"To": ["+15550100001"], "Body": ["hi"], "From": ["+15005550006"]}

    assert twilio.create(auth, credentials.account_sid, {**form, "ValidityPeriod": ["600"]}).status == 201
    assert twilio.create(auth, credentials.account_sid, form).status == 201

    first, second = log.all()
    assert first["validityPeriod"] == 600
    assert "validityPeriod" not in second
