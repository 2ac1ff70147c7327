"""The dispatcher functions fed from the real queues on moto: SNS, SES v2 and the HTTP provider."""

from __future__ import annotations

import json

from sendonce.providers.sns_provider import MESSAGE_ID_ATTRIBUTE

from tests.integration.conftest import FakeLambdaContext, function, load_event


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
    stack.setenv("SENDONCE_HTTP_PROVIDER_TOKEN", "secret-token")

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
