"""HttpProvider against a tiny HTTP server on 127.0.0.1: how each answer is classified."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sendonce.dispatch.ports import ProviderThrottled
from sendonce.errors import AmbiguousOutcome, PermanentFailure, TransientFailure
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status
from sendonce.providers.http_provider import HttpProvider


def _message() -> Message:
    now = datetime.now(UTC)
    return Message(
        id=new_message_id(),
        workspace_id="ws",
        channel=Channel("imessage"),
        to="+15550100000",
        body="hi",
        status=Status.SENDING,
        created_at=now,
        updated_at=now,
    )


def test_given_201_then_the_provider_id_and_the_message_id_as_idempotency_key(http_provider) -> None:
    message = _message()

    provider_id = HttpProvider(http_provider.url + "/", "tok", 5).send(message)

    assert provider_id == "prov_1"
    (call,) = http_provider.calls
    assert call.path == "/messages"
    assert call.headers["idempotency-key"] == message.id
    assert call.headers["authorization"] == "Bearer tok"
    assert call.headers["content-type"] == "application/json"
    assert call.body["messageId"] == message.id


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_given_a_4xx_then_permanent_failure(http_provider, status: int) -> None:
    http_provider.answer_next(status)

    with pytest.raises(PermanentFailure) as failure:
        HttpProvider(http_provider.url, "tok", 5).send(_message())
    assert failure.value.code == "provider_rejected"


@pytest.mark.parametrize("status", [500, 502, 503])
def test_given_a_5xx_then_transient_failure(http_provider, status: int) -> None:
    http_provider.answer_next(status)

    with pytest.raises(TransientFailure) as failure:
        HttpProvider(http_provider.url, "tok", 5).send(_message())
    assert failure.value.code == "provider_unavailable"


def test_given_a_429_then_throttled_retried_on_time_not_on_attempts(http_provider) -> None:
    http_provider.answer_next(429)

    with pytest.raises(ProviderThrottled) as failure:
        HttpProvider(http_provider.url, "tok", 5).send(_message())
    assert failure.value.code == "provider_throttled"


def test_given_no_answer_in_time_then_ambiguous_outcome(http_provider) -> None:
    http_provider.answer_next(201, delay=1.0)

    with pytest.raises(AmbiguousOutcome) as failure:
        HttpProvider(http_provider.url, "tok", 0.2).send(_message())
    assert failure.value.code == "provider_timeout"
    assert len(http_provider.calls) == 1  # the request did reach the provider


def test_given_nothing_listening_then_transient_failure(closed_port: int) -> None:
    with pytest.raises(TransientFailure) as failure:
        HttpProvider(f"http://127.0.0.1:{closed_port}", "tok", 2).send(_message())
    assert failure.value.code == "provider_unreachable"
