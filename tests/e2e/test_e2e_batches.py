"""Batches and edits through `sendonce run`, counted where it matters: the sandbox's deliveries."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from tests.e2e.conftest import LocalStack
from tests.e2e.e2e_support import (
    deliveries_with_body,
    email,
    eventually,
    imessage,
    message,
    rfc3339,
    send,
    sms,
    unique_body,
    unique_email,
    unique_phone,
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
