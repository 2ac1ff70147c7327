"""Issue 32, end to end through `sendonce run` with sms through Twilio then the HTTP provider (both the
sandbox's): each of the sandbox's faults at Twilio, and the deliveries counted per provider.

A message goes to the HTTP provider only when Twilio provably did not accept it (refused, 403, a
lost answer that Twilio's list shows it never took); a lost answer Twilio did take is learned by
asking, and nothing is sent again; a recipient Twilio refuses fails the message; a burst of
messages failing over delivers each exactly once.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from tests.e2e.e2e_support import (
    arm_fault,
    created_id,
    deliveries_of,
    eventually,
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

DONE = ("sent", "delivered", "failed", "unknown")


def _providers(stack: LocalStack, message_id: str) -> list[str]:
    return [entry["provider"] for entry in deliveries_of(stack, message_id)]


def _attempts(message: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a["provider"], a["outcome"]) for a in message["providerAttempts"]]


def _delivered(stack: LocalStack, message_id: str) -> dict[str, Any]:
    """The message once delivered (the sandbox reports deliveries back)."""
    return wait_status(stack, message_id, ("delivered", "failed", "unknown"), timeout=60)


@pytest.mark.parametrize("mode", ["refused", "error_403", "timeout_unaccepted"])
def test_twilio_provably_not_accepting_sends_through_the_http_provider_once(
    failover_stack: LocalStack, mode: str
) -> None:
    phone = unique_phone()
    arm_fault(failover_stack, mode, to=phone, channel="sms", provider="twilio")

    message_id = created_id(send(failover_stack, sms(phone, unique_body(f"twilio {mode}"))))
    final = _delivered(failover_stack, message_id)

    assert final["status"] == "delivered"
    assert final["provider"] == "http"
    assert _attempts(final) == [("twilio", "not_accepted"), ("http", "accepted")]
    assert _providers(failover_stack, message_id) == ["http"]


def test_a_lost_answer_twilio_did_take_is_learned_by_asking_and_never_sent_again(
    failover_stack: LocalStack,
) -> None:
    phone = unique_phone()
    arm_fault(failover_stack, "timeout", to=phone, channel="sms", provider="twilio")

    message_id = created_id(send(failover_stack, sms(phone, unique_body("twilio took it late"))))
    _delivered(failover_stack, message_id)
    # Its status callbacks may deliver it before the lost answer times out: the call is recorded then.
    final = eventually(lambda: (found := message(failover_stack, message_id))["providerAttempts"] and found)

    assert final["status"] == "delivered"
    assert final["provider"] == "twilio"
    assert _attempts(final) == [("twilio", "accepted")]
    assert _providers(failover_stack, message_id) == ["twilio"]


def test_a_recipient_twilio_refuses_fails_and_no_other_provider_is_tried(failover_stack: LocalStack) -> None:
    phone = unique_phone()
    arm_fault(failover_stack, "error_400", to=phone, channel="sms", provider="twilio")

    message_id = created_id(send(failover_stack, sms(phone, unique_body("a bad number"))))
    final = wait_status(failover_stack, message_id, DONE, timeout=60)

    assert final["status"] == "failed"
    assert (final["provider"], _attempts(final)) == (None, [("twilio", "failed")])
    assert _providers(failover_stack, message_id) == []


def test_without_faults_twilio_sends_and_its_signed_callbacks_deliver(failover_stack: LocalStack) -> None:
    message_id = created_id(send(failover_stack, sms(unique_phone(), unique_body("plain twilio"))))
    final = _delivered(failover_stack, message_id)

    assert (final["status"], final["provider"]) == ("delivered", "twilio")
    assert _providers(failover_stack, message_id) == ["twilio"]


def test_a_burst_failing_over_delivers_each_message_exactly_once(failover_stack: LocalStack) -> None:
    phone = unique_phone()
    arm_fault(failover_stack, "error_403", to=phone, channel="sms", provider="twilio", count=20)
    bodies = [unique_body(f"burst {n}") for n in range(20)]

    with ThreadPoolExecutor(max_workers=10) as pool:
        ids = list(pool.map(lambda body: created_id(send(failover_stack, sms(phone, body))), bodies))
    finals = [_delivered(failover_stack, message_id) for message_id in ids]

    per_provider = Counter(
        provider for message_id in ids for provider in _providers(failover_stack, message_id)
    )
    assert {final["status"] for final in finals} == {"delivered"}
    assert per_provider == {"http": len(ids)}  # one delivery each, in all, none through Twilio
    for final in finals:  # Twilio refused it, or was cooling off and skipped: then http took it
        assert _attempts(final) in (
            [("twilio", "not_accepted"), ("http", "accepted")],
            [("http", "accepted")],
        )
