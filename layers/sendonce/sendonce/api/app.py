"""The handlers of the HTTP API (v1) on Powertools' event handler, and the function's entry point.

Each handler is registered from its route's declaration in `sendonce.api.routes`. Handlers validate,
call one domain use case, and shape the answer. A JSON body is decoded once, by the preflight
(`sendonce.api.preflight`); the resolver's validation (its `json_body`) and every handler take that
value, and none parses the body's text again. Every failure becomes the contract's error body in
`sendonce.api.errors`; nothing, however malformed, answers 500.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import unquote

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
from sendonce.api.batch import answer_batch
from sendonce.api.commands import command_of
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
from sendonce.api.preflight import RequestBody, check_request, header, raw_body
from sendonce.api.routes import (
    ADD_SUPPRESSION,
    ADD_WEBHOOK_ENDPOINT,
    CANCEL_MESSAGE,
    DELETE_SUPPRESSION,
    DELETE_WEBHOOK_ENDPOINT,
    DOCS,
    EDIT_MESSAGE,
    GET_EVENT,
    GET_MESSAGE,
    GET_SUPPRESSION,
    GET_WEBHOOK_ENDPOINT,
    HEALTH,
    LIST_EVENTS,
    LIST_MESSAGES,
    LIST_SUPPRESSIONS,
    LIST_WEBHOOK_ENDPOINTS,
    OPENAPI,
    PROVIDER_WEBHOOK,
    REDELIVER_EVENT,
    ROTATE_WEBHOOK_SECRET,
    SEND_BATCH,
    SEND_MESSAGE,
    TEST_DELIVERIES,
    USAGE,
    Handler,
    Route,
    allowed_methods,
    register,
)
from sendonce.api.schemas import (
    AddSuppressionRequest,
    AddWebhookEndpointRequest,
    BatchRequest,
    EditMessageRequest,
    RedeliverRequest,
    SendMessageRequest,
)
from sendonce.auth.api_keys import bearer_token, resolve_workspace
from sendonce.clock import rfc3339
from sendonce.errors import IdempotencyKeyReused, RateLimited, SendonceError
from sendonce.idempotency.keys import InvalidIdempotencyKey, parse_idempotency_key
from sendonce.limits.model import RateDecision
from sendonce.messages.edits import MessageChanges
from sendonce.messages.ids import looks_like_message_id
from sendonce.messages.model import Status
from sendonce.messages.recipients import InvalidRecipient
from sendonce.modes import is_test_workspace
from sendonce.observability import logger
from sendonce.provider_events.signature import InvalidSignature
from sendonce.provider_events.signature import verify as verify_signature
from sendonce.secret_values import SecretUnavailable
from sendonce.suppressions.service import SuppressionService
from sendonce.webhooks.model import EventType


def _preflight_body(_text: str) -> Any:
    """The resolver's `json_body`: the value the preflight decoded from this very text, not a second parse."""
    return _json_body()


app = APIGatewayHttpResolver(enable_validation=True, json_body_deserializer=_preflight_body)

CURSOR_PATTERN = r"^msg_[0-9A-HJKMNP-TV-Z]{26}$"  # nextCursor: the last message id of a page
EVENT_CURSOR_PATTERN = r"^evt_[0-9A-HJKMNP-TV-Z]{26}$"


def route(declared: Route) -> Callable[[Handler], Handler]:
    """Registers the handler of a declared route on this app."""
    return register(app, declared)


def _json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response[Any]:
    body = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return Response(status_code=status, content_type=JSON, body=body, headers=headers or {})


# The router's context keys of the caller's workspace and of the decoded body, which the preflight
# found (set on every request).
_CALLER = "caller_workspace"
_BODY = "request_body"


def _workspace() -> str:
    workspace = app.context.get(_CALLER)
    if not isinstance(workspace, str) or not workspace:  # the preflight already answered 401
        raise ApiError(401, "unauthorized", "A valid API key is required.")
    return workspace


