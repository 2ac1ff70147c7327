"""The dispatcher functions fed from the real queues on moto: SNS, SES v2 and the HTTP provider, each
invocation within its time budget."""

from __future__ import annotations

import json

from sendonce.providers.sns_provider import MESSAGE_ID_ATTRIBUTE
from sendonce.settings import DispatcherSettings

from tests.integration.conftest import function, load_event, sqs_event
from tests.support.lambda_context import FakeLambdaContext, readings


def _sent_and_dispatched(stack, event_file: str, channel: str) -> tuple[dict, dict]:
    message = stack.send(event_file).json["message"]
    records = stack.receive(channel)
    assert len(records) == 1
    return message, stack.dispatch(channel, records)


def test_given_a_queued_sms_then_sent_through_sns_with_one_attempt(stack) -> None:
    message, result = _sent_and_dispatched(stack, "api_send_sms.json", "sms")

    assert result == {"batchItemFailures": []}
    item = stack.message_item(message["id"])
    assert item["status"]["S"] == "sent"
    assert item["attempts"]["N"] == "1"
    assert "providerMessageId" in item

    from moto.core import DEFAULT_ACCOUNT_ID  # noqa: PLC0415
    from moto.sns import sns_backends  # noqa: PLC0415

    published = sns_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sms_messages
    assert len(published) == 1
    ((phone, text, *_),) = published.values()
    assert phone == "+15550100000"
    assert text == "Your code is 123456"
    assert MESSAGE_ID_ATTRIBUTE  # the SNS call names the message it sends


def test_given_a_queued_email_then_sent_through_ses_v2_from_the_verified_identity(stack) -> None:
    import boto3  # noqa: PLC0415

    sender = "no-reply@example.com"  # SENDONCE_EMAIL_FROM, the template's default
    boto3.client("sesv2", region_name="us-east-1").create_email_identity(EmailIdentity=sender)
    boto3.client("ses", region_name="us-east-1").verify_email_identity(EmailAddress=sender)

    message, result = _sent_and_dispatched(stack, "api_send_email.json", "email")

    assert result == {"batchItemFailures": []}
    item = stack.message_item(message["id"])
    assert item["status"]["S"] == "sent", item
    assert item["attempts"]["N"] == "1"
    quota = boto3.client("ses", region_name="us-east-1").get_send_quota()
    assert quota["SentLast24Hours"] == 1


def test_given_an_unverified_sender_then_ses_refuses_and_the_message_fails_with_the_cause(stack) -> None:
    message, result = _sent_and_dispatched(stack, "api_send_email.json", "email")

    assert result == {"batchItemFailures": []}
    item = stack.message_item(message["id"])
    assert item["status"]["S"] == "failed"
    assert item["error"]["M"]["code"]["S"] == "provider_rejected"


def test_given_a_queued_imessage_then_sent_through_the_http_provider(stack, http_provider) -> None:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    stack.put_secret("HttpProviderTokenSecret", "secret-token")

    message, result = _sent_and_dispatched(stack, "api_send_imessage.json", "imessage")

    assert result == {"batchItemFailures": []}
    item = stack.message_item(message["id"])
    assert item["status"]["S"] == "sent"
    assert item["attempts"]["N"] == "1"
    assert item["providerMessageId"]["S"] == "prov_1"
    (call,) = http_provider.calls
    assert call.path == "/messages"
    assert call.headers["authorization"] == "Bearer secret-token"
    assert call.headers["idempotency-key"] == message["id"]
    assert call.body == {
        "messageId": message["id"],
        "channel": "imessage",
        "to": "+15550100001",
        "subject": None,
        "body": "See you at 6?",
    }
    fetched = stack.event("api_get_message.json", path=f"/v1/messages/{message['id']}")
    fetched["pathParameters"] = {"id": message["id"]}
    assert stack.call(fetched).json["message"]["status"] == "sent"


def test_given_the_same_record_delivered_twice_then_one_provider_call(stack, http_provider) -> None:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    message = stack.send("api_send_imessage.json").json["message"]
    records = stack.receive("imessage")

    first = stack.dispatch("imessage", records)
    second = stack.dispatch("imessage", records + records)

    assert first == second == {"batchItemFailures": []}
    assert len(http_provider.calls) == 1
    assert stack.message_item(message["id"])["attempts"]["N"] == "1"


