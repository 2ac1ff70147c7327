"""Issue 3, end to end: Idempotency-Key on POST /v1/messages, counted with the sandbox's /deliveries."""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
import requests

from tests.e2e.e2e_support import (
    SETTLED,
    created_id,
    deliveries_of,
    deliveries_with_body,
    error_code,
    eventually,
    imessage,
    message,
    rfc3339,
    send,
    sms,
    unique_body,
    unique_phone,
    wait_status,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e

SHORT_WINDOW_SECONDS = 3
EXPIRY_ROUNDING_SECONDS = 1.5  # expiry is stored in whole seconds and compared with int(now)


def new_key(label: str) -> str:
    return f"e2e-{label}-{uuid.uuid4().hex}"


def test_a_replay_is_the_first_answer_byte_for_byte_and_sends_nothing(stack: LocalStack) -> None:
    key, request = new_key("replay"), imessage(unique_phone(), unique_body("replay"))

    first = send(stack, request, idempotency_key=key)
    again = send(stack, request, idempotency_key=key)
    reordered = send(
        stack, request, idempotency_key=key, raw=json.dumps(dict(reversed(request.items())), indent=2)
    )

    message_id = created_id(first)
    assert "Idempotency-Replayed" not in first.headers
    for replay in (again, reordered):
        assert replay.status_code == 201
        assert replay.content == first.content
        assert replay.headers["Idempotency-Replayed"] == "true"
    assert first.json()["message"]["idempotencyKey"] == key
    wait_status(stack, message_id, SETTLED)
    assert len(deliveries_of(stack, message_id)) == 1


def test_the_same_key_with_another_payload_is_422_and_sends_nothing(stack: LocalStack) -> None:
    key, body = new_key("reused"), unique_body("reused")
    message_id = created_id(send(stack, sms(unique_phone(), body), idempotency_key=key))

    other = send(stack, sms(unique_phone(), body + " (edited)"), idempotency_key=key)

    assert other.status_code == 422, other.text
    assert error_code(other) == "idempotency_key_reused"
    wait_status(stack, message_id, SETTLED)
    assert len(deliveries_with_body(stack, body)) == 1
    assert deliveries_with_body(stack, body + " (edited)") == []


def test_key_formats(stack: LocalStack) -> None:
    key, request = new_key("quoted"), sms(unique_phone(), unique_body("quoted"))
    quoted = send(stack, request, idempotency_key=f'"{key}"')
    bare = send(stack, request, idempotency_key=key)

    assert quoted.status_code == 201, quoted.text
    assert bare.status_code == 201
    assert bare.headers.get("Idempotency-Replayed") == "true"
    assert bare.json()["message"]["id"] == quoted.json()["message"]["id"]

    longest = send(stack, sms(unique_phone(), unique_body("255")), idempotency_key="k" * 255)
    assert longest.status_code == 201, longest.text
    for bad in ("k" * 256, "has space", "clé-non-ascii"):
        answer = send(stack, sms(unique_phone(), unique_body("bad key")), idempotency_key=bad)
        assert answer.status_code == 400, (bad, answer.text)
        assert error_code(answer) == "invalid_idempotency_key"


def test_twenty_threads_on_one_key_make_one_message_and_one_delivery(stack: LocalStack) -> None:
    key, request = new_key("race"), imessage(unique_phone(), unique_body("race"))

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(lambda _: send(stack, request, idempotency_key=key), range(20)))

    statuses = sorted(answer.status_code for answer in answers)
    assert set(statuses) <= {201, 409}, statuses
    created = [answer for answer in answers if answer.status_code == 201]
    originals = [answer for answer in created if "Idempotency-Replayed" not in answer.headers]
    assert len(originals) == 1, statuses
    assert {answer.json()["message"]["id"] for answer in created} == {created_id(originals[0])}
    for answer in answers:
        if answer.status_code == 409:
            assert error_code(answer) == "idempotency_in_progress"
            assert answer.headers["Retry-After"] == "1"
    message_id = created_id(originals[0])
    wait_status(stack, message_id, SETTLED)
    assert len(deliveries_with_body(stack, request["body"])) == 1


def test_a_key_is_scoped_to_its_workspace(short_stack: LocalStack) -> None:
    key, request = new_key("scope"), sms(unique_phone(), unique_body("scope"))

    in_a = send(short_stack, request, idempotency_key=key)
    in_b = send(short_stack, request, idempotency_key=key, key=short_stack.other_api_key)

    assert "Idempotency-Replayed" not in in_a.headers
    assert "Idempotency-Replayed" not in in_b.headers
    assert created_id(in_a) != created_id(in_b)
    wait_status(short_stack, created_id(in_a), "sent")
    wait_status(short_stack, created_id(in_b), "sent", key=short_stack.other_api_key)
    assert len(deliveries_with_body(short_stack, request["body"])) == 2


def test_required_mode_refuses_a_post_without_a_key_and_writes_nothing(short_stack: LocalStack) -> None:
    body = unique_body("no key")

    answer = send(short_stack, sms(unique_phone(), body))

    assert answer.status_code == 400, answer.text
    assert error_code(answer) == "missing_idempotency_key"
    listed = requests.get(f"{short_stack.api}/v1/messages?limit=20", headers=short_stack.auth(), timeout=10)
    assert body not in {found["body"] for found in listed.json()["messages"]}


def test_after_the_window_a_key_stays_tied_to_its_message(short_stack: LocalStack) -> None:
    sent_key, sent_request = new_key("tie"), imessage(unique_phone(), unique_body("tie"))
    canceled_key = new_key("tie-canceled")
    send_at = rfc3339(datetime.now(UTC) + timedelta(minutes=5))
    canceled_request = sms(unique_phone(), unique_body("tie canceled")) | {"sendAt": send_at}
    first = send(short_stack, sent_request, idempotency_key=sent_key)
    original_id = created_id(first)
    scheduled_id = created_id(send(short_stack, canceled_request, idempotency_key=canceled_key))
    stored = time.monotonic()  # both answers are stored by now, for the 3 s window
    canceled = requests.delete(
        f"{short_stack.api}/v1/messages/{scheduled_id}", headers=short_stack.auth(), timeout=10
    )
    assert canceled.status_code == 200, canceled.text
    wait_status(short_stack, original_id, "sent")

    # Past the 3 s window (+ the whole second Powertools rounds expiry times to): the stored
    # responses have expired, the ties have not.
    time.sleep(max(0.0, SHORT_WINDOW_SECONDS + EXPIRY_ROUNDING_SECONDS - (time.monotonic() - stored)))
    again = send(short_stack, sent_request, idempotency_key=sent_key)
    edited = send(short_stack, sent_request | {"body": sent_request["body"] + "!"}, idempotency_key=sent_key)
    after_cancel = send(short_stack, canceled_request, idempotency_key=canceled_key)

    assert again.status_code == 201, again.text
    assert again.headers.get("Idempotency-Replayed") == "true"
    assert again.json()["message"]["id"] == original_id
    assert edited.status_code == 422, edited.text
    assert error_code(edited) == "idempotency_key_reused"
    assert after_cancel.status_code == 422, after_cancel.text
    assert error_code(after_cancel) == "idempotency_key_reused"
    assert message(short_stack, scheduled_id)["status"] == "canceled"
    assert eventually(lambda: deliveries_of(short_stack, original_id))
    assert len(deliveries_with_body(short_stack, sent_request["body"])) == 1
    assert deliveries_of(short_stack, scheduled_id) == []
