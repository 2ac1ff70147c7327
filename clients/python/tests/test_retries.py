"""Which failures the client retries, with what key, after what wait, and until when.

A send keeps one Idempotency-Key and one body across its retries; a call that the API would
carry out twice is never repeated after its answer was lost; `Retry-After` is a floor under the
backoff; the deadline bounds the whole call.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from client_support import MESSAGE, Api, answer, created, error, lost, refused
from sendonce_client import SendOutcome, errors


def _keys(api: Api) -> list[str | None]:
    return [request.headers.get("idempotency-key") for request in api.requests]


# ---------------------------------------------------------------- one key per call
def test_a_send_makes_a_key_and_keeps_it_and_its_body_on_every_retry(api: Api) -> None:
    api.then(
        lost(), error(503, "unavailable", **{"Retry-After": "1"}), created(**{"Idempotency-Replayed": "true"})
    )

    result = api.client().messages.send("sms", "+15550100000", "hi")

    keys = _keys(api)
    assert len(keys) == 3
    assert keys[0]
    assert len(set(keys)) == 1
    assert len({request.content for request in api.requests}) == 1
    assert result.idempotency_key == keys[0]
    assert result.attempts == 3
    # The replay answered this call's own lost first attempt: the message is this call's.
    assert result.outcome is SendOutcome.CREATED
    assert result.replayed is True


def test_two_sends_get_two_keys(api: Api) -> None:
    api.then(created(), created())
    client = api.client()
    client.messages.send("sms", "+15550100000", "hi")
    client.messages.send("sms", "+15550100000", "hi")
    assert len(set(_keys(api))) == 2


def test_the_callers_key_is_sent_as_given_and_a_first_answer_replay_is_a_replay(api: Api) -> None:
    api.then(created(**{"Idempotency-Replayed": "true"}))
    result = api.client().messages.send("sms", "+15550100000", "hi", idempotency_key="order-42")
    assert _keys(api) == ["order-42"]
    assert result.outcome is SendOutcome.REPLAYED


def test_a_caught_duplicate_is_a_duplicate_with_the_original(api: Api) -> None:
    duplicate = {
        "success": True,
        "duplicateOnly": True,
        "duplicateMessage": "sent 3 s ago",
        "message": MESSAGE,
    }
    api.then(answer(200, duplicate))
    result = api.client().messages.send("sms", "+15550100000", "hi")
    assert result.outcome is SendOutcome.DUPLICATE
    assert result.message is not None
    assert result.message.id == "msg_1"
    assert result.duplicate_message == "sent 3 s ago"


def test_a_batch_keeps_its_key_across_retries(api: Api) -> None:
    results = {"success": True, "results": []}
    api.then(lost(), answer(200, results, **{"Idempotency-Replayed": "true"}))
    batch = api.client().messages.send_batch([{"channel": "sms", "to": "+15550100000", "body": "hi"}])
    keys = _keys(api)
    assert len(keys) == 2
    assert keys[0] == keys[1] == batch.idempotency_key
    assert api.requests[0].url.params["validation"] == "permissive"


# ---------------------------------------------------------------- what is retried
@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(refused, id="connection refused"),
        pytest.param(lost(), id="answer lost"),
        pytest.param(error(409, "idempotency_in_progress", **{"Retry-After": "1"}), id="409 in progress"),
        pytest.param(error(429, "rate_limited", **{"Retry-After": "1"}), id="429 rate limited"),
        pytest.param(error(503, "unavailable", **{"Retry-After": "1"}), id="503"),
    ],
)
def test_a_send_is_retried_on(api: Api, failure: Any) -> None:
    api.then(failure, created())
    result = api.client().messages.send("sms", "+15550100000", "hi")
    assert result.attempts == 2
    assert result.outcome is SendOutcome.CREATED


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (400, "validation_error", errors.ValidationFailed),
        (400, "invalid_idempotency_key", errors.InvalidIdempotencyKey),
        (401, "unauthorized", errors.Unauthorized),
        (404, "not_found", errors.NotFound),
        (409, "message_not_cancelable", errors.MessageNotCancelable),
        (409, "duplicate_content", errors.DuplicateContent),
        (422, "idempotency_key_reused", errors.IdempotencyKeyReused),
        (422, "recipient_suppressed", errors.RecipientSuppressed),
        (413, "payload_too_large", errors.PayloadTooLarge),
    ],
)
def test_an_explicit_refusal_is_raised_at_once_with_its_code_message_and_details(
    api: Api, status: int, code: str, kind: type[errors.ApiError]
) -> None:
    api.then(error(status, code, details=[{"field": "to", "message": "bad"}]))
    with pytest.raises(kind) as raised:
        api.client().messages.send("sms", "+15550100000", "hi")
    assert len(api.requests) == 1
    assert raised.value.status == status
    assert raised.value.code == code
    assert raised.value.message == f"{code}!"
    assert raised.value.details == [{"field": "to", "message": "bad"}]


def test_a_cancel_is_not_repeated_once_it_may_have_reached_the_api(api: Api) -> None:
    api.then(lost())
    with pytest.raises(errors.ConnectionFailed):
        api.client().messages.cancel("msg_1")
    assert len(api.requests) == 1  # a second cancel would answer 409 for the first one's success


def test_a_call_without_a_key_is_still_retried_when_it_was_never_sent(api: Api) -> None:
    endpoint = {
        "id": "whep_1",
        "url": "https://x.test",
        "eventTypes": None,
        "description": None,
        "createdAt": "2026-11-30T00:00:00Z",
        "secret": "whsec_abc",
    }
    api.then(refused, answer(201, {"success": True, "endpoint": endpoint}))
    created_endpoint = api.client().webhook_endpoints.create("https://x.test")
    assert created_endpoint.secret == "whsec_abc"
    assert len(api.requests) == 2


def test_a_read_is_retried_after_a_lost_answer(api: Api) -> None:
    api.then(lost(), answer(200, {"success": True, "message": MESSAGE}))
    assert api.client().messages.get("msg_1").id == "msg_1"


# ---------------------------------------------------------------- Retry-After and the deadline
def test_retry_after_is_a_floor_under_the_backoff(api: Api) -> None:
    api.then(
        error(429, "rate_limited", **{"Retry-After": "4"}),
        error(503, "unavailable", **{"Retry-After": "2"}),
        created(),
    )
    api.client().messages.send("sms", "+15550100000", "hi")
    assert api.time.slept[0] >= 4
    assert api.time.slept[1] >= 2


def test_a_retry_after_past_the_deadline_is_raised_at_once(api: Api) -> None:
    api.then(error(429, "quota_exceeded", **{"Retry-After": "36000"}))
    with pytest.raises(errors.QuotaExceeded) as raised:
        api.client(deadline=30).messages.send("sms", "+15550100000", "hi")
    assert raised.value.retry_after == 36000
    assert api.time.slept == []
    assert len(api.requests) == 1


def test_the_deadline_bounds_the_whole_call(api: Api) -> None:
    api.then(*[error(503, "unavailable", **{"Retry-After": "1"})] * 100)
    started = api.time.now
    with pytest.raises(errors.Unavailable):
        api.client(deadline=10).messages.send("sms", "+15550100000", "hi")
    assert api.time.now - started <= 10
    assert 3 <= len(api.requests) < 100


def test_a_slow_lost_answer_uses_up_the_deadline_and_names_the_key_to_retry_with(api: Api) -> None:
    api.then(*[lost(api.time, after=4.0)] * 10)
    with pytest.raises(errors.ConnectionFailed) as raised:
        api.client(deadline=10).messages.send("sms", "+15550100000", "hi")
    assert raised.value.idempotency_key == _keys(api)[0]
    assert len(api.requests) <= 3


def test_each_attempts_timeout_is_cut_to_what_the_deadline_leaves(api: Api) -> None:
    api.then(lost(api.time, after=7.0), created())
    api.client(deadline=12).messages.send("sms", "+15550100000", "hi")
    first, second = (request.extensions["timeout"]["read"] for request in api.requests)
    assert first == 10.0
    assert second <= 12 - 7


# ---------------------------------------------------------------- asynchronously
def test_the_async_client_retries_with_the_same_key_and_honours_retry_after(api: Api) -> None:
    api.then(lost(), error(429, "rate_limited", **{"Retry-After": "3"}), created())

    async def send() -> Any:
        async with api.async_client() as client:
            return await client.messages.send("sms", "+15550100000", "hi")

    result = asyncio.run(send())
    assert len(set(_keys(api))) == 1
    assert len(api.requests) == 3
    assert api.time.slept[-1] >= 3
    assert result.outcome is SendOutcome.CREATED


def test_the_async_client_raises_a_refusal_at_once(api: Api) -> None:
    api.then(error(422, "idempotency_key_reused"))

    async def send() -> None:
        async with api.async_client() as client:
            await client.messages.send("sms", "+15550100000", "hi", idempotency_key="k")

    with pytest.raises(errors.IdempotencyKeyReused):
        asyncio.run(send())
    assert len(api.requests) == 1


def test_an_answer_that_is_not_the_apis_shape_is_unexpected(api: Api) -> None:
    api.then(lambda request: httpx.Response(502, text="<html>bad gateway</html>"))
    with pytest.raises(errors.UnexpectedAnswer):
        api.client().messages.get("msg_1")
