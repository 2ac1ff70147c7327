"""Reading botocore failures of the AWS providers (SES, SNS, AWS End User Messaging SMS) through
`classification`'s table.

None of them honours an idempotency key, so the question is always whether the request may have
been taken. `signals` names a failure as the table's signals, most specific first: a service's
answer as its error code, then its status (a code AWS uses for rate or quota anywhere reads as a
429, a server fault as a 5xx, whatever status carries it); no connection as `connect_failed`; a
lost answer as `timeout`. The table then says what it means for the message.
"""

from __future__ import annotations

from sendonce.errors import DispatchFailure
from sendonce.providers.classification import failure, status_signals

THROTTLED_STATUS = 429
SERVER_ERROR_STATUS = 500

# SES (v1 and v2) and SNS refusals for rate or quota, whatever HTTP status carries them.
_THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "LimitExceededException",
        "KMSThrottlingException",
    }
)
# Server faults, whatever status carries them: the request arrived, its fate is unknown.
_SERVER_FAULT_CODES = frozenset(
    {
        "InternalFailure",
        "InternalError",
        "InternalErrorException",
        "InternalServerError",
        "ServiceUnavailable",
    }
)
# The service gave up waiting for the request itself: it was not taken.
_REQUEST_NOT_TAKEN_CODES = frozenset({"RequestTimeout", "RequestTimeoutException"})


def classify(error: Exception, provider: str) -> DispatchFailure:
    """The failure `provider`'s call raised, as `classification`'s table reads it."""
    return failure(provider, signals(error), detail(error))


def signals(error: Exception) -> tuple[str, ...]:
    """A botocore failure as `classification` signals, most specific first: a service's answer is
    its error code then its status; no connection, a lost answer, or anything else, one signal."""
    from botocore.exceptions import (  # noqa: PLC0415
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ParamValidationError,
        ReadTimeoutError,
    )

    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code") or "")
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 400)
        # A code the table does not name falls back on what AWS's codes share across services.
        if code in _THROTTLING_CODES:
            status = THROTTLED_STATUS
        elif code in _SERVER_FAULT_CODES:
            status = max(status, SERVER_ERROR_STATUS)
        elif code in _REQUEST_NOT_TAKEN_CODES:
            return (f"aws:{code}", "connect_failed")
        return (f"aws:{code}", *status_signals(status)) if code else status_signals(status)
    # No connection was made: the request never left.
    if isinstance(error, ConnectTimeoutError | EndpointConnectionError):
        return ("connect_failed",)
    # The SDK refused the request before sending it, as the service would have with a 400.
    if isinstance(error, ParamValidationError):
        return status_signals(400)
    # The request left and its answer was lost.
    if isinstance(error, ReadTimeoutError | ConnectionClosedError):
        return ("timeout",)
    return ("unreadable_answer",)


def detail(error: Exception) -> str:
    """What a failure says about itself, for the message's `error`: the service's code and reason,
    never its message (it may quote the recipient)."""
    from botocore.exceptions import ClientError  # noqa: PLC0415

    if isinstance(error, ClientError):
        answer = error.response.get("Error", {})
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?")
        reason = error.response.get("Reason") or answer.get("Reason")
        return f"{answer.get('Code', 'Unknown')}{f' {reason}' if reason else ''}, HTTP {status}"
    return type(error).__name__