def _request_body() -> RequestBody | None:
    """The body as the preflight decoded it; None when the request sent none."""
    body = app.context.get(_BODY)
    return body if isinstance(body, RequestBody) else None


def _json_body() -> Any:
    """The decoded JSON body (raising its refusal); a route that requires one got it from the preflight."""
    body = _request_body()
    if body is None:
        raise validation_error([{"field": "body", "message": "is required: a JSON object"}])
    return body.json()


# ---------------------------------------------------------------------------- POST /v1/messages
@route(SEND_MESSAGE)
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
    deps = dependencies.root.get()
    key = None
    if idempotency_key is not None:
        try:
            key = parse_idempotency_key(idempotency_key)
        except InvalidIdempotencyKey as error:
            raise ApiError(400, "invalid_idempotency_key", f"Idempotency-Key {error}.") from None
    elif deps.settings.require_idempotency_key:
        raise ApiError(400, "missing_idempotency_key", "This API requires an Idempotency-Key header.")

    if key is None:
        answer = deps.send(command_of(message, workspace, None))
    else:
        # Compared on the parsed body (the very value the model was validated from): key order and
        # white space never make two requests differ.
        payload = _json_body()
        command = command_of(message, workspace, key, payload=payload)
        # An in-progress record expires with this invocation's time, should it die mid-request.
        deps.idempotency_config.register_lambda_context(app.lambda_context)
        try:
            answer = deps.send_once(
                request={"workspace": workspace, "key": key, "payload": payload}, command=command
            )
        except IdempotencyAlreadyInProgressError:
            raise idempotency_in_progress() from None
        except IdempotencyValidationError:
            raise from_domain_error(IdempotencyKeyReused()) from None
    headers = {"Idempotency-Replayed": "true"} if answer.get("replayed") else {}
    return _json_response(answer["statusCode"], answer["body"], headers)


# ---------------------------------------------------------------------------- POST /v1/messages/batch
@route(SEND_BATCH)
def send_batch(
    batch: Annotated[BatchRequest, Body(embed=False)],
    validation: Annotated[
        Literal["permissive", "strict"],
        Query(description="strict: any item that is not valid fails the whole request, nothing written"),
    ] = "permissive",
    idempotency_key: Annotated[
        str | None,
        Header(alias="idempotency-key", description="Covers the whole request; a retry replays its 200"),
    ] = None,
) -> Response[Any]:
    workspace = _workspace()
    deps = dependencies.root.get()
    # An in-progress record expires with this invocation's time, should it die mid-request.
    deps.idempotency_config.register_lambda_context(app.lambda_context)
    answer = answer_batch(
        workspace=workspace,
        body=_json_body(),
        strict=validation == "strict",
        header_key=idempotency_key,
        key_required=deps.settings.require_idempotency_key,
        send_many=deps.send_many,
        send_once=deps.send_once,
        send_batch_once=deps.send_batch_once,
    )
    headers = {"Idempotency-Replayed": "true"} if answer.get("replayed") else {}
    return _json_response(answer["statusCode"], answer["body"], headers)


# ---------------------------------------------------------------------------- reads
@route(GET_MESSAGE)
def get_message(id: str) -> Response[Any]:
    message = dependencies.root.get().messages.get(_workspace(), id)
    return _json_response(200, {"success": True, "message": message.to_api()})


@route(LIST_MESSAGES)
def list_messages(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    status: Annotated[Status | None, Query(description="Only messages in this status")] = None,
    cursor: Annotated[
        str | None, Query(pattern=CURSOR_PATTERN, description="nextCursor of the page before")
    ] = None,
) -> Response[Any]:
    page = dependencies.root.get().messages.list(_workspace(), status, limit, cursor)
    return _json_response(
        200,
        {
            "success": True,
            "messages": [message.to_api() for message in page.messages],
            "nextCursor": page.next_cursor,
        },
    )


@route(CANCEL_MESSAGE)
def cancel_message(id: str) -> Response[Any]:
    message = dependencies.root.get().messages.cancel(_workspace(), id)
    return _json_response(200, {"success": True, "message": message.to_api()})


