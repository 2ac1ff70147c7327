"""Status webhooks: endpoints (add, list, get, delete, rotate their secret) and events (list, get,
redeliver).

The declarations of these routes (`sendonce.api.routes`); their handlers are `sendonce.api.routers`'.
"""

from __future__ import annotations

from sendonce.api.routes import Body, Route, json_answer
from sendonce.status_webhooks.rules import MAX_REPLACED_SECRETS, ROTATION_OVERLAP

_OVERLAP_HOURS = int(ROTATION_OVERLAP.total_seconds()) // 3600


ADD_WEBHOOK_ENDPOINT = Route(
    "POST",
    "/v1/webhook-endpoints",
    summary="Add an endpoint for status webhooks",
    description=(
        "At most 10 a workspace. The url must be https:// and must not resolve to a loopback, private, "
        "link-local or metadata address. The answer carries the endpoint's signing secret, shown only "
        "here and on rotation."
    ),
    answers={201: json_answer("Added; `secret` is shown this once", "WebhookEndpointEnvelope")},
    errors=(400, 503),
    body=Body.JSON,
    tags=("webhooks",),
)


LIST_WEBHOOK_ENDPOINTS = Route(
    "GET",
    "/v1/webhook-endpoints",
    summary="List the endpoints (no secrets)",
    answers={200: json_answer("The endpoints", "WebhookEndpointList")},
    errors=(503,),
    tags=("webhooks",),
)


GET_WEBHOOK_ENDPOINT = Route(
    "GET",
    "/v1/webhook-endpoints/{id}",
    summary="Get one endpoint (no secret)",
    answers={200: json_answer("The endpoint", "WebhookEndpointEnvelope")},
    errors=(404, 503),
    tags=("webhooks",),
)


DELETE_WEBHOOK_ENDPOINT = Route(
    "DELETE",
    "/v1/webhook-endpoints/{id}",
    summary="Delete an endpoint: nothing is delivered to it afterwards, pending retries included",
    answers={200: json_answer("Deleted", "Acknowledged")},
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
    answers={200: json_answer("Rotated; the new `secret` is shown this once", "WebhookEndpointEnvelope")},
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
    answers={200: json_answer("A page of events", "EventPageModel")},
    errors=(400, 503),
    tags=("webhooks",),
)


GET_EVENT = Route(
    "GET",
    "/v1/events/{id}",
    summary="Get one event and its deliveries",
    answers={200: json_answer("The event", "EventEnvelope")},
    errors=(404, 503),
    tags=("webhooks",),
)


REDELIVER_EVENT = Route(
    "POST",
    "/v1/events/{id}/redeliver",
    summary="Deliver an event again, with the same webhook-id",
    description="To the endpoint named by `endpointId`, or to every endpoint the event was for.",
    answers={202: json_answer("Queued for delivery", "Acknowledged")},
    errors=(400, 404, 503),
    body=Body.OPTIONAL_JSON,
    tags=("webhooks",),
)
