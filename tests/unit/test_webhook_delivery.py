"""One delivery of one event to one endpoint: signed, recorded, retried on schedule, never again once done.

- A 2xx is `succeeded`; anything else (no answer included) is recorded and tried again later, and
  every attempt is on the event. A redelivery starts a schedule of its own.
- Nothing is sent for a deleted endpoint, an event that is gone, a delivery that already succeeded
  or ended `failed`.
- The delivery function's batches: a retry postpones its record (ChangeMessageVisibility) and
  reports it failed, so SQS brings it back then; an unreadable record is reported, not retried forever.
- The queue's records name one delivery each, and a refused enqueue is `QueueUnavailable`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sendonce.adapters.sqs_webhook_queue import SqsDeliveryQueue, parse_task, task_body
from sendonce.errors import QueueUnavailable, RetryLater
from sendonce.webhooks.delivery import Answer, Outcome, WebhookDeliverer, body_of
from sendonce.webhooks.dependencies import DeliveryDependencies
from sendonce.webhooks.handlers import handle_delivery_batch
from sendonce.webhooks.model import (
    ROTATION_OVERLAP,
    Delivery,
    DeliveryStatus,
    Endpoint,
    Event,
    EventType,
    SigningSecret,
    new_secret,
)
from sendonce.webhooks.ports import Attempt, DeliveryTask
from standardwebhooks.webhooks import Webhook

from tests.unit.unit_fakes import InMemoryWebhookStore, ManualClock

WS = "ws_1"
EVENT_ID = "evt_01KDVDNA00QV9D1V5ZMBF8DBMW"
SECRET = new_secret()
# The receiver's library checks the timestamp against its own clock: the deliverer's runs near it.
NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture(autouse=True)
def _now_is_the_tests_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A receiver's library checks `webhook-timestamp` against its own clock (5 minutes either way):
    the deliveries are signed at the time each test runs, not when the module was collected."""
    monkeypatch.setattr(sys.modules[__name__], "NOW", datetime.now(UTC).replace(microsecond=0))


