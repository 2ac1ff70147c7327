"""POST, GET and list through the API function's handler, against moto (docs/api.md, the messages routes)."""

from __future__ import annotations

import json

import pytest

CHANNELS = [
    ("api_send_sms.json", "sms", "+15550100000"),
    ("api_send_email.json", "email", "Ada@example.com"),
    ("api_send_imessage.json", "imessage", "+15550100001"),
]


@pytest.mark.parametrize(("event_file", "channel", "to"), CHANNELS)
def test_given_a_send_on_each_channel_then_201_queued_stored_and_one_record_on_its_own_queue(
    stack, event_file: str, channel: str, to: str
) -> None:
    answer = stack.send(event_file)

    assert answer.status == 201
    assert answer.header("Content-Type").startswith("application/json")
    body = answer.json
    assert body["success"] is True
    assert body["status"] == "queued"
    assert body["duplicateOnly"] is False
    message = body["message"]
    assert message["id"].startswith("msg_")
    assert message["channel"] == channel
    assert message["to"] == to
    assert message["status"] == "queued"
    assert message["attempts"] == 0
    assert message["error"] is None
    assert message["idempotencyKey"] is None
    assert message["createdAt"].endswith("Z")

    item = stack.message_item(message["id"])
    assert item["status"]["S"] == "queued"
    assert item["workspaceId"]["S"] == "ws_local"
    for other in ("sms", "email", "imessage"):
        records = stack.receive(other)
        if other == channel:
            # The record names the message and carries it as written: what its claim sends.
            bodies = [json.loads(r["Body"]) for r in records]
            assert [(b["messageId"], b["workspaceId"]) for b in bodies] == [(message["id"], "ws_local")]
            copy = bodies[0]["message"]  # the item as the table holds it
            assert (copy["body"], copy["updatedAt"], copy["attempts"]) == (
                item["body"],
                item["updatedAt"],
                {"N": "0"},
            )
        else:
            assert records == []


def test_given_a_sent_message_when_got_back_then_200_with_the_same_message(stack) -> None:
    created = stack.send("api_send_sms.json").json["message"]
    event = stack.event(
        "api_get_message.json", path=f"/v1/messages/{created['id']}", method="GET", workspace="ws_local"
    )
    event["pathParameters"] = {"id": created["id"]}

    answer = stack.call(event)

    assert answer.status == 200
    assert answer.json == {"success": True, "message": created}
    assert answer.json["message"]["metadata"] == {"campaign": "onboarding"}


def _get(stack, message_id: str, workspace: str = "ws_local"):
    event = stack.event("api_get_message.json", path=f"/v1/messages/{message_id}", workspace=workspace)
    event["pathParameters"] = {"id": message_id}
    return stack.call(event)


def test_given_another_workspaces_message_when_got_then_404_like_an_unknown_id(stack) -> None:
    created = stack.send("api_send_sms.json", workspace="ws_other").json["message"]

    foreign = _get(stack, created["id"])
    unknown = _get(stack, "msg_01KDVDNA00QV9D1V5ZMBF8DBMW")
    malformed = _get(stack, "not-an-id")

    for answer in (foreign, unknown, malformed):
        assert answer.status == 404
        assert answer.json["success"] is False
        assert answer.json["error"]["code"] == "not_found"
    assert _get(stack, created["id"], workspace="ws_other").status == 200


def _list(stack, workspace: str = "ws_local", **query: str):
    return stack.call(stack.event("api_list_messages.json", query=query, workspace=workspace))


def _send_many(stack, count: int, workspace: str = "ws_local") -> list[str]:
    ids = []
    for index in range(count):
        body = {"channel": "sms", "to": "+15550100000", "body": f"message {index}"}
        answer = stack.send("api_send_sms.json", body=body, workspace=workspace)
        assert answer.status == 201
        ids.append(answer.json["message"]["id"])
    return ids


def test_given_messages_when_listed_then_newest_first_and_only_this_workspaces(stack) -> None:
    ids = _send_many(stack, 3)
    _send_many(stack, 1, workspace="ws_other")

    answer = _list(stack)

    assert answer.status == 200
    assert answer.json["success"] is True
    assert [m["id"] for m in answer.json["messages"]] == list(reversed(ids))
    assert answer.json["nextCursor"] is None


