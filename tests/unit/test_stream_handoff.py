"""HandoffFunction: every message created in the table reaches its queue from the stream, once the
write committed; nothing else in the stream does, and a refused hand-off comes back."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace
from sendonce.adapters.dynamodb_items import lock_key, to_item
from sendonce.adapters.dynamodb_message_creations import CREATION_FILTER
from sendonce.entrypoints.handoff import hand_off_batch
from sendonce.messages.model import Channel, Message, Status

from sendonce_local.event_filters import parse_filters, passes
from sendonce_local.template import Template, load_template
from tests.unit.unit_fakes import FakeQueue, ManualClock

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template() -> Template:
    return load_template(ROOT / "template.yaml")


def _message(clock: ManualClock, number: int = 1, **changes: Any) -> Message:
    message = Message(
        id=f"msg_{number:026d}",
        workspace_id="ws_a",
        channel=Channel("sms"),
        to="+15550100000",
        subject=None,
        body=f"hello {number}",
        status=Status.QUEUED,
        created_at=clock.now,
        updated_at=clock.now,
    )
    return replace(message, **changes)


def _record(event_name: str, image: dict[str, Any], number: int) -> dict[str, Any]:
    return {
        "eventName": event_name,
        "dynamodb": {
            "Keys": {"pk": image["pk"], "sk": image["sk"]},
            "NewImage": image,
            "SequenceNumber": f"{number:021d}",
        },
    }


def _created(message: Message, number: int) -> dict[str, Any]:
    return _record("INSERT", to_item(message, message.created_at), number)


def test_each_created_message_goes_to_its_queue_with_the_delay_its_send_at_asks(clock: ManualClock) -> None:
    queue = FakeQueue()
    now_, soon, later = (
        _message(clock, 1),
        _message(clock, 2, status=Status.SCHEDULED, send_at=clock.now + timedelta(seconds=90.5)),
        _message(clock, 3, status=Status.SCHEDULED, send_at=clock.now + timedelta(hours=2)),
    )

    result = hand_off_batch(
        queue, {"Records": [_created(m, n) for n, m in enumerate((now_, soon, later))]}, clock
    )

    assert result == {"batchItemFailures": []}
    # Two hours ahead is beyond SQS's reach: the outbox hands it over when it comes due.
    assert queue.enqueued == [(now_.id, 0), (soon.id, 91)]


def test_changes_locks_and_expiries_are_not_creations(clock: ManualClock) -> None:
    queue = FakeQueue()
    message = _message(clock)
    lock = {**lock_key("abc"), "messageId": {"S": message.id}}
    records = [
        _record("MODIFY", to_item(message, None), 1),
        _record("INSERT", lock, 2),
        {"eventName": "REMOVE", "dynamodb": {"Keys": {}, "SequenceNumber": "3"}},
    ]

    assert hand_off_batch(queue, {"Records": records}, clock) == {"batchItemFailures": []}
    assert queue.enqueued == []


def test_a_refused_hand_off_reports_its_record_so_the_stream_brings_it_back(clock: ManualClock) -> None:
    queue = FakeQueue(fail=True)
    records = [_created(_message(clock, n), n) for n in range(3)]

    result = hand_off_batch(queue, {"Records": records}, clock)

    assert [f["itemIdentifier"] for f in result["batchItemFailures"]] == [
        r["dynamodb"]["SequenceNumber"] for r in records
    ]


def test_an_unreadable_message_is_skipped_not_retried_forever(clock: ManualClock) -> None:
    queue = FakeQueue()
    broken = _created(_message(clock, 1), 1)
    broken["dynamodb"]["NewImage"]["status"] = {"S": "sent"}  # no message is created sent
    good = _created(_message(clock, 2), 2)

    assert hand_off_batch(queue, {"Records": [broken, good]}, clock) == {"batchItemFailures": []}
    assert [message_id for message_id, _ in queue.enqueued] == [_message(clock, 2).id]


@pytest.mark.parametrize("event", [None, {}, {"Records": []}, {"Records": "nope"}, []])
def test_an_empty_or_odd_event_hands_nothing_over(clock: ManualClock, event: Any) -> None:
    queue = FakeQueue()
    assert hand_off_batch(queue, event, clock) == {"batchItemFailures": []}
    assert queue.enqueued == []


def test_the_templates_filter_is_the_creation_filter_and_admits_only_creations(
    template: Template, clock: ManualClock
) -> None:
    (mapping,) = [m for m in template.stream_mappings if m.function_id == "HandoffFunction"]
    assert mapping.filters == (CREATION_FILTER,)
    message = _message(clock)
    assert passes(mapping.filters, _created(message, 1))
    assert not passes(mapping.filters, _record("MODIFY", to_item(message, None), 2))
    assert not passes(mapping.filters, _record("INSERT", {**lock_key("abc")}, 3))


def test_filter_operators_match_as_lambda_documents_them() -> None:
    (pattern,) = parse_filters(
        {
            "Filters": [
                {
                    "Pattern": json.dumps(
                        {
                            "a": [{"exists": True}],
                            "b": [{"exists": False}],
                            "c": [{"prefix": "MSG#"}],
                            "d": {"e": [{"anything-but": ["x"]}, 1]},
                        }
                    )
                }
            ]
        },
        "test",
    )
    assert passes([pattern], {"a": 0, "c": "MSG#1", "d": {"e": "y"}})
    assert not passes([pattern], {"a": 0, "b": 1, "c": "MSG#1", "d": {"e": "y"}})
    assert not passes([pattern], {"a": 0, "c": "LOCK#1", "d": {"e": "y"}})
    assert not passes([pattern], {"a": 0, "c": "MSG#1", "d": {"e": "x"}})
    assert not passes([pattern], {"c": "MSG#1", "d": {"e": 1}})
    assert passes([], {"anything": True})


def test_an_operator_the_local_stack_does_not_emulate_is_refused_when_the_template_is_read() -> None:
    with pytest.raises(ValueError, match="not emulated"):
        parse_filters({"Filters": [{"Pattern": '{"a": [{"numeric": [">", 1]}]}'}]}, "test")
