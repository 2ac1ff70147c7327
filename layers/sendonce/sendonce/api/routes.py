"""Every route of the HTTP API, declared once.

A route's method, path, caller (an API key, or nobody), body and OpenAPI description live here and
nowhere else in the function: the resolver registers each handler from its declaration, the
preflight asks the declarations which requests need a key and which bodies to check, a 405 lists
the methods declared on its path, and the OpenAPI document marks the public routes. template.yaml
declares the same routes to API Gateway; `tests/unit/test_routes.py` fails when the two disagree.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any, TypeVar
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from sendonce.api.schemas import (
    Acknowledged,
    BatchResults,
    DuplicateCaught,
    ErrorBody,
    EventEnvelope,
    EventPageModel,
    Health,
    MessageEnvelope,
    MessagePage,
    SendAccepted,
    SimulatedDeliveries,
    SuppressionEnvelope,
    SuppressionPageModel,
    UsageReport,
    WebhookEndpointEnvelope,
    WebhookEndpointList,
)
from sendonce.webhooks.model import MAX_REPLACED_SECRETS, ROTATION_OVERLAP

Handler = TypeVar("Handler", bound=Callable[..., Any])

_PARAMETER = re.compile(r"\{(\w+)\}")
# A request body over its route's limit is a 413 before anything else reads it.
MAX_BODY_BYTES = 256 * 1024
_OVERLAP_HOURS = int(ROTATION_OVERLAP.total_seconds()) // 3600

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
        "idempotency_key_reused (the key was used with a different request) or recipient_suppressed "
        "(the recipient is on the workspace's suppression list; details.reason; nothing was written)"
    ),
    429: (
        "rate_limited (the workspace's request rate; with Retry-After and the RateLimit fields) or "
        "quota_exceeded (the daily send quota; Retry-After: seconds to 00:00 UTC)"
    ),
    503: "unavailable: a dependency failed and nothing was sent; safe to retry (with Retry-After)",
}


class Body(Enum):
    """What a route reads from the request body, and so what the preflight checks of it."""

    NONE = "none"  # nothing: the preflight leaves the body alone
    JSON = "json"  # a JSON document: over 256 KiB is a 413, not UTF-8 JSON a 415
    OPTIONAL_JSON = "optional_json"  # none at all, or a JSON document checked as JSON is
    SIGNED = "signed"  # raw bytes signed as they came: only their size is checked, nothing rewrites them


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # API Gateway's form, as in template.yaml: `/v1/messages/{id}`
    summary: str
    answers: Mapping[int, Any]  # the documented success answers
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


def _json(description: str, model: Any = None) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"model": model} if model else {}}}


SEND_MESSAGE = Route(
    "POST",
    "/v1/messages",
    summary="Send one message",
    description=(
        "Accepts a message for delivery. An identical message to the same recipient within the dedup "
        "window is answered 200 with duplicateOnly: true and the original. With an Idempotency-Key, "
        "a retry replays the first answer with Idempotency-Replayed: true."
    ),
    answers={
        201: _json(
            "Accepted: queued, scheduled, or accepted (hand-off to the queue still owed)", SendAccepted
        ),
        200: _json("The dedup guard caught a duplicate; nothing was sent", DuplicateCaught),
    },
    errors=(400, 409, 422, 503),
    body=Body.JSON,
    tags=("messages",),
)
SEND_BATCH = Route(
    "POST",
    "/v1/messages/batch",
    summary="Send 1 to 500 messages, each answered as if sent alone",
    description=(
        'Body {"messages": [...]}, at most 1 MiB: each item is the body of POST /v1/messages plus an '
        "optional idempotencyKey, and gets the Result POST /v1/messages would answer it alone (its "
        "status code, duplicateOnly, replayed, message or error), in the items' order. Identical items "
        "are one message. ?validation=strict: any item that is not valid makes the whole request a 400 "
        "and nothing is written. An Idempotency-Key header covers the whole request."
    ),
    answers={200: _json("One Result per item, in order", BatchResults)},
    errors=(400, 409, 422, 503),
    body=Body.JSON,
    tags=("messages",),
    max_body_bytes=1024 * 1024,
)
GET_MESSAGE = Route(
    "GET",
    "/v1/messages/{id}",
    summary="Get one message",
    answers={200: _json("The message", MessageEnvelope)},
    errors=(404, 503),
    tags=("messages",),
)
LIST_MESSAGES = Route(
    "GET",
    "/v1/messages",
    summary="List messages, newest first",
    answers={200: _json("A page of messages", MessagePage)},
    errors=(400, 503),
    tags=("messages",),
)
CANCEL_MESSAGE = Route(
    "DELETE",
    "/v1/messages/{id}",
    summary="Cancel a message that has not started its delivery",
    answers={200: _json("Canceled", MessageEnvelope)},
    errors=(404, 409, 503),
    tags=("messages",),
)
EDIT_MESSAGE = Route(
    "PATCH",
    "/v1/messages/{id}",
    summary="Edit a scheduled message until its delivery starts",
    description=(
        "One or more of body, subject, sendAt, metadata (metadata replaces the old one). Allowed while "
        "the message is scheduled, whether or not it was already handed to its queue, up to the moment "
        "its delivery is claimed (at its sendAt); otherwise 409 message_not_editable. What is sent is "
        "the message as it stands at that moment: an edit answered 200 before it is always sent whole, "
        "an edit after it is refused. The dedup lock follows the content: a new content another message "
        "holds in the dedup window is 409 duplicate_content with details.messageId, and nothing changes."
    ),
    answers={200: _json("Edited", MessageEnvelope)},
    errors=(400, 404, 409, 503),
    body=Body.JSON,
    tags=("messages",),
)
PROVIDER_WEBHOOK = Route(
    "POST",
    "/v1/webhooks/{provider}",
    summary="Delivery events from a provider (signed)",
    description=(
        "For the HTTP provider (`http`): header `X-Sendonce-Signature: t=<unix seconds>,v1=<hex "
        'HMAC-SHA256(secret, "<t>.<raw body>")>`, at most 5 minutes old. Each eventId takes effect '
        "once; status never moves backwards. Acknowledged as soon as the event is safely queued."
    ),
    answers={200: _json("Acknowledged", Acknowledged)},
    errors=(400, 401, 404, 503),  # 401: a signature that is not valid
    public=True,  # the provider signs the body instead
    body=Body.SIGNED,
    tags=("provider events",),
)
HEALTH = Route(
    "GET",
    "/v1/health",
    summary="Health",
    answers={200: _json("Ready to take sends", Health)},
    public=True,
    tags=("service",),
)
OPENAPI = Route(
    "GET",
    "/openapi.json",
    summary="This OpenAPI description",
    answers={200: _json("OpenAPI 3 document")},
    public=True,
    tags=("service",),
)
DOCS = Route(
    "GET",
    "/docs",
    summary="This OpenAPI description, browsable",
    answers={200: {"description": "Swagger UI", "content": {"text/html": {}}}},
    public=True,
    tags=("service",),
)

ADD_WEBHOOK_ENDPOINT = Route(
    "POST",
    "/v1/webhook-endpoints",
    summary="Add an endpoint for status webhooks",
    description=(
        "At most 10 a workspace. The url must be https:// and must not resolve to a loopback, private, "
        "link-local or metadata address. The answer carries the endpoint's signing secret, shown only "
        "here and on rotation."
    ),
    answers={201: _json("Added; `secret` is shown this once", WebhookEndpointEnvelope)},
    errors=(400, 503),
    body=Body.JSON,
    tags=("webhooks",),
)
LIST_WEBHOOK_ENDPOINTS = Route(
    "GET",
    "/v1/webhook-endpoints",
    summary="List the endpoints (no secrets)",
    answers={200: _json("The endpoints", WebhookEndpointList)},
    errors=(503,),
    tags=("webhooks",),
)
GET_WEBHOOK_ENDPOINT = Route(
    "GET",
    "/v1/webhook-endpoints/{id}",
    summary="Get one endpoint (no secret)",
    answers={200: _json("The endpoint", WebhookEndpointEnvelope)},
    errors=(404, 503),
    tags=("webhooks",),
)
DELETE_WEBHOOK_ENDPOINT = Route(
    "DELETE",
    "/v1/webhook-endpoints/{id}",
    summary="Delete an endpoint: nothing is delivered to it afterwards, pending retries included",
    answers={200: _json("Deleted", Acknowledged)},
    errors=(404, 503),
    tags=("webhooks",),
)
ROTATE_WEBHOOK_SECRET = Route(
    "POST",
    "/v1/webhook-endpoints/{id}/rotate-secret",
    summary="Rotate an endpoint's signing secret",
    description=(
        "Every delivery is signed with the current secret and with each secret it replaced within "
        f"the last {_OVERLAP_HOURS} hours. Rotations asked at once apply one after another: every "
        f"`secret` answered with a 200 is stored and signs. At most {MAX_REPLACED_SECRETS} replaced "
        "secrets sign at once: a rotation past them is refused (429 too_many_rotations) until the "
        "oldest stops signing, `Retry-After` seconds later."
    ),
    answers={200: _json("Rotated; the new `secret` is shown this once", WebhookEndpointEnvelope)},
    errors=(404, 409, 503),
    tags=("webhooks",),
    error_descriptions={
        409: (
            "rotation_conflict (with Retry-After: 1): other rotations of this endpoint were written "
            "first on each of its tries; nothing was rotated by this one"
        ),
        429: (
            "rate_limited (the workspace's request rate; with Retry-After and the RateLimit fields) or "
            f"too_many_rotations ({MAX_REPLACED_SECRETS} replaced secrets still sign; Retry-After: "
            "seconds until the oldest stops)"
        ),
    },
)
LIST_EVENTS = Route(
    "GET",
    "/v1/events",
    summary="List events, newest first",
    answers={200: _json("A page of events", EventPageModel)},
    errors=(400, 503),
    tags=("webhooks",),
)
GET_EVENT = Route(
    "GET",
    "/v1/events/{id}",
    summary="Get one event and its deliveries",
    answers={200: _json("The event", EventEnvelope)},
    errors=(404, 503),
    tags=("webhooks",),
)
REDELIVER_EVENT = Route(
    "POST",
    "/v1/events/{id}/redeliver",
    summary="Deliver an event again, with the same webhook-id",
    description="To the endpoint named by `endpointId`, or to every endpoint the event was for.",
    answers={202: _json("Queued for delivery", Acknowledged)},
    errors=(400, 404, 503),
    body=Body.OPTIONAL_JSON,
    tags=("webhooks",),
)

USAGE = Route(
    "GET",
    "/v1/usage",
    summary="The workspace's limits and today's use of its send quota",
    answers={200: _json("Limits and usage", UsageReport)},
    errors=(503,),
    tags=("usage",),
)

ADD_SUPPRESSION = Route(
    "POST",
    "/v1/suppressions",
    summary="Put a recipient on the suppression list",
    description=(
        "Body {channel, to}: the recipient as that channel reads it. One entry covers every channel that "
        "reaches the recipient (a phone number: sms and iMessage; an address: email and iMessage). "
        "201 with the new entry (reason manual); 200 with the existing one if the recipient is on the "
        "list already, whatever its reason."
    ),
    answers={
        201: _json("Added", SuppressionEnvelope),
        200: _json("Already on the list: the existing entry", SuppressionEnvelope),
    },
    errors=(400, 503),
    body=Body.JSON,
    tags=("suppressions",),
)
LIST_SUPPRESSIONS = Route(
    "GET",
    "/v1/suppressions",
    summary="List the suppression list, newest first",
    description=(
        "Entries come from STOP replies (opted_out), permanent SES bounces (bounced), complaints "
        "(complained) and this API (manual). A STOP to the shared sending number that names no message "
        "is on every workspace's list."
    ),
    answers={200: _json("A page of entries", SuppressionPageModel)},
    errors=(400, 503),
    tags=("suppressions",),
)
GET_SUPPRESSION = Route(
    "GET",
    "/v1/suppressions/{to}",
    summary="Get a recipient's entry",
    description=(
        "`to` URL-encoded, in any form that normalises to the entry (`%2B15550100000`, `ann%40x.io`)."
    ),
    answers={200: _json("The entry", SuppressionEnvelope)},
    errors=(400, 404, 503),
    tags=("suppressions",),
)
DELETE_SUPPRESSION = Route(
    "DELETE",
    "/v1/suppressions/{to}",
    summary="Take a recipient off the suppression list (after they opted back in)",
    description="Sends to the recipient work again at once. `to` as for GET; 404 when not on the list.",
    answers={200: _json("Removed", Acknowledged)},
    errors=(400, 404, 503),
    tags=("suppressions",),
)
TEST_DELIVERIES = Route(
    "GET",
    "/v1/test/deliveries",
    summary="Test mode: what the simulator accepted",
    description=(
        "Test keys (sk_test_…) only: a live key gets 404. The calls the simulator accepted for the test "
        "twin's messages, one entry per accepted call (a retry under the same Idempotency-Key adds none), "
        "so a CI run can assert that a message was delivered exactly once. ?messageId=: that message's "
        "(404 for a message that is not this twin's); without it, the newest 100. Kept 7 days."
    ),
    answers={200: _json("The simulator's deliveries", SimulatedDeliveries)},
    errors=(400, 404, 503),
    tags=("test mode",),
)

ROUTES: tuple[Route, ...] = (
    SEND_MESSAGE,
    SEND_BATCH,
    GET_MESSAGE,
    LIST_MESSAGES,
    CANCEL_MESSAGE,
    EDIT_MESSAGE,
    PROVIDER_WEBHOOK,
    ADD_WEBHOOK_ENDPOINT,
    LIST_WEBHOOK_ENDPOINTS,
    GET_WEBHOOK_ENDPOINT,
    DELETE_WEBHOOK_ENDPOINT,
    ROTATE_WEBHOOK_SECRET,
    LIST_EVENTS,
    GET_EVENT,
    REDELIVER_EVENT,
    USAGE,
    ADD_SUPPRESSION,
    LIST_SUPPRESSIONS,
    GET_SUPPRESSION,
    DELETE_SUPPRESSION,
    TEST_DELIVERIES,
    HEALTH,
    OPENAPI,
    DOCS,
)


def decoded_path(raw_path: str) -> str:
    """The path a route is matched on: the raw path URL-decoded once, as API Gateway matches it."""
    return unquote(raw_path)


@dataclass(frozen=True)
class Found:
    """The route of a request, and its path parameters as API Gateway passes them (decoded)."""

    route: Route
    parameters: dict[str, str]


# API Gateway prefers the route with fewer parameters: `/v1/messages/batch` over `/v1/messages/{id}`.
_MOST_SPECIFIC_FIRST = tuple(sorted(ROUTES, key=lambda route: len(_PARAMETER.findall(route.path))))


def find_route(method: str, raw_path: str) -> Found | None:
    """The declared route a request is for; None: no route takes its method on its path (404 or 405)."""
    path = decoded_path(raw_path)
    for route in _MOST_SPECIFIC_FIRST:
        if route.method == method and route.matches(path):
            return Found(route, route.parameters(path))
    return None


def allowed_methods(raw_path: str) -> list[str]:
    """The methods declared on a path: a request with another one is a 405; none at all, a 404."""
    path = decoded_path(raw_path)
    return sorted({route.method for route in ROUTES if route.matches(path)})


def register(app: APIGatewayHttpResolver, route: Route) -> Callable[[Handler], Handler]:
    """The resolver's decorator for the handler of a declared route."""
    return app.route(
        route.rule,
        route.method,
        summary=route.summary,
        description=route.description,
        responses=route.responses,
        tags=list(route.tags),
    )
