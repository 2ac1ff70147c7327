"""What a receiver gets: the payload, its Standard Webhooks signature, and when it is tried again.

- The payload is `{"type", "timestamp", "data": {"message", "sequence"}}`, the same bytes on every
  attempt, and the event's id is its `webhook-id`.
- Signatures are the `standardwebhooks` package's: `Webhook(secret).verify` accepts a delivery;
  while a secret is rotated a delivery carries one signature per live secret, and each secret alone
  verifies it; after the overlap only the new one signs. At most MAX_REPLACED_SECRETS replaced
  secrets sign at once: the rotation past them waits for the oldest to stop.
- The retry schedule: the first attempt at once, one after each delay (±10% jitter, at least a
  second), and after the last the delivery is `failed`.
"""

from __future__ import annotations

import base64
import itertools
import json
import sys
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sendonce.api.routers.webhooks import EventDelivery, EventModel, WebhookEndpointModel
from sendonce.api.shapes import message_shape, to_json
from sendonce.messages.model import Channel, Message, MessageFailure, Status
from sendonce.status_webhooks.delivery import (
    DEFAULT_RETRY_SCHEDULE,
    JITTER,
    DeliveryOutcome,
    EndpointAnswer,
    RetryLater,
    WebhookDeliverer,
    body_of,
    parse_schedule,
)
from sendonce.status_webhooks.model import (
    Delivery,
    DeliveryStatus,
    Endpoint,
    Event,
    SigningSecret,
    new_secret,
)
from sendonce.status_webhooks.ports import DeliveryTask
from sendonce.status_webhooks.rules import (
    MAX_REPLACED_SECRETS,
    ROTATION_OVERLAP,
    EventType,
)
from sendonce.status_webhooks.signing import signed_headers
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.unit.unit_fakes import T0, FakeDeliveryQueue, InMemoryWebhookStore, ManualClock

