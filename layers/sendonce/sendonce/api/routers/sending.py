"""Sending: `POST /v1/messages`, one message, once.

The handler validates, calls `MessageService.send` (through the Idempotency-Key's record when the
request has a key), and answers with the send's stored answer (`sendonce.api.answers`), which a
retry under the same key replays. This router is the one the API function includes at import: a
send is what a first request most likely is.
"""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)

from sendonce.api import dependencies
from sendonce.api.answers import DuplicateCaught, SendAccepted
from sendonce.api.commands import SendMessageRequest, command_of
from sendonce.api.errors import ApiError, from_domain_error, idempotency_in_progress
from sendonce.api.exchange import caller, json_body, json_text
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.messages import SEND_MESSAGE
from sendonce.errors import IdempotencyKeyReused
from sendonce.idempotency.keys import InvalidIdempotencyKey, parse_idempotency_key

__all__ = ["DuplicateCaught", "SendAccepted", "router"]  # the documented answers (SEND_MESSAGE's)

router = DeclaredRouter()


def _key(header_value: str | None, required: bool) -> str | None:
    """The Idempotency-Key a header names; a missing one refused where the settings require it."""
    if header_value is not None:
        try:
            return parse_idempotency_key(header_value)
        except InvalidIdempotencyKey as error:
            raise ApiError(400, "invalid_idempotency_key", f"Idempotency-Key {error}.") from None
    if required:
        raise ApiError(400, "missing_idempotency_key", "This API requires an Idempotency-Key header.")
    return None


@router.handles(SEND_MESSAGE)
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
    workspace = caller(router.context)
    deps = dependencies.root.get()
    key = _key(idempotency_key, deps.settings.require_idempotency_key)
    if key is None:
        stored = deps.send(command_of(message, workspace, None))
    else:
        # Compared on the parsed body (the very value the model was validated from): key order and
        # white space never make two requests differ.
        payload = json_body(router.context)
        command = command_of(message, workspace, key, payload=payload)
        # An in-progress record expires with this invocation's time, should it die mid-request.
        deps.idempotency_config.register_lambda_context(router.lambda_context)
        try:
            stored = deps.send_once(
                request={"workspace": workspace, "key": key, "payload": payload}, command=command
            )
        except IdempotencyAlreadyInProgressError:
            raise idempotency_in_progress() from None
        except IdempotencyValidationError:
            raise from_domain_error(IdempotencyKeyReused()) from None
    headers = {"Idempotency-Replayed": "true"} if stored.get("replayed") else {}
    return json_text(stored["statusCode"], stored["body"], headers)