@route(EDIT_MESSAGE)
def edit_message(id: str, changes: Annotated[EditMessageRequest, Body(embed=False)]) -> Response[Any]:
    if not changes.model_fields_set:
        fields = "body, subject, sendAt or metadata"
        raise validation_error([{"field": "body", "message": f"must set at least one of {fields}"}])
    message = dependencies.root.get().messages.edit(
        _workspace(),
        id,
        MessageChanges(
            body=changes.body,
            subject=changes.subject,
            send_at=changes.send_at(),
            metadata=changes.metadata,
        ),
    )
    return _json_response(200, {"success": True, "message": message.to_api()})


# ---------------------------------------------------------------------------- status webhooks
@route(ADD_WEBHOOK_ENDPOINT)
def add_webhook_endpoint(request: Annotated[AddWebhookEndpointRequest, Body(embed=False)]) -> Response[Any]:
    endpoint = dependencies.root.get().webhooks.add_endpoint(
        _workspace(), request.url, request.eventTypes, request.description
    )
    return _json_response(201, {"success": True, "endpoint": endpoint.to_api(with_secret=True)})


@route(LIST_WEBHOOK_ENDPOINTS)
def list_webhook_endpoints() -> Response[Any]:
    endpoints = dependencies.root.get().webhooks.list_endpoints(_workspace())
    return _json_response(200, {"success": True, "endpoints": [e.to_api() for e in endpoints]})


@route(GET_WEBHOOK_ENDPOINT)
def get_webhook_endpoint(id: str) -> Response[Any]:
    endpoint = dependencies.root.get().webhooks.endpoint(_workspace(), id)
    return _json_response(200, {"success": True, "endpoint": endpoint.to_api()})


@route(DELETE_WEBHOOK_ENDPOINT)
def delete_webhook_endpoint(id: str) -> Response[Any]:
    dependencies.root.get().webhooks.delete_endpoint(_workspace(), id)
    return _json_response(200, {"success": True})


@route(ROTATE_WEBHOOK_SECRET)
def rotate_webhook_secret(id: str) -> Response[Any]:
    endpoint = dependencies.root.get().webhooks.rotate_secret(_workspace(), id)
    return _json_response(200, {"success": True, "endpoint": endpoint.to_api(with_secret=True)})


@route(LIST_EVENTS)
def list_events(
    messageId: Annotated[
        str | None, Query(pattern=CURSOR_PATTERN, description="Only this message's events")
    ] = None,
    type: Annotated[EventType | None, Query(description="Only events of this type")] = None,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[
        str | None, Query(pattern=EVENT_CURSOR_PATTERN, description="nextCursor of the page before")
    ] = None,
) -> Response[Any]:
    page = dependencies.root.get().webhooks.list_events(_workspace(), messageId, type, limit, cursor)
    return _json_response(
        200, {"success": True, "events": [e.to_api() for e in page.events], "nextCursor": page.next_cursor}
    )


@route(GET_EVENT)
def get_event(id: str) -> Response[Any]:
    event = dependencies.root.get().webhooks.event(_workspace(), id)
    return _json_response(200, {"success": True, "event": event.to_api()})


@route(REDELIVER_EVENT)
def redeliver_event(id: str) -> Response[Any]:
    body = _request_body()  # optional: none at all asks for every endpoint
    try:
        request = RedeliverRequest.model_validate(body.json()) if body is not None else RedeliverRequest()
    except ValidationError as error:
        raise validation_error(details_from_pydantic(list(error.errors()))) from None
    dependencies.root.get().webhooks.redeliver(_workspace(), id, request.endpointId)
    return _json_response(202, {"success": True})


