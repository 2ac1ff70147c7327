"""Issue 11, end to end: a webhook forged with a wrong secret releases no lock and delivers nothing twice.

The template used to deploy `change-me-webhook-secret` by default: a `failed` event signed with it
released a `sent` sms's dedup lock, and an identical resend was delivered a second time. Now the
local stack, like a deployment, has a secret of its own (random, printed in its banner, kept in
the emulator's Secrets Manager), and a webhook signed with anything else is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
import pytest

from tests.e2e.e2e_support import (
    as_raw,
    created_id,
    deliveries_with_body,
    error_code,
    http_body,
    message,
    post_webhook,
    send,
    settle_events,
    sms,
    unique_body,
    unique_phone,
    wait_status,
)

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e

OLD_DEFAULT_SECRET = "change-me-webhook-secret"


def _failed(message_id: str) -> bytes:
    event: dict[str, Any] = http_body(message_id, "failed")
    return as_raw(event | {"error": {"code": "unreachable", "message": "the handset is off"}})


def _sent_sms(stack: LocalStack, label: str) -> tuple[dict[str, Any], str]:
    request = sms(unique_phone(), unique_body(label))
    message_id = created_id(send(stack, request))
    wait_status(stack, message_id, "sent")
    assert len(deliveries_with_body(stack, request["body"])) == 1
    return request, message_id


def test_a_failed_event_forged_with_a_wrong_secret_releases_no_lock_and_nothing_is_sent_twice(
    stack: LocalStack,
) -> None:
    request, message_id = _sent_sms(stack, "forged failed")

    for secret in (OLD_DEFAULT_SECRET, stack.webhook_secret[::-1]):
        forged = post_webhook(stack, _failed(message_id), secret=secret)
        assert forged.status_code == 401, forged.text
        assert error_code(forged) == "unauthorized"

    settle_events(stack)  # whatever reached the events queue before now has been applied
    assert message(stack, message_id)["status"] == "sent"
    resend = send(stack, request)
    assert resend.status_code == 200, resend.text
    assert resend.json()["duplicateOnly"] is True  # the dedup lock still holds
    assert resend.json()["message"]["id"] == message_id
    settle_events(stack)  # a resend that slipped through would have reached the sandbox by now
    assert len(deliveries_with_body(stack, request["body"])) == 1


def test_the_same_event_signed_with_the_printed_secret_takes_effect(stack: LocalStack) -> None:
    """The control: the secret the banner printed is the stack's, and a release is observable."""
    request, message_id = _sent_sms(stack, "genuine failed")

    genuine = post_webhook(stack, _failed(message_id), secret=stack.webhook_secret)

    assert genuine.status_code == 200, genuine.text
    wait_status(stack, message_id, "failed")
    retried = created_id(send(stack, request))  # a deliberate retry of a failed message
    wait_status(stack, retried, "sent")
    assert len(deliveries_with_body(stack, request["body"])) == 2


def test_the_printed_secret_is_the_one_the_stack_keeps_in_its_secrets_manager(stack: LocalStack) -> None:
    secretsmanager = boto3.client(
        "secretsmanager",
        endpoint_url=stack.aws,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )

    stored = secretsmanager.get_secret_value(SecretId="WebhookSigningSecret")["SecretString"]

    assert stored == stack.webhook_secret
    assert len(stored) >= 32
    assert "SENDONCE_WEBHOOK_SECRET" not in stack.env
