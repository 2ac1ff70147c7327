"""An sms's encoding and segments, and smart encoding, through the local stack to the provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.e2e.e2e_support import (
    SETTLED,
    created_id,
    deliveries_of,
    send,
    sms,
    unique_body,
    unique_phone,
    wait_status,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e

CURLY = "\u201cready\u201d \u2013 it\u2019s 5\u00a0pm\u2026"
PLAIN = '"ready" - it\'s 5 pm...'


def test_smart_encoding_is_what_the_provider_receives_and_what_the_guard_compares(stack: LocalStack) -> None:
    phone, label = unique_phone(), unique_body("smart")

    first = send(stack, sms(phone, f"{label} {CURLY}") | {"smartEncoding": True})
    message_id = created_id(first)
    shown = first.json()["message"]
    assert shown["body"] == f"{label} {PLAIN}"
    assert (shown["encoding"], shown["segments"]) == ("GSM-7", 1)
    again = send(stack, sms(phone, f"{label} {PLAIN}"))
    assert again.status_code == 200
    assert again.json()["message"]["id"] == message_id

    wait_status(stack, message_id, SETTLED)
    [delivery] = deliveries_of(stack, message_id)
    assert delivery["body"] == f"{label} {PLAIN}"


def test_a_long_ucs_2_sms_shows_its_segments(stack: LocalStack) -> None:
    answer = send(stack, sms(unique_phone(), unique_body("ucs2") + " \u2713" * 40))

    shown = answer.json()["message"]
    assert answer.status_code == 201
    assert shown["encoding"] == "UCS-2"
    assert shown["segments"] == -(-len(shown["body"]) // 67)