def test_given_more_messages_than_the_limit_then_pages_follow_the_cursor_to_the_end(stack) -> None:
    ids = _send_many(stack, 5)

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        query = {"limit": "2"} | ({"cursor": cursor} if cursor else {})
        page = _list(stack, **query)
        assert page.status == 200
        assert len(page.json["messages"]) <= 2
        seen.extend(m["id"] for m in page.json["messages"])
        cursor = page.json["nextCursor"]
        pages += 1
        if cursor is None:
            break

    assert seen == list(reversed(ids))
    assert pages == 3


def test_given_a_status_filter_then_only_messages_in_that_status(stack) -> None:
    _send_many(stack, 2)

    assert len(_list(stack, status="queued").json["messages"]) == 2
    assert _list(stack, status="sent").json["messages"] == []


@pytest.mark.parametrize(
    "query",
    [
        {"cursor": "garbage"},
        {"cursor": "eyJhZnRlciI6ICJub3BlIn0"},  # {"after": "nope"}
        {"limit": "0"},
        {"limit": "101"},
        {"limit": "ten"},
        {"status": "lost"},
    ],
)
def test_given_a_bad_query_then_400_validation_error(stack, query: dict[str, str]) -> None:
    answer = _list(stack, **query)

    assert answer.status == 400
    assert answer.json["success"] is False
    assert answer.json["error"]["code"] == "validation_error"
    assert answer.json["error"]["details"]
    assert {d["field"] for d in answer.json["error"]["details"]} & set(query)


def test_given_the_health_route_then_200_ok_without_a_key(stack) -> None:
    answer = stack.call(stack.event("api_health.json"))

    assert answer.status == 200
    assert answer.json == {"success": True, "status": "ok"}


def test_given_a_scheduled_send_then_201_scheduled_with_send_at(stack) -> None:
    body = {"channel": "sms", "to": "+15550100000", "body": "later", "sendAt": "2099-01-01T00:00:00Z"}
    # 2099 is past the 30-day window: refused, naming sendAt
    refused = stack.send("api_send_sms.json", body=body)
    assert refused.status == 400
    assert [d["field"] for d in refused.json["error"]["details"]] == ["sendAt"]

    from datetime import UTC, datetime, timedelta  # noqa: PLC0415

    when = (datetime.now(UTC) + timedelta(minutes=5)).isoformat(timespec="seconds").replace("+00:00", "Z")
    answer = stack.send("api_send_sms.json", body=body | {"sendAt": when})

    assert answer.status == 201
    assert answer.json["status"] == "scheduled"
    assert answer.json["message"]["sendAt"] == when.replace("Z", ".000Z")
    assert len(stack.receive("sms")) == 0  # held back by the queue's delay
    assert stack.queue_depth("sms") == 1


def test_given_a_waiting_message_when_canceled_then_200_canceled_and_a_second_cancel_409(stack) -> None:
    created = stack.send("api_send_sms.json").json["message"]
    event = stack.event("api_get_message.json", path=f"/v1/messages/{created['id']}", method="DELETE")
    event["pathParameters"] = {"id": created["id"]}

    answer = stack.call(event)
    again = stack.call(event)

    assert answer.status == 200
    assert answer.json["message"]["status"] == "canceled"
    assert again.status == 409
    assert again.json["error"]["code"] == "message_not_cancelable"


def test_given_a_message_then_it_carries_the_retention_ttl_from_when_it_is_sent_or_due(stack) -> None:
    from datetime import UTC, datetime, timedelta  # noqa: PLC0415

    stack.setenv("SENDONCE_MESSAGE_RETENTION_DAYS", "2")
    now = stack.send(body={"channel": "sms", "to": "+15550100091", "body": "kept two days"}).json["message"]
    send_at = (datetime.now(UTC) + timedelta(days=20)).replace(microsecond=0)
    later = stack.send(
        body={"channel": "sms", "to": "+15550100092", "body": "due later", "sendAt": send_at.isoformat()}
    ).json["message"]

    created = datetime.fromisoformat(now["createdAt"].replace("Z", "+00:00"))
    expires = int(stack.message_item(now["id"])["expiresAt"]["N"])
    assert abs(expires - (created + timedelta(days=2)).timestamp()) <= 1
    # A scheduled message is kept for the retention after its sendAt, never removed before it is sent.
    assert int(stack.message_item(later["id"])["expiresAt"]["N"]) == int(
        (send_at + timedelta(days=2)).timestamp()
    )
