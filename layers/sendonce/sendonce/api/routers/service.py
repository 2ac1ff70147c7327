"""The service: its health, and its OpenAPI description (`/openapi.json`) and browsable page (`/docs`).

The document is built on its first request (`sendonce.api.openapi`): its models and Swagger UI stay
off a send's cold start.
"""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.event_handler import Response

from sendonce.api.exchange import answer, json_text
from sendonce.api.routes import DeclaredRouter
from sendonce.api.routes.service import DOCS, HEALTH, OPENAPI
from sendonce.api.shapes import ResponseModel

router = DeclaredRouter()


class Health(ResponseModel):
    success: Literal[True]
    status: Literal["ok"]


@router.handles(HEALTH)
def health() -> Response[Any]:
    return answer(200, Health(success=True, status="ok"))


@router.handles(OPENAPI)
def openapi_json() -> Response[Any]:
    from sendonce.api.openapi import openapi_document  # noqa: PLC0415  (the document's models: off a send's path)

    return json_text(200, openapi_document())


@router.handles(DOCS)
def docs() -> Response[Any]:
    from sendonce.api.openapi import docs_page  # noqa: PLC0415  (the document's models: off a send's path)

    return Response(status_code=200, content_type="text/html; charset=utf-8", body=docs_page())
