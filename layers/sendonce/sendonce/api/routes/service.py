"""The service: its health, and its OpenAPI description (`/openapi.json`) and browsable page (`/docs`).

The declarations of these routes (`sendonce.api.routes`); their handlers are `sendonce.api.routers`'.
"""

from __future__ import annotations

from sendonce.api.routes import Route, json_answer

HEALTH = Route(
    "GET",
    "/v1/health",
    summary="Health",
    answers={200: json_answer("Ready to take sends", "Health")},
    public=True,
    tags=("service",),
)


OPENAPI = Route(
    "GET",
    "/openapi.json",
    summary="This OpenAPI description",
    answers={200: json_answer("OpenAPI 3 document")},
    public=True,
    tags=("service",),
)


DOCS = Route(
    "GET",
    "/docs",
    summary="This OpenAPI description, browsable",
    answers={200: {"description": "Swagger UI", "content": {"text/html": {}}}},
    public=True,
    tags=("service",),
)