@dataclass
class Receiver:
    """A Sender that records each call and answers from a script (default 200)."""

    answers: list[Answer] = field(default_factory=list)
    calls: list[tuple[str, bytes, dict[str, str]]] = field(default_factory=list)

    def __call__(self, url: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        self.calls.append((url, body, dict(headers)))
        return self.answers.pop(0) if self.answers else Answer(200)


def endpoint(endpoint_id: str = "whep_1", secrets: tuple[SigningSecret, ...] | None = None) -> Endpoint:
    return Endpoint(
        id=endpoint_id,
        workspace_id=WS,
        url=f"https://hooks.example.com/{endpoint_id}",
        event_types=None,
        description=None,
        created_at=NOW,
        secrets=secrets or (SigningSecret(SECRET),),
    )


def event(*deliveries: Delivery) -> Event:
    return Event(
        id=EVENT_ID,
        workspace_id=WS,
        message_id="msg_01KDVDNA00QV9D1V5ZMBF8DBMW",
        type=EventType.SENT,
        timestamp=NOW,
        message={"id": "msg_01KDVDNA00QV9D1V5ZMBF8DBMW", "status": "sent", "metadata": {"k": "v"}},
        sequence=2,
        deliveries=deliveries or (Delivery("whep_1"),),
    )


@dataclass
class Setup:
    store: InMemoryWebhookStore
    receiver: Receiver
    clock: ManualClock
    deliverer: WebhookDeliverer

    def delivery(self, endpoint_id: str = "whep_1") -> Delivery:
        found = self.store.event_items[(WS, EVENT_ID)].delivery(endpoint_id)
        assert found is not None
        return found


def setup(*answers: Answer, schedule: tuple[int, ...] = (5, 300, 1800), stored: Event | None = None) -> Setup:
    store = InMemoryWebhookStore()
    store.add_endpoint(endpoint(), limit=10)
    store.event_items[(WS, EVENT_ID)] = stored or event()
    receiver, clock = Receiver(list(answers)), ManualClock(NOW)
    deliverer = WebhookDeliverer(
        events=store, endpoints=store, send=receiver, schedule=schedule, clock=clock, jitter=lambda d: d
    )
    return Setup(store, receiver, clock, deliverer)


TASK = DeliveryTask(WS, EVENT_ID, "whep_1")


# ---------------------------------------------------------------------------- WebhookDeliverer
def test_a_2xx_is_a_success_recorded_on_the_event() -> None:
    s = setup(Answer(204))

    assert s.deliverer.deliver(TASK) is Outcome.SUCCEEDED

    assert s.delivery() == Delivery("whep_1", DeliveryStatus.SUCCEEDED, 1, NOW, 204)
    [(url, body, headers)] = s.receiver.calls
    assert url == "https://hooks.example.com/whep_1"
    assert body == body_of(event()).encode()
    assert headers["webhook-id"] == EVENT_ID
    assert Webhook(SECRET).verify(body, headers) == event().payload()


@pytest.mark.parametrize(
    "answer", [Answer(500), Answer(302), Answer(199), Answer(None, "timed out"), Answer(410)]
)
def test_anything_but_a_2xx_is_recorded_and_tried_again_later(answer: Answer) -> None:
    s = setup(answer)

    with pytest.raises(RetryLater) as retry:
        s.deliverer.deliver(TASK)

    assert retry.value.seconds == 5
    assert s.delivery() == Delivery("whep_1", DeliveryStatus.PENDING, 1, NOW, answer.status)


def test_failures_then_a_success_record_every_attempt_with_the_same_id_and_body() -> None:
    s = setup(Answer(500), Answer(None, "refused"), Answer(200))
    delays = []
    for _ in range(2):
        with pytest.raises(RetryLater) as retry:
            s.deliverer.deliver(TASK)
        delays.append(retry.value.seconds)

    assert s.deliverer.deliver(TASK) is Outcome.SUCCEEDED

    assert delays == [5, 300]
    assert s.delivery() == Delivery("whep_1", DeliveryStatus.SUCCEEDED, 3, NOW, 200)
    assert {c[2]["webhook-id"] for c in s.receiver.calls} == {EVENT_ID}
    assert len({c[1] for c in s.receiver.calls}) == 1
    for _, body, headers in s.receiver.calls:
        assert Webhook(SECRET).verify(body, headers)


def test_after_the_last_delay_a_failure_ends_the_delivery_failed() -> None:
    s = setup(*[Answer(503)] * 4)
    for _ in range(3):
        with pytest.raises(RetryLater):
            s.deliverer.deliver(TASK)

    assert s.deliverer.deliver(TASK) is Outcome.FAILED
    assert s.delivery() == Delivery("whep_1", DeliveryStatus.FAILED, 4, NOW, 503)

    # SQS brings a copy of the record back: a failed delivery is not tried again.
    assert s.deliverer.deliver(TASK) is Outcome.DROPPED
    assert len(s.receiver.calls) == 4


def test_a_redelivery_starts_a_fresh_schedule() -> None:
    s = setup(stored=event(Delivery("whep_1", DeliveryStatus.PENDING, 4, NOW, 503)), schedule=(5, 300))
    redelivery = DeliveryTask(WS, EVENT_ID, "whep_1", base_attempts=4)
    s.receiver.answers = [Answer(500), Answer(500), Answer(500)]

    delays = []
    for _ in range(2):
        with pytest.raises(RetryLater) as retry:
            s.deliverer.deliver(redelivery)
        delays.append(retry.value.seconds)
    outcome = s.deliverer.deliver(redelivery)

    assert delays == [5, 300]
    assert outcome is Outcome.FAILED
    assert s.delivery().attempts == 7  # every attempt, the earlier ones included


def test_without_its_base_the_same_delivery_would_have_ended_at_once() -> None:
    s = setup(stored=event(Delivery("whep_1", DeliveryStatus.PENDING, 4, NOW, 503)), schedule=(5, 300))
    s.receiver.answers = [Answer(500)]

    assert s.deliverer.deliver(TASK) is Outcome.FAILED


def test_a_deleted_endpoint_gets_nothing_and_its_delivery_ends() -> None:
    s = setup()
    s.store.delete_endpoint(WS, "whep_1")

    assert s.deliverer.deliver(TASK) is Outcome.DROPPED

    assert s.receiver.calls == []
    assert s.delivery().status is DeliveryStatus.FAILED
    assert s.delivery().attempts == 0  # nothing was sent: no attempt is counted
    assert s.delivery().last_attempt_at is None


def test_a_delivery_that_succeeded_is_not_sent_again() -> None:
    s = setup(stored=event(Delivery("whep_1", DeliveryStatus.SUCCEEDED, 1, NOW, 200)))

    assert s.deliverer.deliver(TASK) is Outcome.DROPPED

    assert s.receiver.calls == []
    assert s.delivery() == Delivery("whep_1", DeliveryStatus.SUCCEEDED, 1, NOW, 200)


def test_a_copy_of_a_task_after_its_success_sends_nothing() -> None:
    s = setup()
    assert s.deliverer.deliver(TASK) is Outcome.SUCCEEDED

    assert s.deliverer.deliver(TASK) is Outcome.DROPPED
    assert len(s.receiver.calls) == 1


@pytest.mark.parametrize(
    "task",
    [
        DeliveryTask(WS, "evt_01KDVDNA00QV9D1V5ZMBF8DBXX", "whep_1"),  # expired or never written
        DeliveryTask("ws_other", EVENT_ID, "whep_1"),  # another workspace's
        DeliveryTask(WS, EVENT_ID, "whep_not_on_the_event"),
    ],
    ids=["no such event", "another workspace", "not a delivery of the event"],
)
def test_a_task_naming_no_delivery_sends_nothing(task: DeliveryTask) -> None:
    s = setup()

    assert s.deliverer.deliver(task) is Outcome.DROPPED
    assert s.receiver.calls == []
    assert s.delivery() == Delivery("whep_1")


def test_a_failure_never_overrides_a_concurrent_copys_success() -> None:
    s = setup()

    def slow_and_failing(url: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        # Meanwhile another copy of the task got a 200 through.
        s.store.record_attempt(WS, EVENT_ID, "whep_1", Attempt(NOW, 200, succeeded=True, final=False))
        return Answer(500)

    s.deliverer.send = slow_and_failing
    with pytest.raises(RetryLater):
        s.deliverer.deliver(TASK)

    assert s.delivery().status is DeliveryStatus.SUCCEEDED
    assert s.delivery().attempts == 1  # the fake's rule, as the store's: the failure is not counted over it
    s.deliverer.send = s.receiver
    assert s.deliverer.deliver(TASK) is Outcome.DROPPED  # the retry finds it done
    assert s.receiver.calls == []


def test_while_a_secret_is_rotated_each_delivery_is_signed_with_both() -> None:
    old, new = new_secret(), new_secret()
    s = setup(Answer(500), Answer(200), schedule=(ROTATION_OVERLAP.seconds + 86_400,))
    s.store.replace_endpoint(endpoint(secrets=(SigningSecret(old),)).rotated(new, NOW))

    with pytest.raises(RetryLater):
        s.deliverer.deliver(TASK)
    s.clock.advance(ROTATION_OVERLAP.total_seconds())
    s.deliverer.deliver(TASK)

    (_, during_body, during), (_, _after_body, after) = s.receiver.calls
    assert len(during["webhook-signature"].split(" ")) == 2
    assert Webhook(old).verify(during_body, during)
    assert Webhook(new).verify(during_body, during)
    assert len(after["webhook-signature"].split(" ")) == 1
    assert after["webhook-timestamp"] == str(int((NOW + ROTATION_OVERLAP).timestamp()))


# ---------------------------------------------------------------------------- the delivery function's batches
@dataclass
class FakeRedelivery:
    postponed: list[tuple[str, int]] = field(default_factory=list)
    fail: bool = False

    def postpone(self, receipt_handle: str, seconds: int) -> None:
        if self.fail:
            raise RuntimeError("sqs is down")
        self.postponed.append((receipt_handle, seconds))


def sqs_event(*bodies: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": f"m{index}",
                "receiptHandle": f"rh{index}",
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:WebhookDeliveryQueue",
                "awsRegion": "us-east-1",
            }
            for index, body in enumerate(bodies)
        ]
    }


