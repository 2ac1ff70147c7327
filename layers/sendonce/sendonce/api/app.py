"""The routes of the HTTP API (v1) on Powertools' event handler, and the function's entry point.

Routes parse, call one domain use case, and shape the answer. Every failure becomes the
contract's error body in `sendonce.api.errors`; nothing, however malformed, answers 500.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from sendonce.api import dependencies
from sendonce.api.answers import send_answer
from sendonce.api.errors import (
    JSON,
    ApiError,
    details_from_pydantic,
    from_domain_error,
    idempotency_in_progress,
    method_not_allowed,
    not_found,
    unavailable,
    validation_error,
)
from sendonce.api.openapi import docs_page, openapi_document
from sendonce.api.preflight import check_request, header, raw_body, workspace_of
from sendonce.api.schemas import (
    Acknowledged,
    DuplicateCaught,
    ErrorBody,
    Health,
    MessageEnvelope,
    MessagePage,
    SendAccepted,
    SendMessageRequest,
)
from sendonce.errors import IdempotencyKeyReused, SendonceError
from sendonce.idempotency.keys import InvalidIdempotencyKey, parse_idempotency_key, payload_fingerprint
from sendonce.messages.model import Channel, Status
from sendonce.messages.recipients import normalise_recipient
from sendonce.messages.service import SendCommand
from sendonce.observability import logger
from sendonce.provider_events.signature import InvalidSignature
from sendonce.provider_events.signature import verify as verify_signature
from sendonce.provider_events.webhook_body import HttpProviderEvent
from sendonce.settings import api_settings

app = APIGatewayHttpResolver(enable_validation=True)

CURSOR_PATTERN = r"^msg_[0-9A-HJKMNP-TV-Z]{26}$"  # nextCursor: the last message id of a page


def _error_docs(*statuses: int) -> dict[int, Any]:
    names = {
        400: "validation_error, missing_idempotency_key or invalid_idempotency_key",
        401: "unauthorized: no or wrong API key",
        404: "not_found",
        409: "idempotency_in_progress (with Retry-After: 1) or message_not_cancelable",
        413: "payload_too_large: body over 256 KiB",
        415: "unsupported_media_type: not JSON, or JSON that is not UTF-8",
        422: "idempotency_key_reused: the key was used with a different request",
        429: "rate_limited (with Retry-After)",
        503: "unavailable: a dependency failed and nothing was sent; safe to retry (with Retry-After)",
    }
    return {
        status: {"description": names[status], "content": {"application/json": {"model": ErrorBody}}}
        for status in statuses
    }


def _json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response[Any]:
    body = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return Response(status_code=status, content_type=JSON, body=body, headers=headers or {})


def _workspace() -> str:
    workspace = workspace_of(app.current_event.raw_event)
    if workspace is None:  # the preflight already answered 401; this guards direct route use
        raise ApiError(401, "unauthorized", "A valid API key is required.")
    return workspace


# ---------------------------------------------------------------------------- POST /v1/messages
def _send(*, request: dict[str, Any], command: SendCommand) -> dict[str, Any]:
    """The once-only part: its answer is what an Idempotency-Key replays."""
    return send_answer(dependencies.message_service().send(command))


@app.post(
    "/v1/messages",
    summary="Send one message",
    description=(
        "Accepts a message for delivery. An identical message to the same recipient within the dedup "
        "window is answered 200 with duplicateOnly: true and the original. With an Idempotency-Key, "
        "a retry replays the first answer with Idempotency-Replayed: true."
    ),
    responses={
        201: {
            "description": "Accepted: queued, scheduled, or accepted (hand-off to the queue still owed)",
            "content": {"application/json": {"model": SendAccepted}},
        },
        200: {
            "description": "The dedup guard caught a duplicate; nothing was sent",
            "content": {"application/json": {"model": DuplicateCaught}},
        },
        **_error_docs(400, 401, 409, 413, 415, 422, 429, 503),
    },
    tags=["messages"],
)
def send_message(
    message: Annotated[SendMessageRequest, Body(embed=False)],
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="idempotency-key",
            description="1-255 visible ASCII characters; a retry with the same key never sends twice",
        ),
    ] = None,
) -> Response[Any]:
    workspace = _workspace()
    key = None
    if idempotency_key is not None:
        try:
            key = parse_idempotency_key(idempotency_key)
        except InvalidIdempotencyKey as error:
            raise ApiError(400, "invalid_idempotency_key", f"Idempotency-Key {error}.") from None
    elif api_settings().require_idempotency_key:
        raise ApiError(400, "missing_idempotency_key", "This API requires an Idempotency-Key header.")

    channel = Channel(message.channel)
    command = SendCommand(
        workspace_id=workspace,
        channel=channel,
        recipient=normalise_recipient(channel, message.to),
        subject=message.subject,
        body=message.body,
        send_at=message.send_at(),
        metadata=message.metadata or {},
        idempotency_key=key,
    )
    if key is None:
        answer = _send(request={}, command=command)
    else:
        # Compared on the parsed body: key order and white space never make two requests differ.
        payload = json.loads(app.current_event.body or "null")
        command = replace(command, payload_fingerprint=payload_fingerprint(payload))
        # An in-progress record expires with this invocation's time, should it die mid-request.
        dependencies.send_idempotency_config().register_lambda_context(app.lambda_context)
        try:
            answer = dependencies.idempotent_sender(_send)(
                request={"workspace": workspace, "key": key, "payload": payload}, command=command
            )
        except IdempotencyAlreadyInProgressError:
            raise idempotency_in_progress() from None
        except IdempotencyValidationError:
            raise from_domain_error(IdempotencyKeyReused()) from None
    headers = {"Idempotency-Replayed": "true"} if answer.get("replayed") else {}
    return _json_response(answer["statusCode"], answer["body"], headers)


# ---------------------------------------------------------------------------- reads
@app.get(
    "/v1/messages/<id>",
    summary="Get one message",
    responses={
        200: {"description": "The message", "content": {"application/json": {"model": MessageEnvelope}}},
        **_error_docs(401, 404, 503),
    },
    tags=["messages"],
)
def get_message(id: str) -> Response[Any]:
    message = dependencies.message_service().get(_workspace(), id)
    return _json_response(200, {"success": True, "message": message.to_api()})


@app.get(
    "/v1/messages",
    summary="List messages, newest first",
    responses={
        200: {"description": "A page of messages", "content": {"application/json": {"model": MessagePage}}},
        **_error_docs(400, 401, 503),
    },
    tags=["messages"],
)
def list_messages(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    status: Annotated[Status | None, Query(description="Only messages in this status")] = None,
    cursor: Annotated[
        str | None, Query(pattern=CURSOR_PATTERN, description="nextCursor of the page before")
    ] = None,
) -> Response[Any]:
    page = dependencies.message_service().list(_workspace(), status, limit, cursor)
    return _json_response(
        200,
        {
            "success": True,
            "messages": [message.to_api() for message in page.messages],
            "nextCursor": page.next_cursor,
        },
    )


@app.delete(
    "/v1/messages/<id>",
    summary="Cancel a message that has not started its delivery",
    responses={
        200: {"description": "Canceled", "content": {"application/json": {"model": MessageEnvelope}}},
        **_error_docs(401, 404, 409, 503),
    },
    tags=["messages"],
)
def cancel_message(id: str) -> Response[Any]:
    message = dependencies.message_service().cancel(_workspace(), id)
    return _json_response(200, {"success": True, "message": message.to_api()})


# ---------------------------------------------------------------------------- provider events
@app.post(
    "/v1/webhooks/<provider>",
    summary="Delivery events from a provider (signed)",
    description=(
        "For the HTTP provider (`http`): header `X-Sendonce-Signature: t=<unix seconds>,v1=<hex "
        'HMAC-SHA256(secret, "<t>.<raw body>")>`, at most 5 minutes old. Each eventId takes effect '
        "once; status never moves backwards. Acknowledged as soon as the event is safely queued."
    ),
    responses={
        200: {"description": "Acknowledged", "content": {"application/json": {"model": Acknowledged}}},
        **_error_docs(400, 401, 404, 413, 503),
    },
    tags=["provider events"],
)
def provider_webhook(provider: str) -> Response[Any]:
    if provider != "http":
        raise not_found("No such provider.")
    raw_event = app.current_event.raw_event
    body = raw_body(raw_event)
    try:
        verify_signature(
            header(raw_event, "x-sendonce-signature"), body, api_settings().webhook_secret, time.time()
        )
    except InvalidSignature as error:
        raise ApiError(401, "unauthorized", f"The webhook signature is not valid: {error}.") from None
    try:
        event = HttpProviderEvent.model_validate_json(body)
    except ValidationError as error:
        raise validation_error(details_from_pydantic(list(error.errors()))) from None
    dependencies.event_queue().publish(event.to_event(provider))
    return _json_response(200, {"success": True})


@app.get(
    "/v1/health",
    summary="Health",
    responses={
        200: {"description": "Ready to take sends", "content": {"application/json": {"model": Health}}}
    },
    tags=["service"],
)
def health() -> Response[Any]:
    return _json_response(200, {"success": True, "status": "ok"})


@app.get(
    "/openapi.json",
    summary="This OpenAPI description",
    responses={200: {"description": "OpenAPI 3 document", "content": {"application/json": {}}}},
    tags=["service"],
)
def openapi_json() -> Response[Any]:
    return _json_response(200, openapi_document(app))


@app.get(
    "/docs",
    summary="This OpenAPI description, browsable",
    responses={200: {"description": "Swagger UI", "content": {"text/html": {}}}},
    tags=["service"],
)
def docs() -> Response[Any]:
    return Response(status_code=200, content_type="text/html; charset=utf-8", body=docs_page(app))


# ---------------------------------------------------------------------------- errors, in one place
def _api_error(error: ApiError) -> Response[Any]:
    return _json_response(error.status, error.body(), error.headers)


def _domain_error(error: SendonceError) -> Response[Any]:
    return _api_error(from_domain_error(error))


def _invalid_request(error: RequestValidationError) -> Response[Any]:
    return _api_error(validation_error(details_from_pydantic(list(error.errors()))))


_ROUTES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^/v1/messages/?$"), "GET, POST"),
    (re.compile(r"^/v1/messages/[^/]+/?$"), "GET, DELETE"),
    (re.compile(r"^/v1/health/?$"), "GET"),
    (re.compile(r"^/v1/webhooks/[^/]+/?$"), "POST"),
    (re.compile(r"^/openapi\.json$"), "GET"),
    (re.compile(r"^/docs/?$"), "GET"),
]


def _not_found(_: NotFoundError) -> Response[Any]:
    path = app.current_event.path
    for pattern, methods in _ROUTES:
        if pattern.match(path):
            return _api_error(method_not_allowed(methods.split(", ")))
    return _api_error(not_found())


def _unexpected(error: Exception) -> Response[Any]:
    logger.exception("api.unexpected_error", extra={"event": "api.unexpected_error"})
    return _api_error(unavailable())


app.exception_handler(ApiError)(_api_error)
app.exception_handler(SendonceError)(_domain_error)
app.exception_handler(RequestValidationError)(_invalid_request)
app.exception_handler(Exception)(_unexpected)
app.not_found(_not_found)


# ---------------------------------------------------------------------------- entry point
def handle(event: Any, context: LambdaContext) -> dict[str, Any]:
    try:
        if not isinstance(event, dict):
            raise validation_error([{"field": "event", "message": "is not an API Gateway event"}])
        event = check_request(event)
        response: dict[str, Any] = app.resolve(event, context)
        return response
    except ApiError as error:
        return error.to_lambda_response()
    except Exception:
        logger.exception("api.unexpected_error", extra={"event": "api.unexpected_error"})
        return unavailable().to_lambda_response()
