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

from sendonce.api import dependencies
from sendonce.api.answers import DuplicateCaught, SendAccepted
from sendonce.api.commands import SendMessageRequest, command_of
from sendonce.api.counted import count_send_answer, refusals_counted
from sendonce.api.dependencies import ApiDependencies
from sendonce.api.exchange import caller, json_body, stored
from sendonce.api.idempotency import StoredAnswer, answered_once, key_of
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.messages import SEND_MESSAGE

__all__ = ["DuplicateCaught", "SendAccepted", "router"]  # the documented answers (SEND_MESSAGE's)

router = DeclaredRouter()


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
    key = key_of(idempotency_key, required=deps.settings.require_idempotency_key)
    with refusals_counted(deps, workspace):
        answer = _send(deps, workspace, message, key)
    count_send_answer(deps, workspace, answer)
    return stored(answer)


def _send(
    deps: ApiDependencies, workspace: str, message: SendMessageRequest, key: str | None
) -> StoredAnswer:
    if key is None:
        answer = deps.send(command_of(message, workspace, None))
    else:
        # Compared on the parsed body (the very value the model was validated from): key order and
        # white space never make two requests differ.
        payload = json_body(router.context)
        command = command_of(message, workspace, key, payload=payload)
        # An in-progress record expires with this invocation's time, should it die mid-request.
        deps.idempotency_config.register_lambda_context(router.lambda_context)
        request = {"workspace": workspace, "key": key, "payload": payload}
        answer = answered_once(deps.send_once, request, command=command)
    return answer
