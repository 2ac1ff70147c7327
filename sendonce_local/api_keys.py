"""API keys of the local stack (`SENDONCE_LOCAL_API_KEYS`) and of `sendonce create-api-key`."""

from __future__ import annotations

from typing import Any

from sendonce.adapters.dynamodb_api_keys import DynamoDbApiKeyStore
from sendonce.auth.api_keys import issue_api_key
from sendonce.modes import Mode

from sendonce_local.constants import DEFAULT_LOCAL_API_KEYS


def parse_local_api_keys(text: str | None) -> list[tuple[str, str]]:
    """`workspace:key,workspace:key` as (workspace, key) pairs."""
    pairs: list[tuple[str, str]] = []
    for raw in (text if text is not None else DEFAULT_LOCAL_API_KEYS).split(","):
        item = raw.strip()
        if not item:
            continue
        workspace, separator, key = item.partition(":")
        if not separator or not workspace.strip() or not key.strip():
            raise ValueError(f"SENDONCE_LOCAL_API_KEYS: {item!r} is not workspace:key")
        pairs.append((workspace.strip(), key.strip()))
    return pairs


def store_api_key(
    dynamodb: Any, table: str, workspace: str, key: str | None = None, mode: Mode | None = None
) -> str:
    """Store a key's hash for a workspace, or for its test twin (a given key starting `sk_test_`, or
    `mode` test); a new random key when none is given. Returns the key."""
    return issue_api_key(DynamoDbApiKeyStore(dynamodb, table), workspace, key, mode=mode)
