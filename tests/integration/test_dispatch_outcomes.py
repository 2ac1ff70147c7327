"""Delivery outcomes against moto, through the real dispatcher functions.

SES and SNS honour no idempotency key: a 5xx after the request left ends the message `unknown`
after exactly one attempt, and nothing sends it again; an operator settles it with
`sendonce resolve`. Throttling is retried, past the attempt count.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends
from sendonce.aws_clients import client
from sendonce.entrypoints.dispatch import build as build_dispatcher
from sendonce.messages.ids import new_message_id
from sendonce.settings import DispatcherSettings
from sendonce_cli.main import main

from tests.integration.conftest import FakeHttpProvider, Stack, function

EMAIL = {"channel": "email", "to": "someone@example.com", "subject": "Hi", "body": "about that invoice"}


def _verify_sender() -> None:
    sender = DispatcherSettings.from_environment().email_from
    client("ses").verify_email_identity(EmailAddress=sender)
    client("sesv2").create_email_identity(EmailIdentity=sender)


def _ses_sends() -> int:
    return len(ses_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sent_messages)


def _ses_answers(stack: Stack, status: int, code: str) -> list[int]:
    """Every SendEmail of the dispatcher's SES client answered `status` `code`; the calls, counted.

    The email dispatcher's root is built here, from its settings (SES, set first: a setting changed
    later forgets it) and clients of the test's own: the SES one gets a botocore hook that answers
    before anything is sent, as SES would answer.
    """
    calls: list[int] = []

    def answer(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        calls.append(status)
        parsed = {
            "Error": {"Code": code, "Message": f"{code} (injected)"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        return AWSResponse(url="", status_code=status, headers={}, raw=None), parsed

    def faulty(service: str, **options: Any) -> Any:
        made = client(service, **options)
        if service == "sesv2":
            made.meta.events.register("before-call.sesv2.SendEmail", answer)
        return made

    stack.setenv("SENDONCE_EMAIL_PROVIDER", "ses")
    settings = DispatcherSettings.from_environment()
    function("dispatch_email").root.use(build_dispatcher("email", settings, faulty))
    return calls


def _send_email(stack: Stack) -> str:
    answer = stack.send("api_send_email.json", body=EMAIL)
    assert answer.status == 201, answer.raw_body
    assert answer.json["duplicateOnly"] is False
    message_id: str = answer.json["message"]["id"]
    return message_id


def _resolve(message_id: str, outcome: str) -> int:
    return main(["resolve", message_id, "--as", outcome, "--endpoint-url", os.environ["AWS_ENDPOINT_URL"]])


@pytest.mark.parametrize(("status", "code"), [(500, "InternalFailure"), (503, "ServiceUnavailable")])
def test_given_a_5xx_from_ses_then_unknown_after_exactly_one_attempt_and_never_sent_again(
    stack: Stack, status: int, code: str
) -> None:
    _verify_sender()
    calls = _ses_answers(stack, status, code)
    message_id = _send_email(stack)
    records = stack.receive("email")

    first = stack.dispatch("email", records)
    again = stack.dispatch("email", records)  # SQS redelivers the record: the message is finished

    assert first == again == {"batchItemFailures": []}
    assert calls == [status]  # one call to SES, never repeated
    assert _ses_sends() == 0
    message = stack.message(message_id)
    assert message["status"] == "unknown"
    assert message["attempts"] == 1
    assert message["error"]["code"] == "provider_error"
    # Its lock stays: an identical send is still a duplicate, so it cannot go out twice.
    assert stack.send("api_send_email.json", body=EMAIL).json["duplicateOnly"] is True


def test_given_ses_throttling_then_the_message_waits_for_a_retry_not_unknown(stack: Stack) -> None:
    _verify_sender()
    stack.setenv("SENDONCE_MAX_DISPATCH_ATTEMPTS", "1")  # throttling is retried on time, not on count
    calls = _ses_answers(stack, 400, "TooManyRequestsException")
    message_id = _send_email(stack)
    records = stack.receive("email")

    first = stack.dispatch("email", records)
    second = stack.dispatch("email", records)

    assert [failure["itemIdentifier"] for failure in first["batchItemFailures"]] == [records[0]["MessageId"]]
    assert second == first
    assert len(calls) == 2
    message = stack.message(message_id)
    assert (message["status"], message["attempts"]) == ("queued", 2)
    assert message["error"]["code"] == "provider_throttled"


def test_given_the_http_provider_throttling_past_the_attempt_count_then_retried_until_sent(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    stack.setenv("SENDONCE_MAX_DISPATCH_ATTEMPTS", "2")
    for _ in range(3):
        http_provider.answer_next(429)
    answer = stack.send(
        "api_send_imessage.json", body={"channel": "imessage", "to": "+15550100001", "body": "hi"}
    )
    message_id = answer.json["message"]["id"]
    records = stack.receive("imessage")

    for _ in range(3):
        assert len(stack.dispatch("imessage", records)["batchItemFailures"]) == 1
        assert stack.message(message_id)["error"]["code"] == "provider_throttled"
    assert stack.dispatch("imessage", records) == {"batchItemFailures": []}

    sent = stack.message(message_id)
    assert (sent["status"], sent["attempts"], sent["error"]) == ("sent", 4, None)
    assert [call.headers["idempotency-key"] for call in http_provider.calls] == [message_id] * 4


def test_given_an_unknown_message_then_resolve_as_failed_releases_its_lock_and_only_once(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    _verify_sender()
    _ses_answers(stack, 503, "ServiceUnavailable")
    message_id = _send_email(stack)
    stack.dispatch("email")
    assert stack.message(message_id)["status"] == "unknown"

    assert _resolve(message_id, "failed") == 0
    assert "is now failed" in capsys.readouterr().out
    failed = stack.message(message_id)
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "provider_error"  # the attempt's cause stays

    # Settled once: a second resolve is refused and changes nothing.
    assert _resolve(message_id, "sent") == 1
    assert "is failed, not unknown" in capsys.readouterr().err
    assert stack.message(message_id)["status"] == "failed"
    # The lock is released: a deliberate retry of the same content is a new message.
    assert _send_email(stack) != message_id


def test_given_an_unknown_message_then_resolve_as_sent_keeps_its_lock(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    _verify_sender()
    _ses_answers(stack, 500, "InternalFailure")
    message_id = _send_email(stack)
    stack.dispatch("email")

    assert _resolve(message_id, "sent") == 0
    assert stack.message(message_id)["status"] == "sent"
    assert stack.send("api_send_email.json", body=EMAIL).json["duplicateOnly"] is True


def test_given_a_message_that_is_not_unknown_or_none_then_resolve_refuses(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    message_id = _send_email(stack)  # queued

    assert _resolve(message_id, "failed") == 1
    assert "is queued, not unknown" in capsys.readouterr().err
    assert stack.message(message_id)["status"] == "queued"
    assert _resolve(new_message_id(), "sent") == 1
    assert "no message" in capsys.readouterr().err
    assert _resolve("not-an-id", "sent") == 2
