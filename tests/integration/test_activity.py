"""What the console shows, against moto through the real functions: the promise's daily counts and a
message's timeline.

- A day's counts: new messages and duplicates blocked come from the table's stream, with the events
  that tell of them (MessageChangesFunction), once however often the stream brings a record again;
  replays and sends refused for a suppressed recipient from the API's answers. A new send makes the
  same AWS calls as before: nothing of the counts is on its path.
- A delivered message's timeline holds its creation, every status told, its provider attempt, the
  provider's events and each status-webhook delivery, oldest first; another workspace gets 404.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from tests.integration.conftest import (
    ApiAnswer,
    FakeHttpProvider,
    Stack,
    WebhookReceiver,
    function,
    sqs_event,
)
from tests.support.lambda_context import FakeLambdaContext

SECRET = "integration-webhook-secret"
TODAY = datetime.now(UTC).date().isoformat()


def _api(
    stack: Stack, method: str, path: str, body: Any = None, workspace: str = "ws_local", **kw: Any
) -> ApiAnswer:
    return stack.call(
        stack.event("api_send_sms.json", method=method, path=path, body=body, workspace=workspace, **kw)
    )


def _today(stack: Stack, workspace: str = "ws_local") -> dict[str, Any]:
    answer = _api(stack, "GET", "/v1/promise", workspace=workspace, query={"days": "2"})
    assert answer.status == 200, answer.raw_body
    today: dict[str, Any] = answer.json["days"][0]
    assert today["date"] == TODAY
    return today


def test_a_days_counts_tell_new_messages_replays_duplicates_and_refusals_once_each(stack: Stack) -> None:
    body = {"channel": "sms", "to": "+15550100041", "body": f"promise {time.monotonic_ns()}"}
    first = stack.send(body=body, key="promise-1")
    assert first.status == 201, first.raw_body
    assert stack.send(body=body, key="promise-1").header("Idempotency-Replayed") == "true"
    duplicate = stack.send(body=body)
    assert duplicate.status == 200
    assert duplicate.json["duplicateOnly"] is True
    assert _api(stack, "POST", "/v1/suppressions", {"channel": "sms", "to": "+15550100042"}).status == 201
    refused = stack.send(body={**body, "to": "+15550100042"})
    assert refused.status == 422, refused.raw_body
    other = stack.send(body={**body, "to": "+15550100043", "body": "another"})
    assert other.status == 201

    records = stack.read_changes()
    assert stack.tell_changes(records) == {"batchItemFailures": []}
    assert stack.tell_changes(records) == {"batchItemFailures": []}  # the stream brings them again

    assert _today(stack) == {
        "date": TODAY,
        "newMessages": 2,
        "replays": 1,
        "duplicatesBlocked": 1,
        "refusedSuppressed": 1,
    }
    assert _today(stack, "ws_other")["newMessages"] == 0
    blocked = _api(stack, "GET", "/v1/events", query={"type": "message.duplicate_blocked"})
    assert [event["data"]["message"]["id"] for event in blocked.json["events"]] == [
        first.json["message"]["id"]
    ]


def test_a_delivered_messages_timeline_holds_everything_that_happened_to_it_in_order(
    stack: Stack, http_provider: FakeHttpProvider, webhook_receiver: WebhookReceiver
) -> None:
    stack.put_secret("WebhookSigningSecret", SECRET)
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    stack.setenv("SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true")  # the receiver on 127.0.0.1
    added = _api(stack, "POST", "/v1/webhook-endpoints", {"url": webhook_receiver.url + "/hooks"})
    assert added.status == 201, added.raw_body
    sent = stack.send(
        "api_send_imessage.json",
        body={"channel": "imessage", "to": "+15550100044", "body": f"timeline {time.monotonic_ns()}"},
    )
    message_id = sent.json["message"]["id"]
    stack.dispatch("imessage")
    event = {
        "eventId": "tl-1",
        "messageId": message_id,
        "type": "delivered",
        "occurredAt": "2026-01-01T00:00:00Z",
    }
    assert stack.provider_webhook(event, SECRET).status == 200
    records = stack.receive("events")
    status = function("status").handler(sqs_event(records, stack.queue_arn("events")), FakeLambdaContext())
    assert status == {"batchItemFailures": []}
    stack.tell_changes()
    stack.deliver_webhooks(wait=1.0)

    answer = _api(stack, "GET", f"/v1/messages/{message_id}/timeline")

    assert answer.status == 200, answer.raw_body
    timeline = answer.json["timeline"]
    kinds = [
        (entry["kind"], entry.get("status") or entry.get("outcome") or entry.get("type"))
        for entry in timeline
    ]
    assert kinds[0] == ("created", "queued")
    assert [k for k in kinds if k[0] == "status"] == [
        ("status", "queued"),
        ("status", "sent"),
        ("status", "delivered"),
    ]
    assert ("provider_attempt", "accepted") in kinds
    assert ("provider_event", "delivered") in kinds
    assert [k for k in kinds if k[0] == "webhook_delivery"] == [("webhook_delivery", "succeeded")] * 3
    assert [entry["at"] for entry in timeline] == sorted(entry["at"] for entry in timeline)
    assert _api(stack, "GET", f"/v1/messages/{message_id}/timeline", workspace="ws_other").status == 404
