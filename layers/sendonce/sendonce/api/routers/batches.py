"""Batches: `POST /v1/messages/batch`, 1 to 500 messages, each answered as if sent alone.

The handler hands the decoded body to `sendonce.api.batch`, which validates each item, sends the
keyless ones in bulk and the keyed ones one by one, and answers with the batch's stored answer.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query

from sendonce.api import dependencies
from sendonce.api.batch import BatchRequest, BatchResults, answer_batch
from sendonce.api.counted import count_batch_answer
from sendonce.api.exchange import caller, json_body, stored
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.messages import SEND_BATCH

__all__ = ["BatchResults", "router"]  # the documented answer (SEND_BATCH's)

router = DeclaredRouter()


@router.handles(SEND_BATCH)
def send_batch(
    batch: Annotated[BatchRequest, Body(embed=False)],
    validation: Annotated[
        Literal["permissive", "strict"],
        Query(description="strict: any item that is not valid fails the whole request, nothing written"),
    ] = "permissive",
    idempotency_key: Annotated[
        str | None,
        Header(alias="idempotency-key", description="Covers the whole request; a retry replays its 200"),
    ] = None,
) -> Response[Any]:
    workspace = caller(router.context)
    deps = dependencies.root.get()
    # An in-progress record expires with this invocation's time, should it die mid-request.
    deps.idempotency_config.register_lambda_context(router.lambda_context)
    answer = answer_batch(
        workspace=workspace,
        body=json_body(router.context),
        strict=validation == "strict",
        header_key=idempotency_key,
        key_required=deps.settings.require_idempotency_key,
        send_many=deps.send_many,
        send_once=deps.send_once,
        send_batch_once=deps.send_batch_once,
    )
    count_batch_answer(deps, workspace, answer)
    return stored(answer)
