"""The HTTP API's Lambda authorizer (payload 2.0, simple responses).

It resolves the bearer key to its workspace and always lets the request through to the API
function, which answers 401 itself: an HTTP API cannot shape an authorizer's denial, and the
contract's 401 body is the API's to give. Every protected route checks the workspace.

An outage is never a bad key: when the key store cannot be read, the context says so
(`keyLookup: "failed"`) and the API answers 503 with Retry-After instead of 401.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sendonce.auth.api_keys import KEY_LOOKUP_FAILED, ApiKeyStore, resolve_workspace
from sendonce.observability import logger


def _authorization_header(event: Any) -> str | None:
    headers = event.get("headers") if isinstance(event, dict) else None
    if not isinstance(headers, dict):
        return None
    for name, value in headers.items():
        if isinstance(name, str) and name.lower() == "authorization" and isinstance(value, str):
            return value
    return None


def authorize(keys: Callable[[], ApiKeyStore], event: Any) -> dict[str, Any]:
    """`keys`: the function's key store, built on first use (its failure is an outage too)."""
    try:
        workspace = resolve_workspace(keys(), _authorization_header(event))
    except Exception:
        logger.exception("auth.key_lookup_failed", extra={"event": "auth.key_lookup_failed"})
        return {"isAuthorized": True, "context": {"workspaceId": "", "keyLookup": KEY_LOOKUP_FAILED}}
    if workspace is None:
        logger.info("auth.key_rejected", extra={"event": "auth.key_rejected"})
    return {"isAuthorized": True, "context": {"workspaceId": workspace or ""}}
