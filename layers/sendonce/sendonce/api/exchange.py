"""A request as its handler reads it, and how the handler answers.

The preflight (`sendonce.api.preflight`) found the caller's workspace and decoded the body; the API's
`handle` puts both in the resolver's routing context before each request (which the resolver clears
after it), so no request sees another's, and every router reads them from there (a router's
`context` is its resolver's once included). A handler answers with `answer`: its status, its
response model and its headers.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import MutableMapping
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from msgspec import Struct
from pydantic import BaseModel

from sendonce.api.errors import JSON, ApiError, validation_error
from sendonce.api.shapes import to_json

# What every listing route takes: its page size, and (where its cursors have no pattern of their
# own) an opaque cursor.
PageSize = Annotated[int, Query(ge=1, le=100, description="Page size")]
OpaqueCursor = Annotated[
    str | None, Query(min_length=1, max_length=1024, description="nextCursor of the page before")
]

# The routing context's keys of the caller's workspace and of the decoded body.
_CALLER = "caller_workspace"
_BODY = "request_body"


class RequestBody(Struct, frozen=True):
    """A request body as the preflight decoded it: its JSON value, or the 400 it gets instead (a
    signed body's, raised by its route once the signature is checked)."""

    value: Any = None
    refusal: ApiError | None = None

    def json(self) -> Any:
        """The decoded value; raises the body's refusal."""
        if self.refusal is not None:
            raise self.refusal
        return self.value


def remember(context: MutableMapping[str, Any], workspace: str | None, body: RequestBody | None) -> None:
    """What the preflight found of this request, for its handler."""
    context[_CALLER] = workspace
    context[_BODY] = body


def caller(context: MutableMapping[str, Any]) -> str:
    """The caller's workspace, on a route that takes an API key."""
    workspace = context.get(_CALLER)
    if not isinstance(workspace, str) or not workspace:  # the preflight already answered 401
        raise ApiError(401, "unauthorized", "A valid API key is required.")
    return workspace


def sent_body(context: MutableMapping[str, Any]) -> RequestBody | None:
    """The body as the preflight decoded it; None when the request sent none."""
    body = context.get(_BODY)
    return body if isinstance(body, RequestBody) else None


def json_body(context: MutableMapping[str, Any]) -> Any:
    """The decoded JSON body (raising its refusal); a route that requires one got it from the preflight."""
    body = sent_body(context)
    if body is None:
        raise validation_error([{"field": "body", "message": "is required: a JSON object"}])
    return body.json()


def header(event: dict[str, Any], name: str) -> str | None:
    headers = event.get("headers")
    if not isinstance(headers, dict):
        return None
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() == name:
            return value if isinstance(value, str) else None
    return None


def raw_body(event: dict[str, Any]) -> bytes:
    body = event.get("body")
    if body is None:
        return b""
    if not isinstance(body, str):
        raise ApiError(400, "validation_error", "The body is not valid JSON.")
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "validation_error", "The body is not valid base64.") from None
    return body.encode("utf-8", errors="surrogatepass")


def answer(status: int, model: BaseModel, headers: dict[str, str] | None = None) -> Response[Any]:
    """A handler's answer: its response model, serialized by pydantic (`to_json`)."""
    return json_text(status, to_json(model), headers)


def json_text(status: int, body: str, headers: dict[str, str] | None = None) -> Response[Any]:
    """An answer whose JSON was written already: a stored one (a send's, a batch's), an error's."""
    return Response(status_code=status, content_type=JSON, body=body, headers=headers or {})


def stored(answer: dict[str, Any]) -> Response[Any]:
    """A stored answer (`{"statusCode", "body", "replayed"?}`), replayed ones marked so."""
    headers = {"Idempotency-Replayed": "true"} if answer.get("replayed") else {}
    return json_text(answer["statusCode"], answer["body"], headers)