def test_a_delivered_record_is_done_and_a_retry_is_postponed_and_reported() -> None:
    s = setup(Answer(200), Answer(500))
    s.store.add_endpoint(endpoint("whep_2"), limit=10)
    s.store.event_items[(WS, EVENT_ID)] = event(Delivery("whep_1"), Delivery("whep_2"))
    redelivery = FakeRedelivery()
    dependencies = DeliveryDependencies(deliverer=s.deliverer, redelivery=redelivery)
    batch = sqs_event(task_body(TASK), task_body(DeliveryTask(WS, EVENT_ID, "whep_2")))

    answer = handle_delivery_batch(dependencies, batch)

    assert answer == {"batchItemFailures": [{"itemIdentifier": "m1"}]}
    assert redelivery.postponed == [("rh1", 5)]


def test_a_retry_whose_postponement_fails_is_still_reported() -> None:
    s = setup(Answer(500))
    dependencies = DeliveryDependencies(deliverer=s.deliverer, redelivery=FakeRedelivery(fail=True))

    answer = handle_delivery_batch(dependencies, sqs_event(task_body(TASK)))

    assert answer == {"batchItemFailures": [{"itemIdentifier": "m0"}]}


@pytest.mark.parametrize("body", ["", "nope", "{}", '{"workspaceId": 1, "eventId": "e", "endpointId": "p"}'])
def test_an_unreadable_record_is_reported_and_sends_nothing(body: str) -> None:
    s = setup()
    dependencies = DeliveryDependencies(deliverer=s.deliverer, redelivery=FakeRedelivery())

    answer = handle_delivery_batch(dependencies, sqs_event(body))

    assert answer == {"batchItemFailures": [{"itemIdentifier": "m0"}]}
    assert s.receiver.calls == []


