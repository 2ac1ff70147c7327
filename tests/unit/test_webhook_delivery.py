"""One delivery of one event to one endpoint: signed, recorded, retried on schedule, never again once done.

- A 2xx is `succeeded`; anything else (no answer included) is recorded and tried again later, and
  every attempt is on the event. A redelivery starts a schedule of its own.
- Nothing is sent for a deleted endpoint, an event that is gone, a delivery that already succeeded
  or ended `failed`.
- The delivery function's batches: a retry postpones its record (ChangeMessageVisibility) and
  reports it failed, so SQS brings it back then; an unreadable record is reported, not retried forever.
- The queue's records name one delivery each, and a refused enqueue is `QueueUnavailable`.
- Two lanes (issue 27): the fast lane gives an endpoint 1 s; no answer within it (a timeout, not
  a refusal) flags the endpoint slow and moves the task to the slow lane's queue, its attempt not
  counted; a fast-lane task of a flagged endpoint moves without a call. The slow lane gives the
  full 15 s; a quick 2xx there takes the flag away, a slow answer keeps (renews) it. The flag is
  read with the endpoint: a healthy delivery makes no more store calls than before. A batch's
  records are delivered side by side, and a retry is postponed in its own lane's queue.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from msgspec.structs import replace
from sendonce.adapters.sqs_webhook_queue import SqsDeliveryQueue, parse_task, task_body
from sendonce.entrypoints.webhook_delivery import DeliveryDependencies, handle_delivery_batch, queue_name
from sendonce.errors import QueueUnavailable, RetryLater
from sendonce.status_webhooks.delivery import (
    FAST_LANE_PATIENCE_SECONDS,
    SLOW_LANE_SECONDS,
    DeliveryOutcome,
    EndpointAnswer,
    Lane,
    WebhookDeliverer,
    body_of,
)
from sendonce.status_webhooks.model import (
    Delivery,
    DeliveryStatus,
    Endpoint,
    Event,
    SigningSecret,
    new_secret,
)
from sendonce.status_webhooks.ports import Attempt, DeliveryTask
from sendonce.status_webhooks.rules import (
    ROTATION_OVERLAP,
    EventType,
)
from standardwebhooks.webhooks import Webhook

from tests.unit.unit_fakes import FakeDeliveryQueue, InMemoryWebhookStore, ManualClock

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


# What a sender answers for an endpoint that hangs: no answer within the timeout.
HANG = EndpointAnswer(None, "no answer within the timeout", timed_out=True)


@dataclass
class Stopwatch:
    """The deliverer's timer: moved on by the receiver, by as long as each answer takes."""

    now: float = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Receiver:
    """A Sender that records each call and answers from a script (default 200 at once); a scripted
    (answer, seconds) takes that long, and a hang takes the whole timeout it was given."""

    answers: list[EndpointAnswer | tuple[EndpointAnswer, float]] = field(default_factory=list)
    calls: list[tuple[str, bytes, dict[str, str]]] = field(default_factory=list)
    timeouts: list[float] = field(default_factory=list)
    stopwatch: Stopwatch = field(default_factory=Stopwatch)

    def __call__(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> EndpointAnswer:
        self.calls.append((url, body, dict(headers)))
        self.timeouts.append(timeout)
        scripted = self.answers.pop(0) if self.answers else EndpointAnswer(200)
        answer, took = scripted if isinstance(scripted, tuple) else (scripted, 0.01)
        self.stopwatch.now += timeout if answer.timed_out else min(took, timeout)
        return answer


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
    slow_lane: FakeDeliveryQueue

    def delivery(self, endpoint_id: str = "whep_1") -> Delivery:
        found = self.store.event_items[(WS, EVENT_ID)].delivery(endpoint_id)
        assert found is not None
        return found


def setup(
    *answers: EndpointAnswer, schedule: tuple[int, ...] = (5, 300, 1800), stored: Event | None = None
) -> Setup:
    store = InMemoryWebhookStore()
    store.add_endpoint(endpoint(), limit=10)
    store.event_items[(WS, EVENT_ID)] = stored or event()
    receiver, clock, slow_lane = Receiver(list(answers)), ManualClock(NOW), FakeDeliveryQueue()
    deliverer = WebhookDeliverer(
        events=store,
        endpoints=store,
        send=receiver,
        slow_lane=slow_lane,
        schedule=schedule,
        clock=clock,
        jitter=lambda d: d,
        timer=receiver.stopwatch,
    )
    return Setup(store, receiver, clock, deliverer, slow_lane)


TASK = DeliveryTask(WS, EVENT_ID, "whep_1")


# ---------------------------------------------------------------------------- WebhookDeliverer
def test_a_2xx_is_a_success_recorded_on_the_event() -> None:
    s = setup(EndpointAnswer(204))

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.SUCCEEDED

    assert s.delivery() == Delivery("whep_1", DeliveryStatus.SUCCEEDED, 1, NOW, 204)
    [(url, body, headers)] = s.receiver.calls
    assert url == "https://hooks.example.com/whep_1"
    assert body == body_of(event()).encode()
    assert headers["webhook-id"] == EVENT_ID
    assert Webhook(SECRET).verify(body, headers) == event().payload()


@pytest.mark.parametrize(
    "answer",
    [
        EndpointAnswer(500),
        EndpointAnswer(302),
        EndpointAnswer(199),
        EndpointAnswer(None, "timed out"),
        EndpointAnswer(410),
    ],
)
def test_anything_but_a_2xx_is_recorded_and_tried_again_later(answer: EndpointAnswer) -> None:
    s = setup(answer)

    with pytest.raises(RetryLater) as retry:
        s.deliverer.deliver(TASK)

    assert retry.value.seconds == 5
    assert s.delivery() == Delivery("whep_1", DeliveryStatus.PENDING, 1, NOW, answer.status)


def test_failures_then_a_success_record_every_attempt_with_the_same_id_and_body() -> None:
    s = setup(EndpointAnswer(500), EndpointAnswer(None, "refused"), EndpointAnswer(200))
    delays = []
    for _ in range(2):
        with pytest.raises(RetryLater) as retry:
            s.deliverer.deliver(TASK)
        delays.append(retry.value.seconds)

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.SUCCEEDED

    assert delays == [5, 300]
    assert s.delivery() == Delivery("whep_1", DeliveryStatus.SUCCEEDED, 3, NOW, 200)
    assert {c[2]["webhook-id"] for c in s.receiver.calls} == {EVENT_ID}
    assert len({c[1] for c in s.receiver.calls}) == 1
    for _, body, headers in s.receiver.calls:
        assert Webhook(SECRET).verify(body, headers)


def test_after_the_last_delay_a_failure_ends_the_delivery_failed() -> None:
    s = setup(*[EndpointAnswer(503)] * 4)
    for _ in range(3):
        with pytest.raises(RetryLater):
            s.deliverer.deliver(TASK)

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.FAILED
    assert s.delivery() == Delivery("whep_1", DeliveryStatus.FAILED, 4, NOW, 503)

    # SQS brings a copy of the record back: a failed delivery is not tried again.
    assert s.deliverer.deliver(TASK) is DeliveryOutcome.DROPPED
    assert len(s.receiver.calls) == 4


def test_a_redelivery_starts_a_fresh_schedule() -> None:
    s = setup(stored=event(Delivery("whep_1", DeliveryStatus.PENDING, 4, NOW, 503)), schedule=(5, 300))
    redelivery = DeliveryTask(WS, EVENT_ID, "whep_1", base_attempts=4)
    s.receiver.answers = [EndpointAnswer(500), EndpointAnswer(500), EndpointAnswer(500)]

    delays = []
    for _ in range(2):
        with pytest.raises(RetryLater) as retry:
            s.deliverer.deliver(redelivery)
        delays.append(retry.value.seconds)
    outcome = s.deliverer.deliver(redelivery)

    assert delays == [5, 300]
    assert outcome is DeliveryOutcome.FAILED
    assert s.delivery().attempts == 7  # every attempt, the earlier ones included


def test_without_its_base_the_same_delivery_would_have_ended_at_once() -> None:
    s = setup(stored=event(Delivery("whep_1", DeliveryStatus.PENDING, 4, NOW, 503)), schedule=(5, 300))
    s.receiver.answers = [EndpointAnswer(500)]

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.FAILED


def test_a_deleted_endpoint_gets_nothing_and_its_delivery_ends() -> None:
    s = setup()
    s.store.delete_endpoint(WS, "whep_1")

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.DROPPED

    assert s.receiver.calls == []
    assert s.delivery().status is DeliveryStatus.FAILED
    assert s.delivery().attempts == 0  # nothing was sent: no attempt is counted
    assert s.delivery().last_attempt_at is None


def test_a_delivery_that_succeeded_is_not_sent_again() -> None:
    s = setup(stored=event(Delivery("whep_1", DeliveryStatus.SUCCEEDED, 1, NOW, 200)))

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.DROPPED

    assert s.receiver.calls == []
    assert s.delivery() == Delivery("whep_1", DeliveryStatus.SUCCEEDED, 1, NOW, 200)


def test_a_copy_of_a_task_after_its_success_sends_nothing() -> None:
    s = setup()
    assert s.deliverer.deliver(TASK) is DeliveryOutcome.SUCCEEDED

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.DROPPED
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

    assert s.deliverer.deliver(task) is DeliveryOutcome.DROPPED
    assert s.receiver.calls == []
    assert s.delivery() == Delivery("whep_1")


def test_a_failure_never_overrides_a_concurrent_copys_success() -> None:
    s = setup()

    def slow_and_failing(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> EndpointAnswer:
        # Meanwhile another copy of the task got a 200 through.
        s.store.record_attempt(WS, EVENT_ID, "whep_1", Attempt(NOW, 200, succeeded=True, final=False))
        return EndpointAnswer(500)

    s.deliverer.send = slow_and_failing
    with pytest.raises(RetryLater):
        s.deliverer.deliver(TASK)

    assert s.delivery().status is DeliveryStatus.SUCCEEDED
    assert s.delivery().attempts == 1  # the fake's rule, as the store's: the failure is not counted over it
    s.deliverer.send = s.receiver
    assert s.deliverer.deliver(TASK) is DeliveryOutcome.DROPPED  # the retry finds it done
    assert s.receiver.calls == []


def test_while_a_secret_is_rotated_each_delivery_is_signed_with_both() -> None:
    old, new = new_secret(), new_secret()
    s = setup(EndpointAnswer(500), EndpointAnswer(200), schedule=(ROTATION_OVERLAP.seconds + 86_400,))
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


def sqs_event(*bodies: str, queue: str = "WebhookDeliveryQueue") -> dict[str, Any]:
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
                "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{queue}",
                "awsRegion": "us-east-1",
            }
            for index, body in enumerate(bodies)
        ]
    }


