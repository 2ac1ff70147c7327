"""Status webhooks on the emulated stack: the real handlers, the MessagesTable stream, a local receiver.

The stream is fed to MessageChangesFunction and the delivery queue to WebhookDeliveryFunction by
hand, as their event source mappings would, so each test chooses when (and how often) a record
arrives. The receiver verifies every delivery with the `standardwebhooks` library.

- Each committed change is one event, whatever is fed twice and whatever fails in between:
  the delivery queue down, the webhooks table unreachable, the stream retried.
- A caught duplicate is `message.duplicate_blocked`, its `data.message` the original, its
  `sequence` null; status changes count 1, 2 per message.
- Deliveries are at least once: concurrent copies of one delivery all send, every attempt is
  recorded, and the delivery ends `succeeded`; a failing receiver gets the same `webhook-id`
  until it answers 2xx; a deleted endpoint's pending retry is dropped.
- `GET /v1/events` pages and filters; another workspace sees none of it; a redelivery arrives
  with the same `webhook-id`; during a rotation both secrets verify every delivery.
- Ten rotations asked at once all answer 200, each with a secret that was stored: the next
  delivery verifies with every one of them, and every copy of the endpoint holds them all.
- Two lanes: an endpoint that has not answered in the fast lane's 1 s is flagged and its task
  moves, uncounted and with the same `webhook-id`, to the slow lane's queue; its next tasks move
  without a call; the slow lane waits for it, and a quick answer there takes the flag away.
"""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sendonce.adapters.dynamodb_webhooks import ENDPOINT_COPIES
from standardwebhooks.webhooks import Webhook

from tests.integration.conftest import SLOW_LANE, ApiAnswer, ReceivedWebhook, Stack, WebhookReceiver

OTHER_WORKSPACE = "ws_elsewhere"


@pytest.fixture
def hooks(stack: Stack, webhook_receiver: WebhookReceiver) -> WebhookReceiver:
    """The receiver on 127.0.0.1, reachable as the local stack allows, with retries at once."""
    stack.setenv("SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true")
    stack.setenv("SENDONCE_WEBHOOK_RETRY_SCHEDULE", "0,0,0")
    return webhook_receiver


def api(
    stack: Stack, method: str, path: str, body: Any = None, *, query: dict[str, str] | None = None, **kw: Any
) -> ApiAnswer:
    name = "api_send_sms.json" if body is not None else "api_get_message.json"
    event = stack.event(
        name, method=method, path=path, query=query, **({"body": body} if body is not None else {}), **kw
    )
    return stack.call(event)


def add_endpoint(stack: Stack, url: str, **extra: Any) -> dict[str, Any]:
    answer = api(stack, "POST", "/v1/webhook-endpoints", {"url": url, **extra})
    assert answer.status == 201, answer.raw_body
    endpoint: dict[str, Any] = answer.json["endpoint"]
    return endpoint


def events(stack: Stack, **query: str) -> list[dict[str, Any]]:
    answer = api(stack, "GET", "/v1/events", query=query)
    assert answer.status == 200, answer.raw_body
    found: list[dict[str, Any]] = answer.json["events"]
    return found


def event(stack: Stack, event_id: str) -> dict[str, Any]:
    answer = api(stack, "GET", f"/v1/events/{event_id}")
    assert answer.status == 200, answer.raw_body
    found: dict[str, Any] = answer.json["event"]
    return found


def stored_events(stack: Stack) -> list[dict[str, Any]]:
    return [item for item in stack.scan("WebhooksTable") if item["sk"]["S"] == "EVENT"]


def verified(request: ReceivedWebhook, secret: str) -> dict[str, Any]:
    """What a receiver written with the Standard Webhooks library accepts (it raises otherwise)."""
    payload: dict[str, Any] = Webhook(secret).verify(request.body, request.headers)
    return payload


def send_and_tell(stack: Stack, **send: Any) -> str:
    answer = stack.send(**send)
    assert answer.status in (200, 201, 202), answer.raw_body
    assert stack.tell_changes() == {"batchItemFailures": []}
    message_id: str = answer.json["message"]["id"]
    return message_id


