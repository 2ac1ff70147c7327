"""Issue 17, end to end through `make run`: a STOP to the sandbox, and the SES mailbox simulator's
bounce address, each put the recipient on the suppression list; the next send answers 422; a
DELETE, after which sends work again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest
import requests

from tests.e2e.e2e_support import (
    created_id,
    email,
    error_code,
    eventually,
    formatted,
    imessage,
    send,
    sms,
    unique_body,
    unique_phone,
    wait_status,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e

BOUNCE = "bounce@simulator.amazonses.com"


def _entry(stack: LocalStack, to: str, key: str | None = None) -> dict[str, Any] | None:
    answer = requests.get(
        f"{stack.api}/v1/suppressions/{quote(to, safe='')}", headers=stack.auth(key), timeout=10
    )
    if answer.status_code == 404:
        return None
    assert answer.status_code == 200, answer.text
    entry: dict[str, Any] = answer.json()["suppression"]
    return entry


def _remove(stack: LocalStack, to: str) -> requests.Response:
    return requests.delete(
        f"{stack.api}/v1/suppressions/{quote(to, safe='')}", headers=stack.auth(), timeout=10
    )


def _refused(answer: requests.Response, reason: str) -> None:
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "recipient_suppressed"
    assert answer.json()["error"]["details"] == {"reason": reason}


def test_a_stop_to_the_sandbox_suppresses_the_number_everywhere_until_a_workspace_removes_it(
    stack: LocalStack,
) -> None:
    phone = unique_phone()
    inbound = requests.post(
        f"{stack.sandbox}/inbound",
        json={"channel": "sms", "from": formatted(phone), "body": " stop "},
        timeout=30,
    )
    assert inbound.status_code == 200, inbound.text
    assert inbound.json()["optedOut"] is True

    entry = eventually(lambda: _entry(stack, phone))
    assert (entry["to"], entry["reason"], entry["messageId"]) == (phone, "opted_out", None)
    _refused(send(stack, sms(phone, unique_body("after stop"))), "opted_out")
    _refused(send(stack, imessage(formatted(phone), unique_body("after stop"))), "opted_out")
    _refused(send(stack, sms(phone, unique_body("other workspace")), key=stack.other_api_key), "opted_out")

    assert _remove(stack, formatted(phone)).json() == {"success": True}
    message_id = created_id(send(stack, sms(phone, unique_body("opted back in"))))
    wait_status(stack, message_id, ("sent", "delivered"))
    _refused(send(stack, sms(phone, unique_body("still out")), key=stack.other_api_key), "opted_out")
    assert _remove(stack, phone).status_code == 404


def test_the_ses_simulators_bounce_address_fails_then_is_suppressed_until_removed(stack: LocalStack) -> None:
    bounced = wait_status(stack, created_id(send(stack, email(BOUNCE, unique_body("bounce")))), "failed")
    assert bounced["error"]["code"] == "bounced"

    entry = eventually(
        lambda: _entry(stack, BOUNCE.upper().replace("SIMULATOR.AMAZONSES.COM", "simulator.amazonses.com"))
    )
    assert (entry["reason"], entry["messageId"]) == ("bounced", bounced["id"])
    _refused(send(stack, email(BOUNCE, unique_body("bounce again"))), "bounced")
    assert _entry(stack, BOUNCE, key=stack.other_api_key) is None  # a bounce is one workspace's

    assert _remove(stack, BOUNCE).status_code == 200
    created_id(send(stack, email(BOUNCE, unique_body("after removal"))))
