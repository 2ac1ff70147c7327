"""`sendonce release-lock`: delete a dedup lock by (workspace, recipient, subject, body).

The identity is computed exactly as the API computes it: the recipient normalised for its channel
(`normalise_recipient(...).dedup_form`), then `dedup_identity(workspace, recipient, subject, body)`,
held as its keyed hash under the stack's hashing key (`sendonce.keyed_hash`); the lock is the item
pk `DEDUP#<keyed hash>`, sk `LOCK` of the messages table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sendonce.adapters.dynamodb_items import lock_key
from sendonce.channels import normalise_recipient
from sendonce.dedup.identity import dedup_identity
from sendonce.keyed_hash import KeyedHash


@dataclass(frozen=True)
class ReleasedLock:
    identity: str
    recipient: str
    existed: bool
    message_id: str | None
    expires_at: int | None


def lock_identity(workspace: str, channel: str, to: str, subject: str | None, body: str) -> tuple[str, str]:
    """(identity, normalised recipient); raises ValueError for an unknown channel or a bad recipient."""
    recipient = normalise_recipient(channel, to)
    return dedup_identity(workspace, recipient.dedup_form, subject, body), recipient.dedup_form


def release_lock(
    dynamodb: Any,
    table: str,
    keyed_hash: KeyedHash,
    *,
    workspace: str,
    channel: str,
    to: str,
    subject: str | None,
    body: str,
) -> ReleasedLock:
    """The lock is found by its identity's keyed hash, as the functions made it."""
    identity, recipient = lock_identity(workspace, channel, to, subject, body)
    identity = keyed_hash(identity)
    answer = dynamodb.delete_item(TableName=table, Key=lock_key(identity), ReturnValues="ALL_OLD")
    old: dict[str, Any] = answer.get("Attributes") or {}
    expires = old.get("expiresAt", {}).get("N")
    return ReleasedLock(
        identity=identity,
        recipient=recipient,
        existed=bool(old),
        message_id=old.get("messageId", {}).get("S"),
        expires_at=int(expires) if expires is not None else None,
    )


def describe(released: ReleasedLock, now: float) -> str:
    if not released.existed:
        return f"no lock for {released.recipient} (identity {released.identity}): nothing to release"
    state = ""
    if released.expires_at is not None:
        state = (
            " (it had expired)"
            if released.expires_at <= now
            else f" ({released.expires_at - int(now)}s left)"
        )
    return (
        f"released the lock of message {released.message_id} for {released.recipient}{state} "
        f"(identity {released.identity}): an identical message may be sent again"
    )
