"""Erasure against moto, through the real handlers (the API, the dispatchers, the status, message
changes and erasure functions): afterwards no item of any table of the stack holds the address or
the content, whatever attribute, however deep; a scheduled message is canceled first; the erasure's
record keeps no address; the suppression keeps refusing and a keyed retry is still a replay."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sendonce.modes import twin_of

from tests.integration.conftest import (
    WORKSPACE,
    ApiAnswer,
    FakeLambdaContext,
    Stack,
    function,
    sqs_event,
)

TWIN = twin_of(WORKSPACE)
PHONE = "+15550107777"
EMAIL = "Erin.Erased@Example.com"
BODY = "Your secret appointment is at 4pm"
SUBJECT = "A private subject line"
ERASURE_QUEUE = "ErasureQueue"
DEADLINE_SECONDS = 60


def _api(stack: Stack, method: str, path: str, workspace: str, body: Any = None, **kw: Any) -> ApiAnswer:
    name = "api_send_sms.json" if body is not None else "api_get_message.json"
    extra = {"body": body} if body is not None else {}
    return stack.call(stack.event(name, method=method, path=path, workspace=workspace, **extra, **kw))


def _send(stack: Stack, workspace: str, body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    name = {"sms": "api_send_sms.json", "email": "api_send_email.json"}[body["channel"]]
    answer = stack.send(name, body=body, workspace=workspace, key=key)
    assert answer.status == 201, answer.raw_body
    message: dict[str, Any] = answer.json["message"]
    return message


def _apply_events(stack: Stack, count: int) -> None:
    """The simulator's `count` reports fed to the status function, once visible."""
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + 15
    while len(records) < count and time.monotonic() < deadline:
        records.extend(stack.receive("events"))
        time.sleep(0.1)
    assert len(records) == count, records
    event = sqs_event(records, stack.queue_arn("events"))
    result = function("status").handler(event, FakeLambdaContext(function_name="status"))
    assert result == {"batchItemFailures": []}


def _erase(stack: Stack, workspace: str, to: str) -> str:
    answer = _api(stack, "POST", "/v1/erasures", workspace, {"to": to})
    assert answer.status == 202, answer.raw_body
    erasure = answer.json["erasure"]
    assert (erasure["status"], erasure["to"]) == ("pending", None)
    assert erasure["id"].startswith("era_")
    erasure_id: str = erasure["id"]
    return erasure_id


def _run_erasures(stack: Stack, erasure_ids: list[str], workspace: str) -> None:
    """The ErasureQueue fed to the erasure function, and the table's stream to the message changes
    function, as their event sources would, until every erasure is done."""
    url = stack.queue_urls[ERASURE_QUEUE]
    arn = f"arn:aws:sqs:us-east-1:123456789012:{ERASURE_QUEUE}"
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        assert stack.tell_changes() == {"batchItemFailures": []}
        records = stack.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=1
        ).get("Messages", [])
        for record in records:
            context = FakeLambdaContext(function_name="sendonce-ErasureFunction")
            result = function("erasures").handler(sqs_event([record], arn), context)
            assert result == {"batchItemFailures": []}
            stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=record["ReceiptHandle"])
        statuses = {
            _api(stack, "GET", f"/v1/erasures/{erasure_id}", workspace).json["erasure"]["status"]
            for erasure_id in erasure_ids
        }
        if statuses == {"done"}:
            return
    raise AssertionError(f"the erasures {erasure_ids} were not done within {DEADLINE_SECONDS} s")


def _texts(value: Any) -> list[str]:
    """Every text of a DynamoDB item, at any depth: names and values, and JSON inside a text."""
    if isinstance(value, dict):
        return [text for name, element in value.items() for text in (name, *_texts(element))]
    if isinstance(value, list):
        return [text for element in value for text in _texts(element)]
    if isinstance(value, str):
        return [value]
    return [str(value)]


def _traces(stack: Stack, needles: list[str]) -> list[tuple[str, str, str]]:
    """(table, item key, needle) for every item of every table of the stack that holds a needle."""
    found = []
    folded = [needle.lower() for needle in needles]
    for table in (spec.logical_id for spec in stack.template.tables):
        for item in stack.scan(table):
            texts = " ".join(_texts(item)).lower()
            key = f"{item.get('pk', item.get('id', {})).get('S', '?')} {item.get('sk', {}).get('S', '')}"
            found.extend((table, key, needle) for needle in folded if needle in texts)
    return found


