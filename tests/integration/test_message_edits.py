"""Edits of scheduled messages against moto: the lock follows the content, races end whole.

Every race checks the message and the dedup locks together afterwards: the message's lock is held by
it, no other lock names it, and its content is one edit's or the original's, never a mix. A message
stays editable until its delivery is claimed, handed to its queue or not: the races with the
dispatcher prove that what the provider gets is the last edit answered 200 before the claim, once.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sendonce.aws_clients import client
from sendonce.channels import normalise_recipient
from sendonce.dedup.identity import dedup_identity
from sendonce.entrypoints.outbox import build as build_outbox
from sendonce.messages.model import Channel
from sendonce.settings import DispatcherSettings

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


def _lock_id(stack: Stack, body: str) -> str:
    recipient = normalise_recipient(Channel("imessage"), TO)
    return stack.keyed_hash(dedup_identity("ws_local", recipient.dedup_form, None, body))


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
        assert held == [_lock_id(stack, item["body"]["S"])] == [item["dedupLockId"]["S"]]
    return item


def _sweeper(at: datetime) -> Any:
    return build_outbox(DispatcherSettings.from_environment(), client, clock=lambda: at)


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


def test_given_a_scheduled_message_already_handed_to_its_queue_then_the_edit_is_what_is_sent(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    message_id = _schedule(stack, body="original", send_in=1)  # within SQS's reach: handed over at once
    assert stack.queue_depth("imessage") == 1
    due = stack.message_item(message_id)["outboxDueAt"]

    answer = _edit(stack, message_id, {"body": "edited", "metadata": {"v": "2"}})

    assert answer.status == 200, answer.raw_body
    assert stack.message_item(message_id)["outboxDueAt"] == due  # the queued record still covers it
    assert stack.queue_depth("imessage") == 1  # and nothing more was queued
    _assert_whole(stack, message_id)
    time.sleep(1.1)
    assert stack.dispatch("imessage") == {"batchItemFailures": []}
    assert [call.body.get("body") for call in imessage_via.calls] == ["edited"]
    late = _edit(stack, message_id, {"body": "too late"})
    assert (late.status, late.json["error"]["code"]) == (409, "message_not_editable")
    assert "handed" not in late.json["error"]["message"]


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
    due = stack.message_item(message_id)["outboxDueAt"]
    # Handed over, and still editable: the record names the message, its content is read at the claim.
    again = _edit(stack, message_id, {"body": "edited twice"})
    assert again.status == 200, again.raw_body
    assert stack.message_item(message_id)["body"]["S"] == "edited twice"
    assert stack.message_item(message_id)["outboxDueAt"] == due
    assert stack.queue_depth("imessage") == 1


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


# ---------------------------------------------------------------------------- the edits and the dispatcher
EDIT_EVERY = 0.05  # seconds between two PATCHes, as the suite sends them
RACE_DEADLINE = 60.0  # generous: a loaded machine only makes the race slower, never different


@dataclass
class _Editing:
    """What the editing thread was answered, in order: (status, body sent, error code)."""

    answers: list[tuple[int, str, str | None]] = field(default_factory=list)
    failure: BaseException | None = None

    @property
    def last_edited_body(self) -> str | None:
        """The body of the last edit answered 200."""
        return next((body for status, body, _ in reversed(self.answers) if status == 200), None)


def _edit_until_refused(
    stack: Stack, message_id: str, editing: _Editing, send_at_for: Callable[[int], float | None]
) -> None:
    """PATCH a new body every EDIT_EVERY seconds (with a new sendAt, `send_at_for(n)` seconds from
    now, where it says so) until the message is no longer editable; then 3 more, all refused."""
    try:
        deadline = time.monotonic() + RACE_DEADLINE
        refused = 0
        n = 0
        while refused < 4 and time.monotonic() < deadline:
            body = f"edit {n}"
            changes: dict[str, Any] = {"body": body}
            send_in = send_at_for(n)
            if send_in is not None:
                changes["sendAt"] = _at(send_in)
            answer = _edit(stack, message_id, changes)
            code = answer.json["error"]["code"] if answer.status != 200 else None
            editing.answers.append((answer.status, body, code))
            if answer.status == 409:
                refused += 1
            elif refused:
                raise AssertionError(f"an edit answered {answer.status} after a 409: {answer.raw_body}")
            n += 1
            time.sleep(EDIT_EVERY)
    except BaseException as error:  # reported by the test, not lost in the thread
        editing.failure = error


def _run_dispatcher(stack: Stack, until: Callable[[], bool]) -> Counter[str]:
    """The channel's event source mapping, by hand: receive, dispatch, delete what was not reported
    as failed (a postponed record stays, hidden until its sendAt), until `until()` and the queue
    holds nothing more. The records' fates, counted."""
    fates: Counter[str] = Counter()
    deadline = time.monotonic() + RACE_DEADLINE
    while time.monotonic() < deadline:
        records = stack.receive("imessage")
        if records:
            result = stack.dispatch("imessage", records)
            failed = {failure["itemIdentifier"] for failure in result["batchItemFailures"]}
            for record in records:
                if record["MessageId"] in failed:
                    fates["handed_back"] += 1
                    continue
                fates["done"] += 1
                stack.sqs.delete_message(
                    QueueUrl=stack.queue_url("imessage"), ReceiptHandle=record["ReceiptHandle"]
                )
        elif until() and stack.queue_depth("imessage") == 0:
            return fates
        time.sleep(EDIT_EVERY)
    raise AssertionError(f"the race did not settle within {RACE_DEADLINE} s: {fates}")


