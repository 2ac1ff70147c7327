"""Suppressions: the workspace's list of recipients it never sends to (add, list, get, remove).

Each route is declared here, right above its handler, which the router registers from it. `{to}`
comes URL-encoded in the path, as the client wrote it, and is decoded once here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from sendonce.api import dependencies
from sendonce.api.errors import ApiError, unavailable, validation_error
from sendonce.api.exchange import OpaqueCursor, PageSize, answer, caller
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.suppressions import (
    ADD_SUPPRESSION,
    DELETE_SUPPRESSION,
    GET_SUPPRESSION,
    LIST_SUPPRESSIONS,
)
from sendonce.api.shapes import Acknowledged, RecipientRequest, ResponseModel, SuppressionModel
from sendonce.messages.recipients import InvalidRecipient
from sendonce.suppressions.service import SuppressionService

router = DeclaredRouter()


class AddSuppressionRequest(RecipientRequest):
    """POST /v1/suppressions: a recipient as its channel reads it (an entry covers every channel)."""


class SuppressionEnvelope(ResponseModel):
    success: Literal[True]
    suppression: SuppressionModel


class SuppressionPageModel(ResponseModel):
    success: Literal[True]
    suppressions: list[SuppressionModel]
    nextCursor: str | None


def _suppressions() -> SuppressionService:
    service = dependencies.root.get().suppressions
    if service is None:
        raise unavailable("Suppressions are not configured.")
    return service


def _named_recipient(to: str) -> str:
    """The `{to}` of a path, URL-decoded (API Gateway passes the path as the client encoded it)."""
    return unquote(to)


def _invalid_recipient(error: InvalidRecipient) -> ApiError:
    return validation_error([{"field": "to", "message": str(error)}])


@router.handles(ADD_SUPPRESSION)
def add_suppression(request: Annotated[AddSuppressionRequest, Body(embed=False)]) -> Response[Any]:
    entry, created = _suppressions().add(caller(router.context), request.channel, request.to)
    shown = SuppressionEnvelope(success=True, suppression=SuppressionModel.of(entry))
    return answer(201 if created else 200, shown)


@router.handles(LIST_SUPPRESSIONS)
def list_suppressions(
    limit: PageSize = 20,
    cursor: OpaqueCursor = None,
) -> Response[Any]:
    page = _suppressions().list(caller(router.context), limit, cursor)
    shown = [SuppressionModel.of(entry) for entry in page.suppressions]
    return answer(200, SuppressionPageModel(success=True, suppressions=shown, nextCursor=page.next_cursor))


@router.handles(GET_SUPPRESSION)
def get_suppression(to: str) -> Response[Any]:
    try:
        entry = _suppressions().get(caller(router.context), _named_recipient(to))
    except InvalidRecipient as error:
        raise _invalid_recipient(error) from None
    return answer(200, SuppressionEnvelope(success=True, suppression=SuppressionModel.of(entry)))


@router.handles(DELETE_SUPPRESSION)
def delete_suppression(to: str) -> Response[Any]:
    try:
        _suppressions().remove(caller(router.context), _named_recipient(to))
    except InvalidRecipient as error:
        raise _invalid_recipient(error) from None
    return answer(200, Acknowledged(success=True))