def test_an_erasure_leaves_no_trace_in_any_table_and_keeps_the_guarantees(stack: Stack) -> None:
    # The twin: every store a message is copied into (the simulator's deliveries, provider events).
    keyed = {"channel": "sms", "to": PHONE, "body": BODY, "metadata": {"note": f"call {PHONE}"}}
    delivered = _send(stack, TWIN, keyed, key=f"order-1:{PHONE}")
    stack.dispatch("sms")
    _apply_events(stack, 1)  # delivered
    send_at = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    scheduled = _send(
        stack, TWIN, {"channel": "sms", "to": PHONE, "body": BODY + " (later)", "sendAt": send_at}
    )
    assert scheduled["status"] == "scheduled"
    email = _send(
        stack,
        TWIN,
        {"channel": "email", "to": ["ann@example.com", EMAIL], "subject": SUBJECT, "body": BODY},
        key="mail-1",
    )
    mail = {"channel": "email", "to": ["ann@example.com", EMAIL], "subject": SUBJECT, "body": BODY}
    # The same email under another key: a duplicate, whose stored answer shows the original.
    duplicate = stack.send("api_send_email.json", body=mail, workspace=TWIN, key="mail-2")
    assert (duplicate.status, duplicate.json["duplicateOnly"]) == (200, True), duplicate.raw_body
    stack.dispatch("email")  # sent: the erasure leaves it (and its lock) as it is
    # A batch under its own key, one item to the recipient: its stored answer shows the message.
    batch = stack.call(
        stack.event(
            "api_send_sms.json",
            workspace=TWIN,
            path="/v1/messages/batch",
            body={"messages": [{"channel": "sms", "to": PHONE, "body": BODY + " (batch)"}]},
            headers={"Idempotency-Key": "batch-1"},
        )
    )
    assert batch.status == 200, batch.raw_body
    assert batch.json["results"][0]["status"] == 201, batch.raw_body
    suppressed = _api(stack, "POST", "/v1/suppressions", TWIN, {"channel": "sms", "to": PHONE})
    assert suppressed.status == 201, suppressed.raw_body
    assert stack.tell_changes() == {"batchItemFailures": []}  # the events so far recorded
    other = _send(stack, TWIN, {"channel": "sms", "to": "+15550108888", "body": "not erased"})

    # Before: copies in every table that keeps messages, events or answers (the scan sees them).
    before = {table for table, _, _ in _traces(stack, [PHONE, BODY])}
    assert {"MessagesTable", "WebhooksTable", "IdempotencyTable"} <= before

    erasures = [_erase(stack, TWIN, PHONE.replace("+1", "+1 ")), _erase(stack, TWIN, EMAIL.lower())]
    _run_erasures(stack, erasures, TWIN)

    # Canceled first, then erased; someone else's message untouched.
    got = _api(stack, "GET", f"/v1/messages/{scheduled['id']}", TWIN).json["message"]
    assert (got["status"], got["to"], got["body"]) == ("canceled", "[erased]", "[erased]")
    assert _api(stack, "GET", f"/v1/messages/{email['id']}", TWIN).json["message"]["subject"] == "[erased]"
    assert _api(stack, "GET", f"/v1/messages/{other['id']}", TWIN).json["message"]["body"] == "not erased"
    events = _api(stack, "GET", "/v1/events", TWIN, query={"messageId": scheduled["id"]}).json["events"]
    assert "message.canceled" in {event["type"] for event in events}
    # No trace of the address, in any form, nor of the content, in any table, at any depth.
    assert _traces(stack, [PHONE, PHONE[1:], EMAIL, BODY, SUBJECT]) == []
    # The erasure's own record: done, counted, no address.
    record = _api(stack, "GET", f"/v1/erasures/{erasures[0]}", TWIN).json["erasure"]
    assert record == {"id": erasures[0], "status": "done", "to": None}
    item = next(i for i in stack.scan("MessagesTable") if i["pk"]["S"] == f"ERASURE#{erasures[0]}")
    assert "pendingTo" not in item
    assert int(item["countMessages"]["N"]) == 3  # delivered, scheduled, the batch's
    assert int(item["countCanceled"]["N"]) == 2  # scheduled, the batch's (queued)
    assert int(item["countStoredAnswers"]["N"]) == 2  # under order-1, and the batch's own key
    assert int(item["countSuppressions"]["N"]) == 1
    assert int(item["countTestDeliveries"]["N"]) == 1
    assert int(item["countEvents"]["N"]) >= 3
    # The guarantees hold: the suppression refuses, a keyed retry is a replay (of the erased answer).
    again = _api(stack, "POST", "/v1/messages", TWIN, {"channel": "sms", "to": PHONE, "body": "again"})
    assert (again.status, again.json["error"]["code"]) == (422, "recipient_suppressed")
    replay = stack.send("api_send_sms.json", body=keyed, workspace=TWIN, key=f"order-1:{PHONE}")
    assert replay.status == 201, replay.raw_body
    assert replay.header("Idempotency-Replayed") == "true"
    assert replay.json["message"]["id"] == delivered["id"]
    assert (replay.json["message"]["to"], replay.json["message"]["body"]) == ("[erased]", "[erased]")
    entry = _api(stack, "GET", f"/v1/suppressions/{PHONE.replace('+', '%2B')}", TWIN).json["suppression"]
    assert entry["to"] == "[erased]"
    # The dedup guard too: the same email again is still a duplicate (of the erased original), and the
    # duplicate's stored answer, found from the original, replays erased.
    mail_item = next(i for i in stack.scan("MessagesTable") if i["pk"]["S"] == f"ERASURE#{erasures[1]}")
    assert int(mail_item["countStoredAnswers"]["N"]) == 2  # the original's key's answer, and mail-2's
    again_mail = stack.send("api_send_email.json", body=mail, workspace=TWIN)
    assert (again_mail.status, again_mail.json["duplicateOnly"]) == (200, True), again_mail.raw_body
    assert again_mail.json["message"]["id"] == email["id"]
    replayed = stack.send("api_send_email.json", body=mail, workspace=TWIN, key="mail-2")
    assert replayed.header("Idempotency-Replayed") == "true"
    assert replayed.json["message"]["subject"] == "[erased]"


