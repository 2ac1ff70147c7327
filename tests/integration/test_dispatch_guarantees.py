"""Delivery guarantees against moto: at most one delivery per message, none left behind.

Each test injects a fault where a crash or a redelivery could duplicate or lose a message, then
checks what reached the provider.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends
from sendonce.adapters.dynamodb_dispatch import DynamoDbDispatchStore
from sendonce.adapters.sqs_queue import SqsMessageQueue
from sendonce.aws_clients import client
from sendonce.clock import rfc3339
from sendonce.dispatch.outbox import OutboxSweeper
from sendonce.entrypoints.outbox import build as build_outbox
from sendonce.settings import DispatcherSettings

from tests.integration.conftest import FakeHttpProvider, Stack, function
from tests.support.lambda_context import FakeLambdaContext


class LambdaDied(BaseException):  # not an error the code could catch: the process is gone
    """The execution environment ends here: nothing after this line runs, nothing is acknowledged."""


@pytest.fixture
def imessage_via(stack: Stack, http_provider: FakeHttpProvider) -> FakeHttpProvider:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    stack.put_secret("HttpProviderTokenSecret", "test-token")
    return http_provider


def _send_imessage(stack: Stack, to: str = "+15550100001", body: str = "hello", **extra: Any) -> str:
    answer = stack.send(
        "api_send_imessage.json", body={"channel": "imessage", "to": to, "body": body, **extra}
    )
    assert answer.status == 201, answer.raw_body
    message_id: str = answer.json["message"]["id"]
    return message_id


def _send_email(stack: Stack, body: str = "hello") -> str:
    answer = stack.send(
        "api_send_email.json",
        body={"channel": "email", "to": "someone@example.com", "subject": "Hi", "body": body},
    )
    assert answer.status == 201, answer.raw_body
    message_id: str = answer.json["message"]["id"]
    return message_id


def _sweeper(at: datetime) -> OutboxSweeper:
    return build_outbox(DispatcherSettings.from_environment(), client, clock=lambda: at)


def _verify_sender(stack: Stack) -> None:
    sender = DispatcherSettings.from_environment().email_from
    client("ses").verify_email_identity(EmailAddress=sender)
    client("sesv2").create_email_identity(EmailIdentity=sender)


def _ses_sends() -> int:
    return len(ses_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sent_messages)


# ---------------------------------------------------------------------------- redelivery
def test_given_one_record_delivered_twice_then_the_provider_is_called_once(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    message_id = _send_imessage(stack)
    records = stack.receive("imessage")

    first = stack.dispatch("imessage", records)
    second = stack.dispatch("imessage", records)  # SQS at-least-once: the same record again

    assert first == {"batchItemFailures": []}
    assert second == {"batchItemFailures": []}
    assert len(imessage_via.calls) == 1
    assert stack.message(message_id)["status"] == "sent"
    assert stack.message(message_id)["attempts"] == 1


def test_given_one_record_delivered_to_two_dispatchers_at_once_then_it_is_sent_once(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    message_id = _send_imessage(stack, body="concurrent")
    records = stack.receive("imessage")
    imessage_via.answer_next(201, delay=0.3)  # the first call is slow: the second arrives meanwhile

    threads = [threading.Thread(target=stack.dispatch, args=("imessage", records)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(imessage_via.calls) == 1
    assert stack.message(message_id)["status"] == "sent"


# ---------------------------------------------------------------------------- crashes after the call
def _dispatch_and_die_after_the_provider_call(
    stack: Stack, channel: str, records: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider took the message; the Lambda dies before the outcome is written."""

    def die(*args: Any, **kwargs: Any) -> bool:
        raise LambdaDied

    with monkeypatch.context() as crash:
        crash.setattr(DynamoDbDispatchStore, "finish_attempt", die)
        with pytest.raises(LambdaDied):
            stack.dispatch(channel, records)


