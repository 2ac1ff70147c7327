"""Provider events in: `POST /v1/webhooks/{provider}`, a provider's delivery events, signed.

The signature is checked on the raw bytes as they came (Twilio's: on its form, and on the URL it
called); the event is queued before the answer, and nothing slow runs before it.
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
from sendonce.clock import utc_now
from sendonce.observability import logger
from sendonce.provider_events.signature import InvalidSignature
from sendonce.provider_events.signature import verify as verify_signature
from sendonce.secret_values import Secret, SecretUnavailable

router = DeclaredRouter()


@router.handles(PROVIDER_WEBHOOK)
def provider_webhook(provider: str) -> Response[Any]:
    if provider == "twilio":
        return _twilio_callback()
    if provider != "http":
        raise not_found("No such provider.")
    raw_event = router.current_event.raw_event
    signed = raw_body(raw_event)  # the bytes as they came: the signature is over them
    deps = dependencies.root.get()
    secret = _read(deps.provider_events_secret)
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


def _read(secret: Secret) -> str:
    try:
        return secret()
    except SecretUnavailable as error:
        # Not a 401: the event may be genuine, and the provider retries a 503.
        logger.warning(
            "webhook.secret_unavailable", extra={"event": "webhook.secret_unavailable", "cause": str(error)}
        )
        raise unavailable("The webhook could not be verified now; nothing was applied. Retry it.") from None


def _twilio_callback() -> Response[Any]:
    """A Twilio status callback: a form, signed with the account's auth token over the URL it called."""
    raw_event = router.current_event.raw_event
    deps = dependencies.root.get()
    if deps.twilio_auth_token is None:  # this deployment does not send through Twilio
        raise not_found("No such provider.")
    auth_token = _read(deps.twilio_auth_token)
    # A provider's webhook is not a send: its module loads with the first one.
    from sendonce.provider_events import twilio_body  # noqa: PLC0415

    context = raw_event.get("requestContext") or {}
    # API Gateway's domain and the raw path and query: what Twilio called, as it signed it.
    url = twilio_body.called_url(
        (header(raw_event, "x-forwarded-proto") or "https").split(",")[0].strip(),
        str(context.get("domainName") or ""),
        str(raw_event.get("rawPath") or ""),
        str(raw_event.get("rawQueryString") or ""),
    )
    try:
        parameters = twilio_body.parse_form(raw_body(raw_event))
    except twilio_body.InvalidCallback:
        parameters = None  # a body that is no form cannot be the one Twilio signed
    if parameters is None or not twilio_body.signature_matches(
        auth_token, url, parameters, header(raw_event, "x-twilio-signature")
    ):
        raise ApiError(401, "unauthorized", "The webhook signature is not valid.")
    try:
        event = twilio_body.status_event(
            dict(reversed(parameters)),  # a repeated name: its first value
            twilio_body.message_id_of(str(raw_event.get("rawQueryString") or "")),
            utc_now(),
        )
    except twilio_body.InvalidCallback as error:
        raise validation_error([{"field": error.field, "message": error.message}]) from None
    if event is not None:
        deps.events.publish(event)
    return answer(200, Acknowledged(success=True))
