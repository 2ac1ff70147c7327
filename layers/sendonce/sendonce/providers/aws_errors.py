"""Sorting botocore failures into permanent, transient and ambiguous ones."""

from __future__ import annotations

from sendonce.errors import AmbiguousOutcome, DeliveryFailure, PermanentFailure, TransientFailure

_TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
        "LimitExceededException",
        "ServiceUnavailable",
        "InternalFailure",
        "InternalError",
        "InternalServerError",
        "KMSThrottlingException",
        "RequestTimeout",
    }
)


def classify(error: Exception, provider: str) -> DeliveryFailure:
    from botocore.exceptions import (  # noqa: PLC0415
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "Unknown")
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 400))
        if code in _TRANSIENT_CODES or status >= 500 or status == 429:
            return TransientFailure("provider_unavailable", f"{provider} answered {code}")
        return PermanentFailure("provider_rejected", f"{provider} refused the message: {code}")
    # The request never left: nothing can have been delivered.
    if isinstance(error, ConnectTimeoutError | EndpointConnectionError):
        return TransientFailure("provider_unreachable", f"{provider} could not be reached")
    # The request left and the answer was lost: it may have been delivered.
    if isinstance(error, ReadTimeoutError | ConnectionClosedError):
        return AmbiguousOutcome("provider_timeout", f"{provider} did not answer in time")
    return AmbiguousOutcome("provider_error", f"{provider} call failed: {type(error).__name__}")
