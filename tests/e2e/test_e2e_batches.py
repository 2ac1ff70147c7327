"""Batches and edits through `sendonce run`, counted where it matters: the sandbox's deliveries.

An edit races the claim as a client would make it race: PATCHes every 50 ms while the message falls
due, then exactly one delivery, of the last edit answered 200 (sms: SNS dedups nothing, so a second
send would show).
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from tests.e2e.conftest import LocalStack
from tests.e2e.e2e_support import (
    DEADLINE,
    SETTLED,
    created_id,
    deliveries_of,
    deliveries_with_body,
    email,
    eventually,
    imessage,
    message,
    parse_time,
    rfc3339,
    send,
    sms,
    unique_body,
    unique_email,
    unique_phone,
    wait_status,
)


def _batch(stack: LocalStack, items: list[dict[str, Any]], key: str | None = None) -> requests.Response:
    headers = {**stack.auth(), "Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return requests.post(
        f"{stack.api}/v1/messages/batch", data=json.dumps({"messages": items}), headers=headers, timeout=60
    )


def test_a_batch_delivers_each_item_once_and_its_retry_delivers_nothing_more(stack: LocalStack) -> None:
    items = [
        sms(unique_phone(), unique_body("batch sms")),
        email(unique_email(), unique_body("batch email")),
        imessage(unique_phone(), unique_body("batch imessage")),
        {**sms(unique_phone(), unique_body("batch keyed")), "idempotencyKey": f"e2e-{uuid.uuid4()}"},
    ]
    items.append(dict(items[0]))  # identical to the first: one message

    first = _batch(stack, items)

    assert first.status_code == 200, first.text
    results = first.json()["results"]
    assert [r["status"] for r in results] == [201, 201, 201, 201, 200]
    assert results[4]["duplicateOnly"] is True
    assert results[4]["message"]["id"] == results[0]["message"]["id"]
    for item in items[:4]:
        eventually(lambda item=item: deliveries_with_body(stack, item["body"]))

    again = _batch(stack, items)  # the whole batch retried, as a client whose answer was lost would

    assert again.status_code == 200, again.text
    retried = again.json()["results"]
    assert [r["duplicateOnly"] or r["replayed"] for r in retried] == [True] * 5
    time.sleep(3)  # anything sent twice would have reached the sandbox by now
    for item in items[:4]:
        assert len(deliveries_with_body(stack, item["body"])) == 1


def test_an_item_key_replays_when_the_item_is_sent_alone(stack: LocalStack) -> None:
    key = f"e2e-{uuid.uuid4()}"
    item = sms(unique_phone(), unique_body("keyed item"))

    batch = _batch(stack, [{**item, "idempotencyKey": key}])
    alone = send(stack, item, idempotency_key=key)

    assert batch.json()["results"][0]["status"] == 201
    assert alone.status_code == 201
    assert alone.headers.get("Idempotency-Replayed") == "true"
    assert alone.json()["message"]["id"] == batch.json()["results"][0]["message"]["id"]


def test_an_edited_scheduled_message_is_delivered_with_its_new_content_once(stack: LocalStack) -> None:
    to = unique_phone()
    original, edited = unique_body("before the edit"), unique_body("after the edit")
    send_at = rfc3339(datetime.now(UTC) + timedelta(hours=1))
    created = send(stack, {**sms(to, original), "sendAt": send_at})
    assert created.status_code == 201, created.text
    message_id = created.json()["message"]["id"]

    answer = requests.patch(
        f"{stack.api}/v1/messages/{message_id}",
        data=json.dumps({"body": edited, "sendAt": rfc3339(datetime.now(UTC) + timedelta(seconds=2))}),
        headers={**stack.auth(), "Content-Type": "application/json"},
        timeout=30,
    )

    assert answer.status_code == 200, answer.text
    assert answer.json()["message"]["body"] == edited
    eventually(lambda: deliveries_with_body(stack, edited))
    assert eventually(lambda: message(stack, message_id)["status"] in ("sent", "delivered"))
    assert deliveries_with_body(stack, original) == []
    # The old content is free again: sending it now is a new message, not a duplicate.
    assert send(stack, sms(to, original)).status_code == 201


# ---------------------------------------------------------------- edits racing the claim
EDIT_EVERY = 0.05  # seconds between two PATCHes


def _edit_every_50_ms_until_refused(
    stack: LocalStack, message_id: str, moves: dict[int, float] | None = None
) -> list[tuple[int, str, str | None, str | None]]:
    """PATCH a new body every 50 ms (with a new sendAt, `moves[n]` seconds ahead, on edit n) until
    the message is no longer editable, then once more; each answer's (status, body, sendAt, code)."""
    answers: list[tuple[int, str, str | None, str | None]] = []
    deadline = time.monotonic() + DEADLINE
    with requests.Session() as session:
        headers = {**stack.auth(), "Content-Type": "application/json"}
        while time.monotonic() < deadline:
            n = len(answers)
            changes: dict[str, Any] = {"body": unique_body(f"edit {n}")}
            if moves and n in moves:
                changes["sendAt"] = rfc3339(datetime.now(UTC) + timedelta(seconds=moves[n]))
            answer = session.patch(
                f"{stack.api}/v1/messages/{message_id}", data=json.dumps(changes), headers=headers, timeout=30
            )
            code = None if answer.status_code == 200 else answer.json()["error"]["code"]
            answers.append((answer.status_code, changes["body"], changes.get("sendAt"), code))
            assert answer.status_code in (200, 409), answer.text
            if [status for status, _, _, _ in answers[-2:]] == [409, 409]:
                return answers  # refused twice in a row: claimed, and it stays so
            time.sleep(EDIT_EVERY)
    raise AssertionError(f"the message was still editable after {DEADLINE} s: {answers[-3:]}")


