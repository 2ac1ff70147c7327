"""The API function's resolver: the preflight, the routers, and every failure in one error body.

`handle` runs the preflight (`sendonce.api.preflight`) on each request, then hands it to the
resolver, which takes it to its route's handler in one of the routers (`sendonce.api.routers`, one
per context). A router is included here with the first request for one of its routes (its module,
its models and its context load then), a send's when this module is imported. A JSON body is
decoded once, by the preflight; the resolver's validation (its `json_body`) and every handler take
that value (`sendonce.api.exchange`), and none parses the body's text again. Every failure becomes
the one error body of `sendonce.api.errors`; nothing, however malformed, answers 500.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from sendonce.api import dependencies, routers
from sendonce.api.errors import (
    ApiError,
    details_from_pydantic,
    from_domain_error,
    method_not_allowed,
    not_found,
    unavailable,
    validation_error,
)
from sendonce.api.exchange import json_body, json_text, remember
from sendonce.api.preflight import check_request
from sendonce.api.routers import ROUTES
from sendonce.api.routes import Route
from sendonce.auth.api_keys import bearer_token, resolve_workspace
from sendonce.errors import RateLimited, SendonceError
from sendonce.limits.model import RateDecision
from sendonce.observability import logger

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext


def _preflight_body(_text: str) -> Any:
    """The resolver's `json_body`: the value the preflight decoded from this very text, not a second parse."""
    return json_body(app.context)


app = APIGatewayHttpResolver(enable_validation=True, json_body_deserializer=_preflight_body)
_included: set[str] = set()
_including = threading.Lock()


def _include(name: str) -> None:
    """The router of that name in the resolver, once (its module imported then)."""
    if name in _included:
        return
    with _including:
        if name not in _included:
            app.include_router(routers.load(name))
            _included.add(name)


def include_router_of(route: Route) -> None:
    """The router that handles `route` in the resolver: before the first request for it is resolved."""
    _include(ROUTES.router_of(route))


for _name in routers.AT_IMPORT:
    _include(_name)


# ---------------------------------------------------------------------------- errors, in one place
def _api_error(error: ApiError) -> Response[Any]:
    return json_text(error.status, error.body(), error.headers)


def _domain_error(error: SendonceError) -> Response[Any]:
    return _api_error(from_domain_error(error))


def _invalid_request(error: RequestValidationError) -> Response[Any]:
    return _api_error(validation_error(details_from_pydantic(list(error.errors()))))


def _not_found(_: NotFoundError) -> Response[Any]:
    # The preflight answered every request no declared route takes; the resolver, matching the raw
    # path, may still miss one that a route takes once decoded: nothing there, then, not a 405.
    allowed = ROUTES.allowed_methods(app.current_event.path)
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
        include_router_of(checked.route)
        # Set before every resolve (which clears it after), so no request sees another's caller or body.
        remember(app.context, checked.workspace, checked.body)
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
