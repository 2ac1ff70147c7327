"""Each AWS provider's adapter made to fail as a `classification` signal says, through a real botocore
client (no socket is opened): a service's answer is stubbed (`aws:<Code>`, `status:NNN`,
`status:4xx`, `status:5xx`), and a fault below the answer is raised where the HTTP request would go
out (`connect_failed`, `timeout`) or is an answer that cannot be read (`unreadable_answer`).

`sms_v2_fault`, `sns_fault` and `ses_fault` return what the adapter's `send` raised, for a test to
hold it to the table's row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from botocore.parsers import ResponseParserError
from botocore.stub import Stubber
from sendonce.messages.model import Channel, Message, Status
from sendonce.providers.classification import TABLE
from sendonce.providers.ses_provider import SesProvider
from sendonce.providers.sms_v2_provider import SmsV2Provider
from sendonce.providers.sns_provider import SnsProvider

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
# An error code no provider has a row for: the status decides.
UNNAMED_CODE = "SendonceUnnamedFault"
# AWS's statuses for its generic codes (its "Common Errors"), where the service model names none.
_GENERIC_STATUS = {
    "InternalFailure": 500,
    "InternalError": 500,
    "InternalServerException": 500,
    "ServiceUnavailable": 503,
    "RequestTimeout": 408,
    "RequestTimeoutException": 408,
    "Throttling": 400,
    "ThrottlingException": 400,
}


@functools.cache
def client(service: str) -> Any:
    """A client as the registry builds one: SDK retries off, so one fault is one call."""
    return boto3.session.Session().client(
        service,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )


def sms_message() -> Message:
    return _message("sms", "+15550100000", subject=None)


def email_message() -> Message:
    return _message("email", "ann@example.com", subject="Hi")


def _message(channel: str, to: str, subject: str | None) -> Message:
    return Message(
        id="msg_01JDZ0000000000000000000000",
        workspace_id="ws_a",
        channel=Channel(channel),
        to=to,
        body="hello",
        subject=subject,
        status=Status.SENDING,
        created_at=NOW,
        updated_at=NOW,
        attempts=1,
    )


def sms_v2_fault(signal: str) -> Exception:
    """What SmsV2Provider.send raises when SendTextMessage fails as `signal` says."""
    return _fault(
        "sms-v2",
        "pinpoint-sms-voice-v2",
        "send_text_message",
        signal,
        lambda c: SmsV2Provider(c, configuration_set="sendonce-sms").send(sms_message()),
        unreadable=_answer(200, b"<html>a proxy's page</html>"),  # JSON without a MessageId
    )


def sns_fault(signal: str) -> Exception:
    """What SnsProvider.send raises when Publish fails as `signal` says."""
    return _fault(
        "sns",
        "sns",
        "publish",
        signal,
        lambda c: SnsProvider(c).send(sms_message()),
        unreadable=_answer(200, b"<PublishResponse><PublishResult>"),  # XML cut short
    )


def ses_fault(signal: str) -> Exception:
    """What SesProvider.send raises when SendEmail fails as `signal` says."""
    return _fault(
        "ses",
        "sesv2",
        "send_email",
        signal,
        lambda c: SesProvider(c, "no-reply@example.com").send(email_message()),
        # SES v2 reads any 200 body as JSON leniently: the parser's own failure stands for it.
        unreadable=_raise(ResponseParserError("Unable to parse response")),
    )


def _fault(
    provider: str,
    service: str,
    operation: str,
    signal: str,
    send: Callable[[Any], object],
    unreadable: Callable[..., AWSResponse | None],
) -> Exception:
    aws = client(service)
    if signal.startswith(("aws:", "status:")):
        code, status = _answer_for(provider, service, signal)
        with Stubber(aws) as stubber:
            stubber.add_client_error(operation, service_error_code=code, http_status_code=status)
            return _raised(send, aws, signal)
    hooks: dict[str, Callable[..., AWSResponse | None]] = {
        # No connection was made: the request never left.
        "connect_failed": _raise(EndpointConnectionError(endpoint_url=aws.meta.endpoint_url)),
        # The request left and its answer never came.
        "timeout": _raise(ReadTimeoutError(endpoint_url=aws.meta.endpoint_url)),
        "unreadable_answer": unreadable,
    }
    if signal not in hooks:
        raise ValueError(f"no way to make {provider} fail as {signal!r}")
    event = f"before-send.{aws.meta.service_model.service_id.hyphenize()}"
    aws.meta.events.register(event, hooks[signal], unique_id="aws_faults")
    try:
        return _raised(send, aws, signal)
    finally:
        aws.meta.events.unregister(event, unique_id="aws_faults")


def _raised(send: Callable[[Any], object], aws: Any, signal: str) -> Exception:
    try:
        send(aws)
    except Exception as raised:  # whatever it is, the caller holds it to the table
        return raised
    raise AssertionError(f"the send did not fail for {signal!r}")


def _answer_for(provider: str, service: str, signal: str) -> tuple[str, int]:
    """The error code and HTTP status of an answer that names `signal` first."""
    if signal.startswith("aws:"):
        code = signal.removeprefix("aws:")
        return code, _status_of(service, code)
    status = signal.removeprefix("status:")
    if status.isdigit():
        return UNNAMED_CODE, int(status)
    # `status:4xx` / `status:5xx`: a status of that class with no row of its own for the provider.
    named = {row.signal for row in TABLE if row.provider == provider}
    first = int(status[0]) * 100
    return UNNAMED_CODE, next(n for n in range(first + 1, first + 100) if f"status:{n}" not in named)


def _status_of(service: str, code: str) -> int:
    """The status the service answers `code` with: its model's, else AWS's generic one, else 400
    (a JSON-protocol service answers every client fault with 400)."""
    for shape in client(service).meta.service_model.error_shapes:
        error = shape.metadata.get("error", {})
        if error.get("code", shape.name) == code and "httpStatusCode" in error:
            return int(error["httpStatusCode"])
    return _GENERIC_STATUS.get(code, 400)


def _raise(error: Exception) -> Callable[..., AWSResponse | None]:
    def hook(**_: Any) -> AWSResponse | None:
        raise error

    return hook


def _answer(status: int, body: bytes) -> Callable[..., AWSResponse | None]:
    def hook(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(request.url, status, {}, _Raw(body))

    return hook


class _Raw:
    """The raw body botocore reads an answer from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body