SLOW_LANE_QUEUE = "sendonce-WebhookSlowLaneQueue-1AB2C3"  # as CloudFormation names a queue


def lanes(
    s: Setup, redelivery: FakeRedelivery | None = None, slow_redelivery: FakeRedelivery | None = None
) -> DeliveryDependencies:
    return DeliveryDependencies(
        deliverer=s.deliverer,
        redelivery=redelivery or FakeRedelivery(),
        slow_redelivery=slow_redelivery or FakeRedelivery(),
        slow_lane_queue=SLOW_LANE_QUEUE,
    )


def test_a_delivered_record_is_done_and_a_retry_is_postponed_and_reported() -> None:
    s = setup(EndpointAnswer(200), EndpointAnswer(500))
    s.store.add_endpoint(endpoint("whep_2"), limit=10)
    s.store.event_items[(WS, EVENT_ID)] = event(Delivery("whep_1"), Delivery("whep_2"))
    redelivery = FakeRedelivery()
    dependencies = lanes(s, redelivery)
    batch = sqs_event(task_body(TASK), task_body(DeliveryTask(WS, EVENT_ID, "whep_2")))

    answer = handle_delivery_batch(dependencies, batch)

    assert answer == {"batchItemFailures": [{"itemIdentifier": "m1"}]}
    assert redelivery.postponed == [("rh1", 5)]


