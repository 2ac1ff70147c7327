"""The secrets on the emulator: read at run time from Secrets Manager, never from the environment.

A webhook signed with any other secret (the old template default included) is refused and
releases nothing; a secret that cannot be read is an outage (`503` on the webhook, a retried
attempt in a dispatcher), never an accepted event and never a failed message.
"""

from __future__ import annotations

import time
from typing import Any

import boto3

from tests.integration.conftest import (
    REGION,
    FakeHttpProvider,
    Stack,
    clear_caches,
    function,
    sqs_event,
)
from tests.support.lambda_context import FakeLambdaContext

OLD_DEFAULT_SECRET = "change-me-webhook-secret"  # what the template used to deploy with


def _send_imessage(stack: Stack, body: str) -> Any:
    return stack.send(
        "api_send_imessage.json", body={"channel": "imessage", "to": "+15550100041", "body": body}
    )


def _failed(message_id: str, event_id: str) -> dict[str, Any]:
    return {
        "eventId": event_id,
        "messageId": message_id,
        "type": "failed",
        "occurredAt": "2026-01-01T00:00:00Z",
        "error": {"code": "unreachable", "message": "off"},
    }


def _apply_queued(stack: Stack) -> int:
    records = stack.receive("events")
    if records:
        event = sqs_event(records, stack.queue_arn("events"))
        function("status").handler(event, FakeLambdaContext(function_name="status"))
    return len(records)


def _sent(stack: Stack, http_provider: FakeHttpProvider, body: str) -> str:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    answer = _send_imessage(stack, body)
    assert answer.status == 201, answer.raw_body
    assert stack.dispatch("imessage") == {"batchItemFailures": []}
    message_id: str = answer.json["message"]["id"]
    assert stack.message(message_id)["status"] == "sent"
    return message_id


def test_a_failed_event_signed_with_the_old_default_is_401_and_the_lock_holds(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    body = f"forged {time.monotonic_ns()}"
    message_id = _sent(stack, http_provider, body)

    forged = stack.provider_webhook(_failed(message_id, "evt-forged"), OLD_DEFAULT_SECRET)

    assert forged.status == 401
    assert _apply_queued(stack) == 0  # nothing reached the events queue
    assert stack.message(message_id)["status"] == "sent"
    resend = _send_imessage(stack, body)
    assert resend.status == 200
    assert resend.json["duplicateOnly"] is True  # the dedup lock was not released
    assert stack.dispatch("imessage") == {"batchItemFailures": []}
    assert len(http_provider.calls) == 1  # delivered once


def test_the_same_event_signed_with_the_stacks_secret_does_release_the_lock(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    """The control of the test above: what its 401 prevented is observable."""
    body = f"genuine {time.monotonic_ns()}"
    message_id = _sent(stack, http_provider, body)

    genuine = stack.provider_webhook(_failed(message_id, "evt-genuine"), stack.secrets.webhook_secret)

    assert genuine.status == 200
    assert _apply_queued(stack) == 1
    assert stack.message(message_id)["status"] == "failed"
    assert _send_imessage(stack, body).status == 201


def test_a_webhook_is_503_while_its_secret_cannot_be_read(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    message_id = _sent(stack, http_provider, f"outage {time.monotonic_ns()}")
    secretsmanager = boto3.client("secretsmanager", region_name=REGION)
    secretsmanager.delete_secret(SecretId="WebhookSigningSecret", ForceDeleteWithoutRecovery=True)
    clear_caches()  # a fresh execution environment: nothing cached from before the outage

    answer = stack.provider_webhook(_failed(message_id, "evt-during-outage"), stack.secrets.webhook_secret)

    assert answer.status == 503
    assert answer.json["error"]["code"] == "unavailable"
    assert answer.header("Retry-After")
    assert _apply_queued(stack) == 0
    assert stack.message(message_id)["status"] == "sent"


def test_the_dispatcher_sends_the_token_its_secret_holds(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    stack.put_secret("HttpProviderTokenSecret", "rotated-token-of-at-least-32-characters")

    _sent(stack, http_provider, f"token {time.monotonic_ns()}")

    (call,) = http_provider.calls
    assert call.headers["authorization"] == "Bearer rotated-token-of-at-least-32-characters"


def test_an_unreadable_token_is_a_retried_attempt_not_a_failure(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    secretsmanager = boto3.client("secretsmanager", region_name=REGION)
    secretsmanager.delete_secret(SecretId="HttpProviderTokenSecret", ForceDeleteWithoutRecovery=True)
    answer = _send_imessage(stack, f"no token {time.monotonic_ns()}")
    message_id = answer.json["message"]["id"]

    result = stack.dispatch("imessage")

    assert len(result["batchItemFailures"]) == 1  # back on the queue for a later attempt
    item = stack.message_item(message_id)
    assert item["status"]["S"] == "queued"
    assert item["error"]["M"]["code"]["S"] == "provider_credentials_unavailable"
    assert http_provider.calls == []
