"""The Python client against the local stack, through a proxy that loses, delays and refuses.

Each fault happens after, or instead of, the request reaching the API; in each case the client's
own retry, under the same Idempotency-Key, ends in exactly one message and one delivery, counted
by the sandbox's `/deliveries`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sendonce_client import AsyncClient, Client, SendOutcome, SendResult

from tests.e2e.conftest import LocalStack
from tests.e2e.e2e_support import (
    SETTLED,
    deliveries_of,
    deliveries_with_body,
    eventually,
    unique_body,
    unique_phone,
    wait_status,
)
from tests.e2e.fault_proxy import Faults, fault_proxy

pytestmark = pytest.mark.e2e

ATTEMPT_TIMEOUT = 2.0  # the proxy's delay (3 s) is past it


@pytest.fixture
def proxy(stack: LocalStack) -> Iterator[tuple[str, Faults]]:
    with fault_proxy(stack.api) as running:
        yield running


def _client(stack: LocalStack, url: str) -> Client:
    return Client(stack.api_key, url, deadline=40, attempt_timeout=ATTEMPT_TIMEOUT)


def _delivered_once(stack: LocalStack, result: SendResult) -> None:
    assert result.message is not None
    message_id = result.message.id
    wait_status(stack, message_id, SETTLED, timeout=60)
    delivered = eventually(lambda: deliveries_of(stack, message_id))
    assert len(delivered) == 1
    assert len(deliveries_with_body(stack, result.message.body)) == 1


@pytest.mark.parametrize("fault", ["drop", "delay", "unavailable"])
def test_a_send_whose_first_attempt_fails_is_retried_once_and_delivered_once(
    stack: LocalStack, proxy: tuple[str, Faults], fault: str
) -> None:
    url, faults = proxy
    faults.arm("/v1/messages", fault)
    body = unique_body(f"client {fault}")

    with _client(stack, url) as client:
        result = client.messages.send("sms", unique_phone(), body)

    assert result.attempts == 2
    assert result.outcome is SendOutcome.CREATED
    # drop and delay: the first attempt made the message, the retry got its answer replayed.
    assert result.replayed is (fault != "unavailable")
    assert faults.forwarded["/v1/messages"] == (2 if fault != "unavailable" else 1)
    _delivered_once(stack, result)


def test_the_async_client_survives_a_lost_answer_with_one_delivery(
    stack: LocalStack, proxy: tuple[str, Faults]
) -> None:
    url, faults = proxy
    faults.arm("/v1/messages", "drop", "unavailable")
    body = unique_body("async client")

    async def send() -> SendResult:
        async with AsyncClient(stack.api_key, url, deadline=40, attempt_timeout=ATTEMPT_TIMEOUT) as client:
            return await client.messages.send("sms", unique_phone(), body)

    result = asyncio.run(send())
    assert result.attempts == 3
    assert result.outcome is SendOutcome.CREATED
    _delivered_once(stack, result)


def test_a_batch_whose_answer_is_lost_is_sent_once(stack: LocalStack, proxy: tuple[str, Faults]) -> None:
    url, faults = proxy
    faults.arm("/v1/messages/batch", "drop")
    items = [
        {"channel": "sms", "to": unique_phone(), "body": unique_body(f"client batch {n}")} for n in range(3)
    ]

    with _client(stack, url) as client:
        batch = client.messages.send_batch(items)
        assert batch.attempts == 2
        assert batch.replayed
        assert [result.status for result in batch.results] == [201, 201, 201]
        for item in batch.results:
            assert item.message is not None
            wait_status(stack, item.message.id, SETTLED, timeout=60)
    for item in items:
        assert len(eventually(lambda body=item["body"]: deliveries_with_body(stack, body))) == 1
