"""Issue 18, end to end through `make run`: a test key's messages meet the simulator's recipient table,
and `/v1/test/deliveries` counts what it accepted; a live key sees none of it."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
import requests

from tests.e2e.e2e_support import (
    SETTLED,
    created_id,
    deliveries_of,
    email,
    message,
    send,
    sms,
    unique_body,
    unique_phone,
    wait_status,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Row:
    request: dict[str, Any]
    statuses: tuple[str, ...]  # where the message ends
    deliveries: int  # what /v1/test/deliveries counts for it
    error: str | None = None  # its error's code


def _rows() -> list[Row]:
    def body(label: str) -> str:
        return unique_body(f"test mode {label}")

    return [
        Row(sms("+15005550001", body("permanent")), ("failed",), 0, "provider_rejected"),
        Row(sms("+15005550002", body("transient")), SETTLED, 1),
        Row(sms("+15005550003", body("lost answer")), SETTLED, 1),
        Row(sms("+15005550004", body("opt-out")), ("delivered",), 1),
        Row(email("success@simulator.amazonses.com", body("success")), ("delivered",), 1),
        Row(email("bounce@simulator.amazonses.com", body("bounce")), ("failed",), 1, "bounced"),
        Row(email("complaint@simulator.amazonses.com", body("complaint")), ("delivered",), 1),
        Row(sms(unique_phone(), body("anyone")), ("delivered",), 1),
    ]


def simulated_deliveries(
    stack: LocalStack, message_id: str | None = None, key: str | None = None
) -> requests.Response:
    query = {"messageId": message_id} if message_id else {}
    return requests.get(
        f"{stack.api}/v1/test/deliveries",
        params=query,
        headers=stack.auth(key or stack.test_api_key),
        timeout=10,
    )


def test_every_row_of_the_recipient_table_with_its_deliveries_counted(stack: LocalStack) -> None:
    rows = _rows()
    with ThreadPoolExecutor(len(rows)) as pool:
        ids = list(pool.map(lambda row: created_id(send(stack, row.request, key=stack.test_api_key)), rows))

    for row, message_id in zip(rows, ids, strict=True):
        final = wait_status(stack, message_id, row.statuses, key=stack.test_api_key, timeout=60)
        assert (final["error"] or {}).get("code") == row.error, (row.request["to"], final)
        answer = simulated_deliveries(stack, message_id)
        assert answer.status_code == 200, answer.text
        assert [d["messageId"] for d in answer.json()["deliveries"]] == [message_id] * row.deliveries, row
        # The last hop was the simulator's: nothing reached the sandbox's providers.
        assert deliveries_of(stack, message_id) == []
    transient = message(stack, ids[1], key=stack.test_api_key)
    assert transient["attempts"] == 3  # two transient failures, then accepted


def test_the_walkthrough_a_lost_answer_sent_twice_under_one_key_is_delivered_once(stack: LocalStack) -> None:
    request = sms("+15005550003", unique_body("walkthrough"))
    order = f"order-{uuid.uuid4().hex}"
    message_id = created_id(send(stack, request, key=stack.test_api_key, idempotency_key=order))
    again = send(stack, request, key=stack.test_api_key, idempotency_key=order)

    assert again.status_code == 201
    assert again.headers.get("Idempotency-Replayed") == "true"
    assert created_id(again) == message_id
    wait_status(stack, message_id, SETTLED, key=stack.test_api_key, timeout=60)
    assert len(simulated_deliveries(stack, message_id).json()["deliveries"]) == 1


def test_a_live_key_gets_404_on_test_deliveries_and_on_a_test_message(stack: LocalStack) -> None:
    message_id = created_id(
        send(stack, sms(unique_phone(), unique_body("test only")), key=stack.test_api_key)
    )

    for query in (None, message_id):
        answer = simulated_deliveries(stack, query, key=stack.api_key)
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "not_found"
    seen_live = requests.get(f"{stack.api}/v1/messages/{message_id}", headers=stack.auth(), timeout=10)
    assert seen_live.status_code == 404
    listed = requests.get(f"{stack.api}/v1/messages", headers=stack.auth(), timeout=10).json()["messages"]
    assert message_id not in {m["id"] for m in listed}
