"""Status webhooks through `sendonce run`, received and verified by a receiver written with the
`standardwebhooks` library, as a customer would write one.

The receiver runs in the test process on a loopback port (the local stack allows private targets).
It can refuse the first attempts of a webhook-id, so the retries are observed as they arrive.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
from standardwebhooks import Webhook, WebhookVerificationError

from tests.e2e.conftest import LocalStack
from tests.e2e.e2e_support import created_id, error_code, eventually, send, sms, unique_body, unique_phone
from tests.support.http_server import Reply, serving


@dataclass
class Receiver:
    """A customer's endpoint: verifies every delivery with the standardwebhooks library."""

    secrets: list[str] = field(default_factory=list)
    refuse_first: int = 0  # attempts of each webhook-id answered 500 before a 204
    received: list[dict[str, Any]] = field(default_factory=list)  # verified deliveries, in arrival order
    unverified: list[str] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def take(self, body: bytes, headers: dict[str, str]) -> int:
        with self.lock:
            payload = None
            for secret in self.secrets:
                try:
                    payload = Webhook(secret).verify(body, headers)
                    break
                except WebhookVerificationError:
                    continue
            if payload is None:
                self.unverified.append(headers.get("webhook-id", "?"))
                return 400
            webhook_id = headers["webhook-id"]
            self.attempts[webhook_id] = self.attempts.get(webhook_id, 0) + 1
            self.received.append({"id": webhook_id, "headers": headers, "payload": payload})
            return 500 if self.attempts[webhook_id] <= self.refuse_first else 204

    def of(self, message_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.received if r["payload"]["data"]["message"]["id"] == message_id]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    state = Receiver()
    with serving(lambda request: Reply(state.take(request.body, request.headers))) as server:
        state.url = f"{server.url}/hooks"
        yield state


def _post(stack: LocalStack, path: str, body: Any = None, key: str | None = None) -> requests.Response:
    headers = stack.auth(key)
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body)
    return requests.post(f"{stack.api}{path}", data=data, headers=headers, timeout=30)


def _get(stack: LocalStack, path: str, key: str | None = None, **params: Any) -> requests.Response:
    return requests.get(f"{stack.api}{path}", params=params, headers=stack.auth(key), timeout=30)


@pytest.fixture(scope="module")
def endpoint(stack: LocalStack, receiver: Receiver) -> Iterator[dict[str, Any]]:
    answer = _post(stack, "/v1/webhook-endpoints", {"url": receiver.url, "description": "e2e receiver"})
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()["endpoint"]
    receiver.secrets.append(created["secret"])
    yield created
    requests.delete(f"{stack.api}/v1/webhook-endpoints/{created['id']}", headers=stack.auth(), timeout=30)


def _sent_message(stack: LocalStack) -> str:
    answer = send(stack, sms(unique_phone(), unique_body("webhooks")))
    assert answer.status_code == 201, answer.text
    return created_id(answer)


def test_every_change_arrives_signed_in_order_and_the_receiver_verifies_it(
    stack: LocalStack, receiver: Receiver, endpoint: dict[str, Any]
) -> None:
    message_id = _sent_message(stack)

    def both_told() -> list[dict[str, Any]] | None:
        got = receiver.of(message_id)
        return got if {"message.queued", "message.sent"} <= {r["payload"]["type"] for r in got} else None

    told = eventually(both_told)

    by_type = {r["payload"]["type"]: r for r in told}
    assert by_type["message.queued"]["payload"]["data"]["sequence"] == 1
    assert by_type["message.sent"]["payload"]["data"]["sequence"] == 2
    assert by_type["message.sent"]["payload"]["data"]["message"]["status"] == "sent"
    assert receiver.unverified == []
    # The event, as the API lists it: the same id as the webhook-id, delivered to the endpoint.
    events = _get(stack, "/v1/events", messageId=message_id).json()["events"]
    assert {e["id"] for e in events} >= {r["id"] for r in told}
    listed = next(e for e in events if e["type"] == "message.sent")
    assert eventually(
        lambda: (
            _get(stack, f"/v1/events/{listed['id']}").json()["event"]["deliveries"][0]["status"]
            == "succeeded"
        )
    )


def test_a_duplicate_caught_by_the_guard_is_told_with_the_original(
    stack: LocalStack, receiver: Receiver, endpoint: dict[str, Any]
) -> None:
    request = sms(unique_phone(), unique_body("duplicate"))
    original = created_id(send(stack, request))
    assert send(stack, request).json()["duplicateOnly"] is True

    blocked = eventually(
        lambda: [r for r in receiver.of(original) if r["payload"]["type"] == "message.duplicate_blocked"]
    )

    assert len(blocked) == 1
    assert blocked[0]["payload"]["data"]["sequence"] is None
    assert blocked[0]["payload"]["data"]["message"]["id"] == original