def test_an_erasure_covers_its_own_workspace_alone_and_another_workspace_cannot_read_it(stack: Stack) -> None:
    live = _send(stack, WORKSPACE, {"channel": "sms", "to": PHONE, "body": BODY})
    erasure = _erase(stack, TWIN, PHONE)

    assert _api(stack, "GET", f"/v1/erasures/{erasure}", WORKSPACE).status == 404
    _run_erasures(stack, [erasure], TWIN)

    assert _api(stack, "GET", f"/v1/messages/{live['id']}", WORKSPACE).json["message"]["body"] == BODY


def test_a_lost_job_is_recovered_by_the_sweep(stack: Stack) -> None:
    message = _send(stack, WORKSPACE, {"channel": "sms", "to": PHONE, "body": BODY})
    erasure = _erase(stack, WORKSPACE, PHONE)
    stack.sqs.purge_queue(QueueUrl=stack.queue_urls[ERASURE_QUEUE])  # the job is lost
    item = {"pk": {"S": f"ERASURE#{erasure}"}, "sk": {"S": "ERASURE"}}
    long_ago = {":t": {"S": "2020-01-01T00:00:00.000Z"}}
    stack.dynamodb.update_item(
        TableName="MessagesTable",
        Key=item,
        UpdateExpression="SET touchedAt = :t",
        ExpressionAttributeValues=long_ago,
    )

    swept = function("erasures").handler({"source": "aws.scheduler"}, FakeLambdaContext())

    assert swept == {"requeued": 1}
    _run_erasures(stack, [erasure], WORKSPACE)
    assert (
        _api(stack, "GET", f"/v1/messages/{message['id']}", WORKSPACE).json["message"]["body"] == "[erased]"
    )
    assert json.dumps(stack.scan("MessagesTable")).count(PHONE) == 0
