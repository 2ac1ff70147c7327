"""API keys are random bearer secrets; only their SHA-256 is ever stored.

A key carries 256 bits of randomness, so a fast hash is enough: there is nothing to brute-force
that a slow password hash would protect.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Protocol

KEY_PREFIX = "sk_"


def hash_api_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def generate_api_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def bearer_token(authorization_header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    if not authorization_header:
        return None
    scheme, _, token = authorization_header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


class ApiKeyStore(Protocol):
    def workspace_for(self, key_hash: str) -> str | None:
        """The workspace of a key's hash; None for an unknown or revoked key. Raises when the
        store cannot be read: an outage is never a bad key."""
        ...

    def save(self, key_hash: str, workspace_id: str) -> None: ...


def resolve_workspace(store: ApiKeyStore, authorization_header: str | None) -> str | None:
    """The workspace of the header's key; None for no key, a malformed header or a wrong key."""
    token = bearer_token(authorization_header)
    if token is None:
        return None
    return store.workspace_for(hash_api_key(token))


def issue_api_key(store: ApiKeyStore, workspace_id: str, api_key: str | None = None) -> str:
    """Store the hash of a new (or given) key for a workspace and return the key, shown once."""
    key = api_key or generate_api_key()
    store.save(hash_api_key(key), workspace_id)
    return key
