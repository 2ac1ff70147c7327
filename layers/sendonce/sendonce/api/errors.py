"""The one place where failures become HTTP answers, in the contract's error body."""

from __future__ import annotations

import json
from typing import Any

from sendonce.errors import (
    DependencyUnavailable,
    DuplicateContent,
    EndpointNotFound,
    EventNotFound,
    IdempotencyKeyReused,
    InvalidCursor,
    InvalidEdit,
    InvalidEndpoint,
    MessageNotCancelable,
    MessageNotEditable,
    MessageNotFound,
    QuotaExceeded,
    RateLimited,
    RecipientSuppressed,
    RotationConflict,
    SendonceError,
    SuppressionNotFound,
    TooManyRotations,
)

JSON = "application/json; charset=utf-8"
RETRY_AFTER_SECONDS = "1"


class ApiError(Exception):
    """An answer other than success, raised anywhere in the HTTP layer."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> str:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return json.dumps({"success": False, "error": error}, ensure_ascii=False)

    def to_lambda_response(self) -> dict[str, Any]:
        return {
            "statusCode": self.status,
            "headers": {"Content-Type": JSON, **self.headers},
            "body": self.body(),
            "isBase64Encoded": False,
        }


def unauthorized() -> ApiError:
    return ApiError(401, "unauthorized", "A valid API key is required: Authorization: Bearer <api key>.")


def not_found(what: str = "No such route.") -> ApiError:
    return ApiError(404, "not_found", what)


def method_not_allowed(allowed: list[str]) -> ApiError:
    return ApiError(
        405,
        "method_not_allowed",
        f"This path answers {', '.join(allowed)} only.",
        headers={"Allow": ", ".join(allowed)},
    )


def validation_error(details: list[dict[str, str]], message: str = "The request is not valid.") -> ApiError:
    return ApiError(400, "validation_error", message, details=details)


def unavailable(message: str = "A dependency failed and nothing was sent. It is safe to retry.") -> ApiError:
    return ApiError(503, "unavailable", message, headers={"Retry-After": RETRY_AFTER_SECONDS})


def idempotency_in_progress() -> ApiError:
    return ApiError(
        409,
        "idempotency_in_progress",
        "A request with this Idempotency-Key is still being processed. Retry shortly.",
        headers={"Retry-After": RETRY_AFTER_SECONDS},
    )


def from_domain_error(error: SendonceError) -> ApiError:
    if isinstance(error, MessageNotFound):
        return not_found("No message with this id.")
    if isinstance(error, EndpointNotFound):
        return not_found("No webhook endpoint with this id.")
    if isinstance(error, EventNotFound):
        return not_found("No event with this id.")
    if isinstance(error, InvalidEndpoint):
        return validation_error([{"field": error.field, "message": str(error)}])
    if isinstance(error, RotationConflict):
        return ApiError(
            409,
            "rotation_conflict",
            f"Not rotated: {error!s}. Every secret those answered is stored; retry to rotate again.",
            headers={"Retry-After": RETRY_AFTER_SECONDS},
        )
    if isinstance(error, TooManyRotations):
        return ApiError(
            429,
            "too_many_rotations",
            f"Not rotated: {error!s}, as many as may sign at once. Retry once the oldest stops signing.",
            headers={"Retry-After": str(error.retry_after_seconds)},
        )
    if isinstance(error, MessageNotCancelable):
        return ApiError(409, "message_not_cancelable", str(error))
    if isinstance(error, MessageNotEditable):
        return ApiError(409, "message_not_editable", str(error))
    if isinstance(error, DuplicateContent):
        return ApiError(409, "duplicate_content", str(error), details={"messageId": error.message_id})
    if isinstance(error, InvalidEdit):
        return validation_error([{"field": error.field, "message": str(error)}])
    if isinstance(error, SuppressionNotFound):
        return not_found("This recipient is not on the suppression list.")
    if isinstance(error, RecipientSuppressed):
        return ApiError(
            422,
            "recipient_suppressed",
            f"Not sent: {error!s}. Remove it (DELETE /v1/suppressions/{{to}}) once they opt back in.",
            details={"reason": error.reason},
        )
    if isinstance(error, IdempotencyKeyReused):
        return ApiError(422, "idempotency_key_reused", str(error))
    if isinstance(error, InvalidCursor):
        return validation_error([{"field": "cursor", "message": "is not a cursor this API gave out"}])
    if isinstance(error, QuotaExceeded):
        return ApiError(
            429,
            "quota_exceeded",
            f"The {error!s}.",
            headers={"Retry-After": str(error.retry_after_seconds)},
        )
    if isinstance(error, RateLimited):
        return ApiError(
            429,
            "rate_limited",
            f"There are {error!s}.",
            headers={"Retry-After": str(error.retry_after_seconds)},
        )
    if isinstance(error, DependencyUnavailable):
        return unavailable()
    return unavailable()


def details_from_pydantic(errors: list[Any]) -> list[dict[str, str]]:
    """One entry per field: where (a dotted path, without the `body` prefix) and what is wrong."""
    details = []
    for error in errors:
        location = [str(part) for part in error.get("loc", ())]
        if location and location[0] in ("body", "query", "path", "header"):
            location = location[1:]
        message = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
        if error.get("type") == "json_invalid":
            location, message = [], "the body is not valid JSON"
        details.append({"field": ".".join(location) or "body", "message": message})
    return details