# ---------------------------------------------------------------------------- provider events
@route(PROVIDER_WEBHOOK)
def provider_webhook(provider: str) -> Response[Any]:
    if provider != "http":
        raise not_found("No such provider.")
    raw_event = app.current_event.raw_event
    signed = raw_body(raw_event)  # the bytes as they came: the signature is over them
    deps = dependencies.root.get()
    try:
        secret = deps.webhook_secret()
    except SecretUnavailable as error:
        # Not a 401: the event may be genuine, and the provider retries a 503.
        logger.warning(
            "webhook.secret_unavailable", extra={"event": "webhook.secret_unavailable", "cause": str(error)}
        )
        raise unavailable("The webhook could not be verified now; nothing was applied. Retry it.") from None
    try:
        verify_signature(header(raw_event, "x-sendonce-signature"), signed, secret, time.time())
    except InvalidSignature as error:
        raise ApiError(401, "unauthorized", f"The webhook signature is not valid: {error}.") from None
    # A provider's webhook is not a send: its body's model loads with the first one.
    from sendonce.provider_events.webhook_body import HttpProviderEvent  # noqa: PLC0415

    try:
        event = HttpProviderEvent.model_validate(_json_body())
    except ValidationError as error:
        raise validation_error(details_from_pydantic(list(error.errors()))) from None
    deps.events.publish(event.to_event(provider))
    return _json_response(200, {"success": True})


# ---------------------------------------------------------------------------- suppressions
def _suppressions() -> SuppressionService:
    service = dependencies.root.get().suppressions
    if service is None:
        raise unavailable("Suppressions are not configured.")
    return service


def _named_recipient(to: str) -> str:
    """The `{to}` of a path, URL-decoded (API Gateway passes the path as the client encoded it)."""
    return unquote(to)


def _invalid_recipient(error: InvalidRecipient) -> ApiError:
    return validation_error([{"field": "to", "message": str(error)}])


@route(ADD_SUPPRESSION)
def add_suppression(request: Annotated[AddSuppressionRequest, Body(embed=False)]) -> Response[Any]:
    entry, created = _suppressions().add(_workspace(), request.channel, request.to)
    return _json_response(201 if created else 200, {"success": True, "suppression": entry.to_api()})


@route(LIST_SUPPRESSIONS)
def list_suppressions(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[
        str | None,
        Query(min_length=1, max_length=1024, description="nextCursor of the page before"),
    ] = None,
) -> Response[Any]:
    page = _suppressions().list(_workspace(), limit, cursor)
    return _json_response(
        200,
        {
            "success": True,
            "suppressions": [entry.to_api() for entry in page.suppressions],
            "nextCursor": page.next_cursor,
        },
    )


@route(GET_SUPPRESSION)
def get_suppression(to: str) -> Response[Any]:
    try:
        entry = _suppressions().get(_workspace(), _named_recipient(to))
    except InvalidRecipient as error:
        raise _invalid_recipient(error) from None
    return _json_response(200, {"success": True, "suppression": entry.to_api()})


@route(DELETE_SUPPRESSION)
def delete_suppression(to: str) -> Response[Any]:
    try:
        _suppressions().remove(_workspace(), _named_recipient(to))
    except InvalidRecipient as error:
        raise _invalid_recipient(error) from None
    return _json_response(200, {"success": True})


# ---------------------------------------------------------------------------- limits
@route(USAGE)
def usage() -> Response[Any]:
    limits = dependencies.root.get().limits
    if limits is None:
        raise unavailable("Limits are not configured.")
    report = limits.usage(_workspace())
    return _json_response(
        200,
        {
            "success": True,
            "rateLimit": {"perSecond": report.limits.rate_per_second},
            "quota": {
                "daily": report.limits.daily_quota,
                "usedToday": report.used_today,
                "resetsAt": rfc3339(report.resets_at),
            },
        },
    )