def test_a_failed_attempt_comes_back_with_the_same_webhook_id_and_every_attempt_is_recorded(
    stack: LocalStack, receiver: Receiver, endpoint: dict[str, Any]
) -> None:
    receiver.refuse_first = 2
    try:
        message_id = _sent_message(stack)
        queued = eventually(
            lambda: (
                [r for r in receiver.of(message_id) if r["payload"]["type"] == "message.queued"][2:] or None
            )
        )
    finally:
        receiver.refuse_first = 0

    webhook_id = queued[0]["id"]
    assert [r["id"] for r in receiver.of(message_id) if r["payload"]["type"] == "message.queued"] == [
        webhook_id
    ] * 3

    def succeeded() -> dict[str, Any] | None:
        delivery: dict[str, Any] = _get(stack, f"/v1/events/{webhook_id}").json()["event"]["deliveries"][0]
        return delivery if delivery["status"] == "succeeded" else None

    delivery = eventually(succeeded)
    assert delivery["attempts"] == 3
    assert delivery["lastResponseStatus"] == 204


def test_a_redelivery_arrives_again_with_the_same_webhook_id(
    stack: LocalStack, receiver: Receiver, endpoint: dict[str, Any]
) -> None:
    message_id = _sent_message(stack)
    first = eventually(
        lambda: [r for r in receiver.of(message_id) if r["payload"]["type"] == "message.queued"]
    )
    webhook_id = first[0]["id"]

    answer = _post(stack, f"/v1/events/{webhook_id}/redeliver", {"endpointId": endpoint["id"]})

    assert answer.status_code == 202, answer.text
    again = eventually(lambda: [r for r in receiver.of(message_id) if r["id"] == webhook_id][1:])
    assert again[0]["payload"] == first[0]["payload"]


def test_another_workspace_sees_neither_the_endpoint_nor_the_events(
    stack: LocalStack, receiver: Receiver, endpoint: dict[str, Any]
) -> None:
    message_id = _sent_message(stack)
    told = eventually(lambda: receiver.of(message_id))

    other = stack.other_api_key
    assert _get(stack, f"/v1/webhook-endpoints/{endpoint['id']}", key=other).status_code == 404
    assert _get(stack, f"/v1/events/{told[0]['id']}", key=other).status_code == 404
    assert _get(stack, "/v1/events", key=other, messageId=message_id).json()["events"] == []
    assert _post(stack, f"/v1/events/{told[0]['id']}/redeliver", key=other).status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://127.0.0.1/hooks"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"url": "https://user:secret@example.com/hooks"}, "url"),
        ({"url": "https://example.com/hooks", "eventTypes": ["message.opened"]}, "eventTypes"),
        ({"url": "https://example.com/hooks", "eventTypes": []}, "eventTypes"),
        ({"url": "https://example.com/hooks", "secret": "mine"}, "secret"),
    ],
)
def test_a_bad_endpoint_is_a_clear_400_and_nothing_is_stored(
    stack: LocalStack, body: dict[str, Any], field: str
) -> None:
    key = stack.other_api_key
    before = _get(stack, "/v1/webhook-endpoints", key=key).json()["endpoints"]

    answer = _post(stack, "/v1/webhook-endpoints", body, key=key)

    assert answer.status_code == 400, answer.text
    assert error_code(answer) == "validation_error"
    assert any(field in detail["field"] for detail in answer.json()["error"]["details"])
    assert _get(stack, "/v1/webhook-endpoints", key=key).json()["endpoints"] == before


def test_the_eleventh_endpoint_is_refused_and_a_secret_is_never_shown_again(stack: LocalStack) -> None:
    key = stack.other_api_key
    made = []
    try:
        for index in range(10):
            answer = _post(
                stack, "/v1/webhook-endpoints", {"url": f"https://example.com/hooks/{index}"}, key=key
            )
            assert answer.status_code == 201, answer.text
            assert answer.json()["endpoint"]["secret"].startswith("whsec_")
            made.append(answer.json()["endpoint"]["id"])

        eleventh = _post(stack, "/v1/webhook-endpoints", {"url": "https://example.com/hooks/11"}, key=key)

        assert eleventh.status_code == 400
        assert error_code(eleventh) == "validation_error"
        listed = _get(stack, "/v1/webhook-endpoints", key=key).json()["endpoints"]
        assert sorted(e["id"] for e in listed) == sorted(made)
        assert all("secret" not in e for e in listed)
        assert "secret" not in _get(stack, f"/v1/webhook-endpoints/{made[0]}", key=key).json()["endpoint"]
    finally:
        for endpoint_id in made:
            requests.delete(
                f"{stack.api}/v1/webhook-endpoints/{endpoint_id}", headers=stack.auth(key), timeout=30
            )
