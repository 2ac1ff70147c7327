"""The service: its health, and its OpenAPI description (`/openapi.json`) and browsable page (`/docs`).

The document is built from the resolver every router is included in, on its first request: its
models and Swagger UI stay off a send's cold start.
"""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from sendonce.api.exchange import answer, json_text
from sendonce.api.routes import DeclaredRouter, Route, json_answer
from sendonce.api.shapes import ResponseModel

router = DeclaredRouter()


class Health(ResponseModel):
    success: Literal[True]
    status: Literal["ok"]


def _resolver() -> APIGatewayHttpResolver:
    """The resolver this router is included in: the document describes all its routes."""
    resolver = router.api_resolver
    assert isinstance(resolver, APIGatewayHttpResolver)  # set by include_router, before any request
    return resolver


HEALTH = Route(
    "GET",
    "/v1/health",
    summary="Health",
    answers={200: json_answer("Ready to take sends", Health)},
    public=True,
    tags=("service",),
)


@router.handles(HEALTH)
def health() -> Response[Any]:
    return answer(200, Health(success=True, status="ok"))


OPENAPI = Route(
    "GET",
    "/openapi.json",
    summary="This OpenAPI description",
    answers={200: json_answer("OpenAPI 3 document")},
    public=True,
    tags=("service",),
)


@router.handles(OPENAPI)
def openapi_json() -> Response[Any]:
    from sendonce.api.openapi import openapi_document  # noqa: PLC0415  (the document's models: off a send's path)

    return json_text(200, openapi_document(_resolver()))


DOCS = Route(
    "GET",
    "/docs",
    summary="This OpenAPI description, browsable",
    answers={200: {"description": "Swagger UI", "content": {"text/html": {}}}},
    public=True,
    tags=("service",),
)


@router.handles(DOCS)
def docs() -> Response[Any]:
    from sendonce.api.openapi import docs_page  # noqa: PLC0415  (the document's models: off a send's path)

    return Response(status_code=200, content_type="text/html; charset=utf-8", body=docs_page(_resolver()))
