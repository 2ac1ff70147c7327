"""The MessagesTable's stream read as the committed changes of messages.

The stream is the one record of what happened: a change is told only if its write committed, and
every committed write is in the stream, in order per message. A status change into a status the
customer is told about is one change; so is a caught duplicate, which the sending store records
on the original (`duplicatesBlocked`). Everything else in the table (locks, ties, attempts, the
outbox's moves, expiry) is no change of status and is not told. A campaign's item moving to
`completed` is the one change of a campaign told (`campaign.completed`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sendonce.activity.counts import promise_count_of
from sendonce.adapters.dynamodb_campaigns import campaign_of, is_campaign_item
from sendonce.adapters.dynamodb_items import MESSAGE_SK, from_item
from sendonce.campaigns.model import CampaignStatus
from sendonce.messages.model import Status
from sendonce.status_webhooks.model import (
    STATUS_EVENTS,
    CampaignChange,
    Change,
    tally_of,
)
from sendonce.status_webhooks.rules import (
    EventType,
)

# DynamoDB stream sequence numbers are decimal strings of 21 to 40 digits: padded, they compare as text.
POSITION_DIGITS = 40


def _count(image: Mapping[str, Any], name: str) -> int:
    try:
        return int(image[name]["N"])
    except (KeyError, TypeError, ValueError):
        return 0


def _status(image: Mapping[str, Any]) -> Status | None:
    try:
        return Status(image["status"]["S"])
    except (KeyError, TypeError, ValueError):
        return None


def change_of(record: Mapping[str, Any]) -> Change | CampaignChange | None:
    """The change a stream record tells of, if any. Raises ValueError for a record that is not one."""
    dynamodb = record.get("dynamodb") or {}
    new, old = dynamodb.get("NewImage"), dynamodb.get("OldImage") or {}
    if record.get("eventName") not in ("INSERT", "MODIFY") or not new:
        return None  # a removal: expiry is not a change of status
    if is_campaign_item(new):
        return _campaign_change(dynamodb, new, old)
    if new.get("sk", {}).get("S") != MESSAGE_SK:
        return None  # a lock, a tie, or another record of the table
    position = str(dynamodb["SequenceNumber"])
    if not position.isdigit():
        raise ValueError("the record's sequence number is not a number")
    status = _status(new)
    if status is None:
        raise ValueError("the message has no known status")
    message = from_item(new)
    padded = position.zfill(POSITION_DIGITS)
    before = _status(old)
    if status is not before and status in STATUS_EVENTS:
        told = STATUS_EVENTS[status]
        counted = promise_count_of(message, before, told, message.updated_at)
        return Change(message, told, message.updated_at, padded, tally_of(message, before), counted)
    if _count(new, "duplicatesBlocked") > _count(old, "duplicatesBlocked"):
        # The stream's creation time is whole seconds, rounded down: it can fall before the
        # original's own last change. The catch came after both, so it is told at the later one.
        approximate = dynamodb.get("ApproximateCreationDateTime")
        written = datetime.fromtimestamp(float(approximate), UTC) if approximate else message.updated_at
        at = max(written, message.updated_at)
        counted = promise_count_of(message, before, EventType.DUPLICATE_BLOCKED, at)
        return Change(message, EventType.DUPLICATE_BLOCKED, at, padded, promise=counted)
    return None


def _campaign_change(
    dynamodb: Mapping[str, Any], new: Mapping[str, Any], old: Mapping[str, Any]
) -> CampaignChange | None:
    """A campaign's completion (its status moved to completed); every other write of it tells nothing."""
    completed = CampaignStatus.COMPLETED.value
    if new.get("status", {}).get("S") != completed or old.get("status", {}).get("S") == completed:
        return None
    position = str(dynamodb["SequenceNumber"])
    if not position.isdigit():
        raise ValueError("the record's sequence number is not a number")
    campaign = campaign_of(dict(new))
    return CampaignChange(
        campaign, campaign.completed_at or campaign.created_at, position.zfill(POSITION_DIGITS)
    )
