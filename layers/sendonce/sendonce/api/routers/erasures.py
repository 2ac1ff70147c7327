"""Erasures: `POST /v1/erasures` asks for one, `GET /v1/erasures/{id}` tells how it stands.

A handler validates, calls one use case of `sendonce.erasures`, and answers with its response model.
The recipient is normalised by the use case (a phone number or an address, as the suppression list
reads it); the answer never names them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import BaseModel, ConfigDict, Field

from sendonce.api import dependencies
from sendonce.api.errors import not_found, unavailable, validation_error
from sendonce.api.exchange import answer, caller
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.erasures import GET_ERASURE, REQUEST_ERASURE
from sendonce.api.shapes import ResponseModel
from sendonce.erasures.model import Erasure
from sendonce.erasures.service import ErasureService
from sendonce.messages.recipients import InvalidRecipient

router = DeclaredRouter()


class ErasureRequest(BaseModel):
    """POST /v1/erasures: whom to erase. Unknown fields are rejected."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    to: str = Field(min_length=1, max_length=320, description="Phone number with country code, or email")


class ErasureModel(ResponseModel):
    id: str = Field(description="era_…")
    status: Literal["pending", "done"]
    to: None = Field(description="Always null: an erasure keeps no address")

    @classmethod
    def of(cls, erasure: Erasure) -> ErasureModel:
        return cls(
            id=erasure.id,
            status=erasure.status.value,
            to=None,
        )


class ErasureEnvelope(ResponseModel):
    success: Literal[True]
    erasure: ErasureModel


def _erasures() -> ErasureService:
    service = dependencies.root.get().erasures
    if service is None:
        raise unavailable("Erasures are not configured.")
    return service


@router.handles(REQUEST_ERASURE)
def request_erasure(request: Annotated[ErasureRequest, Body(embed=False)]) -> Response[Any]:
    try:
        erasure = _erasures().request(caller(router.context), request.to)
    except InvalidRecipient as error:
        raise validation_error([{"field": "to", "message": str(error)}]) from None
    return answer(202, ErasureEnvelope(success=True, erasure=ErasureModel.of(erasure)))


@router.handles(GET_ERASURE)
def get_erasure(id: str) -> Response[Any]:  # the path parameter's name
    erasure = _erasures().get(caller(router.context), id)
    if erasure is None:
        raise not_found("No erasure with this id.")
    return answer(200, ErasureEnvelope(success=True, erasure=ErasureModel.of(erasure)))
