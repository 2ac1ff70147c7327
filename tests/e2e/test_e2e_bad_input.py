"""Bad input over HTTP, beside the schema-driven fuzz: what a generator from the OpenAPI document never
sends, sent by hand through `sendonce run` and its emulated API Gateway.

- numbers longer than Python converts, on every route that reads a JSON body: `400 validation_error`
  naming the field, never a 5xx (a 503 would tell the client to retry its bad input);
- a field repeated in one object, at any depth: `400`, so a second `to` never changes a send, and an
  Idempotency-Key sent with it is not taken;
- an id holding an encoded slash (`%2F`, routed by the gateway as two segments; `%252F`, passed on as
  `a/b`) on every route with an id: `404` to a good key, never `401`;
- the `RateLimit` fields on every answer to a good key, its 404s and 405s included.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
import requests

from tests.e2e.e2e_support import (
    created_id,
    error_code,
    message,
    rfc3339,
    send,
    sms,
    unique_body,
    unique_phone,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e

LONG = "1" * 5_000  # over Python's 4,300-digit limit of int() on text
REPEATED = "is repeated: a field may appear once in an object"


def _call(
    stack: LocalStack, method: str, path: str, body: str | None = None, **headers: str
) -> requests.Response:
    sent = {**stack.auth(), "Content-Type": "application/json", **headers}
    data = body.encode("utf-8") if body is not None else None
    return requests.request(method, f"{stack.api}{path}", data=data, headers=sent, timeout=30)


def _bad_request(answer: requests.Response) -> list[dict[str, str]]:
    assert answer.status_code == 400, answer.text
    assert error_code(answer) == "validation_error"
    assert answer.headers["RateLimit"]  # a good key's answer
    details: list[dict[str, str]] = answer.json()["error"]["details"]
    return details


def _sms_text(body: str, *extra: str) -> str:
    return "{" + ", ".join([f'"channel": "sms", "to": "{unique_phone()}", "body": "{body}"', *extra]) + "}"


def _scheduled(stack: LocalStack) -> str:
    later = rfc3339(datetime.now(UTC) + timedelta(hours=1))
    return created_id(send(stack, sms(unique_phone(), unique_body("scheduled")) | {"sendAt": later}))


# ---------------------------------------------------------------------------- numbers too long
_LONG_SEND_AT = _sms_text("long", f'"sendAt": {LONG}')


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/messages", _LONG_SEND_AT, "sendAt"),
        ("/v1/messages/batch", f'{{"messages": [{_LONG_SEND_AT}]}}', "messages.0.sendAt"),
        (
            "/v1/webhook-endpoints",
            f'{{"url": "https://example.com/hook", "eventTypes": [{LONG}]}}',
            "eventTypes.0",
        ),
        ("/v1/suppressions", f'{{"channel": "sms", "to": -{LONG}}}', "to"),
    ],
)
def test_a_number_too_long_is_a_400_naming_it_never_a_5xx(
    stack: LocalStack, path: str, body: str, field: str
) -> None:
    details = _bad_request(_call(stack, "POST", path, body))

    assert [detail["field"] for detail in details] == [field]
    assert "5000 digits" in details[0]["message"]


def test_an_edit_with_a_number_too_long_is_a_400_and_changes_nothing(stack: LocalStack) -> None:
    message_id = _scheduled(stack)
    before = message(stack, message_id)

    details = _bad_request(_call(stack, "PATCH", f"/v1/messages/{message_id}", f'{{"sendAt": {LONG}}}'))

    assert [detail["field"] for detail in details] == ["sendAt"]
    assert message(stack, message_id) == before


# ---------------------------------------------------------------------------- repeated fields
def test_a_repeated_to_is_a_400_and_its_key_is_not_taken(stack: LocalStack) -> None:
    first, second, body = unique_phone(), unique_phone(), unique_body("repeated to")
    repeated = f'{{"channel": "sms", "to": "{first}", "to": "{second}", "body": "{body}"}}'
    key = f"e2e-repeated-{time.time_ns()}"

    details = _bad_request(send(stack, {}, raw=repeated, idempotency_key=key))
    accepted = send(stack, sms(first, body), idempotency_key=key)

    assert details == [{"field": "to", "message": REPEATED}]
    assert accepted.status_code == 201, accepted.text  # the 400 was not stored under the key
    assert "Idempotency-Replayed" not in accepted.headers
    assert accepted.json()["message"]["to"] == first


_TWICE_BODY = _sms_text("b", '"body": "c"')


@pytest.mark.parametrize(
    ("path", "method", "body", "field"),
    [
        (
            "/v1/messages/batch",
            "POST",
            f'{{"messages": [{_sms_text("a")}, {_TWICE_BODY}]}}',
            "messages.1.body",
        ),
        ("/v1/messages", "POST", _sms_text("m", '"metadata": {"k": "1", "k": "2"}'), "metadata.k"),
        (
            "/v1/suppressions",
            "POST",
            '{"channel": "sms", "to": "+15550100000", "channel": "email"}',
            "channel",
        ),
        (
            "/v1/webhook-endpoints",
            "POST",
            '{"url": "https://example.com/a", "url": "https://example.com/b"}',
            "url",
        ),
    ],
)
def test_a_field_repeated_at_any_depth_is_a_400_naming_it(
    stack: LocalStack, path: str, method: str, body: str, field: str
) -> None:
    assert _bad_request(_call(stack, method, path, body)) == [{"field": field, "message": REPEATED}]


def test_an_edit_repeating_a_field_is_a_400_and_changes_nothing(stack: LocalStack) -> None:
    message_id = _scheduled(stack)
    before = message(stack, message_id)

    details = _bad_request(_call(stack, "PATCH", f"/v1/messages/{message_id}", '{"body": "x", "body": "y"}'))

    assert details == [{"field": "body", "message": REPEATED}]
    assert message(stack, message_id) == before


# ---------------------------------------------------------------------------- encoded slashes
_WITH_ID = [
    ("GET", "/v1/messages/{}"),
    ("DELETE", "/v1/messages/{}"),
    ("PATCH", "/v1/messages/{}"),
    ("GET", "/v1/suppressions/{}"),
    ("DELETE", "/v1/suppressions/{}"),
    ("GET", "/v1/webhook-endpoints/{}"),
    ("DELETE", "/v1/webhook-endpoints/{}"),
    ("POST", "/v1/webhook-endpoints/{}/rotate-secret"),
    ("GET", "/v1/events/{}"),
    ("POST", "/v1/events/{}/redeliver"),
]


@pytest.mark.parametrize(("method", "path"), _WITH_ID)
@pytest.mark.parametrize("value", ["a%2fb", "a%2Fb", "%2F", "a%252fb", "a%252Fb"])
def test_an_id_that_decodes_to_a_slash_is_a_404_never_a_401(
    stack: LocalStack, method: str, path: str, value: str
) -> None:
    body = '{"body": "x"}' if method == "PATCH" else None

    answer = _call(stack, method, path.format(value), body)

    assert answer.status_code == 404, answer.text
    assert error_code(answer) == "not_found"
    assert answer.headers["RateLimit"]
    assert answer.headers["RateLimit-Policy"]


# ---------------------------------------------------------------------------- RateLimit on 404 and 405
@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/nowhere", 404),
        ("GET", "/v1/messages/a/b", 404),
        ("GET", "/v1/messages/", 404),
        ("DELETE", "/v1/messages", 405),
        ("PUT", "/v1/messages/msg_01KDVDNA00QV9D1V5ZMBF8DBMW", 405),
        ("POST", "/v1/health", 405),
        ("GET", "/v1/messages/batch/x", 404),
    ],
)
def test_a_404_or_405_to_a_good_key_carries_the_ratelimit_fields(
    stack: LocalStack, method: str, path: str, status: int
) -> None:
    good = _call(stack, method, path)
    wrong = _call(stack, method, path, Authorization="Bearer sk_wrong")

    assert (good.status_code, wrong.status_code) == (status, status)
    assert good.headers["RateLimit"]
    assert good.headers["RateLimit-Policy"]
    assert "RateLimit" not in wrong.headers
    assert json.loads(good.text)["success"] is False