# ---------------------------------------------------------------------------- what is told
def test_each_change_reaches_the_receiver_signed_with_its_sequence(
    stack: Stack, hooks: WebhookReceiver
) -> None:
    endpoint = add_endpoint(stack, hooks.url)
    sent_only = add_endpoint(stack, hooks.url + "/sent-only", eventTypes=["message.sent"])

    message_id = send_and_tell(stack)
    stack.deliver_webhooks()
    stack.dispatch("sms")
    assert stack.tell_changes() == {"batchItemFailures": []}
    stack.deliver_webhooks()

    to_all = [r for r in hooks.requests if r.path == "/hooks"]
    to_sent = [r for r in hooks.requests if r.path == "/hooks/sent-only"]
    payloads = [verified(r, endpoint["secret"]) for r in to_all]
    assert [(p["type"], p["data"]["sequence"]) for p in payloads] == [
        ("message.queued", 1),
        ("message.sent", 2),
    ]
    assert [verified(r, sent_only["secret"])["type"] for r in to_sent] == ["message.sent"]
    assert to_sent[0].webhook_id == to_all[1].webhook_id  # one event, one id, every endpoint
    # The message as it stood right after each change; its metadata echoed for the receiver's joins.
    assert payloads[0]["data"]["message"]["status"] == "queued"
    assert payloads[1]["data"]["message"] == stack.message(message_id)
    assert payloads[1]["data"]["message"]["metadata"] == {"campaign": "onboarding"}
    assert all(r.headers["content-type"] == "application/json" for r in hooks.requests)

    told = events(stack, messageId=message_id)
    assert [(e["id"], e["type"], e["data"]["sequence"]) for e in told] == [
        (to_all[1].webhook_id, "message.sent", 2),
        (to_all[0].webhook_id, "message.queued", 1),
    ]
    assert {
        d["endpointId"]: (d["status"], d["attempts"], d["lastResponseStatus"]) for d in told[0]["deliveries"]
    } == {
        endpoint["id"]: ("succeeded", 1, 200),
        sent_only["id"]: ("succeeded", 1, 200),
    }


def test_a_caught_duplicate_is_told_with_the_original_and_no_sequence(
    stack: Stack, hooks: WebhookReceiver
) -> None:
    endpoint = add_endpoint(stack, hooks.url)
    original = stack.send()
    duplicate = stack.send()
    assert duplicate.json["duplicateOnly"] is True

    assert stack.tell_changes() == {"batchItemFailures": []}
    stack.deliver_webhooks()

    payloads = [verified(r, endpoint["secret"]) for r in hooks.requests]
    assert sorted((p["type"], p["data"]["sequence"]) for p in payloads) == [
        ("message.duplicate_blocked", None),
        ("message.queued", 1),
    ]
    blocked = next(p for p in payloads if p["type"] == "message.duplicate_blocked")
    queued = next(p for p in payloads if p["type"] == "message.queued")
    assert blocked["data"]["message"]["id"] == original.json["message"]["id"]
    assert blocked["data"]["message"] == stack.message(original.json["message"]["id"])
    # Caught after the original was queued: never told as if it came before (the stream's
    # creation time is whole seconds).
    assert blocked["timestamp"] >= queued["timestamp"]


def test_a_scheduled_message_canceled_is_told_scheduled_then_canceled(
    stack: Stack, hooks: WebhookReceiver
) -> None:
    endpoint = add_endpoint(stack, hooks.url, eventTypes=["message.scheduled", "message.canceled"])
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat(timespec="seconds").replace("+00:00", "Z")
    body = {"channel": "sms", "to": "+15550100000", "body": "Later", "sendAt": later, "metadata": {"k": "v"}}
    message_id = send_and_tell(stack, body=body)
    assert api(stack, "DELETE", f"/v1/messages/{message_id}").status == 200

    assert stack.tell_changes() == {"batchItemFailures": []}
    stack.deliver_webhooks()

    payloads = [verified(r, endpoint["secret"]) for r in hooks.requests]
    assert sorted((p["type"], p["data"]["sequence"], p["data"]["message"]["status"]) for p in payloads) == [
        ("message.canceled", 2, "canceled"),
        ("message.scheduled", 1, "scheduled"),
    ]
    assert all(p["data"]["message"]["metadata"] == {"k": "v"} for p in payloads)