def test_a_final_failure_is_done_with_its_record() -> None:
    s = setup(Answer(500), schedule=())
    dependencies = DeliveryDependencies(deliverer=s.deliverer, redelivery=FakeRedelivery())

    answer = handle_delivery_batch(dependencies, sqs_event(task_body(TASK)))

    assert answer == {"batchItemFailures": []}
    assert s.delivery().status is DeliveryStatus.FAILED


# ---------------------------------------------------------------------------- the queue's records
def test_a_task_body_names_one_delivery_and_reads_back() -> None:
    task = DeliveryTask(WS, EVENT_ID, "whep_1", base_attempts=3)

    assert json.loads(task_body(task)) == {
        "workspaceId": WS,
        "eventId": EVENT_ID,
        "endpointId": "whep_1",
        "baseAttempts": 3,
    }
    assert parse_task(task_body(task)) == task
    assert parse_task('{"workspaceId":"w","eventId":"e","endpointId":"p"}') == DeliveryTask("w", "e", "p", 0)


@pytest.mark.parametrize(
    "body",
    [
        "",
        "[]",
        "null",
        '{"workspaceId":"w","eventId":"e"}',
        '{"workspaceId":"w","eventId":"e","endpointId":null}',
        '{"workspaceId":"w","eventId":"e","endpointId":"p","baseAttempts":"x"}',
    ],
)
def test_a_body_that_names_no_delivery_is_refused(body: str) -> None:
    with pytest.raises(ValueError, match="does not name a delivery"):
        parse_task(body)


@dataclass
class FakeSqs:
    batches: list[list[dict[str, str]]] = field(default_factory=list)
    refuse: int = 0
    down: bool = False

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> dict[str, Any]:
        if self.down:
            raise ConnectionError("unreachable")
        self.batches.append(Entries)
        return {"Failed": [{"Id": e["Id"]} for e in Entries[: self.refuse]]}


def test_the_queue_sends_tasks_in_batches_of_ten() -> None:
    sqs = FakeSqs()
    tasks = [DeliveryTask(WS, EVENT_ID, f"whep_{n}") for n in range(23)]

    SqsDeliveryQueue(sqs, "https://queue/webhooks").enqueue(tasks)

    assert [len(b) for b in sqs.batches] == [10, 10, 3]
    assert [parse_task(e["MessageBody"]) for b in sqs.batches for e in b] == tasks


@pytest.mark.parametrize("sqs", [FakeSqs(refuse=1), FakeSqs(down=True)], ids=["refused", "unreachable"])
def test_a_task_the_queue_did_not_take_is_queue_unavailable(sqs: FakeSqs) -> None:
    with pytest.raises(QueueUnavailable):
        SqsDeliveryQueue(sqs, "https://queue/webhooks").enqueue([TASK])


def test_a_moment_after_now_is_still_now_for_the_signature() -> None:
    # The deliverer signs with the instant of the attempt, not the event's.
    s = setup(stored=event())
    s.clock.now = NOW + timedelta(seconds=90)
    s.deliverer.deliver(TASK)

    assert s.receiver.calls[0][2]["webhook-timestamp"] == str(int((NOW + timedelta(seconds=90)).timestamp()))