def test_given_a_crash_after_the_http_provider_accepted_then_the_retry_reuses_its_key(
    stack: Stack, imessage_via: FakeHttpProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    message_id = _send_imessage(stack, body="crash after call")
    records = stack.receive("imessage")

    _dispatch_and_die_after_the_provider_call(stack, "imessage", records, monkeypatch)
    assert stack.message(message_id)["status"] == "sending"

    # SQS brings the record back: the claim stands, nothing is sent.
    assert stack.dispatch("imessage", records) == {"batchItemFailures": []}
    assert len(imessage_via.calls) == 1

    # Past the claim's deadline the outbox knows the attempt is dead; the HTTP provider dedups on
    # the message id, so the message is tried again with the same key.
    report = _sweeper(datetime.now(UTC) + timedelta(minutes=5)).sweep()
    assert report == {"reclaimed": 1}
    stack.dispatch("imessage")

    assert [call.headers["idempotency-key"] for call in imessage_via.calls] == [message_id, message_id]
    assert stack.message(message_id)["status"] == "sent"
    assert stack.message(message_id)["attempts"] == 2


def test_given_a_crash_after_ses_accepted_then_the_message_ends_unknown_and_is_not_resent(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    _verify_sender(stack)
    message_id = _send_email(stack, body="crash after ses")
    records = stack.receive("email")

    _dispatch_and_die_after_the_provider_call(stack, "email", records, monkeypatch)
    assert _ses_sends() == 1

    stack.dispatch("email", records)  # redelivered: the claim stands
    report = _sweeper(datetime.now(UTC) + timedelta(minutes=5)).sweep()
    stack.dispatch("email")

    assert report == {"stranded_unknown": 1}
    assert _ses_sends() == 1
    assert stack.message(message_id)["status"] == "unknown"


# ---------------------------------------------------------------------------- provider failures
def test_given_a_provider_5xx_then_success_then_the_message_is_sent_on_the_second_attempt(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    message_id = _send_imessage(stack, body="flaky provider")
    imessage_via.answer_next(503)
    records = stack.receive("imessage")

    first = stack.dispatch("imessage", records)
    assert [failure["itemIdentifier"] for failure in first["batchItemFailures"]] == [records[0]["MessageId"]]
    waiting = stack.message(message_id)
    assert waiting["status"] == "queued"
    assert waiting["error"]["code"] == "provider_unavailable"

    stack.dispatch("imessage", records)  # the record comes back after its backoff

    sent = stack.message(message_id)
    assert sent["status"] == "sent"
    assert sent["attempts"] == 2
    assert sent["error"] is None
    assert len(imessage_via.calls) == 2


def test_given_only_5xx_then_the_message_fails_after_the_attempt_limit(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    stack.setenv("SENDONCE_MAX_DISPATCH_ATTEMPTS", "3")
    message_id = _send_imessage(stack, body="provider down")
    records = stack.receive("imessage")
    for _ in range(5):
        imessage_via.answer_next(500)

    for _ in range(4):
        stack.dispatch("imessage", records)

    failed = stack.message(message_id)
    assert failed["status"] == "failed"
    assert failed["attempts"] == 3
    assert failed["error"]["code"] == "provider_unavailable"
    assert len(imessage_via.calls) == 3


def test_given_a_provider_4xx_then_the_message_fails_at_once_and_releases_its_lock(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    message_id = _send_imessage(stack, body="refused")
    imessage_via.answer_next(400)

    assert stack.dispatch("imessage") == {"batchItemFailures": []}
    failed = stack.message(message_id)
    assert failed["status"] == "failed"
    assert failed["attempts"] == 1
    assert failed["error"]["code"] == "provider_rejected"

    retry = stack.send(
        "api_send_imessage.json", body={"channel": "imessage", "to": "+15550100001", "body": "refused"}
    )
    assert retry.status == 201
    assert retry.json["duplicateOnly"] is False


def test_given_the_provider_is_unreachable_then_the_attempt_is_retried(
    stack: Stack, closed_port: int
) -> None:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", f"http://127.0.0.1:{closed_port}")
    message_id = _send_imessage(stack, body="nobody home")

    result = stack.dispatch("imessage")

    assert len(result["batchItemFailures"]) == 1
    assert stack.message(message_id)["error"]["code"] == "provider_unreachable"
    assert stack.message(message_id)["status"] == "queued"


# ---------------------------------------------------------------------------- nothing left behind
def _refused(self: SqsMessageQueue, handoffs: Any) -> list[Any]:
    return list(handoffs)  # SQS refuses every record


def test_given_sqs_refuses_the_hand_off_then_the_stream_brings_the_creation_back(
    stack: Stack, imessage_via: FakeHttpProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as outage:
        outage.setattr(SqsMessageQueue, "enqueue_batch", _refused)
        answer = stack.send(
            "api_send_imessage.json", body={"channel": "imessage", "to": "+15550100001", "body": "outage"}
        )
        assert answer.status == 201  # the request never calls SQS
        assert answer.json["status"] == "queued"
        assert len(stack.hand_off()["batchItemFailures"]) == 1
        assert stack.queue_depth("imessage") == 0
    message_id = answer.json["message"]["id"]

    stack.dispatch("imessage")  # the mapping feeds the failed record again: handed over now

    assert stack.message(message_id)["status"] == "sent"
    assert len(imessage_via.calls) == 1


def _grace_over(stack: Stack, message_ids: list[str]) -> None:
    """Move the outbox entries written with these messages to now, as if their grace had passed."""
    for message_id in message_ids:
        stack.dynamodb.update_item(
            TableName="MessagesTable",
            Key={"pk": {"S": f"MSG#{message_id}"}, "sk": {"S": "MESSAGE"}},
            UpdateExpression="SET outboxDueAt = :due",
            ExpressionAttributeValues={":due": {"S": rfc3339(datetime.now(UTC) - timedelta(seconds=1))}},
        )


def _never_brought(stack: Stack, monkeypatch: pytest.MonkeyPatch, count: int) -> list[str]:
    """`count` messages whose creation the stream never brought to HandoffFunction (SQS refused every
    hand-off until the stream gave the records up): each one owed to the outbox, its grace over."""
    with monkeypatch.context() as outage:
        outage.setattr(SqsMessageQueue, "enqueue_batch", _refused)
        message_ids = [_send_imessage(stack, body=f"outage {index}") for index in range(count)]
        stack.hand_off()
    stack.drop_handoffs()
    _grace_over(stack, message_ids)
    return message_ids


def test_given_the_stream_never_brings_a_creation_then_the_outbox_hands_it_over(
    stack: Stack, imessage_via: FakeHttpProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    (message_id,) = _never_brought(stack, monkeypatch, 1)
    assert stack.queue_depth("imessage") == 0

    assert _sweeper(datetime.now(UTC) + timedelta(seconds=1)).sweep() == {"handed_off": 1}
    stack.dispatch("imessage")

    assert stack.message(message_id)["status"] == "sent"
    assert len(imessage_via.calls) == 1


def _run_outbox_function(seconds_left: float) -> dict[str, int]:
    context = FakeLambdaContext(
        function_name="sendonce-OutboxFunction", remaining_millis=int(seconds_left * 1000)
    )
    result: dict[str, int] = function("outbox").handler({}, context)
    return result


def test_given_a_peak_owed_to_the_outbox_then_one_run_of_its_function_hands_every_message_over(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    message_ids = _never_brought(stack, monkeypatch, 25)
    assert stack.queue_depth("imessage") == 0

    assert _run_outbox_function(seconds_left=50) == {"handed_off": 25}

    assert stack.queue_depth("imessage") == 25
    assert {stack.message(message_id)["status"] for message_id in message_ids} == {"queued"}


def test_given_the_outbox_function_is_out_of_time_then_it_starts_nothing_and_all_stays_owed(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    message_ids = _never_brought(stack, monkeypatch, 3)

    assert _run_outbox_function(seconds_left=5) == {"budget_spent": 1}

    assert stack.queue_depth("imessage") == 0
    assert {stack.message(message_id)["status"] for message_id in message_ids} == {"queued"}
    assert _run_outbox_function(seconds_left=50) == {"handed_off": 3}


def test_given_an_unreadable_record_then_it_fails_alone(stack: Stack, imessage_via: FakeHttpProvider) -> None:
    _send_imessage(stack, body="good neighbour")
    records = stack.receive("imessage")
    bad = {**records[0], "MessageId": "bad-record", "Body": "not json"}

    result = stack.dispatch("imessage", [bad, *records])

    assert result == {"batchItemFailures": [{"itemIdentifier": "bad-record"}]}
    assert len(imessage_via.calls) == 1


# ---------------------------------------------------------------------------- schedules and cancel
def _at(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _record_for(stack: Stack, message_id: str, queue_record: dict[str, Any] | None = None) -> dict[str, Any]:
    """A queue record naming the message, as SQS would hand it over once its delay passed."""
    body = json.dumps({"messageId": message_id, "workspaceId": "ws_local"})
    sent = stack.sqs.send_message(QueueUrl=stack.queue_url("imessage"), MessageBody=body)
    return {"MessageId": sent["MessageId"], "ReceiptHandle": "handle-" + sent["MessageId"], "Body": body}


def test_given_a_scheduled_message_then_it_is_not_sent_before_its_time(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    answer = stack.send(
        "api_send_imessage.json",
        body={"channel": "imessage", "to": "+15550100001", "body": "later", "sendAt": _at(600)},
    )
    assert answer.status == 201
    assert answer.json["status"] == "scheduled"
    message_id = answer.json["message"]["id"]

    early = stack.dispatch("imessage", [_record_for(stack, message_id)])

    assert len(early["batchItemFailures"]) == 1  # back on the queue until its time
    assert imessage_via.calls == []
    assert stack.message(message_id)["status"] == "scheduled"


def test_given_a_send_beyond_sqs_reach_then_the_outbox_hands_it_over_when_it_comes_due(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    answer = stack.send(
        "api_send_imessage.json",
        body={"channel": "imessage", "to": "+15550100001", "body": "next week", "sendAt": _at(3600)},
    )
    message_id = answer.json["message"]["id"]
    assert stack.queue_depth("imessage") == 0  # SQS can hold a record back 15 minutes at most

    assert _sweeper(datetime.now(UTC) + timedelta(minutes=10)).sweep() == {}
    assert _sweeper(datetime.now(UTC) + timedelta(minutes=46)).sweep() == {"scheduled": 1}

    assert stack.queue_depth("imessage") == 1
    assert stack.message(message_id)["status"] == "scheduled"


def test_given_a_canceled_message_then_a_record_already_queued_sends_nothing(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    message_id = _send_imessage(stack, body="never mind")
    records = stack.receive("imessage")

    canceled = stack.call(
        stack.event("api_get_message.json", method="DELETE", path=f"/v1/messages/{message_id}")
    )
    assert canceled.status == 200
    assert canceled.json["message"]["status"] == "canceled"

    assert stack.dispatch("imessage", records) == {"batchItemFailures": []}
    assert imessage_via.calls == []
    assert stack.message(message_id)["status"] == "canceled"


def test_given_a_message_whose_attempt_started_then_cancel_is_refused(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    message_id = _send_imessage(stack, body="too late")
    stack.dispatch("imessage")

    late = stack.call(stack.event("api_get_message.json", method="DELETE", path=f"/v1/messages/{message_id}"))

    assert late.status == 409
    assert late.json["error"]["code"] == "message_not_cancelable"
    assert len(imessage_via.calls) == 1


def _cancel(stack: Stack, message_id: str, answers: list[int]) -> None:
    event = stack.event("api_get_message.json", method="DELETE", path=f"/v1/messages/{message_id}")
    answers.append(stack.call(event).status)


def test_given_cancel_and_dispatch_race_then_exactly_one_of_them_wins(
    stack: Stack, imessage_via: FakeHttpProvider
) -> None:
    outcomes: list[tuple[str, int]] = []
    for round_ in range(5):
        message_id = _send_imessage(stack, to=f"+1555010020{round_}", body=f"race {round_}")
        records = stack.receive("imessage")
        answers: list[int] = []
        cancel = threading.Thread(target=_cancel, args=(stack, message_id, answers))
        dispatch = threading.Thread(target=stack.dispatch, args=("imessage", records))
        cancel.start()
        dispatch.start()
        cancel.join()
        dispatch.join()
        outcomes.append((stack.message(message_id)["status"], answers[0]))

    for status, cancel_answer in outcomes:
        assert (status, cancel_answer) in {("canceled", 200), ("sent", 409)}
    assert len(imessage_via.calls) == sum(1 for status, _ in outcomes if status == "sent")
