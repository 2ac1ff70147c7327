"""Edits of scheduled messages against moto: the lock follows the content, races end whole.

Every race checks the message and the dedup locks together afterwards: the message's lock is held by
it, no other lock names it, and its content is one edit's or the original's, never a mix.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sendonce.channels import normalise_recipient
from sendonce.dedup.identity import dedup_identity
from sendonce.delivery.dependencies import build_outbox
from sendonce.messages.model import Channel

from tests.integration.conftest import ApiAnswer, FakeHttpProvider, Stack

TO = "+15550100001"


@pytest.fixture
def imessage_via(stack: Stack, http_provider: FakeHttpProvider) -> FakeHttpProvider:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    stack.put_secret("HttpProviderTokenSecret", "test-token")
    return http_provider


def _at(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _payload(body: str = "hello", send_in: float = 3600, **extra: Any) -> dict[str, Any]:
    return {"channel": "imessage", "to": TO, "body": body, "sendAt": _at(send_in), **extra}


def _schedule(stack: Stack, body: str = "hello", key: str | None = None, **extra: Any) -> str:
    answer = stack.send("api_send_imessage.json", body=_payload(body, **extra), key=key)
    assert answer.status == 201, answer.raw_body
    assert answer.json["status"] == "scheduled"
    message_id: str = answer.json["message"]["id"]
    return message_id


def _edit(stack: Stack, message_id: str, changes: dict[str, Any]) -> ApiAnswer:
    event = stack.event(
        "api_send_imessage.json", method="PATCH", path=f"/v1/messages/{message_id}", body=changes
    )
    event["pathParameters"] = {"id": message_id}
    return stack.call(event)


def _cancel(stack: Stack, message_id: str) -> ApiAnswer:
    return stack.call(stack.event("api_get_message.json", method="DELETE", path=f"/v1/messages/{message_id}"))


def _lock_id(body: str) -> str:
    recipient = normalise_recipient(Channel("imessage"), TO)
    return dedup_identity("ws_local", recipient.dedup_form, None, body)


def _locks(stack: Stack) -> dict[str, str]:
    """Every dedup lock: its identity and the message holding it."""
    return {
        item["pk"]["S"].removeprefix("DEDUP#"): item["messageId"]["S"]
        for item in stack.scan("MessagesTable")
        if item["sk"]["S"] == "LOCK"
    }


def _assert_whole(stack: Stack, message_id: str) -> dict[str, Any]:
    """The message and the locks agree: exactly one lock names it, the one of its content."""
    item = stack.message_item(message_id)
    held = [lock for lock, holder in _locks(stack).items() if holder == message_id]
    if item["status"]["S"] == "canceled":
        assert held == []  # a cancel releases the lock of the content it canceled
    else:
        assert held == [_lock_id(item["body"]["S"])] == [item["dedupLockId"]["S"]]
    return item


def _sweeper(at: datetime) -> Any:
    return build_outbox(clock=lambda: at)


# ---------------------------------------------------------------------------- the edit and its lock
def test_given_an_edit_then_the_old_identity_is_free_and_the_new_one_taken(stack: Stack) -> None:
    message_id = _schedule(stack, body="hello")

    answer = _edit(stack, message_id, {"body": "goodbye", "metadata": {"campaign": "b"}})

    assert answer.status == 200, answer.raw_body
    assert answer.json["message"]["body"] == "goodbye"
    assert answer.json["message"]["metadata"] == {"campaign": "b"}
    assert answer.json["message"]["status"] == "scheduled"
    _assert_whole(stack, message_id)
    again_old = stack.send("api_send_imessage.json", body=_payload("hello"))
    assert again_old.status == 201  # the old content is a new message
    again_new = stack.send("api_send_imessage.json", body=_payload("goodbye"))
    assert again_new.status == 200
    assert again_new.json["duplicateOnly"] is True
    assert again_new.json["message"]["id"] == message_id


def test_given_the_new_content_held_by_another_message_then_409_and_nothing_changes(stack: Stack) -> None:
    holder = _schedule(stack, body="taken")
    message_id = _schedule(stack, body="mine")
    before = (stack.message_item(message_id), _locks(stack))

    answer = _edit(stack, message_id, {"body": "taken", "metadata": {"x": "y"}})

    assert answer.status == 409, answer.raw_body
    assert answer.json["error"]["code"] == "duplicate_content"
    assert answer.json["error"]["details"] == {"messageId": holder}
    assert (stack.message_item(message_id), _locks(stack)) == before
    assert "duplicatesBlocked" not in stack.message_item(holder)  # an edit refused is no send caught


def test_given_unknown_or_another_workspace_s_message_then_404(stack: Stack) -> None:
    message_id = _schedule(stack)
    event = stack.event(
        "api_send_imessage.json",
        method="PATCH",
        path=f"/v1/messages/{message_id}",
        body={"body": "mine"},
        workspace="ws_other",
    )

    assert stack.call(event).status == 404
    assert _edit(stack, "msg_01KDVDNA00QV9D1V5ZMBF8DBMW", {"body": "x"}).status == 404
    assert stack.message_item(message_id)["body"]["S"] == "hello"


def test_given_a_message_not_scheduled_then_409_message_not_editable(stack: Stack) -> None:
    now = stack.send("api_send_imessage.json", body={"channel": "imessage", "to": TO, "body": "now"})
    assert now.json["status"] == "queued"

    answer = _edit(stack, now.json["message"]["id"], {"body": "changed"})

    assert answer.status == 409
    assert answer.json["error"]["code"] == "message_not_editable"


def test_given_a_scheduled_message_already_handed_to_its_queue_then_409(stack: Stack) -> None:
    message_id = _schedule(stack, send_in=600)  # within SQS's reach: handed over at once

    answer = _edit(stack, message_id, {"body": "changed"})

    assert (answer.status, answer.json["error"]["code"]) == (409, "message_not_editable")


def test_given_a_send_at_edit_then_the_outbox_hands_it_over_at_the_new_time(stack: Stack) -> None:
    message_id = _schedule(stack, body="original")
    # From an hour ahead (the outbox's) to 30 minutes ahead: due for the outbox 15 minutes before.
    answer = _edit(stack, message_id, {"body": "edited", "sendAt": _at(1800)})
    assert answer.status == 200, answer.raw_body
    item = stack.message_item(message_id)
    assert item["outboxDueAt"]["S"] < item["sendAt"]["S"]

    now = datetime.now(UTC)
    assert _sweeper(now + timedelta(minutes=10)).sweep() == {}  # no longer due 45 minutes ahead
    assert _sweeper(now + timedelta(minutes=16)).sweep() == {"scheduled": 1}
    assert stack.queue_depth("imessage") == 1
    # Handed over now: too late for another edit.
    late = _edit(stack, message_id, {"body": "edited twice"})
    assert (late.status, late.json["error"]["code"]) == (409, "message_not_editable")
    assert stack.message_item(message_id)["body"]["S"] == "edited"


def test_given_a_send_at_brought_within_sqs_reach_then_the_edit_hands_it_over_and_it_is_delivered_edited(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    message_id = _schedule(stack, body="original")

    answer = _edit(stack, message_id, {"body": "edited", "sendAt": _at(-1)})

    assert answer.status == 200, answer.raw_body
    records = stack.receive("imessage")
    assert len(records) == 1
    assert stack.dispatch("imessage", records) == {"batchItemFailures": []}
    assert [call.body.get("body") for call in imessage_via.calls] == ["edited"]
    assert stack.message(message_id)["status"] in {"sent", "delivered"}


def test_given_a_send_at_edit_then_the_message_expires_after_its_new_send_at(stack: Stack) -> None:
    message_id = _schedule(stack)
    before = int(stack.message_item(message_id)["expiresAt"]["N"])

    assert _edit(stack, message_id, {"sendAt": _at(7 * 86_400)}).status == 200

    assert int(stack.message_item(message_id)["expiresAt"]["N"]) >= before + 6 * 86_400


# ---------------------------------------------------------------------------- the key tie
def test_given_an_edit_then_past_the_window_the_original_key_and_payload_get_422(stack: Stack) -> None:
    stack.setenv("SENDONCE_IDEMPOTENCY_TTL_SECONDS", "1")
    payload = _payload("original")
    first = stack.send("api_send_imessage.json", body=payload, key="order-7")
    assert first.status == 201
    message_id = first.json["message"]["id"]
    assert _edit(stack, message_id, {"body": "edited"}).status == 200
    time.sleep(2.1)  # the window is over: the record is still in the table, but expired

    again = stack.send("api_send_imessage.json", body=payload, key="order-7")

    assert again.status == 422, again.raw_body
    assert again.json["error"]["code"] == "idempotency_key_reused"
    assert stack.message_item(message_id)["body"]["S"] == "edited"


def _idempotency_ids(stack: Stack) -> list[str]:
    return [item["id"]["S"] for item in stack.scan("IdempotencyTable")]


def test_given_an_edit_then_past_the_window_the_edited_payload_replays_the_message(stack: Stack) -> None:
    first = stack.send("api_send_imessage.json", body=_payload("original"), key="order-8")
    message_id = first.json["message"]["id"]
    edited = _edit(stack, message_id, {"body": "edited"}).json["message"]
    for record_id in _idempotency_ids(stack):
        stack.dynamodb.delete_item(TableName="IdempotencyTable", Key={"id": {"S": record_id}})
    payload = {"channel": "imessage", "to": TO, "body": "edited", "sendAt": edited["sendAt"]}

    again = stack.send("api_send_imessage.json", body=payload, key="order-8")

    assert again.status == 201, again.raw_body
    assert again.header("Idempotency-Replayed") == "true"
    assert again.json["message"]["id"] == message_id


# ---------------------------------------------------------------------------- races
def _race(*actions: Callable[[], Any]) -> list[Any]:
    results: list[Any] = [None] * len(actions)
    start = threading.Barrier(len(actions))

    def run(index: int, action: Callable[[], Any]) -> None:
        start.wait()
        results[index] = action()

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_given_edit_and_cancel_race_then_each_wins_whole_or_answers_409(stack: Stack) -> None:
    stack.warm_api()
    for round_ in range(6):
        message_id = _schedule(stack, body=f"race {round_}")
        edit, cancel = _race(
            lambda m=message_id, r=round_: _edit(stack, m, {"body": f"edited {r}"}),
            lambda m=message_id: _cancel(stack, m),
        )
        assert cancel.status == 200  # a scheduled message can always be canceled
        assert edit.status in {200, 409}, edit.raw_body
        if edit.status == 409:
            assert edit.json["error"]["code"] == "message_not_editable"
        item = _assert_whole(stack, message_id)
        assert item["status"]["S"] == "canceled"
        assert item["body"]["S"] == (f"edited {round_}" if edit.status == 200 else f"race {round_}")
        assert _locks(stack) == {}  # whichever came first, the cancel released the lock of the content


def test_given_edit_and_the_outbox_hand_off_race_then_the_edit_wins_whole_or_answers_409(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    stack.warm_api()
    outcomes = []
    for round_ in range(6):
        message_id = _schedule(stack, body=f"race {round_}")
        sweep_at = datetime.now(UTC) + timedelta(minutes=46)  # the hand-off is due
        edit, report = _race(
            lambda m=message_id, r=round_: _edit(stack, m, {"body": f"edited {r}"}),
            lambda at=sweep_at: _sweeper(at).sweep(),
        )
        assert edit.status in {200, 409}, edit.raw_body
        item = _assert_whole(stack, message_id)
        assert item["status"]["S"] == "scheduled"
        assert item["body"]["S"] == (f"edited {round_}" if edit.status == 200 else f"race {round_}")
        outcomes.append((edit.status, report))
        # Whatever record reached the queue names the message: the content is read when it is sent.
        for record in stack.receive("imessage"):
            assert json.loads(record["Body"])["messageId"] == message_id
            stack.sqs.delete_message(
                QueueUrl=stack.queue_url("imessage"), ReceiptHandle=record["ReceiptHandle"]
            )
    assert all(report.get("scheduled", 0) <= 1 for _, report in outcomes)


def test_given_two_edits_race_then_both_apply_whole_one_after_the_other(stack: Stack) -> None:
    stack.warm_api()
    for round_ in range(5):
        message_id = _schedule(stack, body=f"race {round_}")
        first, second = _race(
            lambda m=message_id, r=round_: _edit(
                stack, m, {"body": f"first {r}", "metadata": {"by": "first"}}
            ),
            lambda m=message_id, r=round_: _edit(
                stack, m, {"body": f"second {r}", "metadata": {"by": "second"}}
            ),
        )
        assert {first.status, second.status} <= {200, 409}
        item = _assert_whole(stack, message_id)
        winner = item["metadata"]["M"]["by"]["S"]
        assert item["body"]["S"] == f"{winner} {round_}"  # never one edit's body with the other's metadata
        assert len([lock for lock, holder in _locks(stack).items() if holder == message_id]) == 1


def test_given_two_edits_race_to_one_content_held_by_nobody_then_the_lock_is_taken_once(stack: Stack) -> None:
    stack.warm_api()
    a = _schedule(stack, body="a")
    b = _schedule(stack, body="b")

    answers = _race(lambda: _edit(stack, a, {"body": "same"}), lambda: _edit(stack, b, {"body": "same"}))

    assert sorted(answer.status for answer in answers) == [200, 409]
    loser = next(answer for answer in answers if answer.status == 409)
    assert loser.json["error"]["code"] == "duplicate_content"
    _assert_whole(stack, a)
    _assert_whole(stack, b)
    assert sorted(stack.message_item(m)["body"]["S"] for m in (a, b)) in (["a", "same"], ["b", "same"])
