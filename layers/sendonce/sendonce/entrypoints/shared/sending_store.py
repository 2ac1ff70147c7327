"""The sending store that charges its workspace's daily quota, as the API and the campaign fan-out
both build it: the limits over their table with the stack's defaults, and the store over the
messages table keeping a message for its retention."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sendonce.adapters.dynamodb_limits import DynamoDbLimits
from sendonce.adapters.dynamodb_sending import DynamoDbSendingStore
from sendonce.keyed_hash import KeyedHash
from sendonce.limits.model import Limits


def charged_sending_store(
    dynamodb: Any,
    *,
    messages_table: str,
    retention_days: int,
    limits_table: str,
    defaults: Limits,
    cache_seconds: int,
    keyed_hash: KeyedHash,
) -> tuple[DynamoDbSendingStore, DynamoDbLimits | None]:
    """The store, and its workspaces' limits (None, and nothing charged, without a limits table)."""
    limits = None
    if limits_table:
        limits = DynamoDbLimits(dynamodb, limits_table, defaults=defaults, cache_seconds=cache_seconds)
    store = DynamoDbSendingStore(
        dynamodb,
        messages_table,
        retention=timedelta(days=retention_days),
        quota=limits,
        keyed_hash=keyed_hash,
    )
    return store, limits
