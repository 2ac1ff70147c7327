"""What is checked before a request reaches its route: its route, the caller, the size and the body.

These run before any body validation and before anything is written, in this order:
401 (or 503), then the workspace's request rate (429), then 413, then 415, then a body the JSON
parser cannot take (400). Which route a request is for, whether it needs a key and what it reads
of its body come from the routes' declarations (`sendonce.api.routers.ROUTES`).

The route is found here, as API Gateway finds it (on the URL-decoded path), whatever route the
gateway named: a request no route takes is answered here, 404 or 405, and never reaches the
resolver, which would match the raw path (`/v1/messages/a%2Fb` as an id). A path parameter holding
a `/` once decoded (`a%252Fb`) is a 404 too, after the caller: no id holds one.

The caller is found here, in the API function, from the `Authorization` header: no authorizer runs
before it. A route that takes a key gets a workspace or an answer, never both: no key, a malformed
header, an unknown or a revoked key is 401; a key store that cannot be read is 503 with
Retry-After, because an outage is never a bad key. A public route, and a request no route takes
(404 or 405), need no key and answer the same whatever key comes along, over the rate too; but a
good key is counted against its workspace's request rate there as well, so that the answer
carries the `RateLimit` fields, as every answer to a good key does.

The body is decoded here, once (`sendonce.api.json_body`), and rides on with the request
(`Checked.body`): the handlers, the resolver's validation and the Idempotency-Key's payload all take
this value and never parse the text again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, NamedTuple

from sendonce.api.errors import (
    JSON,
    ApiError,
    method_not_allowed,
    not_found,
    unauthorized,
    unavailable,
    validation_error,
)
from sendonce.api.exchange import RequestBody, header, raw_body
from sendonce.api.json_body import decode_json
from sendonce.api.routers import ROUTES
from sendonce.api.routes import MAX_BODY_BYTES, Body, Route, size_text
from sendonce.observability import logger

__all__ = ["MAX_BODY_BYTES", "Checked", "FindWorkspace", "RequestBody", "check_request", "header", "raw_body"]

# The `Authorization` header -> the workspace of its key; None: no key, or none good. It raises
# when the key store cannot be read.
FindWorkspace = Callable[[str | None], str | None]


class Checked(NamedTuple):
    """A request that may reach its route: the route, the event, the caller and the decoded body."""

    route: Route
    event: dict[str, Any]
    workspace: str | None  # on a route that takes an API key, always set; elsewhere, a good key's
    body: RequestBody | None = None  # None: the route reads no JSON, or none was sent (optional)


def _caller(event: dict[str, Any], find_workspace: FindWorkspace) -> str:
    authorization = header(event, "authorization")
    try:
        workspace = find_workspace(authorization)
    except Exception:
        # Neither the header nor the key is logged: only that the store could not be read.
        logger.exception("auth.key_lookup_failed", extra={"event": "auth.key_lookup_failed"})
        raise unavailable("The API key could not be checked. It is safe to retry.") from None
    if workspace is None:
        logger.info("auth.key_rejected", extra={"event": "auth.key_rejected"})
        raise unauthorized()
    return workspace


def _is_json_media_type(content_type: str | None) -> bool:
    if not content_type:
        return False
    media_type, *parameters = (part.strip().lower() for part in content_type.split(";"))
    if media_type != "application/json":
        return False
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip() == "charset" and value.strip().strip('"') not in ("utf-8", "utf8"):
            return False
    return True


def _good_key_or_none(event: dict[str, Any], find_workspace: FindWorkspace) -> str | None:
    """The workspace of a good key, on a request that needs none (a public route's, or one no route
    takes): no key, a wrong one or a store that cannot be read changes nothing of its answer."""
    authorization = header(event, "authorization")
    if authorization is None:
        return None
    try:
        return find_workspace(authorization)
    except Exception:
        logger.exception("auth.key_lookup_failed", extra={"event": "auth.key_lookup_failed"})
        return None


def _decoded(body: bytes) -> RequestBody:
    """A signed body, decoded as any other; its refusal waits for the signature (a 401 comes first)."""
    try:
        return RequestBody(decode_json(body.decode("utf-8")))
    except UnicodeDecodeError:
        return RequestBody(refusal=validation_error([{"field": "body", "message": "is not UTF-8 JSON"}]))
    except ApiError as refusal:
        return RequestBody(refusal=refusal)


def check_request(
    event: dict[str, Any],
    find_workspace: FindWorkspace,
    check_rate: Callable[[str], None] | None = None,
) -> Checked:
    """Raise the answer for a request that must stop here; otherwise the event (its JSON body as
    text, its media type normalised), the caller's workspace and the decoded body.

    `check_rate(workspace)` runs right after the API key is found good, and raises a refusal (which
    stops only a request that needs a key)."""
    method = str((event.get("requestContext") or {}).get("http", {}).get("method", "")).upper()
    path = str(event.get("rawPath") or "")
    found = ROUTES.find(method, path)
    workspace: str | None
    if found is not None and not found.route.public:
        workspace = caller = _caller(event, find_workspace)
        if check_rate is not None:
            check_rate(caller)
    else:  # it needs no key: a good one is counted, never refused
        workspace = _good_key_or_none(event, find_workspace)
        if workspace is not None and check_rate is not None:
            with contextlib.suppress(ApiError):
                check_rate(workspace)
    if found is None:
        allowed = ROUTES.allowed_methods(path)
        raise method_not_allowed(allowed) if allowed else not_found()
    route = found.route
    if any("/" in value for value in found.parameters.values()):
        raise not_found("Nothing has this id: no id holds a slash.")
    # Only the routes that take a body read one.
    if route.body is Body.NONE:
        return Checked(route, event, workspace)
    body = raw_body(event)
    limit = route.max_body_bytes  # the route's own: 1 MiB for a batch, 256 KiB for one message
    if len(body) > limit:
        raise ApiError(413, "payload_too_large", f"The body is over {size_text(limit)}.")
    if route.body is Body.SIGNED:  # the route checks the signature on the raw bytes
        return Checked(route, event, workspace, _decoded(body))
    if route.body is Body.OPTIONAL_JSON and not body.strip():
        return Checked(route, event, workspace)
    if not _is_json_media_type(header(event, "content-type")):
        raise ApiError(415, "unsupported_media_type", "Send the body as Content-Type: application/json.")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(415, "unsupported_media_type", "The JSON body must be encoded as UTF-8.") from None
    value = decode_json(text)
    # The router's own body check compares the media type case-sensitively: hand it the checked one.
    headers = {k: v for k, v in (event.get("headers") or {}).items() if str(k).lower() != "content-type"}
    checked = {**event, "headers": {**headers, "content-type": JSON}, "body": text, "isBase64Encoded": False}
    return Checked(route, checked, workspace, RequestBody(value))