def test_a_retry_whose_postponement_fails_is_still_reported() -> None:
    s = setup(EndpointAnswer(500))
    dependencies = lanes(s, FakeRedelivery(fail=True))

    answer = handle_delivery_batch(dependencies, sqs_event(task_body(TASK)))

    assert answer == {"batchItemFailures": [{"itemIdentifier": "m0"}]}


@pytest.mark.parametrize("body", ["", "nope", "{}", '{"workspaceId": 1, "eventId": "e", "endpointId": "p"}'])
def test_an_unreadable_record_is_reported_and_sends_nothing(body: str) -> None:
    s = setup()
    dependencies = lanes(s)

    answer = handle_delivery_batch(dependencies, sqs_event(body))

    assert answer == {"batchItemFailures": [{"itemIdentifier": "m0"}]}
    assert s.receiver.calls == []


def test_a_final_failure_is_done_with_its_record() -> None:
    s = setup(EndpointAnswer(500), schedule=())
    dependencies = lanes(s)

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


# ---------------------------------------------------------------------------- two lanes (issue 27)
def flagged_until(s: Setup) -> datetime | None:
    return s.store.lane_items.get((WS, "whep_1"))


def test_a_healthy_delivery_reads_its_endpoint_and_flag_in_one_call_and_writes_no_flag() -> None:
    s = setup(EndpointAnswer(204))

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.SUCCEEDED

    # As before the lanes: the endpoint (with its flag, one round trip), the event, the attempt.
    assert s.store.calls == ["endpoint_and_lane", "event", "record_attempt"]
    assert s.receiver.timeouts == [FAST_LANE_PATIENCE_SECONDS]
    assert s.slow_lane.tasks == []


