"""Releasing a dedup lock: only by the message that owns it, and never an error for the caller.

A failed or canceled message releases its lock so a deliberate retry may send at once. Release is
best effort: a lock that cannot be deleted now still expires with its window.
"""

from __future__ import annotations

from sendonce.adapters.dynamodb_items import lock_key
from sendonce.adapters.dynamodb_writes import DynamoDbTable
from sendonce.errors import DependencyUnavailable
from sendonce.messages.model import Message
from sendonce.observability import logger


def release_dedup_lock(table: DynamoDbTable, message: Message) -> None:
    """Every lock the message holds (a send from a template holds two), each on its own."""
    for lock_id in message.lock_ids:
        _release(table, message, lock_id)


def _release(table: DynamoDbTable, message: Message, lock_id: str) -> None:
    try:
        deleted = table.write(
            "delete_item",
            Key=lock_key(lock_id),
            # Only the lock this message owns: a later message may hold the identity now.
            ConditionExpression="messageId = :id",
            ExpressionAttributeValues={":id": {"S": message.id}},
        )
    except DependencyUnavailable:
        logger.warning(
            "message.dedup.lock_release_failed",
            extra={"event": "message.dedup.lock_release_failed", "message_id": message.id},
        )
        return
    if isinstance(deleted, dict):
        logger.info(
            "message.dedup.lock_released",
            extra={"event": "message.dedup.lock_released", "message_id": message.id},
        )
