"""Suppressions against moto, through the real handlers: SES bounces and complaints through the events
queue, the HTTP provider's `opted_out` webhook (naming a message, or none), the list's routes, the
send-time refusal (never stored under a key) and the dispatcher's check at its claim; and races of a
STOP with sends, and with a dispatch."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any
from urllib.parse import quote

import pytest
from sendonce.aws_clients import client
from sendonce.settings import DispatcherSettings
from sendonce_cli.main import main

from tests.integration.conftest import (
    ApiAnswer,
    FakeHttpProvider,
    Stack,
    function,
    sqs_event,
)
from tests.support.lambda_context import FakeLambdaContext

SECRET = "integration-webhook-secret"
OTHER = "ws_other"
PHONE = "+15550100077"


def _api(stack: Stack, method: str, path: str, body: Any = None, workspace: str = "ws_local") -> ApiAnswer:
    return stack.call(
        stack.event("api_send_sms.json", method=method, path=path, body=body, workspace=workspace)
    )


def _suppression(stack: Stack, to: str, workspace: str = "ws_local") -> ApiAnswer:
    return _api(stack, "GET", f"/v1/suppressions/{quote(to, safe='')}", workspace=workspace)


def _webhook(stack: Stack, payload: dict[str, Any]) -> ApiAnswer:
    return stack.provider_webhook(payload, SECRET)


def _apply_queued(stack: Stack) -> dict[str, Any]:
    """Feed the events queue to the status function, as its event source mapping would."""
    records = stack.receive("events")
    event = sqs_event(records, stack.queue_arn("events"))
    result: dict[str, Any] = function("status").handler(event, FakeLambdaContext(function_name="status"))
    return result


def _opt_out(stack: Stack, event_id: str, to: str = PHONE, message_id: str | None = None) -> None:
    payload = {"eventId": event_id, "type": "opted_out", "to": to, "occurredAt": "2026-01-01T00:00:00Z"}
    if message_id is not None:
        payload["messageId"] = message_id
    assert _webhook(stack, payload).status == 200
    assert _apply_queued(stack) == {"batchItemFailures": []}


def _imessage(
    stack: Stack, to: str = PHONE, body: str = "hello", workspace: str = "ws_local", **extra: Any
) -> ApiAnswer:
    return stack.send(
        "api_send_imessage.json",
        body={"channel": "imessage", "to": to, "body": body, **extra},
        workspace=workspace,
    )


def _sms(
    stack: Stack, to: str = PHONE, body: str = "hello", workspace: str = "ws_local", key: str | None = None
) -> ApiAnswer:
    return stack.send(
        "api_send_sms.json", body={"channel": "sms", "to": to, "body": body}, workspace=workspace, key=key
    )


def _refused(answer: ApiAnswer, reason: str) -> bool:
    return answer.status == 422 and answer.json["error"] == {
        "code": "recipient_suppressed",
        "message": answer.json["error"]["message"],
        "details": {"reason": reason},
    }


# ---------------------------------------------------------------------------- SES, by the events queue
def test_given_ses_permanent_bounces_and_complaints_then_each_recipient_is_suppressed_in_its_workspace(
    stack: Stack,
) -> None:
    client("ses").verify_email_identity(EmailAddress=DispatcherSettings.from_environment().email_from)
    sent = {}
    for to in ("bounced@example.com", "complainer@example.com"):
        answer = stack.send(
            "api_send_email.json", body={"channel": "email", "to": to, "subject": "Hi", "body": "news"}
        )
        assert answer.status == 201, answer.raw_body
        sent[to] = answer.json["message"]["id"]
    stack.dispatch("email")

    def notification(kind: str, to: str, detail: dict[str, Any]) -> str:
        ses_event = {
            "eventType": kind,
            "mail": {
                "timestamp": "2026-01-01T00:00:00.000Z",
                "messageId": f"ses-{kind}",
                "destination": [to],
                "tags": {"sendonce-message-id": [sent[to]]},
            },
            kind[0].lower() + kind[1:]: {"timestamp": "2026-01-01T00:00:01.000Z", **detail},
        }
        return json.dumps({"Type": "Notification", "MessageId": kind, "Message": json.dumps(ses_event)})

    bounce = notification(
        "Bounce", "bounced@example.com", {"bounceType": "Permanent", "bounceSubType": "General"}
    )
    complaint = notification("Complaint", "complainer@example.com", {"complaintFeedbackType": "abuse"})
    for body in (bounce, complaint, bounce, complaint):  # SNS delivers at least once
        stack.sqs.send_message(QueueUrl=stack.queue_urls["EventsQueue"], MessageBody=body)
    assert _apply_queued(stack) == {"batchItemFailures": []}

    assert stack.message(sent["bounced@example.com"])["status"] == "failed"
    for to, reason in (("bounced@example.com", "bounced"), ("complainer@example.com", "complained")):
        entry = _suppression(stack, to.upper().replace("EXAMPLE.COM", "example.com"))
        assert entry.status == 200, entry.raw_body
        assert entry.json["suppression"] == {
            "to": to,
            "reason": reason,
            "createdAt": entry.json["suppression"]["createdAt"],
            "messageId": sent[to],
        }
        assert _suppression(stack, to, workspace=OTHER).status == 404  # another workspace is not silenced
        email = {"channel": "email", "to": to, "subject": "Again", "body": "news 2"}
        assert _refused(stack.send("api_send_email.json", body=email), reason)
        assert _refused(_imessage(stack, to=to), reason)  # an address covers email and iMessage
        assert stack.send("api_send_email.json", body=email, workspace=OTHER).status == 201


# ---------------------------------------------------------------------------- the HTTP provider's opted_out
def test_given_an_opt_out_naming_a_message_then_only_that_messages_workspace_is_silenced(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    stack.put_secret("WebhookSigningSecret", SECRET)
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    answer = _imessage(stack)
    assert answer.status == 201, answer.raw_body
    stack.dispatch("imessage")

    _opt_out(stack, "stop-1", to="+1 (555) 010-0077", message_id=answer.json["message"]["id"])

    entry = _suppression(stack, PHONE).json["suppression"]
    assert (entry["reason"], entry["messageId"]) == ("opted_out", answer.json["message"]["id"])
    assert _refused(_sms(stack), "opted_out")  # a phone number covers sms and iMessage
    assert _suppression(stack, PHONE, workspace=OTHER).status == 404
    assert _sms(stack, workspace=OTHER).status == 201


def test_given_an_opt_out_naming_no_message_then_every_workspace_until_each_removes_it(stack: Stack) -> None:
    stack.put_secret("WebhookSigningSecret", SECRET)
    _opt_out(stack, "stop-shared")

    for workspace in ("ws_local", OTHER):
        listed = _api(stack, "GET", "/v1/suppressions", workspace=workspace)
        assert [entry["to"] for entry in listed.json["suppressions"]] == [PHONE]
        assert _refused(_sms(stack, workspace=workspace), "opted_out")

    removed = _api(stack, "DELETE", f"/v1/suppressions/{quote('+1 555 010 0077')}")
    assert (removed.status, removed.json) == (200, {"success": True})
    assert _sms(stack).status == 201
    assert _refused(_sms(stack, workspace=OTHER, body="other"), "opted_out")

    _opt_out(stack, "stop-shared")  # the same event again: applied once, so the removal stands
    assert _sms(stack, body="still fine").status == 201
    assert _api(stack, "DELETE", f"/v1/suppressions/{quote(PHONE)}").status == 404


# ---------------------------------------------------------------------------- the routes, keys and batches
def test_given_a_refused_send_with_a_key_then_nothing_is_stored_under_it_and_it_sends_once_removed(
    stack: Stack,
) -> None:
    added = _api(stack, "POST", "/v1/suppressions", {"channel": "sms", "to": PHONE})
    assert added.status == 201, added.raw_body
    again = _api(stack, "POST", "/v1/suppressions", {"channel": "imessage", "to": PHONE})
    assert (again.status, again.json) == (200, added.json)

    assert _refused(_sms(stack, key="key-1"), "manual")
    assert stack.messages() == []
    assert [item for item in stack.scan("MessagesTable") if item["sk"]["S"] == "LOCK"] == []

    assert _api(stack, "DELETE", f"/v1/suppressions/{quote(PHONE)}").status == 200
    first = _sms(stack, key="key-1")
    assert first.status == 201, first.raw_body
    assert first.header("Idempotency-Replayed") is None
    assert _sms(stack, key="key-1").header("Idempotency-Replayed") == "true"


def test_given_a_batch_naming_a_suppressed_recipient_among_others_then_only_that_item_is_refused(
    stack: Stack,
) -> None:
    assert _api(stack, "POST", "/v1/suppressions", {"channel": "sms", "to": PHONE}).status == 201
    items = [
        {"channel": "sms", "to": "+15550100078", "body": "one"},
        {"channel": "imessage", "to": PHONE, "body": "two"},
        {"channel": "sms", "to": "+15550100079", "body": "three"},
        {"channel": "sms", "to": PHONE, "body": "four", "idempotencyKey": "item-key"},
    ]
    answer = _api(stack, "POST", "/v1/messages/batch", {"messages": items})

    assert answer.status == 200, answer.raw_body
    results = answer.json["results"]
    assert [result["status"] for result in results] == [201, 422, 201, 422]
    assert results[1]["error"]["details"] == {"reason": "manual"}
    assert sorted(message["to"]["S"] for message in stack.messages()) == ["+15550100078", "+15550100079"]


# ------------------------------------------------------------------------ the dispatcher's check, and races
def test_given_a_scheduled_message_then_a_stop_then_it_fails_when_due_and_is_never_sent(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    stack.put_secret("WebhookSigningSecret", SECRET)
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    answer = _imessage(stack, body="later", sendAt=_in(3600))
    assert answer.status == 201, answer.raw_body
    message_id = answer.json["message"]["id"]
    assert answer.json["status"] == "scheduled"

    _opt_out(stack, "stop-before-due")
    _fall_due(stack, message_id)
    stack.dispatch("imessage")

    failed = stack.message(message_id)
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "recipient_suppressed"
    assert http_provider.calls == []


def test_race_a_stop_with_ten_sends_then_none_is_ever_delivered(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    stack.put_secret("WebhookSigningSecret", SECRET)
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    stack.warm_api()
    barrier = threading.Barrier(11)
    answers: list[ApiAnswer | None] = [None] * 10

    def send(i: int) -> None:
        barrier.wait()
        answers[i] = _imessage(stack, body=f"race {i}")

    def stop() -> None:
        barrier.wait()
        assert (
            _webhook(
                stack,
                {
                    "eventId": "stop-race",
                    "type": "opted_out",
                    "to": PHONE,
                    "occurredAt": "2026-01-01T00:00:00Z",
                },
            ).status
            == 200
        )

    threads = [threading.Thread(target=send, args=(i,)) for i in range(10)] + [threading.Thread(target=stop)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert _apply_queued(stack) == {"batchItemFailures": []}
    stack.dispatch("imessage")

    statuses = sorted(answer.status for answer in answers if answer is not None)
    assert len(statuses) == 10
    assert set(statuses) <= {201, 422}
    for answer in answers:
        assert answer is not None
        if answer.status == 201:  # written before the STOP: caught at its claim, never sent
            message = stack.message(answer.json["message"]["id"])
            assert (message["status"], message["error"]["code"]) == ("failed", "recipient_suppressed")
    assert http_provider.calls == []


def test_race_a_stop_with_the_dispatch_of_a_queued_message_then_sent_once_or_failed_unsent(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    stack.put_secret("WebhookSigningSecret", SECRET)
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    answer = _imessage(stack, body="queued")
    assert answer.status == 201, answer.raw_body
    records = stack.receive("imessage")
    assert (
        _webhook(
            stack,
            {"eventId": "stop-d", "type": "opted_out", "to": PHONE, "occurredAt": "2026-01-01T00:00:00Z"},
        ).status
        == 200
    )
    stop_records = stack.receive("events")
    barrier = threading.Barrier(2)

    def dispatch() -> None:
        barrier.wait()
        stack.dispatch("imessage", records)

    def apply() -> None:
        barrier.wait()
        event = sqs_event(stop_records, stack.queue_arn("events"))
        function("status").handler(event, FakeLambdaContext(function_name="status"))

    threads = [threading.Thread(target=dispatch), threading.Thread(target=apply)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    message = stack.message(answer.json["message"]["id"])
    if http_provider.calls:  # claimed and checked before the STOP committed: its attempt had started
        assert len(http_provider.calls) == 1
        assert message["status"] == "sent"
    else:
        assert (message["status"], message["error"]["code"]) == ("failed", "recipient_suppressed")
    assert _refused(_imessage(stack, body="after"), "opted_out")


def _in(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds))


def _fall_due(stack: Stack, message_id: str) -> None:
    """Move a scheduled message's sendAt into the past and hand it to its queue, as the outbox would
    when it comes due (the test does not wait an hour)."""
    past = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - 1))
    stack.dynamodb.update_item(
        TableName="MessagesTable",
        Key={"pk": {"S": f"MSG#{message_id}"}, "sk": {"S": "MESSAGE"}},
        UpdateExpression="SET sendAt = :past",
        ExpressionAttributeValues={":past": {"S": past}},
    )
    stack.sqs.send_message(
        QueueUrl=stack.queue_url("imessage"),
        MessageBody=json.dumps({"workspaceId": "ws_local", "messageId": message_id}),
    )


# ---------------------------------------------------------------------------- the operators' command
def test_the_cli_adds_lists_and_removes_entries_the_api_then_honours(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = ["--endpoint-url", os.environ["AWS_ENDPOINT_URL"]]
    where = ["--workspace", "ws_local", *endpoint]

    assert main(["suppressions", "add", "--channel", "sms", "--to", "+1 (555) 010-0077", *where]) == 0
    added = json.loads(capsys.readouterr().out)
    assert (added["to"], added["reason"], added["messageId"]) == (PHONE, "manual", None)
    assert _refused(_imessage(stack), "manual")

    assert main(["suppressions", "list", *where]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [added]
    assert main(["suppressions", "list", "--workspace", OTHER, *endpoint]) == 0
    assert capsys.readouterr().out == ""

    assert main(["suppressions", "add", "--channel", "sms", "--to", "not a number", *where]) == 2
    assert main(["suppressions", "remove", "--to", PHONE, *where]) == 0
    assert _sms(stack).status == 201
    assert main(["suppressions", "remove", "--to", PHONE, *where]) == 1
    assert "is not on workspace ws_local's list" in capsys.readouterr().err