def test_the_fast_lanes_patience_leaves_the_e2e_bound_a_margin() -> None:
    # A healthy endpoint's delivery waits at most two patiences for an invocation while others hang
    # (a batch taken just before the first hanging delivery flags its endpoint): 2 s of the 5.
    assert 2 * FAST_LANE_PATIENCE_SECONDS <= 5.0 - 3.0
    assert FAST_LANE_PATIENCE_SECONDS < 15.0


def test_no_answer_within_the_patience_moves_the_task_to_the_slow_lane_uncounted() -> None:
    s = setup(HANG)

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.MOVED

    assert s.slow_lane.tasks == [TASK]  # the same event, endpoint and webhook-id
    assert s.delivery() == Delivery("whep_1")  # no attempt counted, still pending
    assert flagged_until(s) == NOW + timedelta(seconds=SLOW_LANE_SECONDS)
    assert "record_attempt" not in s.store.calls


def test_a_redelivery_moved_to_the_slow_lane_keeps_its_base() -> None:
    s = setup(HANG, stored=event(Delivery("whep_1", DeliveryStatus.PENDING, 4, NOW, 503)))
    redelivery = DeliveryTask(WS, EVENT_ID, "whep_1", base_attempts=4)

    assert s.deliverer.deliver(redelivery) is DeliveryOutcome.MOVED

    assert s.slow_lane.tasks == [redelivery]


@pytest.mark.parametrize(
    "answer",
    [
        EndpointAnswer(None, "connection refused"),
        EndpointAnswer(None, "refused: a loopback address"),
        EndpointAnswer(503),
    ],
    ids=["refused", "unsafe target", "a quick 503"],
)
def test_an_answer_within_the_patience_stays_in_the_fast_lane_on_the_retry_schedule(
    answer: EndpointAnswer,
) -> None:
    s = setup(answer)

    with pytest.raises(RetryLater) as retry:
        s.deliverer.deliver(TASK)

    assert retry.value.seconds == 5
    assert s.delivery().attempts == 1
    assert s.slow_lane.tasks == []
    assert flagged_until(s) is None


def test_a_fast_lane_task_of_a_flagged_endpoint_moves_without_calling_it() -> None:
    s = setup()
    s.store.lane_items[(WS, "whep_1")] = NOW + timedelta(seconds=60)

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.MOVED

    assert s.receiver.calls == []
    assert s.slow_lane.tasks == [TASK]
    assert s.delivery() == Delivery("whep_1")
    assert s.store.calls == ["endpoint_and_lane"]  # one read, nothing written


