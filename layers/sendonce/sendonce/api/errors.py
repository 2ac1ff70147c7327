"""The one place where failures become HTTP answers, in the API's one error body (docs/api.md, Errors)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, Literal, TypeVar

from msgspec import Struct
from pydantic import Field

from sendonce.api.shapes import ResponseModel, to_json
from sendonce.errors import (
    CampaignFinished,
    CampaignNotFound,
    DependencyUnavailable,
    DestinationNotAllowed,
    DispatchFailure,
    DuplicateContent,
    EndpointNotFound,
    EventNotFound,
    IdempotencyKeyReused,
    InvalidCursor,
    InvalidEdit,
    InvalidEndpoint,
    InvalidTemplate,
    MessageNotCancelable,
    MessageNotEditable,
    MessageNotFound,
    QueueUnavailable,
    QuotaExceeded,
    RateLimited,
    RecipientCapped,
    RecipientsNotReady,
    RecipientSuppressed,
    RetryLater,
    RotationConflict,
    SendonceError,
    SmsBudgetExceeded,
    SuppressionNotFound,
    TemplateDataInvalid,
    TemplateExists,
    TemplateNotFound,
    TooManyCappedRecipients,
    TooManyRotations,
    UnknownTemplate,
)

JSON = "application/json; charset=utf-8"
RETRY_AFTER_SECONDS = "1"
_INVALID = "The request is not valid."
_UNAVAILABLE = "A dependency failed and nothing was sent. It is safe to retry."


class ErrorDetail(ResponseModel):
    code: str
    message: str
    # validation_error: one {"field", "message"} per wrong field; duplicate_content: {"messageId"};
    # recipient_suppressed and destination_not_allowed: {"reason"}; template_data_invalid:
    # {"missing": [names]}, {"limit"} or {"reason"}.
    details: list[dict[str, str]] | dict[str, str] | dict[str, list[str]] | None = Field(
        default=None, exclude_if=lambda v: v is None
    )


class ErrorBody(ResponseModel):  # the body of every answer that is not a success
    success: Literal[False]
    error: ErrorDetail


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
        detail = ErrorDetail(code=self.code, message=self.message, details=self.details)
        return to_json(ErrorBody(success=False, error=detail))

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


def validation_error(details: list[dict[str, str]], message: str = _INVALID) -> ApiError:
    return ApiError(400, "validation_error", message, details=details)


def unavailable(message: str = _UNAVAILABLE) -> ApiError:
    return ApiError(503, "unavailable", message, headers={"Retry-After": RETRY_AFTER_SECONDS})


def idempotency_in_progress() -> ApiError:
    return ApiError(
        409,
        "idempotency_in_progress",
        "A request with this Idempotency-Key is still being processed. Retry shortly.",
        headers={"Retry-After": RETRY_AFTER_SECONDS},
    )


E = TypeVar("E", bound=SendonceError)


def _no_details(_: SendonceError) -> Any:
    return None


def _no_headers(_: SendonceError) -> dict[str, str]:
    return {}


class DomainAnswer(Struct, Generic[E], frozen=True):
    """How the API answers one kind of domain error: its status and code, and from the error its
    message, its `details` (None: none) and its headers."""

    status: int
    code: str
    message: Callable[[E], str]
    details: Callable[[E], Any] = _no_details
    headers: Callable[[E], dict[str, str]] = _no_headers

    def answer(self, error: E) -> ApiError:
        return ApiError(self.status, self.code, self.message(error), self.details(error), self.headers(error))


def _row(
    kind: type[E],
    status: int,
    code: str,
    message: Callable[[E], str],
    *,
    details: Callable[[E], Any] = _no_details,
    headers: Callable[[E], dict[str, str]] = _no_headers,
) -> tuple[type[SendonceError], DomainAnswer[Any]]:
    """A row of the table, its functions checked against the error class they read."""
    return kind, DomainAnswer(status, code, message, details, headers)


def _field_error(
    error: InvalidEdit | InvalidEndpoint | InvalidTemplate | TooManyCappedRecipients,
) -> list[dict[str, str]]:
    return [{"field": error.field, "message": str(error)}]


def _retry_after(
    error: QuotaExceeded | RateLimited | RecipientCapped | SmsBudgetExceeded | TooManyRotations,
) -> dict[str, str]:
    return {"Retry-After": str(error.retry_after_seconds)}


def _retry_shortly(_: SendonceError) -> dict[str, str]:
    return {"Retry-After": RETRY_AFTER_SECONDS}


# Every domain error the API may meet, and its answer: the first class of an error's MRO found here
# answers it. `tests/unit/test_domain_errors.py` fails for a subclass of SendonceError that none of
# its classes (SendonceError aside) is in, so no domain error is ever a 500, nor an unplanned 503.
DOMAIN_ERRORS: Mapping[type[SendonceError], DomainAnswer[Any]] = dict(
    [
        _row(MessageNotFound, 404, "not_found", lambda _: "No message with this id."),
        _row(EndpointNotFound, 404, "not_found", lambda _: "No webhook endpoint with this id."),
        _row(EventNotFound, 404, "not_found", lambda _: "No event with this id."),
        _row(
            SuppressionNotFound, 404, "not_found", lambda _: "This recipient is not on the suppression list."
        ),
        _row(InvalidEndpoint, 400, "validation_error", lambda _: _INVALID, details=_field_error),
        _row(InvalidEdit, 400, "validation_error", lambda _: _INVALID, details=_field_error),
        _row(InvalidTemplate, 400, "validation_error", lambda _: _INVALID, details=_field_error),
        _row(TooManyCappedRecipients, 400, "validation_error", lambda _: _INVALID, details=_field_error),
        _row(TemplateNotFound, 404, "not_found", lambda _: "No template with this name (or this version)."),
        _row(
            UnknownTemplate,
            422,
            "template_not_found",
            lambda _: "No template with this name (or this version) for this channel.",
        ),
        _row(TemplateExists, 409, "template_exists", str),
        _row(TemplateDataInvalid, 422, "template_data_invalid", str, details=lambda e: e.details),
        _row(
            InvalidCursor,
            400,
            "validation_error",
            lambda _: _INVALID,
            details=lambda _: [{"field": "cursor", "message": "is not a cursor this API gave out"}],
        ),
        _row(
            RotationConflict,
            409,
            "rotation_conflict",
            lambda e: f"Not rotated: {e!s}. Every secret those answered is stored; retry to rotate again.",
            headers=_retry_shortly,
        ),
        _row(
            TooManyRotations,
            429,
            "too_many_rotations",
            lambda e: (
                f"Not rotated: {e!s}, as many as may sign at once. Retry once the oldest stops signing."
            ),
            headers=_retry_after,
        ),
        _row(CampaignNotFound, 404, "not_found", lambda _: "No campaign with this id."),
        _row(CampaignFinished, 409, "campaign_finished", lambda e: f"Nothing changed: {e!s}."),
        _row(RecipientsNotReady, 409, "recipients_not_ready", str),
        _row(MessageNotCancelable, 409, "message_not_cancelable", str),
        _row(MessageNotEditable, 409, "message_not_editable", str),
        _row(DuplicateContent, 409, "duplicate_content", str, details=lambda e: {"messageId": e.message_id}),
        _row(
            RecipientSuppressed,
            422,
            "recipient_suppressed",
            lambda e: f"Not sent: {e!s}. Remove it (DELETE /v1/suppressions/{{to}}) once they opt back in.",
            details=lambda e: {"reason": e.reason},
        ),
        _row(
            DestinationNotAllowed,
            422,
            "destination_not_allowed",
            lambda e: f"Not sent: {e!s}. An operator may allow it (sendonce workspace set-limits).",
            details=lambda e: {"reason": e.reason},
        ),
        _row(IdempotencyKeyReused, 422, "idempotency_key_reused", str),
        _row(QuotaExceeded, 429, "quota_exceeded", lambda e: f"The {e!s}.", headers=_retry_after),
        _row(SmsBudgetExceeded, 429, "sms_budget_exceeded", lambda e: f"The {e!s}.", headers=_retry_after),
        _row(
            RecipientCapped,
            429,
            "recipient_capped",
            lambda e: f"Not sent: {e!s}. Retry after the time given, or send it as critical.",
            headers=_retry_after,
        ),
        _row(RateLimited, 429, "rate_limited", lambda e: f"There are {e!s}.", headers=_retry_after),
        # Nothing was written: safe to retry (SecretUnavailable among them).
        _row(DependencyUnavailable, 503, "unavailable", lambda _: _UNAVAILABLE, headers=_retry_shortly),
        _row(QueueUnavailable, 503, "unavailable", lambda _: _UNAVAILABLE, headers=_retry_shortly),
        # The dispatchers' own: should one ever reach a request, it is an outage, never a 500.
        _row(RetryLater, 503, "unavailable", lambda _: _UNAVAILABLE, headers=_retry_shortly),
        _row(DispatchFailure, 503, "unavailable", lambda _: _UNAVAILABLE, headers=_retry_shortly),
    ]
)


def domain_answer(kind: type[SendonceError]) -> DomainAnswer[Any] | None:
    """The row that answers errors of this class: its own, or its nearest base class's."""
    for base in kind.__mro__:
        row = DOMAIN_ERRORS.get(base)
        if row is not None:
            return row
    return None


def from_domain_error(error: SendonceError) -> ApiError:
    row = domain_answer(type(error))
    return row.answer(error) if row is not None else unavailable()


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
