"""Erasure through `sendonce run`, over HTTP: a recipient with a delivered message, a scheduled one
and a suppression entry is erased; then no item of any table of the stack (read through its AWS
emulator) holds their number or the messages' content, the scheduled message was canceled, the
suppression still refuses a send to them, and the erasure answers `done` without the address."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import requests

from tests.e2e.conftest import LocalStack
from tests.e2e.e2e_support import (
    SETTLED,
    call,
    created_id,
    error_code,
    eventually,
    message,
    rfc3339,
    send,
    sms,
    unique_body,
    unique_phone,
    wait_status,
)

# An erasure is done within a minute; the stack's pollers and stream add their own seconds.
ERASURE_DEADLINE = 75.0


def _items(stack: LocalStack) -> list[tuple[str, dict[str, Any]]]:
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=stack.aws,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    found = []
    for table in dynamodb.list_tables()["TableNames"]:
        request: dict[str, Any] = {"TableName": table}
        while True:
            page = dynamodb.scan(**request)
            found.extend((table, item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return found


def _holding(stack: LocalStack, needles: list[str]) -> list[tuple[str, str]]:
    """(table, key) of every item whose attributes, at any depth, hold one of `needles`."""
    return [
        (table, json.dumps({name: item[name] for name in ("pk", "sk", "id") if name in item}))
        for table, item in _items(stack)
        if any(needle.lower() in json.dumps(item, ensure_ascii=False).lower() for needle in needles)
    ]


def test_an_erased_recipient_leaves_no_trace_and_stays_suppressed(stack: LocalStack) -> None:
    phone, body = unique_phone(), unique_body("erase me")
    delivered = created_id(send(stack, sms(phone, body), idempotency_key=f"erase-{phone}"))
    wait_status(stack, delivered, SETTLED)  # delivered, where its provider reports deliveries
    later = {**sms(phone, body + " later"), "sendAt": rfc3339(datetime.now(UTC) + timedelta(hours=1))}
    scheduled = created_id(send(stack, later))
    added = call(stack, "POST", "/v1/suppressions", {"channel": "sms", "to": phone})
    assert added.status_code == 201, added.text
    assert _holding(stack, [phone, body]) != []  # the scan sees the copies before

    answer = call(stack, "POST", "/v1/erasures", {"to": phone})

    assert answer.status_code == 202, answer.text
    erasure = answer.json()["erasure"]
    assert (erasure["status"], erasure["to"]) == ("pending", None)

    def done() -> dict[str, Any] | None:
        got = requests.get(f"{stack.api}/v1/erasures/{erasure['id']}", headers=stack.auth(), timeout=10)
        assert got.status_code == 200, got.text
        shown: dict[str, Any] = got.json()["erasure"]
        return shown if shown["status"] == "done" else None

    assert eventually(done, ERASURE_DEADLINE) == {"id": erasure["id"], "status": "done", "to": None}
    assert message(stack, scheduled)["status"] == "canceled"  # canceled before it was erased
    assert (message(stack, delivered)["to"], message(stack, delivered)["body"]) == ("[erased]", "[erased]")
    assert _holding(stack, [phone, phone[1:], body]) == []
    refused = send(stack, sms(phone, "are you still there?"))
    assert (refused.status_code, error_code(refused)) == (422, "recipient_suppressed")
    again = send(stack, sms(phone, body), idempotency_key=f"erase-{phone}")
    assert again.status_code == 201, again.text
    assert again.headers.get("Idempotency-Replayed") == "true"
