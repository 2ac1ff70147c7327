"""Provider events in: `POST /v1/webhooks/{provider}`, a provider's delivery events, signed.

The declarations of these routes (`sendonce.api.routes`); their handlers are `sendonce.api.routers`'.
"""

from __future__ import annotations

from sendonce.api.routes import Body, Route, json_answer

PROVIDER_WEBHOOK = Route(
    "POST",
    "/v1/webhooks/{provider}",
    summary="Delivery events from a provider (signed)",
    description=(
        "For the HTTP provider (`http`): header `X-Sendonce-Signature: t=<unix seconds>,v1=<hex "
        'HMAC-SHA256(secret, "<t>.<raw body>")>`, at most 5 minutes old. Each eventId takes effect '
        "once; status never moves backwards. Acknowledged as soon as the event is safely queued."
    ),
    answers={200: json_answer("Acknowledged", "Acknowledged")},
    errors=(400, 401, 404, 503),  # 401: a signature that is not valid
    public=True,  # the provider signs the body instead
    body=Body.SIGNED,
    tags=("provider events",),
)
