"""SQS batches, each record alone: a record that raises fails by itself (ReportBatchItemFailures),
the others stand, and an event without records is an empty batch."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sendonce.entrypoints.shared.sqs_batches import SqsRecord, process_batch


def _event(*bodies: str) -> dict[str, Any]:
    return {
        "Records": [
            {"messageId": f"m{i}", "receiptHandle": f"rh{i}", "body": body, "eventSource": "aws:sqs"}
            for i, body in enumerate(bodies)
        ]
    }


def test_only_the_records_that_raise_are_reported() -> None:
    seen: list[SqsRecord] = []

    def handle(record: SqsRecord) -> str:
        seen.append(record)
        if record.body == "bad":
            raise ValueError("unreadable")
        return "done"

    answer = process_batch(_event("ok", "bad", "ok", "bad"), handle)

    assert answer == {"batchItemFailures": [{"itemIdentifier": "m1"}, {"itemIdentifier": "m3"}]}
    assert [record.message_id for record in seen] == ["m0", "m1", "m2", "m3"]
    assert seen[0] == SqsRecord(message_id="m0", body="ok", receipt_handle="rh0")


def test_every_record_may_fail_without_failing_the_invocation() -> None:
    def handle(record: SqsRecord) -> str:
        raise RuntimeError("down")

    assert process_batch(_event("a", "b"), handle) == {
        "batchItemFailures": [{"itemIdentifier": "m0"}, {"itemIdentifier": "m1"}]
    }


@pytest.mark.parametrize("event", [{}, {"Records": []}, {"Records": None}, [], None, "nonsense"])
def test_an_event_without_records_is_an_empty_batch(event: Any) -> None:
    def handle(record: SqsRecord) -> str:
        raise AssertionError("no record to handle")

    assert process_batch(event, handle) == {"batchItemFailures": []}


@pytest.mark.parametrize(
    ("attributes", "count"),
    [
        ({"ApproximateReceiveCount": "3"}, 3),
        ({"ApproximateReceiveCount": "1"}, 1),
        ({}, 1),
        (None, 1),
        ({"ApproximateReceiveCount": "three"}, 1),
        ({"ApproximateReceiveCount": 3}, 1),  # SQS sends strings; anything else is not trusted
    ],
)
def test_a_record_knows_how_often_it_was_received(attributes: Any, count: int) -> None:
    raw = {"messageId": "m0", "receiptHandle": "rh0", "body": "{}", "attributes": attributes}

    assert SqsRecord.of(raw).receive_count == count


def test_side_by_side_records_overlap_and_failures_keep_the_batchs_order() -> None:
    barrier = threading.Barrier(4, timeout=5)

    def handle(record: SqsRecord) -> str:
        barrier.wait()  # returns only once all four records are being handled at once
        if record.body == "bad":
            raise ValueError("unreadable")
        return "done"

    answer = process_batch(_event("bad", "ok", "bad", "ok"), handle, workers=4)

    assert answer == {"batchItemFailures": [{"itemIdentifier": "m0"}, {"itemIdentifier": "m2"}]}


def test_a_record_knows_the_queue_it_came_from() -> None:
    raw = {**_event("ok")["Records"][0], "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:Lane"}

    assert SqsRecord.of(raw).source_arn == "arn:aws:sqs:us-east-1:123456789012:Lane"