WS = "ws_1"
EVENT_ID = "evt_01KDVDNA00QV9D1V5ZMBF8DBMW"
# The receiver's library checks the timestamp against its own clock: sign with the real one.
NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture(autouse=True)
def _now_is_the_tests_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A receiver's library checks `webhook-timestamp` against its own clock (5 minutes either way):
    the deliveries are signed at the time each test runs, not when the module was collected."""
    monkeypatch.setattr(sys.modules[__name__], "NOW", datetime.now(UTC).replace(microsecond=0))


def message(status: Status = Status.SENT) -> Message:
    return Message(
        id="msg_01KDVDNA00QV9D1V5ZMBF8DBMW",
        workspace_id=WS,
        channel=Channel("email"),
        to="ada@example.com",
        subject="Über «quotes»",
        body="Hello, 世界",
        status=status,
        created_at=T0,
        updated_at=T0 + timedelta(seconds=2),
        metadata={"customer": "c_42", "order": "A-17"},
        idempotency_key="order-A-17",
        attempts=1,
        error=MessageFailure("x", "y") if status is Status.FAILED else None,
    )


def event(sequence: int | None = 2, deliveries: tuple[Delivery, ...] = ()) -> Event:
    return Event(
        id=EVENT_ID,
        workspace_id=WS,
        message_id=message().id,
        type=EventType.SENT if sequence is not None else EventType.DUPLICATE_BLOCKED,
        timestamp=T0 + timedelta(seconds=2),
        message=message_shape(message()),
        sequence=sequence,
        deliveries=deliveries,
    )


def endpoint(*secrets: SigningSecret) -> Endpoint:
    return Endpoint(
        id="whep_1",
        workspace_id=WS,
        url="https://hooks.example.com/in",
        event_types=None,
        description=None,
        created_at=T0,
        secrets=secrets or (SigningSecret(new_secret()),),
    )


# ---------------------------------------------------------------------------- the payload
def test_the_payload_is_type_timestamp_and_the_message_with_its_sequence() -> None:
    assert event().payload() == {
        "type": "message.sent",
        "timestamp": "2026-01-01T12:00:02.000Z",
        "data": {"message": message_shape(message()), "sequence": 2},
    }


def test_a_caught_duplicates_payload_has_a_null_sequence() -> None:
    payload = json.loads(body_of(event(sequence=None)))

    assert payload["type"] == "message.duplicate_blocked"
    assert payload["data"]["sequence"] is None
    assert payload["data"]["message"]["id"] == message().id


def test_the_body_is_compact_utf8_json_and_the_same_bytes_every_time() -> None:
    body = body_of(event())

    assert body == body_of(event())
    assert json.loads(body) == event().payload()
    assert "世界" in body
    assert "\\u" not in body
    assert ", " not in body.replace("Hello, 世界", "")


def test_the_api_shows_the_event_as_its_payload_with_its_id_and_deliveries() -> None:
    delivery = Delivery("whep_1", DeliveryStatus.FAILED, 8, T0, 503)

    shown = EventModel.of(event(deliveries=(delivery,))).model_dump(mode="json")

    assert shown == {
        "id": EVENT_ID,
        **event().payload(),
        "deliveries": [
            {
                "endpointId": "whep_1",
                "status": "failed",
                "attempts": 8,
                "lastAttemptAt": "2026-01-01T12:00:00.000Z",
                "lastResponseStatus": 503,
            }
        ],
    }
    assert EventDelivery.of(Delivery("whep_2")).model_dump(mode="json") == {
        "endpointId": "whep_2",
        "status": "pending",
        "attempts": 0,
        "lastAttemptAt": None,
        "lastResponseStatus": None,
    }


# ---------------------------------------------------------------------------- signing
def test_a_new_secret_is_whsec_and_24_random_bytes() -> None:
    secret = new_secret()

    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 24
    assert new_secret() != secret


def test_a_signed_delivery_verifies_with_the_standardwebhooks_library() -> None:
    secret = new_secret()
    body = body_of(event())

    headers = signed_headers(EVENT_ID, NOW, body, [secret])

    assert headers["webhook-id"] == EVENT_ID
    assert headers["webhook-timestamp"] == str(int(NOW.timestamp()))
    assert headers["content-type"] == "application/json"
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(body, headers) == event().payload()


def test_a_signature_does_not_verify_another_body_id_or_secret() -> None:
    secret = new_secret()
    body = body_of(event())
    headers = signed_headers(EVENT_ID, NOW, body, [secret])

    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace("sent", "failed"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, {**headers, "webhook-id": "evt_other"})
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)


def test_with_two_secrets_each_one_alone_verifies() -> None:
    old, new = new_secret(), new_secret()
    body = body_of(event())

    headers = signed_headers(EVENT_ID, NOW, body, [new, old])

    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(old).verify(body, headers) == event().payload()
    assert Webhook(new).verify(body, headers) == event().payload()
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)


def test_a_delivery_needs_a_secret() -> None:
    with pytest.raises(ValueError, match="secret"):
        signed_headers(EVENT_ID, NOW, "{}", [])


def test_a_rotation_signs_with_both_secrets_for_24_hours_then_with_the_new_one() -> None:
    old = SigningSecret(new_secret())
    rotated = endpoint(old).rotated(new_secret(), T0)

    assert rotated.secrets[0].expires_at is None  # the current one first
    assert rotated.secrets[1] == SigningSecret(old.value, T0 + ROTATION_OVERLAP)
    assert rotated.signing_secrets(T0) == (rotated.secrets[0].value, old.value)
    assert rotated.signing_secrets(T0 + ROTATION_OVERLAP - timedelta(seconds=1)) == (
        rotated.secrets[0].value,
        old.value,
    )
    assert rotated.signing_secrets(T0 + ROTATION_OVERLAP) == (rotated.secrets[0].value,)


def test_a_second_rotation_keeps_the_first_old_secrets_deadline_and_drops_expired_ones() -> None:
    first = endpoint(SigningSecret("whsec_first")).rotated("whsec_second", T0)
    second = first.rotated("whsec_third", T0 + timedelta(hours=1))

    assert [(s.value, s.expires_at) for s in second.secrets] == [
        ("whsec_third", None),
        ("whsec_second", T0 + timedelta(hours=1) + ROTATION_OVERLAP),
        ("whsec_first", T0 + ROTATION_OVERLAP),  # not extended by the second rotation
    ]
    later = second.rotated("whsec_fourth", T0 + ROTATION_OVERLAP + timedelta(hours=2))
    assert [s.value for s in later.secrets] == ["whsec_fourth", "whsec_third"]


def test_a_rotation_keeps_the_version_it_was_made_from_for_the_store_to_move_on() -> None:
    made = endpoint()

    assert made.version == 1
    assert made.rotated(new_secret(), T0).version == 1


def test_rotations_past_the_cap_wait_until_the_oldest_replaced_secret_stops_signing() -> None:
    rotated = endpoint(SigningSecret("whsec_0"))
    for n in range(1, MAX_REPLACED_SECRETS + 1):
        assert rotated.rotation_refused_until(T0 + timedelta(minutes=n)) is None
        rotated = rotated.rotated(f"whsec_{n}", T0 + timedelta(minutes=n))
    full = T0 + timedelta(minutes=MAX_REPLACED_SECRETS + 1)
    oldest_stops = T0 + timedelta(minutes=1) + ROTATION_OVERLAP  # whsec_0's, replaced first

    assert len(rotated.signing_secrets(full)) == MAX_REPLACED_SECRETS + 1
    assert rotated.rotation_refused_until(full) == oldest_stops
    assert rotated.rotation_refused_until(oldest_stops - timedelta(seconds=1)) == oldest_stops
    assert rotated.rotation_refused_until(oldest_stops) is None  # whsec_0 no longer signs
    again = rotated.rotated("whsec_next", oldest_stops)
    assert len(again.signing_secrets(oldest_stops)) == MAX_REPLACED_SECRETS + 1
    assert "whsec_0" not in again.signing_secrets(oldest_stops)


def test_an_endpoint_shows_its_secret_only_when_asked() -> None:
    rotated = endpoint(SigningSecret("whsec_current"), SigningSecret("whsec_old", T0))

    shown = to_json(WebhookEndpointModel.of(rotated))

    assert '"secret"' not in shown
    assert "whsec_" not in shown
    with_secret = WebhookEndpointModel.of(endpoint(SigningSecret("whsec_current")), with_secret=True)
    assert with_secret.model_dump(mode="json")["secret"] == "whsec_current"


# ---------------------------------------------------------------------------- the retry schedule
def test_the_schedule_reads_comma_separated_seconds() -> None:
    assert parse_schedule("5,300,1800,7200,18000,36000,36000") == DEFAULT_RETRY_SCHEDULE
    assert parse_schedule(" 0, 0 ,0,") == (0, 0, 0)
    assert parse_schedule("") == ()
    with pytest.raises(ValueError, match="negative"):
        parse_schedule("5,-1")
    with pytest.raises(ValueError):  # noqa: PT011 (int()'s own message)
        parse_schedule("5,soon")


def test_the_default_schedule_retries_for_at_least_24_hours() -> None:
    assert sum(DEFAULT_RETRY_SCHEDULE) >= 24 * 60 * 60
    assert all(a <= b for a, b in itertools.pairwise(DEFAULT_RETRY_SCHEDULE))
    assert max(DEFAULT_RETRY_SCHEDULE) * (1 + JITTER) <= 12 * 60 * 60  # SQS's longest visibility


def failing_deliverer(
    schedule: tuple[int, ...], jitter: object = None
) -> tuple[WebhookDeliverer, InMemoryWebhookStore, list[bytes]]:
    store = InMemoryWebhookStore()
    store.add_endpoint(endpoint(), limit=10)
    store.event_items[(WS, EVENT_ID)] = event(deliveries=(Delivery("whep_1"),))
    sent: list[bytes] = []

    def send(url: str, body: bytes, headers: object, timeout: float) -> EndpointAnswer:
        sent.append(body)
        return EndpointAnswer(503)

    deliverer = WebhookDeliverer(
        events=store,
        endpoints=store,
        send=send,
        slow_lane=FakeDeliveryQueue(),
        schedule=schedule,
        clock=ManualClock(),
    )
    if jitter is not None:
        deliverer.jitter = jitter  # type: ignore[assignment]
    return deliverer, store, sent


def run_until_done(deliverer: WebhookDeliverer, task: DeliveryTask) -> tuple[list[int], DeliveryOutcome]:
    delays: list[int] = []
    while True:
        try:
            return delays, deliverer.deliver(task)
        except RetryLater as retry:
            delays.append(retry.seconds)


def test_a_failing_delivery_is_tried_once_at_once_then_after_each_delay_then_failed() -> None:
    deliverer, store, sent = failing_deliverer(DEFAULT_RETRY_SCHEDULE, jitter=lambda delay: delay)

    delays, outcome = run_until_done(deliverer, DeliveryTask(WS, EVENT_ID, "whep_1"))

    assert delays == list(DEFAULT_RETRY_SCHEDULE)
    assert outcome is DeliveryOutcome.FAILED
    assert len(sent) == len(DEFAULT_RETRY_SCHEDULE) + 1
    assert len(set(sent)) == 1  # the same bytes every attempt
    delivery = store.event_items[(WS, EVENT_ID)].delivery("whep_1")
    assert delivery is not None
    assert (delivery.status, delivery.attempts, delivery.last_response_status) == (
        DeliveryStatus.FAILED,
        8,
        503,
    )


def test_an_empty_schedule_is_one_attempt() -> None:
    deliverer, _store, sent = failing_deliverer(())

    assert run_until_done(deliverer, DeliveryTask(WS, EVENT_ID, "whep_1")) == ([], DeliveryOutcome.FAILED)
    assert len(sent) == 1


@given(delay=st.integers(min_value=0, max_value=43_200))
def test_jitter_stays_within_ten_percent_and_at_least_a_second(delay: int) -> None:
    deliverer, _, _ = failing_deliverer((delay,))

    with pytest.raises(RetryLater) as retry:
        deliverer.deliver(DeliveryTask(WS, EVENT_ID, "whep_1"))

    low, high = max(1, round(delay * (1 - JITTER))), max(1, round(delay * (1 + JITTER)))
    assert low <= retry.value.seconds <= high


def test_jitter_spreads_the_delays() -> None:
    drawn = set()
    for _ in range(30):
        deliverer, _, _ = failing_deliverer((1800,))
        with pytest.raises(RetryLater) as retry:
            deliverer.deliver(DeliveryTask(WS, EVENT_ID, "whep_1"))
        drawn.add(retry.value.seconds)
    assert len(drawn) > 5
    assert min(drawn) >= 1620
    assert max(drawn) <= 1980