# ---------------------------------------------------------------------------- exactly one event per change
def test_the_same_stream_batch_fed_twice_is_one_event_per_change(
    stack: Stack, hooks: WebhookReceiver
) -> None:
    add_endpoint(stack, hooks.url)
    stack.send()
    records = stack.read_changes()

    assert stack.tell_changes(records + records) == {"batchItemFailures": []}  # duplicated records
    stack.deliver_webhooks()
    assert stack.tell_changes(records) == {"batchItemFailures": []}  # the batch again

    assert len(stored_events(stack)) == 1
    assert stack.webhook_queue_depth() == 0  # its delivery was made: nothing owed again
    assert len(hooks.requests) == 1


@pytest.mark.parametrize(
    ("setting", "broken"),
    [
        ("WEBHOOK_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/NoSuchQueue"),
        ("WEBHOOKS_TABLE", "NoSuchTable"),
    ],
    ids=["the delivery queue down", "the webhooks table unreachable"],
)
def test_a_failure_between_a_change_and_its_event_then_the_stream_retried_is_one_event(
    stack: Stack, hooks: WebhookReceiver, setting: str, broken: str
) -> None:
    endpoint = add_endpoint(stack, hooks.url)
    working = os.environ[setting]
    message_id = stack.send().json["message"]["id"]
    stack.dispatch("sms")  # two changes in the batch: queued, then sent
    stack.setenv(setting, broken)

    failed = stack.tell_changes()
    retried = stack.tell_changes()  # still failing: the mapping keeps the records, in order

    assert failed["batchItemFailures"]
    assert retried["batchItemFailures"]
    if setting == "WEBHOOK_QUEUE_URL":
        # The first change's event was written before its deliveries could be queued; the
        # second was held back behind it.
        assert [e["type"]["S"] for e in stored_events(stack)] == ["message.queued"]
    else:
        assert stored_events(stack) == []
    stack.setenv(setting, working)
    assert stack.tell_changes() == {"batchItemFailures": []}
    assert stack.tell_changes() == {"batchItemFailures": []}  # nothing left over
    stack.deliver_webhooks()

    assert len(stored_events(stack)) == 2
    payloads = [verified(r, endpoint["secret"]) for r in hooks.requests]
    assert sorted((p["type"], p["data"]["sequence"]) for p in payloads) == [
        ("message.queued", 1),
        ("message.sent", 2),
    ]
    assert sorted(e["id"] for e in events(stack, messageId=message_id)) == sorted(
        r.webhook_id for r in hooks.requests
    )


