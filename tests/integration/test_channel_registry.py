"""A fourth channel, registered in `sendonce.channels` and nowhere else, sent end to end on moto.

The API function's real handler accepts it, HandoffFunction hands it to its own queue from the
table's stream, and the one dispatcher
function built for it delivers it once through the provider its setting chose; a repeat of the
queue record sends nothing more. Only the queue itself is created here, as template.yaml would.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sendonce import channels
from sendonce.channels import ChannelSpec
from sendonce.entrypoints.dispatch import dispatcher_function
from sendonce.messages.recipients import normalise_phone

from tests.integration.conftest import FakeHttpProvider, Stack, sqs_event
from tests.support.lambda_context import FakeLambdaContext

PAGER = ChannelSpec("pager", normalise_phone, subject="forbidden", providers=("http",))


@pytest.fixture
def pager(stack: Stack, http_provider: FakeHttpProvider) -> Iterator[str]:
    with channels.registered(PAGER):
        url = stack.sqs.create_queue(QueueName="PagerQueue")["QueueUrl"]
        stack.setenv(PAGER.queue_url_setting, url)
        stack.setenv(PAGER.provider_setting, "http")
        stack.setenv("SENDONCE_HTTP_PROVIDER_URL", http_provider.url)
        yield url


def test_a_registered_fourth_channel_is_sent_once_through_the_real_functions(
    stack: Stack, pager: str, http_provider: FakeHttpProvider
) -> None:
    body = {"channel": "pager", "to": "+1 (555) 010-0077", "body": "paged"}
    first = stack.send(body=body)
    assert first.status == 201, first.raw_body
    assert first.json["message"]["channel"] == "pager"
    assert first.json["message"]["to"] == "+15550100077"
    assert stack.send(body=body).json["duplicateOnly"] is True  # the same dedup guard

    stack.hand_off()
    records = stack.sqs.receive_message(QueueUrl=pager, MaxNumberOfMessages=10).get("Messages", [])
    assert len(records) == 1
    handler, _root = dispatcher_function("pager")
    event = sqs_event(records + records, "arn:aws:sqs:us-east-1:123456789012:PagerQueue")
    assert handler(event, FakeLambdaContext()) == {"batchItemFailures": []}

    (call,) = http_provider.calls
    assert call.body["channel"] == "pager"
    assert call.headers["idempotency-key"] == first.json["message"]["id"]
    assert stack.message(first.json["message"]["id"])["status"] == "sent"


def test_a_channel_not_registered_is_refused_with_a_400(stack: Stack) -> None:
    answer = stack.send(body={"channel": "pager", "to": "+15550100077", "body": "paged"})
    assert answer.status == 400
    assert answer.json["error"]["code"] == "validation_error"
