"""The MessagesTable's stream read as the creations of messages, each owed its hand-off.

A message item's INSERT is its creation, committed with its dedup lock; nothing else in the
stream is (a lock's or a tie's INSERT, a change, an expiry). HandoffFunction's event filter in
template.yaml admits exactly the INSERTs of message items (`CREATION_FILTER` below is checked
against it by a test), and `created_of` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sendonce.adapters.dynamodb_items import MESSAGE_SK, from_item
from sendonce.messages.model import Message, Status

# Lambda's event filter pattern of a message's creation, as template.yaml declares it.
CREATION_FILTER: dict[str, Any] = {
    "eventName": ["INSERT"],
    "dynamodb": {"NewImage": {"sk": {"S": [MESSAGE_SK]}}},
}
# A message is created waiting for its hand-off, now or at its sendAt.
CREATED_STATUSES = (Status.QUEUED, Status.SCHEDULED)


def created_of(record: Mapping[str, Any]) -> Message | None:
    """The message whose creation a stream record tells, if any. Raises ValueError (or KeyError,
    TypeError) for a message item that cannot be read as one."""
    dynamodb = record.get("dynamodb") or {}
    new = dynamodb.get("NewImage")
    if record.get("eventName") != "INSERT" or not new:
        return None  # a change or an expiry: only a creation is owed its hand-off
    if new.get("sk", {}).get("S") != MESSAGE_SK:
        return None  # a lock, a tie, or another record of the table
    status = new.get("status", {}).get("S")
    if status not in CREATED_STATUSES:
        raise ValueError(f"a message created {status!r}, a status no creation has")
    return from_item(new)
