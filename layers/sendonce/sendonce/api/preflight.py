"""What is checked before a request reaches its route: the caller, the size and the media type.

These run before any body validation and before anything is written, in the contract's order:
401 (or 503), then the workspace's request rate (429), then 413, then 415. Which requests need a
key and which bodies are read come from the routes' declarations in `sendonce.api.routes`.

The caller is found here, in the API function, from the `Authorization` header: no authorizer runs
before it. A route that takes a key gets a workspace or an answer, never both: no key, a malformed
header, an unknown or a revoked key is 401; a key store that cannot be read is 503 with
Retry-After, because an outage is never a bad key.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any, NamedTuple

from sendonce.api.errors import JSON, ApiError, unauthorized, unavailable
from sendonce.api.routes import MAX_BODY_BYTES, Body, body_of, max_body_of, needs_key, size_text
from sendonce.observability import logger

__all__ = ["MAX_BODY_BYTES", "Checked", "FindWorkspace", "check_request", "header", "raw_body"]
_TOO_DEEP = {"field": "body", "message": "the body is not valid JSON: it is nested too deeply"}

# The `Authorization` header -> the workspace of its key; None: no key, or none good. It raises
# when the key store cannot be read.
FindWorkspace = Callable[[str | None], str | None]


class Checked(NamedTuple):
    """A request that may reach its route: the event (its body decoded) and the caller."""

    event: dict[str, Any]
    workspace: str | None  # on a route that takes an API key, always set


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


def check_request(
    event: dict[str, Any],
    find_workspace: FindWorkspace,
    check_rate: Callable[[str], None] | None = None,
) -> Checked:
    """Raise the answer for a request that must stop here; otherwise the event, body decoded, and
    the caller's workspace.

    `check_rate(workspace)` runs right after the API key is found good, and raises a refusal."""
    method = str((event.get("requestContext") or {}).get("http", {}).get("method", "")).upper()
    path = str(event.get("rawPath") or "")
    # `$default` takes what no route matched: no key is looked up, and the answer is 404 or 405.
    matched = event.get("routeKey") != "$default"
    workspace = _caller(event, find_workspace) if matched and needs_key(path) else None
    if matched and check_rate is not None and workspace is not None and needs_key(path):
        check_rate(workspace)
    # Only the routes that take a body read one: any other answers its own 404 or 405.
    kind = body_of(method, path)
    if kind is Body.NONE:
        return Checked(event, workspace)
    body = raw_body(event)
    limit = max_body_of(method, path)  # the route's own: 1 MiB for a batch, 256 KiB for one message
    if len(body) > limit:
        raise ApiError(413, "payload_too_large", f"The body is over {size_text(limit)}.")
    if kind is Body.SIGNED:
        return Checked(event, workspace)  # signed raw bytes: the route reads them as they came
    if kind is Body.OPTIONAL_JSON and not body.strip():
        return Checked(event, workspace)
    if not _is_json_media_type(header(event, "content-type")):
        raise ApiError(415, "unsupported_media_type", "Send the body as Content-Type: application/json.")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(415, "unsupported_media_type", "The JSON body must be encoded as UTF-8.") from None
    try:
        json.loads(text)
    except RecursionError:  # the router's own parse would fail the same way, as an unexpected error
        raise ApiError(400, "validation_error", "The request is not valid.", details=[_TOO_DEEP]) from None
    except ValueError:
        pass  # the router answers it with the field details of a JSON error
    # The router's own body check compares the media type case-sensitively: hand it the checked one.
    headers = {k: v for k, v in (event.get("headers") or {}).items() if str(k).lower() != "content-type"}
    checked = {**event, "headers": {**headers, "content-type": JSON}, "body": text, "isBase64Encoded": False}
    return Checked(checked, workspace)
