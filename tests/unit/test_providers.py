"""The providers' reading of each answer: what may have been taken (SES, SNS: `unknown`), what was
throttled, what never left; and the HTTP provider's answer read with a size cap."""

from __future__ import annotations

import functools
import io
import urllib.error
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.stub import Stubber
from sendonce.dispatch.ports import ProviderThrottled
from sendonce.errors import (
    AmbiguousOutcome,
    DispatchFailure,
    PermanentFailure,
    ProviderRefused,
    ProviderUnreachable,
    TransientFailure,
)
from sendonce.messages.model import Channel, Message, Status
from sendonce.providers.http_provider import MAX_ANSWER_BYTES, HttpProvider
from sendonce.providers.ses_provider import SesProvider
from sendonce.providers.sns_provider import SnsProvider

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ENDPOINT = "https://email.us-east-1.amazonaws.com"


def _message(channel: str = "email", to: str = "ann@example.com") -> Message:
    return Message(
        id="msg_01JDZ0000000000000000000000",
        workspace_id="ws_a",
        channel=Channel(channel),
        to=to,
        body="hello",
        subject="Hi" if channel == "email" else None,
        status=Status.SENDING,
        created_at=NOW,
        updated_at=NOW,
        attempts=1,
    )


@functools.cache
def _client(service: str) -> Any:
    return boto3.session.Session().client(
        service, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def _ses_answering(code: str, status: int) -> DispatchFailure:
    client = _client("sesv2")
    with Stubber(client) as stubber:
        stubber.add_client_error("send_email", service_error_code=code, http_status_code=status)
        with pytest.raises(DispatchFailure) as raised:
            SesProvider(client, "no-reply@example.com").send(_message())
    return raised.value


def _sns_answering(code: str, status: int) -> DispatchFailure:
    client = _client("sns")
    with Stubber(client) as stubber:
        stubber.add_client_error("publish", service_error_code=code, http_status_code=status)
        with pytest.raises(DispatchFailure) as raised:
            SnsProvider(client).send(_message("sms", "+15550100000"))
    return raised.value


# ---------------------------------------------------------------------------- SES and SNS
@pytest.mark.parametrize("answer", [_ses_answering, _sns_answering])
@pytest.mark.parametrize(
    ("code", "status"),
    [("InternalFailure", 500), ("ServiceUnavailable", 503), ("InternalServerError", 500), ("Weird", 502)],
)
def test_given_a_5xx_from_ses_or_sns_then_the_outcome_is_ambiguous(
    answer: Any, code: str, status: int
) -> None:
    failure = answer(code, status)

    assert isinstance(failure, AmbiguousOutcome)  # the dispatcher makes it `unknown`: no idempotency key
    assert failure.code == "provider_error"


@pytest.mark.parametrize(
    ("answer", "code", "status"),
    [
        (_ses_answering, "TooManyRequestsException", 429),
        (_ses_answering, "LimitExceededException", 400),
        (_ses_answering, "Throttling", 400),
        (_sns_answering, "Throttling", 400),
        (_sns_answering, "ThrottledException", 429),
        (_sns_answering, "KMSThrottlingException", 400),
    ],
)
def test_given_throttling_from_ses_or_sns_then_throttled(answer: Any, code: str, status: int) -> None:
    failure = answer(code, status)

    assert isinstance(failure, ProviderThrottled)
    assert failure.code == "provider_throttled"


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (_ses_answering, "MessageRejected"),
        (_ses_answering, "BadRequestException"),
        (_sns_answering, "InvalidParameter"),
        (_sns_answering, "OptedOut"),
    ],
)
def test_given_a_4xx_from_ses_or_sns_then_permanent(answer: Any, code: str) -> None:
    failure = answer(code, 400)

    assert isinstance(failure, PermanentFailure)
    assert not isinstance(failure, TransientFailure)
    assert failure.code == "provider_rejected"


@dataclass
class RaisingClient:
    error: Exception
    calls: int = 0

    def send_email(self, **_: Any) -> dict[str, Any]:
        self.calls += 1
        raise self.error

    def publish(self, **_: Any) -> dict[str, Any]:
        self.calls += 1
        raise self.error


@pytest.mark.parametrize("provider", ["ses", "sns"])
@pytest.mark.parametrize(
    ("error", "kind", "code"),
    [
        (ReadTimeoutError(endpoint_url=ENDPOINT), AmbiguousOutcome, "provider_timeout"),
        (ConnectionClosedError(endpoint_url=ENDPOINT), AmbiguousOutcome, "provider_timeout"),
        (RuntimeError("something odd"), AmbiguousOutcome, "provider_error"),
        (EndpointConnectionError(endpoint_url=ENDPOINT), ProviderUnreachable, "provider_unreachable"),
        (ConnectTimeoutError(endpoint_url=ENDPOINT), ProviderUnreachable, "provider_unreachable"),
    ],
)
def test_given_a_timeout_after_the_request_left_then_ambiguous_and_before_it_left_then_transient(
    provider: str, error: Exception, kind: type[DispatchFailure], code: str
) -> None:
    client = RaisingClient(error)
    sender = SesProvider(client, "no-reply@example.com") if provider == "ses" else SnsProvider(client)

    with pytest.raises(DispatchFailure) as raised:
        sender.send(_message() if provider == "ses" else _message("sms", "+15550100000"))

    assert type(raised.value) is kind
    assert raised.value.code == code
    assert client.calls == 1


