"""Sorting botocore failures of SES and SNS into permanent, transient, throttled and ambiguous ones.

Neither SES nor SNS honours an idempotency key, so the question is always whether the request may
have been taken. A refusal for rate or quota was not taken: throttled, retried on time. A failure
before the request left (no connection) was not taken: transient. A 4xx was not taken and will not
be: permanent. A 5xx or a lost answer after the request left may have been taken: ambiguous, so
the message ends `unknown` and is never sent again automatically.
"""

from __future__ import annotations

from sendonce.dispatch.ports import ProviderThrottled
from sendonce.errors import AmbiguousOutcome, DispatchFailure, PermanentFailure, TransientFailure

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
    from botocore.exceptions import (  # noqa: PLC0415
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ParamValidationError,
        ReadTimeoutError,
    )

    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "Unknown")
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 400))
        if code in _THROTTLING_CODES or status == THROTTLED_STATUS:
            return ProviderThrottled("provider_throttled", f"{provider} throttled the message: {code}")
        if code in _SERVER_FAULT_CODES or status >= SERVER_ERROR_STATUS:
            return AmbiguousOutcome("provider_error", f"{provider} answered {status} {code}")
        if code in _REQUEST_NOT_TAKEN_CODES:
            return TransientFailure("provider_unavailable", f"{provider} answered {code}")
        return PermanentFailure("provider_rejected", f"{provider} refused the message: {code}")
    # The request never left: nothing can have been delivered.
    if isinstance(error, ConnectTimeoutError | EndpointConnectionError):
        return TransientFailure("provider_unreachable", f"{provider} could not be reached")
    if isinstance(error, ParamValidationError):
        return PermanentFailure("provider_rejected", f"{provider} refused the message: {error}")
    # The request left and the answer was lost: it may have been delivered.
    if isinstance(error, ReadTimeoutError | ConnectionClosedError):
        return AmbiguousOutcome("provider_timeout", f"{provider} did not answer in time")
    return AmbiguousOutcome("provider_error", f"{provider} call failed: {type(error).__name__}")