def test_a_flag_that_ran_out_moves_nothing() -> None:
    s = setup(EndpointAnswer(200))
    s.store.lane_items[(WS, "whep_1")] = NOW - timedelta(seconds=1)  # TTL has not removed it yet

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.SUCCEEDED

    assert s.slow_lane.tasks == []
    assert s.receiver.timeouts == [FAST_LANE_PATIENCE_SECONDS]


def test_a_flag_that_cannot_be_written_still_moves_the_task() -> None:
    s = setup(HANG)
    s.store.fail_lane_writes = True

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.MOVED

    assert s.slow_lane.tasks == [TASK]


def test_a_move_the_slow_lane_refuses_fails_the_record_and_counts_nothing() -> None:
    s = setup(HANG)
    s.slow_lane.fail = 1

    with pytest.raises(QueueUnavailable):
        s.deliverer.deliver(TASK)

    assert s.delivery() == Delivery("whep_1")  # its record comes back to the fast lane


def test_the_slow_lane_gives_the_endpoint_the_contracts_full_timeout() -> None:
    s = setup(EndpointAnswer(200))

    assert s.deliverer.deliver(TASK, Lane.SLOW) is DeliveryOutcome.SUCCEEDED

    assert s.receiver.timeouts == [15.0]
    assert s.slow_lane.tasks == []


def test_a_quick_2xx_in_the_slow_lane_takes_the_endpoint_out() -> None:
    s = setup((EndpointAnswer(204), FAST_LANE_PATIENCE_SECONDS - 0.5))
    s.store.lane_items[(WS, "whep_1")] = NOW + timedelta(seconds=SLOW_LANE_SECONDS)

    assert s.deliverer.deliver(TASK, Lane.SLOW) is DeliveryOutcome.SUCCEEDED

    assert flagged_until(s) is None
    assert s.delivery().status is DeliveryStatus.SUCCEEDED


@pytest.mark.parametrize(
    "answer",
    [(EndpointAnswer(200), FAST_LANE_PATIENCE_SECONDS + 0.5), (EndpointAnswer(500), 9.0), HANG],
    ids=["a slow 2xx", "a slow 500", "no answer in 15 s"],
)
def test_an_answer_slower_than_the_patience_in_the_slow_lane_keeps_the_endpoint_in(
    answer: EndpointAnswer | tuple[EndpointAnswer, float],
) -> None:
    s = setup(answer)
    s.store.lane_items[(WS, "whep_1")] = NOW + timedelta(seconds=10)  # less than half is left
    s.clock.advance(1)

    with contextlib.suppress(RetryLater):  # a retry stays in the slow lane: postponed there
        s.deliverer.deliver(TASK, Lane.SLOW)

    assert flagged_until(s) == NOW + timedelta(seconds=1 + SLOW_LANE_SECONDS)
    assert s.delivery().attempts == 1  # the slow lane's attempts count
    assert s.slow_lane.tasks == []  # nothing is moved from the slow lane


def test_the_flag_is_renewed_only_once_less_than_half_of_it_is_left() -> None:
    s = setup(HANG)
    s.store.lane_items[(WS, "whep_1")] = NOW + timedelta(seconds=SLOW_LANE_SECONDS * 0.6)

    with pytest.raises(RetryLater):
        s.deliverer.deliver(TASK, Lane.SLOW)

    assert "put_in_slow_lane" not in s.store.calls
    assert flagged_until(s) == NOW + timedelta(seconds=SLOW_LANE_SECONDS * 0.6)


def test_a_quick_failure_in_the_slow_lane_leaves_the_flag_as_it_is() -> None:
    s = setup(EndpointAnswer(503))
    until = NOW + timedelta(seconds=10)
    s.store.lane_items[(WS, "whep_1")] = until

    with pytest.raises(RetryLater):
        s.deliverer.deliver(TASK, Lane.SLOW)

    assert flagged_until(s) == until
    assert not {"put_in_slow_lane", "take_out_of_slow_lane"} & set(s.store.calls)


