"""Batches against in-memory ports: item expansion, Results, strict and permissive, identical items, order."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyValidationError
from msgspec.structs import replace
from sendonce.api.answers import send_answer
from sendonce.api.batch import answer_batch, run_once
from sendonce.api.errors import ApiError
from sendonce.channels import normalise_recipient
from sendonce.idempotency.keys import payload_fingerprint
from sendonce.messages.batch import BatchSender
from sendonce.messages.model import Channel, Status
from sendonce.messages.ports import NotWritten
from sendonce.messages.service import MessageService, SendCommand

from tests.unit.unit_fakes import FakeQueue, InMemoryStore, ManualClock, hand_off

WINDOW = timedelta(seconds=900)


class KeyRecords:
    """The Idempotency-Key record of POST /v1/messages, in memory: one answer per (workspace, key)."""

    def __init__(self, service: MessageService) -> None:
        self.service = service
        self.records: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self.calls = 0

    def send_once(self, *, request: dict[str, Any], command: SendCommand) -> dict[str, Any]:
        self.calls += 1
        record = (request["workspace"], request["key"])
        fingerprint = payload_fingerprint(request["payload"])
        if record in self.records:
            stored_fingerprint, answer = self.records[record]
            if stored_fingerprint != fingerprint:
                raise IdempotencyValidationError("payload differs")
            return {**answer, "replayed": True}
        answer = send_answer(self.service.send(command))
        self.records[record] = (fingerprint, answer)
        return answer


class Batches:
    def __init__(self, store: InMemoryStore, queue: FakeQueue, clock: ManualClock) -> None:
        self.store, self.queue, self.clock = store, queue, clock
        self.sender = BatchSender(store=store, dedup_window=WINDOW, clock=clock)
        self.keys = KeyRecords(MessageService(store=store, queue=queue, dedup_window=WINDOW, clock=clock))

    def send(
        self, items: list[Any], *, strict: bool = False, key_required: bool = False
    ) -> list[dict[str, Any]]:
        answer = answer_batch(
            workspace="ws_a",
            body={"messages": items},
            strict=strict,
            header_key=None,
            key_required=key_required,
            send_many=self.sender.send_many,
            send_once=self.keys.send_once,
            send_batch_once=run_once,
        )
        assert answer["statusCode"] == 200
        body = json.loads(answer["body"])
        assert body["success"] is True
        results: list[dict[str, Any]] = body["results"]
        return results


@pytest.fixture
def batches(store: InMemoryStore, queue: FakeQueue, clock: ManualClock) -> Batches:
    return Batches(store, queue, clock)


def sms(body: str = "hello", to: str = "+15550100000", **extra: Any) -> dict[str, Any]:
    return {"channel": "sms", "to": to, "body": body, **extra}


def test_each_item_gets_a_result_in_order_as_a_single_send_would(batches: Batches) -> None:
    results = batches.send([sms("one"), sms("two", to="+1 (555) 010-0001"), sms("three")])

    assert [r["index"] for r in results] == [0, 1, 2]
    assert [r["status"] for r in results] == [201, 201, 201]
    assert all(r["duplicateOnly"] is False and r["replayed"] is False and r["error"] is None for r in results)
    assert [r["message"]["body"] for r in results] == ["one", "two", "three"]
    assert results[1]["message"]["to"] == "+15550100001"  # normalised as a single send normalises it
    assert batches.store.bulk_calls == 1
    assert batches.queue.enqueued == []  # handed over from the stream, not by the request
    hand_off(batches.store, batches.queue, batches.clock)
    assert [message_id for message_id, _ in batches.queue.enqueued] == [r["message"]["id"] for r in results]


def test_identical_items_are_one_message_the_later_a_duplicate_counted_on_the_earlier(
    batches: Batches,
) -> None:
    results = batches.send([sms("same"), sms("other"), sms("same", to="+1 555 010 0000")])

    assert [r["status"] for r in results] == [201, 201, 200]
    assert results[2]["duplicateOnly"] is True
    assert results[2]["message"]["id"] == results[0]["message"]["id"]
    assert len(batches.store.messages) == 2
    assert batches.store.duplicates_counted == [results[0]["message"]["id"]]


def test_an_items_smart_encoding_is_applied_before_the_guard_sees_it(batches: Batches) -> None:
    curly = "It\u2019s \u201cready\u201d \u2013 5\u00a0pm\u2026"
    plain = 'It\'s "ready" - 5 pm...'

    results = batches.send([sms(curly, smartEncoding=True), sms(plain), sms(curly)])

    assert [r["status"] for r in results] == [201, 200, 201]
    assert results[0]["message"]["body"] == plain
    assert (results[0]["message"]["encoding"], results[0]["message"]["segments"]) == ("GSM-7", 1)
    assert results[1]["message"]["id"] == results[0]["message"]["id"]  # the same text: a duplicate
    assert results[2]["message"]["encoding"] == "UCS-2"  # no smart encoding asked: sent as written


def test_an_item_already_sent_is_a_duplicate_of_the_original(batches: Batches) -> None:
    first = batches.send([sms("hi")])

    again = batches.send([sms("hi"), sms("new")])

    assert [r["status"] for r in again] == [200, 201]
    assert again[0]["message"]["id"] == first[0]["message"]["id"]


def test_permissive_gives_each_bad_item_its_own_400_and_sends_the_rest(batches: Batches) -> None:
    results = batches.send(
        [sms("ok"), "not an object", sms("bad", channel="fax"), sms("k", idempotencyKey="é"), sms("also ok")]
    )

    assert [r["status"] for r in results] == [201, 400, 400, 400, 201]
    assert results[1]["error"]["code"] == "validation_error"
    assert results[2]["error"]["details"][0]["field"] == "channel"
    assert results[3]["error"]["code"] == "invalid_idempotency_key"
    assert all(r["message"] is None and r["duplicateOnly"] is None for r in results[1:4])
    assert len(batches.store.messages) == 2


def test_strict_fails_the_whole_request_naming_each_bad_item_and_writes_nothing(batches: Batches) -> None:
    with pytest.raises(ApiError) as raised:
        batches.send([sms("ok"), 7, sms("x", unknown=1), sms("k", idempotencyKey="")], strict=True)

    assert raised.value.status == 400
    assert raised.value.code == "validation_error"
    fields = [detail["field"] for detail in raised.value.details]
    assert fields == ["messages.1", "messages.2.unknown", "messages.3.idempotencyKey"]
    assert batches.store.messages == {}
    assert batches.keys.calls == 0


def test_strict_keeps_a_reused_key_a_per_item_422(batches: Batches) -> None:
    batches.send([sms("first", idempotencyKey="k1")])

    results = batches.send([sms("second", idempotencyKey="k1"), sms("fine")], strict=True)

    assert [r["status"] for r in results] == [422, 201]
    assert results[0]["error"]["code"] == "idempotency_key_reused"


@pytest.mark.parametrize("items", [[], [sms(str(i)) for i in range(501)]])
def test_zero_or_more_than_500_items_is_a_400(batches: Batches, items: list[Any]) -> None:
    with pytest.raises(ApiError) as raised:
        batches.send(items)

    assert raised.value.status == 400
    assert raised.value.details[0]["field"] == "messages"


@pytest.mark.parametrize(
    "body", [[], {"messages": {}}, {"messages": [], "extra": 1}, "text", None, {"nope": 1}]
)
def test_a_body_that_is_not_a_list_of_messages_is_a_400(batches: Batches, body: Any) -> None:
    with pytest.raises(ApiError) as raised:
        answer_batch(
            workspace="ws_a",
            body=body,
            strict=False,
            header_key=None,
            key_required=False,
            send_many=batches.sender.send_many,
            send_once=batches.keys.send_once,
            send_batch_once=run_once,
        )
    assert raised.value.status == 400


def test_a_keyed_item_uses_the_single_sends_record_both_ways(batches: Batches) -> None:
    # The key's record compares the item's body without its idempotencyKey: a single send's body.
    alone = batches.keys.send_once(
        request={"workspace": "ws_a", "key": "k-alone", "payload": sms("a")},
        command=_command("a", "k-alone"),
    )
    results = batches.send([sms("a", idempotencyKey="k-alone"), sms("b", idempotencyKey="k-batch")])

    assert results[0]["status"] == 201
    assert results[0]["replayed"] is True
    assert results[0]["message"]["id"] == json.loads(alone["body"])["message"]["id"]
    assert results[1]["status"] == 201
    assert results[1]["replayed"] is False
    assert batches.keys.records[("ws_a", "k-batch")][0] == payload_fingerprint(sms("b"))


def test_duplicate_keys_in_one_batch_replay_or_answer_422_as_single_sends_would(batches: Batches) -> None:
    results = batches.send(
        [sms("x", idempotencyKey="dup"), sms("x", idempotencyKey="dup"), sms("y", idempotencyKey="dup")]
    )

    assert [r["status"] for r in results] == [201, 201, 422]
    assert results[1]["replayed"] is True
    assert results[1]["message"]["id"] == results[0]["message"]["id"]
    assert results[2]["error"]["code"] == "idempotency_key_reused"
    assert len(batches.store.messages) == 1


def test_order_an_identical_keyless_item_after_a_keyed_one_is_its_duplicate(batches: Batches) -> None:
    results = batches.send([sms("same", idempotencyKey="k"), sms("same"), sms("other")])

    assert [r["status"] for r in results] == [201, 200, 201]
    assert results[1]["message"]["id"] == results[0]["message"]["id"]
    assert results[0]["message"]["idempotencyKey"] == "k"


def test_order_a_keyed_item_after_an_identical_keyless_one_is_its_duplicate(batches: Batches) -> None:
    results = batches.send([sms("same"), sms("same", idempotencyKey="k")])

    assert [r["status"] for r in results] == [201, 200]
    assert results[1]["message"]["id"] == results[0]["message"]["id"]
    assert results[1]["duplicateOnly"] is True


def test_a_required_key_is_asked_of_each_item_unless_the_batch_has_one(batches: Batches) -> None:
    results = batches.send([sms("a"), sms("b", idempotencyKey="kb")], key_required=True)

    assert [r["status"] for r in results] == [400, 201]
    assert results[0]["error"]["code"] == "missing_idempotency_key"


def test_scheduled_items_wait_with_a_delay_or_for_the_outbox(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    sender = BatchSender(store=store, dedup_window=WINDOW, clock=clock)
    soon, later = (
        _command("soon", send_at=clock.now + timedelta(minutes=5)),
        _command("later", send_at=clock.now + timedelta(days=1)),
    )

    outcomes = sender.send_many([soon, later])

    assert [o.message.status for o in outcomes if not isinstance(o, NotWritten) and o.message] == [
        Status.SCHEDULED,
        Status.SCHEDULED,
    ]
    hand_off(store, queue, clock)
    assert [delay for _, delay in queue.enqueued] == [300]


def test_a_failed_hand_off_reports_every_item_for_the_stream_to_bring_back(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    queue.fail = True
    sender = BatchSender(store=store, dedup_window=WINDOW, clock=clock)

    outcomes = sender.send_many([_command("a"), _command("b")])

    assert all(
        not isinstance(o, NotWritten) and o.message and o.message.status is Status.QUEUED for o in outcomes
    )
    records = list(store.stream)
    failures = hand_off(store, queue, clock)["batchItemFailures"]
    assert [f["itemIdentifier"] for f in failures] == [r["dynamodb"]["SequenceNumber"] for r in records]


def test_a_store_failure_answers_503_for_the_items_not_written_and_the_batch_is_not_stored(
    batches: Batches,
) -> None:
    batches.store.fail_bulk_after = 1

    answer = answer_batch(
        workspace="ws_a",
        body={"messages": [sms("a"), sms("b"), sms("b")]},
        strict=False,
        header_key=None,
        key_required=False,
        send_many=batches.sender.send_many,
        send_once=batches.keys.send_once,
        send_batch_once=run_once,
    )

    results = json.loads(answer["body"])["results"]
    assert [r["status"] for r in results] == [201, 503, 503]
    assert answer["storable"] is False
    # Retried: the written item is a duplicate of itself, the rest are written now.
    batches.store.fail_bulk_after = None
    retried = batches.send([sms("a"), sms("b"), sms("b")])
    assert [r["status"] for r in retried] == [200, 201, 200]
    assert len(batches.store.messages) == 2


def test_keyed_commands_never_go_through_the_bulk_path(
    store: InMemoryStore, queue: FakeQueue, clock: ManualClock
) -> None:
    sender = BatchSender(store=store, dedup_window=WINDOW, clock=clock)

    with pytest.raises(ValueError, match="keyed"):
        sender.send_many([_command("a", idempotency_key="k")])


def _command(body: str, key: str | None = None, **changes: Any) -> SendCommand:
    command = SendCommand(
        workspace_id="ws_a",
        channel=Channel("sms"),
        recipient=normalise_recipient(Channel("sms"), "+15550100000"),
        body=body,
        idempotency_key=key,
        payload_fingerprint=payload_fingerprint(sms(body)) if key else None,
    )
    return replace(command, **changes)
