"""API keys are random bearer secrets; only their SHA-256 is ever stored.

A key carries 256 bits of randomness, so a fast hash is enough: there is nothing to brute-force
that a slow password hash would protect. A test key (`sk_test_…`) is stored against its workspace's
test twin (`sendonce.modes`), and a key opens a workspace only when both are of one mode.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Protocol

from sendonce.modes import (
    LIVE_KEY_PREFIX,
    TEST_KEY_PREFIX,
    Mode,
    is_test_workspace,
    mode_of,
    mode_of_key,
    twin_of,
)


def hash_api_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def generate_api_key(mode: Mode = Mode.LIVE) -> str:
    # A live key says so: a random live key can never start like a test key.
    return (TEST_KEY_PREFIX if mode is Mode.TEST else LIVE_KEY_PREFIX) + secrets.token_urlsafe(32)


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
    """The workspace of the header's key; None for no key, a malformed header or a wrong key, and for
    a key whose mode is not its workspace's (a test key opens only a twin, a live key never one)."""
    token = bearer_token(authorization_header)
    if token is None:
        return None
    workspace = store.workspace_for(hash_api_key(token))
    if workspace is None or mode_of(workspace) is not mode_of_key(token):
        return None
    return workspace


def issue_api_key(
    store: ApiKeyStore, workspace_id: str, api_key: str | None = None, *, mode: Mode | None = None
) -> str:
    """Store the hash of a new (or given) key for a live workspace, or for its test twin, and return
    the key, shown once. The mode is the given key's (`sk_test_…`: test), else `mode`, else live."""
    if is_test_workspace(workspace_id):
        raise ValueError(f"{workspace_id!r} names a test twin: name its live workspace, with a test key")
    key_mode = mode_of_key(api_key) if api_key else (mode or Mode.LIVE)
    if mode is not None and key_mode is not mode:
        raise ValueError(f"a test key starts with {TEST_KEY_PREFIX!r}, and no {mode.value} key does")
    key = api_key or generate_api_key(key_mode)
    store.save(hash_api_key(key), twin_of(workspace_id) if key_mode is Mode.TEST else workspace_id)
    return key