# ---------------------------------------------------------------------------- the HTTP provider
class FakeResponse(io.BytesIO):
    """A 2xx answer; `chunks`: the most one read returns (a slow, chunked body)."""

    def __init__(self, body: bytes, chunks: int | None = None, fail_after: int | None = None) -> None:
        super().__init__(body)
        self.chunks = chunks
        self.fail_after = fail_after
        self.reads: list[int] = []

    def read(self, size: int | None = -1) -> bytes:
        if self.fail_after is not None and self.tell() >= self.fail_after:
            raise ConnectionResetError("reset mid-body")
        limit = size if size is not None and size >= 0 else None
        if self.chunks is not None:
            limit = min(limit or self.chunks, self.chunks)
        data = super().read(limit)
        self.reads.append(len(data))
        return data


@dataclass
class FakeOpener:
    answer: FakeResponse | Exception
    requests: list[Any] = field(default_factory=list)

    def open(self, request: Any, timeout: float) -> FakeResponse:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _http(answer: FakeResponse | Exception) -> tuple[HttpProvider, FakeOpener]:
    opener = FakeOpener(answer)
    return HttpProvider("http://provider.test", "token", 5.0, opener=opener), opener


def test_given_a_2xx_with_an_id_then_the_providers_id() -> None:
    provider, opener = _http(FakeResponse(b'{"id": "prov_1"}'))

    assert provider.send(_message("imessage", "+15550100000")) == "prov_1"
    assert opener.requests[0].get_header("Idempotency-key") == _message().id


def test_given_a_2xx_answer_over_the_cap_then_read_no_further_and_sent_under_the_message_id() -> None:
    huge = b'{"id": "prov_1", "padding": "' + b"x" * (10 * MAX_ANSWER_BYTES) + b'"}'
    response = FakeResponse(huge)
    provider, _ = _http(response)

    provider_id = provider.send(_message("imessage", "+15550100000"))

    # Accepted by its 2xx: the message is sent, and the answer past the cap was never read.
    assert provider_id == _message().id
    assert sum(response.reads) <= MAX_ANSWER_BYTES + 8 * 1024


def test_given_a_2xx_answer_just_under_the_cap_then_its_id_is_read() -> None:
    body = b'{"id": "prov_2", "padding": "'
    body += b"x" * (MAX_ANSWER_BYTES - len(body) - 2) + b'"}'
    provider, _ = _http(FakeResponse(body, chunks=1000))

    assert provider.send(_message("imessage", "+15550100000")) == "prov_2"


@pytest.mark.parametrize(
    "response",
    [
        FakeResponse(b"not json"),
        FakeResponse(b""),
        FakeResponse(b'["prov_1"]'),
        FakeResponse(b'{"id": true}'),
        FakeResponse(b'{"id": "' + b"p" * 300 + b'"}'),
        FakeResponse(b'{"id": "prov_1"}', fail_after=4),
    ],
    ids=["not-json", "empty", "a-list", "not-a-string", "too-long", "reset-mid-body"],
)
def test_given_a_2xx_whose_id_cannot_be_read_then_still_sent_under_the_message_id(
    response: FakeResponse,
) -> None:
    provider, _ = _http(response)

    assert provider.send(_message("imessage", "+15550100000")) == _message().id


def _http_error(status: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://provider.test/messages", status, "x", {}, io.BytesIO(b"{}"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answer", "kind", "code"),
    [
        (_http_error(429), ProviderThrottled, "provider_throttled"),
        (_http_error(503), TransientFailure, "provider_unavailable"),
        (_http_error(400), PermanentFailure, "provider_rejected"),
        (_http_error(302), ProviderRefused, "provider_rejected"),  # not followed: nothing taken
        (_http_error(403), ProviderRefused, "provider_rejected"),  # the account: the next provider
        (urllib.error.URLError(ConnectionRefusedError()), ProviderUnreachable, "provider_unreachable"),
        (urllib.error.URLError(TimeoutError()), AmbiguousOutcome, "provider_timeout"),
        (TimeoutError(), AmbiguousOutcome, "provider_timeout"),
    ],
)
def test_given_an_http_failure_then_its_kind(
    answer: Exception, kind: type[DispatchFailure], code: str
) -> None:
    provider, _ = _http(answer)

    with pytest.raises(DispatchFailure) as raised:
        provider.send(_message("imessage", "+15550100000"))

    assert type(raised.value) is kind
    assert raised.value.code == code
