"""An email to several recipients against moto, through the real handlers: the send's answer and
its message, a suppressed recipient left out and named, one SES call (and one HTTP provider call)
carrying every recipient left, and the 422 when none is left."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from sendonce.aws_clients import client
from sendonce.entrypoints.dispatch import build as build_dispatcher
from sendonce.settings import DispatcherSettings

from tests.integration.conftest import FakeHttpProvider, Stack, function

EMAIL = {
    "channel": "email",
    "to": ["ann@example.com", "Bob@Example.com"],
    "cc": ["cy@example.com"],
    "replyTo": "desk@example.com",
    "subject": "Your invoice",
    "body": "It is attached.",
    "html": "<p>It is <b>attached</b>.</p>",
}


def _suppress(stack: Stack, to: str) -> None:
    event = stack.event(
        "api_send_sms.json", method="POST", path="/v1/suppressions", body={"channel": "email", "to": to}
    )
    answer = stack.call(event)
    assert answer.status == 201, answer.raw_body


def _recording_ses(stack: Stack) -> list[dict[str, Any]]:
    """Every SendEmail the email dispatcher makes to SES (on moto), as sent."""
    sender = DispatcherSettings.from_environment().email_from
    client("ses").verify_email_identity(EmailAddress=sender)
    client("sesv2").create_email_identity(EmailIdentity=sender)
    calls: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(json.loads(params["body"]))

    def recording(service: str, **options: Any) -> Any:
        made = client(service, **options)
        if service == "sesv2":
            made.meta.events.register("before-call.sesv2.SendEmail", record)
        return made

    stack.setenv("SENDONCE_EMAIL_PROVIDER", "ses")
    function("dispatch_email").root.use(
        build_dispatcher("email", DispatcherSettings.from_environment(), recording)
    )
    return calls


def test_given_one_of_three_suppressed_then_accepted_named_and_ses_gets_one_call_with_the_two_others(
    stack: Stack,
) -> None:
    _suppress(stack, "bob@example.com")
    calls = _recording_ses(stack)

    answer = stack.send("api_send_email.json", body=EMAIL)

    assert answer.status == 201, answer.raw_body
    shown = answer.json["message"]
    assert shown["to"] == ["ann@example.com"]
    assert shown["cc"] == ["cy@example.com"]
    assert shown["suppressedRecipients"] == ["Bob@example.com"]
    assert shown["replyTo"] == "desk@example.com"
    assert shown["html"] == EMAIL["html"]
    assert "bcc" not in shown
    assert stack.message(shown["id"]) == {**shown, "updatedAt": stack.message(shown["id"])["updatedAt"]}

    assert stack.dispatch("email", stack.receive("email")) == {"batchItemFailures": []}

    (call,) = calls
    assert call["Destination"] == {"ToAddresses": ["ann@example.com"], "CcAddresses": ["cy@example.com"]}
    assert call["ReplyToAddresses"] == ["desk@example.com"]
    assert call["Content"]["Simple"]["Body"]["Html"]["Data"] == EMAIL["html"]
    assert call["Content"]["Simple"]["Body"]["Text"]["Data"] == EMAIL["body"]
    assert stack.message(shown["id"])["status"] == "sent"


def test_given_all_three_suppressed_then_422_and_nothing_stored(stack: Stack) -> None:
    for address in ("ann@example.com", "bob@example.com", "cy@example.com"):
        _suppress(stack, address)
    before = stack.messages()

    answer = stack.send("api_send_email.json", body=EMAIL, key="all-suppressed")

    assert answer.status == 422, answer.raw_body
    assert answer.json["error"]["code"] == "recipient_suppressed"
    assert answer.json["error"]["details"]["reason"] == "manual"
    assert stack.messages() == before


def test_given_the_http_provider_for_email_then_one_call_carries_the_lists_as_accepted(
    stack: Stack, http_provider: FakeHttpProvider
) -> None:
    stack.setenv("SENDONCE_EMAIL_PROVIDER", "http")
    stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
    stack.put_secret("HttpProviderTokenSecret", "secret-token")
    _suppress(stack, "cy@example.com")

    answer = stack.send("api_send_email.json", body={**EMAIL, "bcc": ["dee@example.com", "ANN@example.com"]})
    assert answer.status == 201, answer.raw_body
    assert stack.dispatch("email", stack.receive("email")) == {"batchItemFailures": []}

    (call,) = http_provider.calls
    assert call.body["to"] == ["ann@example.com", "Bob@example.com"]
    assert call.body["cc"] == []
    assert call.body["bcc"] == ["dee@example.com"]
    assert call.body["replyTo"] == "desk@example.com"
    assert call.body["html"] == EMAIL["html"]
    listed = stack.call(
        stack.event("api_send_sms.json", method="GET", path=f"/v1/suppressions/{quote('cy@example.com')}")
    )
    assert listed.status == 200


def test_given_the_largest_html_a_request_carries_then_its_keyed_answer_is_stored_and_replayed(
    stack: Stack,
) -> None:
    """An Idempotency-Key's record is one item: a large answer is stored compressed, never a 503."""
    for index, html in enumerate(("語" * 40_000, '"' * 120_000)):
        body = {"channel": "email", "to": ["a@example.com", "b@example.com"], "subject": "s", "html": html}

        first = stack.send("api_send_email.json", body=body, key=f"large-{index}")
        again = stack.send("api_send_email.json", body=body, key=f"large-{index}")

        assert first.status == 201, first.raw_body[:300]
        assert first.json["message"]["html"] == html
        assert (again.status, again.raw_body) == (201, first.raw_body)
        assert again.header("Idempotency-Replayed") == "true"