# ---------------------------------------------------------------------------- deliveries
def test_concurrent_copies_of_one_delivery_all_send_and_every_attempt_is_recorded(
    stack: Stack, hooks: WebhookReceiver
) -> None:
    add_endpoint(stack, hooks.url)
    send_and_tell(stack)
    [record] = stack.receive_deliveries()
    for _ in range(3):  # SQS delivers a record more than once, now and then
        stack.sqs.send_message(QueueUrl=stack.webhook_queue_url, MessageBody=record["Body"])
    copies = [record, *stack.receive_deliveries()]
    assert len(copies) == 4
    start = threading.Barrier(len(copies))
    results: list[dict[str, Any]] = []

    def deliver(copy: dict[str, Any]) -> None:
        start.wait()
        results.append(stack.deliver_webhook(copy))

    threads = [threading.Thread(target=deliver, args=(copy,)) for copy in copies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert results == [{"batchItemFailures": []}] * len(copies)
    assert 1 <= len(hooks.requests) <= len(copies)  # at least once; each copy that sent is recorded
    assert len({r.webhook_id for r in hooks.requests}) == 1
    [told] = stored_events(stack)
    [delivery] = event(stack, told["id"]["S"])["deliveries"]
    assert delivery["status"] == "succeeded"
    assert delivery["attempts"] == len(hooks.requests)
    assert stack.webhook_queue_depth() == 0


def test_a_failing_receiver_gets_the_same_webhook_id_until_it_answers_or_the_retries_end(
    stack: Stack, hooks: WebhookReceiver
) -> None:
    recovering = add_endpoint(stack, hooks.url)
    dead = add_endpoint(stack, hooks.url + "/dead")
    hooks.answer_next(500, 503)
    hooks.answer_next(*[500] * 10, path="/hooks/dead")
    send_and_tell(stack)

    stack.deliver_webhooks(wait=15)

    to_recovering, to_dead = hooks.requests_to("/hooks"), hooks.requests_to("/hooks/dead")
    assert (len(to_recovering), len(to_dead)) == (3, 4)  # schedule "0,0,0": four attempts at most
    assert len({r.webhook_id for r in to_recovering + to_dead}) == 1
    assert len({r.body for r in to_recovering + to_dead}) == 1
    for request in to_recovering:
        verified(request, recovering["secret"])
    for request in to_dead:
        verified(request, dead["secret"])
    deliveries = {d["endpointId"]: d for d in event(stack, to_dead[0].webhook_id)["deliveries"]}
    shown = {k: (d["status"], d["attempts"], d["lastResponseStatus"]) for k, d in deliveries.items()}
    assert shown == {recovering["id"]: ("succeeded", 3, 200), dead["id"]: ("failed", 4, 500)}
    last = datetime.fromisoformat(deliveries[dead["id"]]["lastAttemptAt"].replace("Z", "+00:00"))
    assert last > datetime.now(UTC) - timedelta(minutes=1)
    assert stack.webhook_queue_depth() == 0


def test_a_deleted_endpoints_pending_retry_is_dropped(stack: Stack, hooks: WebhookReceiver) -> None:
    endpoint = add_endpoint(stack, hooks.url)
    hooks.answer_next(500)
    send_and_tell(stack)
    assert stack.deliver_webhooks()[0]["batchItemFailures"]  # a retry is pending
    assert stack.webhook_queue_depth() == 1

    assert api(stack, "DELETE", f"/v1/webhook-endpoints/{endpoint['id']}").status == 200
    stack.deliver_webhooks(wait=10)

    assert len(hooks.requests) == 1
    assert stack.webhook_queue_depth() == 0


# ---------------------------------------------------------------------------- two lanes (issue 27)
def lane_flags(stack: Stack, endpoint_id: str) -> list[dict[str, Any]]:
    return [
        item
        for item in stack.scan("WebhooksTable")
        if item["pk"]["S"].startswith("WHEPLANE#") and item["sk"]["S"] == f"WHEPLANE#{endpoint_id}"
    ]


def test_an_endpoint_that_does_not_answer_in_1_s_moves_to_the_slow_lane_and_back_when_it_recovers(
    stack: Stack, hooks: WebhookReceiver
) -> None:
    slow = add_endpoint(stack, hooks.url + "/slow")
    hooks.hold(2, path="/hooks/slow")  # past the fast lane's 1 s, well within the promised 15
    first = send_and_tell(stack)

    # The fast lane waits 1 s, then moves the task to the slow lane's queue: no attempt counted.
    assert stack.deliver_webhooks() == [{"batchItemFailures": []}]
    assert (stack.webhook_queue_depth(), stack.webhook_queue_depth(SLOW_LANE)) == (0, 1)
    [told] = events(stack, messageId=first)
    assert [(d["status"], d["attempts"]) for d in told["deliveries"]] == [("pending", 0)]
    assert len(lane_flags(stack, slow["id"])) == ENDPOINT_COPIES

    # The endpoint is flagged: the next message's task moves at once, the endpoint not called.
    second = send_and_tell(stack, body={"channel": "sms", "to": "+15550100001", "body": "Another"})
    called = len(hooks.requests)
    assert stack.deliver_webhooks() == [{"batchItemFailures": []}]
    assert len(hooks.requests) == called
    assert stack.webhook_queue_depth(SLOW_LANE) == 2

    # The slow lane waits the 2 s: delivered, and the endpoint stays in the slow lane.
    received = stack.receive_deliveries(SLOW_LANE)
    moved, moved_at_once = sorted(received, key=lambda record: told["id"] not in record["Body"])
    assert told["id"] in moved["Body"]
    assert stack.deliver_webhook(moved, SLOW_LANE) == {"batchItemFailures": []}
    assert len(lane_flags(stack, slow["id"])) == ENDPOINT_COPIES

    # Quick again: its next slow-lane delivery takes it out, and the fast lane has it back.
    hooks.hold(0, path="/hooks/slow")
    assert stack.deliver_webhook(moved_at_once, SLOW_LANE) == {"batchItemFailures": []}
    assert lane_flags(stack, slow["id"]) == []
    assert stack.webhook_queue_depth(SLOW_LANE) == 0
    for message_id in (first, second):
        [told] = events(stack, messageId=message_id)
        assert [(d["status"], d["attempts"]) for d in told["deliveries"]] == [("succeeded", 1)]
    to_slow = hooks.requests_to("/hooks/slow")
    assert [verified(r, slow["secret"])["data"]["message"]["id"] for r in to_slow] == [first, first, second]
    assert len({r.webhook_id for r in to_slow[:2]}) == 1  # the move kept the event's webhook-id


# ---------------------------------------------------------------------------- the events API
def test_events_page_filter_and_stay_in_their_workspace(stack: Stack, hooks: WebhookReceiver) -> None:
    endpoint = add_endpoint(stack, hooks.url)
    first = send_and_tell(stack)
    second = send_and_tell(stack, body={"channel": "sms", "to": "+15550100001", "body": "Another"})
    stack.dispatch("sms")
    assert stack.tell_changes() == {"batchItemFailures": []}

    everything = events(stack)
    assert len(everything) == 4
    assert [e["id"] for e in everything] == sorted((e["id"] for e in everything), reverse=True)
    page = api(stack, "GET", "/v1/events", query={"limit": "3"}).json
    rest = api(stack, "GET", "/v1/events", query={"limit": "3", "cursor": page["nextCursor"]}).json
    assert [e["id"] for e in page["events"] + rest["events"]] == [e["id"] for e in everything]
    assert rest["nextCursor"] is None
    for message_id in (first, second):
        assert [e["type"] for e in events(stack, messageId=message_id)] == ["message.sent", "message.queued"]
    assert {e["data"]["message"]["id"] for e in events(stack, type="message.sent")} == {first, second}
    only = events(stack, messageId=first, type="message.queued")
    assert [(e["type"], e["data"]["message"]["id"]) for e in only] == [("message.queued", first)]
    assert event(stack, only[0]["id"]) == only[0]

    elsewhere = {"workspace": OTHER_WORKSPACE}
    assert api(stack, "GET", f"/v1/events/{only[0]['id']}", **elsewhere).status == 404
    assert api(stack, "GET", "/v1/events", **elsewhere).json["events"] == []
    assert api(stack, "GET", "/v1/events", query={"messageId": first}, **elsewhere).json["events"] == []
    assert api(stack, "POST", f"/v1/events/{only[0]['id']}/redeliver", **elsewhere).status == 404
    assert api(stack, "GET", f"/v1/webhook-endpoints/{endpoint['id']}", **elsewhere).status == 404
    assert api(stack, "DELETE", f"/v1/webhook-endpoints/{endpoint['id']}", **elsewhere).status == 404
    assert (
        api(stack, "POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret", **elsewhere).status == 404
    )
    assert api(stack, "GET", "/v1/webhook-endpoints", **elsewhere).json["endpoints"] == []
    assert api(stack, "GET", "/v1/events", query={"type": "message.exploded"}).status == 400


def test_a_redelivery_arrives_again_with_the_same_webhook_id(stack: Stack, hooks: WebhookReceiver) -> None:
    endpoint = add_endpoint(stack, hooks.url)
    send_and_tell(stack)
    stack.deliver_webhooks()
    [first] = hooks.requests

    answer = api(stack, "POST", f"/v1/events/{first.webhook_id}/redeliver", {"endpointId": endpoint["id"]})
    assert (answer.status, answer.json) == (202, {"success": True})
    stack.deliver_webhooks()
    assert api(stack, "POST", f"/v1/events/{first.webhook_id}/redeliver").status == 202  # every endpoint
    stack.deliver_webhooks()

    assert [r.webhook_id for r in hooks.requests] == [first.webhook_id] * 3
    assert {r.body for r in hooks.requests} == {first.body}
    for request in hooks.requests:
        verified(request, endpoint["secret"])
    [delivery] = event(stack, first.webhook_id)["deliveries"]
    assert (delivery["status"], delivery["attempts"]) == ("succeeded", 3)


def test_during_a_rotation_both_secrets_verify_every_delivery(stack: Stack, hooks: WebhookReceiver) -> None:
    endpoint = add_endpoint(stack, hooks.url)
    answer = api(stack, "POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")
    assert answer.status == 200
    rotated = answer.json["endpoint"]
    assert rotated["secret"] != endpoint["secret"]
    assert "secret" not in api(stack, "GET", f"/v1/webhook-endpoints/{endpoint['id']}").json["endpoint"]

    send_and_tell(stack)
    stack.deliver_webhooks()

    [request] = hooks.requests
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    assert verified(request, endpoint["secret"]) == verified(request, rotated["secret"])
    copies = [i for i in stack.scan("WebhooksTable") if i["sk"]["S"] == f"WHEP#{endpoint['id']}"]
    assert len(copies) == ENDPOINT_COPIES
    assert all(copy["secrets"] == copies[0]["secrets"] for copy in copies)  # rotated together
    old = copies[0]["secrets"]["L"][1]["M"]
    until = datetime.fromisoformat(old["expiresAt"]["S"].replace("Z", "+00:00"))
    assert timedelta(hours=23, minutes=59) < until - datetime.now(UTC) <= timedelta(hours=24)


def test_ten_rotations_at_once_each_answer_a_secret_that_verifies_the_next_delivery(
    stack: Stack, hooks: WebhookReceiver
) -> None:
    endpoint = add_endpoint(stack, hooks.url)
    rotations = 10
    start = threading.Barrier(rotations)
    answers: list[ApiAnswer | None] = [None] * rotations

    def rotate(index: int) -> None:
        start.wait()
        answers[index] = api(stack, "POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")

    threads = [threading.Thread(target=rotate, args=(i,)) for i in range(rotations)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    statuses = [a.status if a else None for a in answers]
    assert statuses == [200] * rotations, [a and a.raw_body for a in answers]
    answered = [a.json["endpoint"]["secret"] for a in answers if a]
    assert len(set(answered)) == rotations
    send_and_tell(stack)
    stack.deliver_webhooks()

    [request] = hooks.requests
    assert len(request.headers["webhook-signature"].split(" ")) == rotations + 1
    payloads = [verified(request, secret) for secret in [endpoint["secret"], *answered]]
    assert all(p == payloads[0] for p in payloads)
    copies = [i for i in stack.scan("WebhooksTable") if i["sk"]["S"] == f"WHEP#{endpoint['id']}"]
    assert len(copies) == ENDPOINT_COPIES
    assert all((c["secrets"], c["version"]) == (copies[0]["secrets"], copies[0]["version"]) for c in copies)
    assert copies[0]["version"] == {"N": str(1 + rotations)}
    stored = {s["M"]["value"]["S"] for s in copies[0]["secrets"]["L"]}
    assert stored == {endpoint["secret"], *answered}