def test_given_an_unreadable_record_then_it_alone_is_reported_and_the_others_are_sent(
    stack, http_provider
) -> None:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    message = stack.send("api_send_imessage.json").json["message"]
    (good,) = stack.receive("imessage")
    bad = [
        dict(good, MessageId="bad-json", Body="not json"),
        dict(good, MessageId="bad-id", Body=json.dumps({"messageId": "msg_nope", "workspaceId": "ws_local"})),
        dict(good, MessageId="bad-shape", Body=json.dumps(["msg"])),
    ]

    result = stack.dispatch("imessage", [bad[0], good, bad[1], bad[2]])

    assert sorted(f["itemIdentifier"] for f in result["batchItemFailures"]) == [
        "bad-id",
        "bad-json",
        "bad-shape",
    ]
    assert stack.message_item(message["id"])["status"]["S"] == "sent"
    assert len(http_provider.calls) == 1


def test_given_a_5xx_from_the_http_provider_then_the_record_is_retried_and_later_sent(
    stack, http_provider
) -> None:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    http_provider.answer_next(503)
    message = stack.send("api_send_imessage.json").json["message"]
    records = stack.receive("imessage")

    first = stack.dispatch("imessage", records)

    assert [f["itemIdentifier"] for f in first["batchItemFailures"]] == [records[0]["MessageId"]]
    item = stack.message_item(message["id"])
    assert item["status"]["S"] == "queued"
    assert item["error"]["M"]["code"]["S"] == "provider_unavailable"

    assert stack.dispatch("imessage", records) == {"batchItemFailures": []}
    item = stack.message_item(message["id"])
    assert item["status"]["S"] == "sent"
    assert item["attempts"]["N"] == "2"
    assert "error" not in item
    assert [c.headers["idempotency-key"] for c in http_provider.calls] == [message["id"]] * 2


def test_given_the_event_file_naming_an_unknown_message_then_skipped_not_failed(stack) -> None:
    result = function("dispatch_sms").handler(load_event("dispatch_sms_batch.json"), FakeLambdaContext())

    assert result == {"batchItemFailures": []}


# ---------------------------------------------------------------------------- the time budget
def _dispatch_with(stack, channel: str, records: list[dict], context: FakeLambdaContext) -> dict:
    return function(f"dispatch_{channel}").handler(sqs_event(records, stack.queue_arn(channel)), context)


def test_given_time_running_out_mid_batch_then_the_rest_goes_back_to_the_queue_unclaimed(
    stack, http_provider
) -> None:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    stack.setenv("SENDONCE_PROVIDER_TIMEOUT_SECONDS", "10")
    ids = [
        stack.send(
            "api_send_imessage.json", body={"channel": "imessage", "to": f"+1555010010{i}", "body": f"hi {i}"}
        ).json["message"]["id"]
        for i in range(3)
    ]
    records = stack.receive("imessage")
    assert len(records) == 3
    # 16 s left before the first record, then 14 s: less than the provider's 10 s plus the margin.
    context = FakeLambdaContext(
        function_name="sendonce-DispatchImessageFunction", time_left=readings(16_000, 14_000)
    )

    result = _dispatch_with(stack, "imessage", records, context)

    handed_back = [failure["itemIdentifier"] for failure in result["batchItemFailures"]]
    assert handed_back == [record["MessageId"] for record in records[1:]]
    assert len(http_provider.calls) == 1
    statuses = {message_id: stack.message(message_id) for message_id in ids}
    sent = [m for m in statuses.values() if m["status"] == "sent"]
    untouched = [m for m in statuses.values() if m["status"] == "queued"]
    assert len(sent) == 1
    assert len(untouched) == 2
    assert all(m["attempts"] == 0 for m in untouched)  # nothing claimed, no attempt counted

    # SQS brings them back, to an invocation with time enough: each is sent once.
    assert stack.dispatch("imessage", records) == {"batchItemFailures": []}
    assert len(http_provider.calls) == 3
    assert all(stack.message(message_id)["status"] == "sent" for message_id in ids)


def test_given_too_little_time_for_one_provider_call_then_the_whole_batch_goes_back(
    stack, http_provider
) -> None:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    message = stack.send("api_send_imessage.json").json["message"]
    records = stack.receive("imessage")
    timeout_ms = DispatcherSettings.from_environment().provider_timeout_seconds * 1000
    context = FakeLambdaContext(
        function_name="sendonce-DispatchImessageFunction", remaining_millis=int(timeout_ms) + 4_000
    )

    result = _dispatch_with(stack, "imessage", records, context)

    assert result == {"batchItemFailures": [{"itemIdentifier": records[0]["MessageId"]}]}
    assert http_provider.calls == []
    item = stack.message_item(message["id"])
    assert (item["status"]["S"], item["attempts"]["N"]) == ("queued", "0")
