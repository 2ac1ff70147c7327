"""Every answer that is not a success, as a typed exception carrying the API's error shape.

The API answers every error as `{"success": false, "error": {"code", "message", "details"?}}`;
the class is chosen by `code` (docs/api.md, Errors), falling back to the status. Whether
the client retried before raising is the retry policy's business (`sendonce_client._retry`), not
the exception's: a 503 raised here is one the deadline left no time to retry.
"""

from __future__ import annotations

from typing import Any


class SendonceError(Exception):
    """Any failure of a call to sendonce."""


class ApiError(SendonceError):
    """An answer of the API with `"success": false`."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}

    @property
    def retry_after(self) -> float | None:
        """Seconds the API asked the caller to wait (`Retry-After`), if it did."""
        value = self.headers.get("retry-after")
        try:
            return max(0.0, float(value)) if value is not None else None
        except ValueError:
            return None


class ValidationFailed(ApiError):
    """400 validation_error: `details` names each field."""


class InvalidIdempotencyKey(ApiError):
    """400 invalid_idempotency_key or missing_idempotency_key."""


class Unauthorized(ApiError):
    """401: no or wrong API key."""


class NotFound(ApiError):
    """404: an unknown resource, or another workspace's."""


class Conflict(ApiError):
    """409: the resource is not in a state that allows the call."""


class IdempotencyInProgress(Conflict):
    """409 idempotency_in_progress: the first request under this key is still running (retried)."""


class MessageNotCancelable(Conflict):
    """409 message_not_cancelable: a delivery attempt has started, or the message is final."""


class MessageNotEditable(Conflict):
    """409 message_not_editable: the message is no longer scheduled."""


class DuplicateContent(Conflict):
    """409 duplicate_content: the edit's content is another message's (`details["messageId"]`)."""


class PayloadTooLarge(ApiError):
    """413 payload_too_large."""


class UnsupportedMediaType(ApiError):
    """415 unsupported_media_type."""


class Unprocessable(ApiError):
    """422: the request is well formed, and refused."""


class IdempotencyKeyReused(Unprocessable):
    """422 idempotency_key_reused: the key was used with another request; nothing was sent."""


class RecipientSuppressed(Unprocessable):
    """422 recipient_suppressed: the recipient is on the workspace's suppression list."""


class TooManyRequests(ApiError):
    """429: retried while `Retry-After` fits in the deadline."""


class RateLimited(TooManyRequests):
    """429 rate_limited: the workspace's request rate."""


class QuotaExceeded(TooManyRequests):
    """429 quota_exceeded: the workspace's daily send quota; `Retry-After` is the next UTC day."""


class RecipientCapped(TooManyRequests):
    """429 recipient_capped: the workspace's frequency cap for this recipient; `Retry-After` is when
    a place comes back. Nothing was written; the same call succeeds then."""


class Unavailable(ApiError):
    """503 unavailable: nothing was sent; retried until the deadline."""


class ConnectionFailed(SendonceError):
    """No answer came: the connection failed or timed out, on the last attempt the deadline allowed.

    For a send, the request may have reached the API: calling `send` again with the same
    `idempotency_key` (`error.idempotency_key`) is safe, and sends nothing twice.
    """

    def __init__(self, message: str, idempotency_key: str | None = None) -> None:
        super().__init__(message)
        self.idempotency_key = idempotency_key


class UnexpectedAnswer(SendonceError):
    """An answer that is not the API's shape (a proxy's error page, say)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"{status}: {text[:200]}")
        self.status = status


_BY_CODE: dict[str, type[ApiError]] = {
    "validation_error": ValidationFailed,
    "invalid_idempotency_key": InvalidIdempotencyKey,
    "missing_idempotency_key": InvalidIdempotencyKey,
    "unauthorized": Unauthorized,
    "not_found": NotFound,
    "idempotency_in_progress": IdempotencyInProgress,
    "message_not_cancelable": MessageNotCancelable,
    "message_not_editable": MessageNotEditable,
    "duplicate_content": DuplicateContent,
    "payload_too_large": PayloadTooLarge,
    "unsupported_media_type": UnsupportedMediaType,
    "idempotency_key_reused": IdempotencyKeyReused,
    "recipient_suppressed": RecipientSuppressed,
    "rate_limited": RateLimited,
    "quota_exceeded": QuotaExceeded,
    "recipient_capped": RecipientCapped,
    "unavailable": Unavailable,
}
_BY_STATUS: dict[int, type[ApiError]] = {
    400: ValidationFailed,
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: Unprocessable,
    429: TooManyRequests,
    503: Unavailable,
}


def error_of(status: int, body: Any, headers: dict[str, str]) -> SendonceError:
    """The exception for an error answer: by its code, else by its status."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return UnexpectedAnswer(status, str(body))
    code = error["code"]
    kind = _BY_CODE.get(code) or _BY_STATUS.get(status, ApiError)
    return kind(status, code, str(error.get("message", "")), error.get("details"), headers)
