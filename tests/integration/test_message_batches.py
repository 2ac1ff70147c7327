"""POST /v1/messages/batch against moto: each item as if sent alone, once, whatever crashes or races.

Deliveries are counted at the HTTP provider (imessage): a crash mid-batch, then the same batch
again, must reach it exactly once per item, with the outbox handing over what the crash left.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sendonce.adapters.dynamodb_sending import DynamoDbSendingStore
from sendonce.adapters.dynamodb_writes import DynamoDbTable
from sendonce.adapters.sqs_queue import SqsMessageQueue
from sendonce.aws_clients import client
from sendonce.entrypoints.outbox import build as build_outbox
from sendonce.settings import DispatcherSettings

from tests.integration.conftest import ApiAnswer, FakeHttpProvider, Stack

BATCH_PATH = "/v1/messages/batch"


class LambdaDied(BaseException):  # not an error the code could catch: the process is gone
    """The execution environment ends here: nothing after this line runs."""


@pytest.fixture
def imessage_via(stack: Stack, http_provider: FakeHttpProvider) -> FakeHttpProvider:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    stack.put_secret("HttpProviderTokenSecret", "test-token")
    return http_provider


def item(body: str, to: str = "+15550100001", **extra: Any) -> dict[str, Any]:
    return {"channel": "imessage", "to": to, "body": body, **extra}


def send_batch(
    stack: Stack,
    items: Any,
    *,
    key: str | None = None,
    query: dict[str, str] | None = None,
    raw: str | None = None,
) -> ApiAnswer:
    body: Any = raw if raw is not None else {"messages": items}
    headers: dict[str, str | None] = {"Idempotency-Key": key} if key else {}
    event = stack.event("api_send_sms.json", body=body, headers=headers, path=BATCH_PATH, query=query)
    return stack.call(event)


def results_of(answer: ApiAnswer) -> list[dict[str, Any]]:
    assert answer.status == 200, answer.raw_body
    results: list[dict[str, Any]] = answer.json["results"]
    return results


def deliver_everything(stack: Stack) -> None:
    """Dispatch what is queued, let the outbox hand over what is owed, and dispatch that too."""
    for sweep in (True, False):
        records = stack.receive("imessage")
        while records:
            for start in range(0, len(records), 10):  # the event source mapping's batch size
                stack.dispatch("imessage", records[start : start + 10])
            records = stack.receive("imessage")
        if sweep:
            build_outbox(
                DispatcherSettings.from_environment(),
                client,
                clock=lambda: datetime.now(UTC) + timedelta(minutes=3),
            ).sweep()


def deliveries_by_body(provider: FakeHttpProvider) -> Counter[str]:
    return Counter(call.body["body"] for call in provider.calls)


# ---------------------------------------------------------------------------- items as if alone
def test_a_batch_of_new_messages_is_created_queued_and_delivered_once_each(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    items = [item(f"m{i}") for i in range(60)]  # two transactions of the bulk create

    results = results_of(send_batch(stack, items))

    assert [r["status"] for r in results] == [201] * 60
    assert {r["message"]["status"] for r in results} == {"queued"}
    deliver_everything(stack)
    assert deliveries_by_body(imessage_via) == Counter({f"m{i}": 1 for i in range(60)})


def test_identical_items_and_an_earlier_send_are_duplicates_counted_on_the_original(stack: Stack) -> None:
    earlier = stack.send("api_send_imessage.json", body=item("before"))
    assert earlier.status == 201

    results = results_of(send_batch(stack, [item("before"), item("twice"), item("twice")]))

    assert [r["status"] for r in results] == [200, 201, 200]
    assert results[0]["message"]["id"] == earlier.json["message"]["id"]
    assert results[2]["message"]["id"] == results[1]["message"]["id"]
    assert stack.message_item(results[1]["message"]["id"])["duplicatesBlocked"] == {"N": "1"}
    assert stack.message_item(earlier.json["message"]["id"])["duplicatesBlocked"] == {"N": "1"}


def test_an_item_key_replays_when_the_item_is_later_sent_alone(stack: Stack) -> None:
    results = results_of(send_batch(stack, [item("keyed", idempotencyKey="k-1")]))

    alone = stack.send("api_send_imessage.json", body=item("keyed"), key="k-1")

    assert alone.status == 201
    assert alone.header("Idempotency-Replayed") == "true"
    assert alone.json["message"]["id"] == results[0]["message"]["id"]


def test_a_single_send_key_replays_in_a_later_batch_item(stack: Stack) -> None:
    alone = stack.send("api_send_imessage.json", body=item("first alone"), key="k-2")

    results = results_of(send_batch(stack, [item("first alone", idempotencyKey="k-2"), item("new")]))

    assert results[0]["status"] == 201
    assert results[0]["replayed"] is True
    assert results[0]["message"]["id"] == alone.json["message"]["id"]
    assert results[1]["status"] == 201
    assert len(stack.messages()) == 2


def test_duplicate_keys_with_different_payloads_in_one_batch_the_second_is_422(stack: Stack) -> None:
    results = results_of(send_batch(stack, [item("a", idempotencyKey="k"), item("b", idempotencyKey="k")]))

    assert [r["status"] for r in results] == [201, 422]
    assert results[1]["error"]["code"] == "idempotency_key_reused"
    assert len(stack.messages()) == 1


def test_a_batch_key_replays_the_whole_answer(stack: Stack) -> None:
    items = [item("x"), item("y", idempotencyKey="item-key")]
    first = send_batch(stack, items, key="batch-1")

    again = send_batch(stack, items, key="batch-1")
    other = send_batch(stack, [item("z")], key="batch-1")

    assert first.status == 200
    assert again.status == 200
    assert again.header("Idempotency-Replayed") == "true"
    assert again.json == first.json
    assert other.status == 422
    assert len(stack.messages()) == 2


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("count", [0, 501])
def test_zero_or_501_items_is_a_400_and_nothing_is_written(stack: Stack, count: int) -> None:
    answer = send_batch(stack, [item(f"m{i}") for i in range(count)])

    assert answer.status == 400
    assert answer.json["error"]["code"] == "validation_error"
    assert stack.messages() == []


def test_a_body_over_1_mib_is_a_413_and_one_under_it_over_256_kib_is_taken(stack: Stack) -> None:
    big = [item("x" * 9_000 + str(i), to=f"+1555010{i:04d}") for i in range(120)]  # over 1 MiB
    assert send_batch(stack, big).status == 413
    assert stack.messages() == []

    answer = send_batch(stack, big[:40])  # about 360 KiB: over a single send's limit

    assert [r["status"] for r in results_of(answer)] == [201] * 40


def test_an_item_that_is_not_an_object_gets_its_own_400(stack: Stack) -> None:
    results = results_of(send_batch(stack, [item("fine"), "text", [1], None]))

    assert [r["status"] for r in results] == [201, 400, 400, 400]
    assert {r["error"]["code"] for r in results[1:]} == {"validation_error"}


def test_strict_mode_names_each_bad_item_and_writes_nothing(stack: Stack) -> None:
    answer = send_batch(stack, [item("fine"), 5, item("bad", channel="fax")], query={"validation": "strict"})

    assert answer.status == 400
    assert [d["field"] for d in answer.json["error"]["details"]] == ["messages.1", "messages.2.channel"]
    assert stack.messages() == []


# ---------------------------------------------------------------------------- races and crashes
def test_five_concurrent_copies_of_one_batch_make_each_message_once(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    items = [item(f"race {i}") for i in range(30)] + [item("keyed race", idempotencyKey="race-key")]
    stack.warm_api()
    answers: list[ApiAnswer] = []
    start = threading.Barrier(5)

    def copy() -> None:
        start.wait()
        answers.append(send_batch(stack, items))

    threads = [threading.Thread(target=copy) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(stack.messages()) == 31
    for index in range(31):
        statuses = sorted(results_of(answer)[index]["status"] for answer in answers)
        ids = {
            results_of(answer)[index]["message"]["id"]
            for answer in answers
            if answer.json["results"][index]["message"]
        }
        assert statuses.count(201) >= 1
        assert len(ids) == 1  # every copy names the one message
    deliver_everything(stack)
    assert deliveries_by_body(imessage_via) == Counter(
        {**{f"race {i}": 1 for i in range(30)}, "keyed race": 1}
    )


def test_a_crash_between_transactions_then_the_same_batch_again_delivers_each_item_once(
    stack: Stack, imessage_via: FakeHttpProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = [item(f"crash {i}") for i in range(70)] + [item("keyed", idempotencyKey="crash-key")]
    original = DynamoDbTable.transact
    calls = {"n": 0}

    def dies_on_the_second(self: DynamoDbTable, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise LambdaDied
        return original(self, *args, **kwargs)

    with monkeypatch.context() as crash:
        crash.setattr(DynamoDbTable, "transact", dies_on_the_second)
        with pytest.raises(LambdaDied):
            send_batch(stack, items)
    # The two transactions (49 and 21 messages, and a quota counter) go side by side: the one that
    # was not the second call committed, and its messages are owed to the outbox.
    written = len(stack.messages())
    assert written in (49, 21)

    results = results_of(send_batch(stack, items))

    assert Counter(r["status"] for r in results) == Counter({200: written, 201: 71 - written})
    deliver_everything(stack)
    assert deliveries_by_body(imessage_via) == Counter({**{f"crash {i}": 1 for i in range(70)}, "keyed": 1})


def test_a_crash_after_the_write_then_the_same_batch_again_delivers_each_item_once(
    stack: Stack, imessage_via: FakeHttpProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = [item(f"unsent {i}") for i in range(15)]
    create_many = DynamoDbSendingStore.create_many

    def dies(self: DynamoDbSendingStore, *args: Any, **kwargs: Any) -> Any:
        create_many(self, *args, **kwargs)
        raise LambdaDied  # written, never answered

    with monkeypatch.context() as crash:
        crash.setattr(DynamoDbSendingStore, "create_many", dies)
        with pytest.raises(LambdaDied):
            send_batch(stack, items)

    results = results_of(send_batch(stack, items))

    assert {r["status"] for r in results} == {200}  # all written before the crash
    deliver_everything(stack)
    assert deliveries_by_body(imessage_via) == Counter({f"unsent {i}": 1 for i in range(15)})


def test_a_refused_hand_off_is_brought_back_by_the_stream(
    stack: Stack, imessage_via: FakeHttpProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as outage:
        outage.setattr(SqsMessageQueue, "enqueue_batch", lambda self, handoffs: list(handoffs))
        results = results_of(send_batch(stack, [item("a"), item("b")]))
        assert len(stack.hand_off()["batchItemFailures"]) == 2

    assert {r["message"]["status"] for r in results} == {"queued"}
    deliver_everything(stack)
    assert deliveries_by_body(imessage_via) == Counter({"a": 1, "b": 1})
