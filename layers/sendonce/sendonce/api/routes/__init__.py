"""A route of the HTTP API, declared once, and the table of them all.

A route's method, path, caller (an API key, or nobody), body and OpenAPI description are its
`Route`, declared in its context's module here (`sendonce.api.routes.messages`, `.webhooks`, ...)
and nowhere else. A declaration names the models of its documented answers rather than holding
them: a model lives in the module of its route's handler (`sendonce.api.routers.*`), which is
imported only when that route is first resolved, and `DeclaredRouter.handles` takes the model from
there when it registers the handler. The table of every route (`RouteTable`,
`sendonce.api.routers.ROUTES`) says which router handles each, tells the preflight which requests
need a key and which bodies to check, a 405 which methods a path takes, and the OpenAPI document
which routes are public and in which order they come. template.yaml declares the same routes to
API Gateway; `tests/unit/test_routes.py` fails when the two disagree.

The declarations import no handler and none of their answers' models: the preflight reads them on
every cold start.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import Enum
from functools import cache
from typing import Any, NamedTuple, TypeVar
from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, Router
from msgspec import Struct, field

from sendonce.api.errors import ErrorBody

Handler = TypeVar("Handler", bound=Callable[..., Any])

_PARAMETER = re.compile(r"\{(\w+)\}")
# A request body over its route's limit is a 413 before anything else reads it.
MAX_BODY_BYTES = 256 * 1024

_ERRORS = {
    400: "validation_error, missing_idempotency_key or invalid_idempotency_key",
    401: "unauthorized: no or wrong API key",
    404: "not_found",
    409: (
        "idempotency_in_progress (with Retry-After: 1), message_not_cancelable, message_not_editable "
        "or duplicate_content (details.messageId: the message that holds the content)"
    ),
    413: "payload_too_large: body over 256 KiB",
    415: "unsupported_media_type: not JSON, or JSON that is not UTF-8",
    422: (
        "idempotency_key_reused (the key was used with a different request), recipient_suppressed "
        "(the recipient is on the workspace's suppression list; details.reason; nothing was written) "
        "or destination_not_allowed (a phone number outside the workspace's sms countries, or "
        "premium-rate or shared-cost; details.reason; nothing was written)"
    ),
    429: (
        "rate_limited (the workspace's request rate; with Retry-After and the RateLimit fields), "
        "quota_exceeded (the daily send quota; Retry-After: seconds to 00:00 UTC), sms_budget_exceeded "
        "(the daily sms segments; Retry-After: seconds to 00:00 UTC) or recipient_capped "
        "(the workspace's frequency cap for a recipient; Retry-After: when a place comes back)"
    ),
    503: "unavailable: a dependency failed and nothing was sent; safe to retry (with Retry-After)",
}


class Body(Enum):
    """What a route reads from the request body, and so what the preflight checks of it."""

    NONE = "none"  # nothing: the preflight leaves the body alone
    JSON = "json"  # a JSON document: over 256 KiB is a 413, not UTF-8 JSON a 415
    OPTIONAL_JSON = "optional_json"  # none at all, or a JSON document checked as JSON is
    SIGNED = "signed"  # raw bytes signed as they came: only their size is checked, nothing rewrites them


class Route(Struct, frozen=True):
    method: str
    path: str  # API Gateway's form, as in template.yaml: `/v1/messages/{id}`
    summary: str
    # The documented success answers (`json_answer`): each model by its name in the handler's module.
    answers: Mapping[int, Any]
    # The errors the route itself answers; those its preflight answers are added (see error_statuses).
    errors: tuple[int, ...] = ()
    public: bool = False  # no API key: the preflight looks none up
    body: Body = Body.NONE
    description: str | None = None
    tags: tuple[str, ...] = ()
    max_body_bytes: int = MAX_BODY_BYTES  # over it: 413, before the body is read
    # The route's own words for an error status it answers, in place of the shared ones (_ERRORS).
    error_descriptions: Mapping[int, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """API Gateway's route key."""
        return f"{self.method} {self.path}"

    @property
    def rule(self) -> str:
        """The path in the resolver's form: `/v1/messages/<id>`."""
        return _PARAMETER.sub(r"<\1>", self.path)

    def matches(self, path: str) -> bool:
        """Whether the route takes this path, URL-decoded (as API Gateway matches it)."""
        return _pattern(self.path).match(path) is not None

    def parameters(self, path: str) -> dict[str, str]:
        """The path parameters of a path the route takes (URL-decoded), each decoded once more, as
        API Gateway passes them on."""
        found = _pattern(self.path).match(path)
        return {name: unquote(value) for name, value in found.groupdict().items()} if found else {}

    @property
    def error_statuses(self) -> tuple[int, ...]:
        statuses = set(self.errors)
        if not self.public:
            statuses |= {401, 429}  # the API key, then the workspace's request rate
        if self.body is not Body.NONE:
            statuses |= {400, 413}  # a body that is not valid base64; a body over 256 KiB
        if self.body in (Body.JSON, Body.OPTIONAL_JSON):
            statuses.add(415)
        return tuple(sorted(statuses))

    @property
    def responses(self) -> dict[int, Any]:
        """Every documented answer, the errors' with their body's model, the success answers' naming
        theirs (`documented` puts the models in)."""
        errors = {
            status: {
                "description": self.error_descriptions.get(status, _ERRORS[status]),
                "content": {"application/json": {"model": ErrorBody}},
            }
            for status in self.error_statuses
        }
        if 413 in errors:
            too_large = f"payload_too_large: body over {size_text(self.max_body_bytes)}"
            errors[413] = {**errors[413], "description": too_large}
        return {**self.answers, **errors}