def test_an_endpoint_that_hangs_then_recovers_goes_to_the_slow_lane_and_back() -> None:
    s = setup(HANG, (EndpointAnswer(200), 0.2), EndpointAnswer(200))
    other = DeliveryTask(WS, "evt_01KDVDNA00QV9D1V5ZMBF8DBXX", "whep_1")
    s.store.event_items[(WS, other.event_id)] = replace(event(), id=other.event_id)

    assert s.deliverer.deliver(TASK) is DeliveryOutcome.MOVED  # 1 s, then flagged
    assert s.deliverer.deliver(TASK, Lane.SLOW) is DeliveryOutcome.SUCCEEDED  # answered quickly there
    assert flagged_until(s) is None
    assert s.deliverer.deliver(other) is DeliveryOutcome.SUCCEEDED  # the fast lane again

    assert s.receiver.timeouts == [FAST_LANE_PATIENCE_SECONDS, 15.0, FAST_LANE_PATIENCE_SECONDS]


# ---------------------------------------------------------------------------- the lanes' batches
def test_a_fast_lane_record_that_hangs_is_moved_and_done_with() -> None:
    s = setup(HANG)
    fast, slow = FakeRedelivery(), FakeRedelivery()

    answer = handle_delivery_batch(lanes(s, fast, slow), sqs_event(task_body(TASK)))

    assert answer == {"batchItemFailures": []}  # deleted from the fast lane: it lives on in the slow
    assert s.slow_lane.tasks == [TASK]
    assert fast.postponed == slow.postponed == []


def test_a_slow_lane_record_gets_the_full_timeout_and_its_retry_is_postponed_in_the_slow_lane() -> None:
    s = setup(HANG)
    fast, slow = FakeRedelivery(), FakeRedelivery()

    answer = handle_delivery_batch(lanes(s, fast, slow), sqs_event(task_body(TASK), queue=SLOW_LANE_QUEUE))

    assert answer == {"batchItemFailures": [{"itemIdentifier": "m0"}]}
    assert s.receiver.timeouts == [15.0]
    assert slow.postponed == [("rh0", 5)]
    assert fast.postponed == []
    assert s.slow_lane.tasks == []


@pytest.mark.parametrize(
    ("source", "slow"),
    [
        ("arn:aws:sqs:us-east-1:123456789012:sendonce-WebhookSlowLaneQueue-1AB2C3", True),
        ("https://sqs.us-east-1.amazonaws.com/123456789012/sendonce-WebhookSlowLaneQueue-1AB2C3", True),
        ("arn:aws:sqs:us-east-1:123456789012:sendonce-WebhookDeliveryQueue-9XY8Z7", False),
        ("", False),
    ],
)
def test_a_records_lane_is_the_queue_it_came_from(source: str, slow: bool) -> None:
    assert (queue_name(source) == SLOW_LANE_QUEUE) is slow


def test_a_batchs_records_are_delivered_side_by_side() -> None:
    """One record that hangs holds no other: the nine healthy records are answered while it waits."""
    s = setup()
    healthy = [endpoint(f"whep_h{n}") for n in range(9)]
    for one in [*healthy, endpoint("whep_hang")]:
        s.store.add_endpoint(one, limit=20)
    s.store.event_items[(WS, EVENT_ID)] = event(Delivery("whep_hang"), *(Delivery(one.id) for one in healthy))
    answered: list[str] = []
    all_answered = threading.Event()
    lock = threading.Lock()

    def send(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> EndpointAnswer:
        if url.endswith("whep_hang"):
            # Hangs until every other record has been answered (or gives up, as in one at a time).
            released = all_answered.wait(timeout=5)
            return HANG if released else EndpointAnswer(None, "never released", timed_out=True)
        with lock:
            answered.append(url)
            if len(answered) == len(healthy):
                all_answered.set()
        return EndpointAnswer(204)

    s.deliverer.send = send
    tasks = [
        DeliveryTask(WS, EVENT_ID, "whep_hang"),
        *(DeliveryTask(WS, EVENT_ID, one.id) for one in healthy),
    ]

    started = time.monotonic()
    answer = handle_delivery_batch(lanes(s), sqs_event(*(task_body(task) for task in tasks)))

    assert time.monotonic() - started < 4  # the hanging record was released by the others
    assert answer == {"batchItemFailures": []}
    assert len(answered) == 9
    assert s.slow_lane.tasks == [DeliveryTask(WS, EVENT_ID, "whep_hang")]
    assert all(s.delivery(one.id).status is DeliveryStatus.SUCCEEDED for one in healthy)