def _assert_one_delivery_of_the_last_200(
    stack: LocalStack, message_id: str, answers: list[tuple[int, str, str | None, str | None]]
) -> str:
    statuses = [status for status, _, _, _ in answers]
    assert 200 in statuses, answers
    first_refused = statuses.index(409)
    assert set(statuses[first_refused:]) == {409}, answers  # no edit is applied after the claim
    assert {code for status, _, _, code in answers if status == 409} == {"message_not_editable"}
    last_200 = next(body for status, body, _, _ in reversed(answers) if status == 200)
    wait_status(stack, message_id, SETTLED)
    eventually(lambda: deliveries_of(stack, message_id))
    return last_200


def test_a_scheduled_message_edited_every_50_ms_as_it_falls_due_is_delivered_once_with_the_last_200(
    stack: LocalStack,
) -> None:
    created = send(stack, {**sms(unique_phone(), unique_body("race")), "sendAt": _ahead(4)})
    message_id = created_id(created)
    assert created.json()["status"] == "scheduled"

    answers = _edit_every_50_ms_until_refused(stack, message_id)

    last_200 = _assert_one_delivery_of_the_last_200(stack, message_id, answers)
    time.sleep(3)  # a second delivery would have reached the sandbox by now
    assert [entry["body"] for entry in deliveries_of(stack, message_id)] == [last_200]
    assert message(stack, message_id)["body"] == last_200


def test_send_at_moved_later_and_earlier_while_edited_every_50_ms_leaves_stale_records_that_send_nothing(
    stack: LocalStack,
) -> None:
    created = send(stack, {**sms(unique_phone(), unique_body("race moved")), "sendAt": _ahead(4)})
    message_id = created_id(created)
    # Later (its first record comes early and is handed back), earlier than the first sendAt (a
    # fresh record), later again: every record but one finds nothing to do.
    answers = _edit_every_50_ms_until_refused(stack, message_id, moves={1: 7.0, 3: 2.0, 5: 5.0})

    last_200 = _assert_one_delivery_of_the_last_200(stack, message_id, answers)
    assert any(status == 200 and send_at for status, _, send_at, _ in answers), answers
    latest = max(parse_time(send_at) for _, _, send_at, _ in answers if send_at)
    # Every record left behind has come by then: still one delivery, of the last 200, not before sendAt.
    time.sleep(max(0.0, (latest - datetime.now(UTC)).total_seconds()) + 3)
    delivered = deliveries_of(stack, message_id)
    assert [entry["body"] for entry in delivered] == [last_200]
    final = message(stack, message_id)
    assert final["body"] == last_200
    assert parse_time(delivered[0]["at"]) >= parse_time(final["sendAt"])


def _ahead(seconds: float) -> str:
    return rfc3339(datetime.now(UTC) + timedelta(seconds=seconds))