# ---------------------------------------------------------------------------- test mode
@route(TEST_DELIVERIES)
def simulated_deliveries(
    messageId: Annotated[str | None, Query(description="Only this message's deliveries (msg_…)")] = None,
) -> Response[Any]:
    workspace = _workspace()
    # Before anything about the request is looked at: for a live key this route does not exist.
    if not is_test_workspace(workspace):
        raise not_found("Test deliveries are seen with a test key (sk_test_…) only.")
    if messageId is not None and not looks_like_message_id(messageId):
        raise validation_error([{"field": "messageId", "message": "must be a message id (msg_…)"}])
    deps = dependencies.root.get()
    if messageId is not None:
        deps.messages.get(workspace, messageId)  # 404 for a message that is not this twin's
    deliveries = deps.test_deliveries.deliveries(workspace, messageId)
    return _json_response(200, {"success": True, "deliveries": [d.to_api() for d in deliveries]})


@route(HEALTH)
def health() -> Response[Any]:
    return _json_response(200, {"success": True, "status": "ok"})


@route(OPENAPI)
def openapi_json() -> Response[Any]:
    from sendonce.api.openapi import openapi_document  # noqa: PLC0415  (the document's models: off a send's path)

    return _json_response(200, openapi_document(app))


@route(DOCS)
def docs() -> Response[Any]:
    from sendonce.api.openapi import docs_page  # noqa: PLC0415  (the document's models: off a send's path)

    return Response(status_code=200, content_type="text/html; charset=utf-8", body=docs_page(app))


# ---------------------------------------------------------------------------- errors, in one place
def _api_error(error: ApiError) -> Response[Any]:
    return _json_response(error.status, error.body(), error.headers)


def _domain_error(error: SendonceError) -> Response[Any]:
    return _api_error(from_domain_error(error))


def _invalid_request(error: RequestValidationError) -> Response[Any]:
    return _api_error(validation_error(details_from_pydantic(list(error.errors()))))


def _not_found(_: NotFoundError) -> Response[Any]:
    # The preflight answered every request no declared route takes; the resolver, matching the raw
    # path, may still miss one that a route takes once decoded: nothing there, then, not a 405.
    allowed = allowed_methods(app.current_event.path)
    method = app.current_event.http_method.upper()
    return _api_error(method_not_allowed(allowed) if allowed and method not in allowed else not_found())


def _unexpected(error: Exception) -> Response[Any]:
    logger.exception("api.unexpected_error", extra={"event": "api.unexpected_error"})
    return _api_error(unavailable())


app.exception_handler(ApiError)(_api_error)
app.exception_handler(SendonceError)(_domain_error)
app.exception_handler(RequestValidationError)(_invalid_request)
app.exception_handler(Exception)(_unexpected)
app.not_found(_not_found)


# ---------------------------------------------------------------------------- entry point
def _find_workspace(authorization: str | None) -> str | None:
    """The caller's workspace, from this environment's key store (and its cache)."""
    if bearer_token(authorization) is None:
        return None  # no key to look up: a 401 that needs no dependency
    return resolve_workspace(dependencies.root.get().api_keys, authorization)


def handle(event: Any, context: LambdaContext) -> dict[str, Any]:
    counted: list[RateDecision] = []

    def check_rate(workspace: str) -> None:
        limits = dependencies.root.get().limits
        decision = limits.check_rate(workspace) if limits is not None else None
        if decision is None:
            return
        counted.append(decision)
        if not decision.allowed:
            raise from_domain_error(RateLimited(decision.reset_seconds))

    try:
        if not isinstance(event, dict):
            raise validation_error([{"field": "event", "message": "is not an API Gateway event"}])
        checked = check_request(event, _find_workspace, check_rate)
        # Set before every resolve (which clears it after), so no request sees another's caller or body.
        app.context[_CALLER] = checked.workspace
        app.context[_BODY] = checked.body
        response: dict[str, Any] = app.resolve(checked.event, context)
    except ApiError as error:
        response = error.to_lambda_response()
    except Exception:
        logger.exception("api.unexpected_error", extra={"event": "api.unexpected_error"})
        response = unavailable().to_lambda_response()
    if counted:  # every answer to a good key tells the caller where it stands
        fields = counted[0].headers()
        if response.get("statusCode") != 429:  # over the rate, yet answered: a request that needs no key
            fields.pop("Retry-After", None)
        response["headers"] = {**(response.get("headers") or {}), **fields}
    return response
