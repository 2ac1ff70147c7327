"""Provider events in: `POST /v1/webhooks/{provider}`, a provider's delivery events, signed.

The signature is checked on the raw bytes as they came; the event is queued before the answer, and
nothing slow runs before it.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.event_handler import Response
from pydantic import ValidationError

from sendonce.api import dependencies
from sendonce.api.errors import ApiError, details_from_pydantic, not_found, unavailable, validation_error
from sendonce.api.exchange import answer, header, json_body, raw_body
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.provider_events import PROVIDER_WEBHOOK
from sendonce.api.shapes import Acknowledged
from sendonce.observability import logger
from sendonce.provider_events.signature import InvalidSignature
from sendonce.provider_events.signature import verify as verify_signature
from sendonce.secret_values import SecretUnavailable

router = DeclaredRouter()


@router.handles(PROVIDER_WEBHOOK)
def provider_webhook(provider: str) -> Response[Any]:
    if provider != "http":
        raise not_found("No such provider.")
    raw_event = router.current_event.raw_event
    signed = raw_body(raw_event)  # the bytes as they came: the signature is over them
    deps = dependencies.root.get()
    try:
        secret = deps.provider_events_secret()
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
    from sendonce.provider_events.http_body import HttpProviderEvent  # noqa: PLC0415

    try:
        event = HttpProviderEvent.model_validate(json_body(router.context))
    except ValidationError as error:
        raise validation_error(details_from_pydantic(list(error.errors()))) from None
    deps.events.publish(event.to_event(provider))
    return answer(200, Acknowledged(success=True))
