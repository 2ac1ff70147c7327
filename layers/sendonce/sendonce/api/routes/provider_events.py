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
        'HMAC-SHA256(secret, "<t>.<raw body>")>`, at most 5 minutes old. For Twilio (`twilio`): its '
        "status callbacks, a form (`application/x-www-form-urlencoded`) with header "
        "`X-Twilio-Signature` (the account's auth token over the URL Twilio called, which names the "
        "message as `?messageId=`, and the form); `sent`, `delivered`, `undelivered` and `failed` "
        "change the message (`failed` with error 21610 also suppresses the recipient as opted out), "
        "every other status is acknowledged and changes nothing. Each eventId (Twilio's: "
        "`<MessageSid>:<MessageStatus>`) takes effect once; status never moves backwards. "
        "Acknowledged as soon as the event is safely queued."
    ),
    answers={200: json_answer("Acknowledged", "Acknowledged")},
    errors=(400, 401, 404, 503),  # 401: a signature that is not valid
    error_descriptions={
        401: "unauthorized: the signature is not valid",
        404: "not_found: no such provider (`twilio`: this deployment names no Twilio credentials)",
    },
    public=True,  # the provider signs the body instead
    body=Body.SIGNED,
    tags=("provider events",),
)
