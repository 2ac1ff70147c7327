"""sendonce_local: the provider sandbox's HTTP provider and the provider calls it records."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.provider_calls import ses_send_email, sns_publish
from sendonce_local.sandbox import HttpProvider, Inbound, read_inbound

TOKEN = "Bearer t0k"


def body(message_id: str = "msg_1", to: str = "+15550100001") -> bytes:
    return json.dumps(
        {"messageId": message_id, "channel": "imessage", "to": to, "subject": None, "body": "hi"}
    ).encode()


@pytest.fixture
def log() -> DeliveryLog:
    return DeliveryLog()


@pytest.fixture
def provider(log: DeliveryLog) -> HttpProvider:
    return HttpProvider(log, lambda: "t0k")


def test_a_send_is_recorded_once_per_idempotency_key(provider: HttpProvider, log: DeliveryLog) -> None:
    first = provider.send(TOKEN, "msg_1", body())
    again = provider.send(TOKEN, "msg_1", body())

    assert first.status == 201
    assert first.body["id"].startswith("prov_")
    assert again == first
    assert [d["messageId"] for d in log.all()] == ["msg_1"]
    assert log.all()[0]["provider"] == "http"


def test_a_wrong_token_or_a_missing_key_is_refused(provider: HttpProvider, log: DeliveryLog) -> None:
    assert provider.send("Bearer nope", "k", body()).status == 401
    assert provider.send(TOKEN, None, body()).status == 400
    assert log.all() == []


def test_faults_apply_to_the_next_n_calls_of_their_recipient(
    provider: HttpProvider, log: DeliveryLog
) -> None:
    provider.arm({"channel": "imessage", "to": "+15550100009", "mode": "error_500", "count": 2})

    assert provider.send(TOKEN, "other", body("other")).status == 201
    assert provider.send(TOKEN, "m9", body("m9", "+15550100009")).status == 500
    assert provider.send(TOKEN, "m9", body("m9", "+15550100009")).status == 500
    assert provider.send(TOKEN, "m9", body("m9", "+15550100009")).status == 201  # not remembered: retried
    assert [d["messageId"] for d in log.all()] == ["other", "m9"]


def test_a_timeout_records_the_delivery_then_answers_late(
    provider: HttpProvider, log: DeliveryLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SENDONCE_PROVIDER_TIMEOUT_SECONDS", "2")
    provider.arm({"channel": "imessage", "mode": "timeout", "count": 1})

    answer = provider.send(TOKEN, "mt", body("mt"))

    assert answer.status == 201
    assert answer.delay_seconds == 3
    assert provider.send(TOKEN, "mt", body("mt")).delay_seconds == 0
    assert len(log.all()) == 1


def test_bad_faults_are_refused(provider: HttpProvider) -> None:
    with pytest.raises(ValueError, match="mode"):
        provider.arm({"channel": "imessage", "mode": "explode", "count": 1})


def test_sns_publish_as_botocore_sends_it() -> None:
    form = urlencode(
        {
            "Action": "Publish",
            "Version": "2010-03-31",
            "PhoneNumber": "+15550100000",
            "Message": "Hello",
            "MessageAttributes.entry.1.Name": "sendonce.message_id",
            "MessageAttributes.entry.1.Value.DataType": "String",
            "MessageAttributes.entry.1.Value.StringValue": "msg_9",
        }
    ).encode()

    call = sns_publish(form, "application/x-www-form-urlencoded; charset=utf-8")

    assert call is not None
    assert (call.message_id, call.channel, call.to, call.body, call.provider) == (
        "msg_9",
        "sms",
        "+15550100000",
        "Hello",
        "sns",
    )
    assert (
        sns_publish(urlencode({"Action": "Publish", "TopicArn": "arn", "Message": "x"}).encode(), "") is None
    )


def test_ses_send_email() -> None:
    request = {
        "FromEmailAddress": "no-reply@sendonce.local",
        "Destination": {"ToAddresses": ["someone@example.com"]},
        "Content": {"Simple": {"Subject": {"Data": "S"}, "Body": {"Text": {"Data": "B"}}}},
        "EmailTags": [{"Name": "sendonce-message-id", "Value": "msg_5"}],
    }

    call = ses_send_email(json.dumps(request).encode())

    assert (call.message_id, call.channel, call.to, call.subject, call.body, call.provider) == (
        "msg_5",
        "email",
        "someone@example.com",
        "S",
        "B",
        "ses",
    )


def test_an_ses_email_to_several_is_one_call_with_to_cc_and_bcc_as_sent() -> None:
    request = {
        "FromEmailAddress": "no-reply@sendonce.local",
        "Destination": {
            "ToAddresses": ["a@example.com", "b@example.com"],
            "CcAddresses": ["c@example.com"],
            "BccAddresses": ["d@example.com"],
        },
        "ReplyToAddresses": ["desk@example.com"],
        "Content": {"Simple": {"Subject": {"Data": "S"}, "Body": {"Html": {"Data": "<p>B</p>"}}}},
        "EmailTags": [{"Name": "sendonce-message-id", "Value": "msg_6"}],
    }
    log = DeliveryLog()

    call = ses_send_email(json.dumps(request).encode())
    log.record(
        message_id=call.message_id,
        channel=call.channel,
        to=call.to,
        subject=call.subject,
        body=call.body,
        provider=call.provider,
        email=call.email,
    )

    (entry,) = log.all()
    assert entry["to"] == ["a@example.com", "b@example.com"]
    assert (entry["cc"], entry["bcc"], entry["replyTo"]) == (
        ["c@example.com"],
        ["d@example.com"],
        "desk@example.com",
    )
    assert entry["html"] == "<p>B</p>"


def test_an_http_email_to_a_list_is_recorded_as_sent_and_a_fault_on_one_of_its_addresses_applies(
    provider: HttpProvider, log: DeliveryLog
) -> None:
    provider.arm({"channel": "email", "to": "B@example.com", "mode": "error_400", "count": 1})
    email = {"messageId": "m1", "channel": "email", "to": ["a@example.com", "b@example.com"], "subject": "s"}
    raw = json.dumps({**email, "body": "hi", "cc": [], "bcc": ["c@example.com"]}).encode()

    assert provider.send(TOKEN, "m1", raw).status == 400
    assert provider.send(TOKEN, "m1", raw).status == 201

    (entry,) = log.all()
    assert (entry["to"], entry["cc"], entry["bcc"]) == (
        ["a@example.com", "b@example.com"],
        [],
        ["c@example.com"],
    )
    assert "replyTo" not in entry


# ---------------------------------------------------------------------------- POST /inbound
@pytest.mark.parametrize(
    ("request_body", "sender", "opts_out"),
    [
        ({"channel": "sms", "from": "+1 (555) 010-0000", "body": " stop\n"}, "+15550100000", True),
        ({"channel": "sms", "from": "+15550100000", "body": "Unsubscribe"}, "+15550100000", True),
        ({"channel": "imessage", "from": "Ann@X.io", "body": "QUIT"}, "Ann@x.io", True),
        ({"channel": "sms", "from": "+15550100000", "body": "stop please"}, "+15550100000", False),
        ({"channel": "sms", "from": "+15550100000", "body": "hello"}, "+15550100000", False),
    ],
)
def test_an_inbound_text_is_read_for_its_sender_and_whether_it_opts_out(
    request_body: dict[str, str], sender: str, opts_out: bool
) -> None:
    assert read_inbound(request_body) == Inbound(sender, opts_out)


@pytest.mark.parametrize(
    "request_body",
    [
        None,
        [],
        {"channel": "email", "from": "ann@x.io", "body": "STOP"},
        {"channel": "sms", "from": "ann@x.io", "body": "STOP"},
        {"channel": "sms", "from": "+15550100000"},
        {"channel": "sms", "from": 15550100000, "body": "STOP"},
    ],
)
def test_an_inbound_text_that_cannot_be_read_is_refused(request_body: object) -> None:
    with pytest.raises(ValueError, match=r"."):
        read_inbound(request_body)
