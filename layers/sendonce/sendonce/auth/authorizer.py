"""The HTTP API's Lambda authorizer (payload 2.0, simple responses).

It resolves the bearer key to its workspace and always lets the request through to the API
function, which answers 401 itself: an HTTP API cannot shape an authorizer's denial, and the
contract's 401 body is the API's to give. Every protected route checks the workspace.
"""

from __future__ import annotations

from typing import Any

from sendonce.auth.api_keys import ApiKeyStore, resolve_workspace
from sendonce.observability import logger


def _authorization_header(event: Any) -> str | None:
    headers = event.get("headers") if isinstance(event, dict) else None
    if not isinstance(headers, dict):
        return None
    for name, value in headers.items():
        if isinstance(name, str) and name.lower() == "authorization" and isinstance(value, str):
            return value
    return None


def authorize(keys: ApiKeyStore, event: Any) -> dict[str, Any]:
    try:
        workspace = resolve_workspace(keys, _authorization_header(event))
    except Exception:
        logger.exception("auth.key_lookup_failed", extra={"event": "auth.key_lookup_failed"})
        workspace = None
    if workspace is None:
        logger.info("auth.key_rejected", extra={"event": "auth.key_rejected"})
    return {"isAuthorized": True, "context": {"workspaceId": workspace or ""}}
