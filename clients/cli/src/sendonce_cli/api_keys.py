"""`sendonce create-api-key`: a key's hash stored for a workspace, the key shown once.

The local stack seeds its keys (`SENDONCE_LOCAL_API_KEYS`) through this function too, so a key it
holds is stored exactly as an operator's.
"""

from __future__ import annotations

from typing import Any

from sendonce.adapters.dynamodb_api_keys import DynamoDbApiKeyStore
from sendonce.auth.api_keys import issue_api_key
from sendonce.modes import Mode


def store_api_key(
    dynamodb: Any, table: str, workspace: str, key: str | None = None, mode: Mode | None = None
) -> str:
    """Store a key's hash for a workspace, or for its test twin (a given key starting `sk_test_`, or
    `mode` test); a new random key when none is given. Returns the key."""
    return issue_api_key(DynamoDbApiKeyStore(dynamodb, table), workspace, key, mode=mode)