def _race_edits_and_dispatcher(
    stack: Stack,
    provider: FakeHttpProvider,
    send_in: float,
    send_at_for: Callable[[int], float | None] = lambda n: None,
) -> tuple[str, _Editing, Counter[str]]:
    stack.warm_api()
    message_id = _schedule(stack, body="original", send_in=send_in)
    editing = _Editing()
    editor = threading.Thread(target=_edit_until_refused, args=(stack, message_id, editing, send_at_for))
    editor.start()
    try:
        fates = _run_dispatcher(stack, until=lambda: not editor.is_alive())
    finally:
        editor.join(RACE_DEADLINE)
    if editing.failure is not None:
        raise editing.failure
    return message_id, editing, fates


def _assert_sent_once_with_the_last_edit(
    stack: Stack, provider: FakeHttpProvider, message_id: str, editing: _Editing
) -> dict[str, Any]:
    statuses = [status for status, _, _ in editing.answers]
    assert 200 in statuses, editing.answers  # edits were applied while it waited, handed over or not
    assert statuses[-4:] == [409] * 4, editing.answers  # and refused once it was claimed
    assert {code for status, _, code in editing.answers if status == 409} == {"message_not_editable"}
    calls = [call.body for call in provider.calls if call.body.get("messageId") == message_id]
    assert len(calls) == 1, calls  # exactly one delivery, whatever records the edits left behind
    assert calls[0]["body"] == editing.last_edited_body  # the last edit answered 200, whole
    item = _assert_whole(stack, message_id)
    assert item["status"]["S"] == "sent"
    assert item["body"]["S"] == editing.last_edited_body
    assert int(item["attempts"]["N"]) == 1
    # Never claimed before its sendAt, whichever record claimed it.
    assert item["firstAttemptAt"]["S"] >= item["sendAt"]["S"]
    return item


def test_given_body_edits_every_50_ms_while_the_message_falls_due_then_one_delivery_of_the_last_200(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    message_id, editing, fates = _race_edits_and_dispatcher(stack, imessage_via, send_in=2)

    _assert_sent_once_with_the_last_edit(stack, imessage_via, message_id, editing)
    assert fates["done"] >= 1


def test_given_send_at_edits_later_and_earlier_while_edited_every_50_ms_then_stale_records_do_nothing(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    # Sent for 3 s ahead, then: later (6 s ahead), earlier (1.5 s ahead: before the first sendAt
    # too), later again (4 s ahead). Each applied move hands a fresh record over; the records that
    # come before the last sendAt are handed back, those after the send find nothing to do.
    moves = {1: 6.0, 3: 1.5, 5: 4.0}

    message_id, editing, fates = _race_edits_and_dispatcher(
        stack, imessage_via, send_in=3, send_at_for=moves.get
    )

    _assert_sent_once_with_the_last_edit(stack, imessage_via, message_id, editing)
    moved = [n for n in moves if editing.answers[n][0] == 200]
    assert moved, editing.answers  # the moves come long before the first sendAt
    # The creation's record and one per move applied: each done once, one of them the delivery.
    assert fates["done"] == 1 + len(moved), fates
    if len(moved) == len(moves):
        assert fates["handed_back"] >= 1, fates  # the creation's record came before the last sendAt