def size_text(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit % (1024 * 1024) == 0 else f"{limit // 1024} KiB"


@cache
def _pattern(path: str) -> re.Pattern[str]:
    """Any path the route's path stands for, exactly (a trailing slash makes another path, as at
    API Gateway and in the resolver); a parameter is one segment of one or more characters."""
    parts = _PARAMETER.split(path)  # literal, name, literal, name, ..., literal
    regex = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts))
    return re.compile(f"^{regex}$")


def json_answer(description: str, model: str | None = None) -> dict[str, Any]:
    """A documented answer: its description, and the name of its JSON body's model in the module of
    the route's handler (which is imported with the route's router, not with the declaration)."""
    return {"description": description, "content": {"application/json": {"model": model} if model else {}}}


def documented(route: Route, namespace: Mapping[str, Any]) -> dict[int, Any]:
    """The route's documented answers, each model named by a success answer taken from `namespace`
    (its handler's module): what the resolver and the OpenAPI document take."""
    answers: dict[int, Any] = {}
    for status, answer in route.responses.items():
        content = {
            media_type: {**body, "model": namespace[body["model"]]}
            if isinstance(body.get("model"), str)
            else body
            for media_type, body in answer.get("content", {}).items()
        }
        answers[status] = {**answer, "content": content} if "content" in answer else answer
    return answers


class DeclaredRouter(Router):
    """Powertools' router for one context of the API, whose handlers are each registered from their
    route's declaration; it keeps each handler by its route's key (`handlers`), in the order of
    registration."""

    def __init__(self) -> None:
        # Powertools' own, unannotated.
        super().__init__()  # type: ignore[no-untyped-call]
        self.handlers: dict[str, Callable[..., Any]] = {}

    def handles(self, route: Route) -> Callable[[Handler], Handler]:
        """The decorator of the handler of a declared route."""

        def register(handler: Handler) -> Handler:
            self.handlers[route.key] = handler
            return register_route(self, route, handler)

        return register


def register_route(resolver: Router | ApiGatewayResolver, route: Route, handler: Handler) -> Handler:
    """`handler` registered for `route` on a router, or straight on a resolver (the OpenAPI
    document's, which takes every route in the table's order), with the route's declaration."""
    registered: Handler = resolver.route(
        route.rule,
        route.method,
        summary=route.summary,
        description=route.description,
        responses=documented(route, handler.__globals__),
        tags=list(route.tags),
    )(handler)
    return registered


def decoded_path(raw_path: str) -> str:
    """The path a route is matched on: the raw path URL-decoded once, as API Gateway matches it."""
    return unquote(raw_path)


class Found(NamedTuple):
    """The route of a request, and its path parameters as API Gateway passes them (decoded)."""

    route: Route
    parameters: dict[str, str]


class RouteTable:
    """Every declared route, in the order of its routers, and the router that handles each: what the
    preflight, a 405, the resolver and the OpenAPI document read."""

    def __init__(self, routers: Mapping[str, Sequence[Route]]) -> None:
        self.routes: tuple[Route, ...] = tuple(route for routes in routers.values() for route in routes)
        self._routers = {route.key: name for name, routes in routers.items() for route in routes}
        keys = [route.key for route in self.routes]
        duplicated = sorted({key for key in keys if keys.count(key) > 1})
        if duplicated:
            raise ValueError(f"routes declared twice: {', '.join(duplicated)}")
        # API Gateway prefers the route with fewer parameters: `/v1/messages/batch` over `/v1/messages/{id}`.
        self._most_specific_first = tuple(
            sorted(self.routes, key=lambda route: len(_PARAMETER.findall(route.path)))
        )

    def __iter__(self) -> Iterator[Route]:
        return iter(self.routes)

    def router_of(self, route: Route) -> str:
        """The name of the router that handles a declared route (its module in `sendonce.api.routers`)."""
        return self._routers[route.key]

    def find(self, method: str, raw_path: str) -> Found | None:
        """The declared route a request is for; None: no route takes its method on its path (404 or 405)."""
        path = decoded_path(raw_path)
        for route in self._most_specific_first:
            if route.method == method and route.matches(path):
                return Found(route, route.parameters(path))
        return None

    def allowed_methods(self, raw_path: str) -> list[str]:
        """The methods declared on a path: a request with another one is a 405; none at all, a 404."""
        path = decoded_path(raw_path)
        return sorted({route.method for route in self.routes if route.matches(path)})
