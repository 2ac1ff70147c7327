"""Messages as DynamoDB items, and back. Keys are namespaced so one table holds messages and locks.

Also what every kind of item shares: times, shards, and the opaque cursors of listings.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import zlib
from datetime import datetime, timedelta

from sendonce.adapters.dynamodb_writes import Item
from sendonce.clock import rfc3339
from sendonce.errors import InvalidCursor
from sendonce.messages.model import (
    AttemptOutcome,
    Channel,
    HeldFor,
    Message,
    MessageFailure,
    Priority,
    ProviderAttempt,
    Status,
    TemplateRef,
)

MESSAGE_SK = "MESSAGE"
EVENT_SK = "EVENT"
PROVIDER_EVENT_RETENTION = timedelta(days=7)
LOCK_SK = "LOCK"
TIE_SK = "TIE"
# Every message passes through the sparse Outbox index (create, claim, finish): enough shards that
# 10,000 sends a second stay under the per-partition write limit; the sweep reads each shard.
OUTBOX_SHARDS = 64
# A workspace's entries in each listing index (ByWorkspace, ByWorkspaceStatus) are spread over this
# many partitions, by the message id, and the listing merges them. Each partition of one workspace
# takes two writes of 1 WCU a message (in, out: the indexes hold keys only), so one workspace at
# 10,000 sends a second is about 310 WCU a second a shard, under a third of DynamoDB's 1,000
# (docs/scaling.md, `bench/capacity.py`'s `busiest_partitions`).
LISTING_SHARDS = 64


def message_key(message_id: str) -> Item:
    return {"pk": {"S": f"MSG#{message_id}"}, "sk": {"S": MESSAGE_SK}}


def lock_key(lock_id: str) -> Item:
    return {"pk": {"S": f"DEDUP#{lock_id}"}, "sk": {"S": LOCK_SK}}


def tie_key(tie_id: str) -> Item:
    return {"pk": {"S": f"KEYTIE#{tie_id}"}, "sk": {"S": TIE_SK}}


def event_key(provider: str, event_id: str) -> Item:
    digest = hashlib.sha256(event_id.encode("utf-8")).hexdigest()
    return {"pk": {"S": f"EVENT#{provider}#{digest}"}, "sk": {"S": EVENT_SK}}


def shard_of(item_id: str, shards: int) -> int:
    """Where an item's entry goes among `shards` partitions: by a hash of its id, so evenly."""
    return zlib.crc32(item_id.encode()) % shards


def workspace_shard(workspace_id: str, shard: int) -> str:
    """A ByWorkspace partition. Read from the right, it names one workspace: a shard has no `#`."""
    return f"{workspace_id}#{shard}"


def status_shard(workspace_id: str, status: Status, shard: int) -> str:
    """A ByWorkspaceStatus partition: one workspace's messages in one status, one shard of them."""
    return f"{workspace_id}#{status.value}#{shard}"


def workspace_status(workspace_id: str, status: Status, message_id: str) -> str:
    """The ByWorkspaceStatus partition of a message in `status`."""
    return status_shard(workspace_id, status, shard_of(message_id, LISTING_SHARDS))


def campaign_shard(workspace_id: str, campaign_id: str, shard: int) -> str:
    """A ByCampaign partition: one campaign's messages, one shard of them (`GET /v1/messages?campaignId=`)."""
    return f"{workspace_id}#{campaign_id}#{shard}"


def outbox_shard(message_id: str) -> str:
    return str(shard_of(message_id, OUTBOX_SHARDS))


def epoch_seconds(moment: datetime) -> dict[str, str]:
    return {"N": str(int(moment.timestamp()))}


def lock_expiry(moment: datetime) -> dict[str, str]:
    """A dedup lock's `expiresAt`: the whole second at or after `moment`. Its writers compare it with
    the whole second of now (`expiresAt <= :now`), so a lock never ends before its window does (at
    most a second after); rounded down, a 3-second window could end after two."""
    return {"N": str(math.ceil(moment.timestamp()))}


def to_item(message: Message, outbox_due_at: datetime | None, expires_at: datetime | None = None) -> Item:
    item: Item = {
        **message_key(message.id),
        "id": {"S": message.id},
        "workspaceId": {"S": message.workspace_id},
        "workspaceShard": {"S": workspace_shard(message.workspace_id, shard_of(message.id, LISTING_SHARDS))},
        "workspaceStatus": {"S": workspace_status(message.workspace_id, message.status, message.id)},
        "channel": {"S": message.channel.value},
        "to": {"S": message.to},
        "body": {"S": message.body},
        "status": {"S": message.status.value},
        "attempts": {"N": str(message.attempts)},
        "metadata": {"M": {key: {"S": value} for key, value in message.metadata.items()}},
        "createdAt": {"S": rfc3339(message.created_at)},
        "updatedAt": {"S": rfc3339(message.updated_at)},
    }
    item.update(recipient_attributes(message))
    if message.reply_to is not None:
        item["replyTo"] = {"S": message.reply_to}
    if message.html is not None:
        item["html"] = {"S": message.html}
    if message.subject is not None:
        item["subject"] = {"S": message.subject}
    if message.send_at is not None:
        item["sendAt"] = {"S": rfc3339(message.send_at)}
    if message.idempotency_key is not None:
        item["idempotencyKey"] = {"S": message.idempotency_key}
    if message.dedup_lock_id is not None:
        item["dedupLockId"] = {"S": message.dedup_lock_id}
    if message.template is not None:
        item["template"] = {
            "M": {"name": {"S": message.template.name}, "version": {"N": str(message.template.version)}}
        }
    if message.template_lock_id is not None:
        item["templateLockId"] = {"S": message.template_lock_id}
    if message.campaign_id is not None:
        shard = shard_of(message.id, LISTING_SHARDS)
        item["campaignId"] = {"S": message.campaign_id}
        item["campaignShard"] = {"S": campaign_shard(message.workspace_id, message.campaign_id, shard)}
    if message.campaign_lock_id is not None:
        item["campaignLockId"] = {"S": message.campaign_lock_id}
    if message.batch_key is not None:  # a set: a duplicate caught in another keyed batch adds its key
        item["batchKeys"] = {"SS": [message.batch_key]}
    if message.provider is not None:
        item["provider"] = {"S": message.provider}
    if message.provider_attempts:
        item["providerAttempts"] = provider_attempts_value(message.provider_attempts)
    if message.expires_at is not None:
        item["validUntil"] = {"S": rfc3339(message.expires_at)}
    if message.priority is not Priority.NORMAL:
        item["priority"] = {"S": message.priority.value}
    if message.held_for is not None:
        item["heldFor"] = {"S": message.held_for.value}
    if message.timezone is not None:
        item["timezone"] = {"S": message.timezone}
    if message.retention_days is not None:
        item["retentionDays"] = {"N": str(message.retention_days)}
    if expires_at is not None:
        item["expiresAt"] = epoch_seconds(expires_at)  # DynamoDB's TTL removes the message then
    if outbox_due_at is not None:
        # Present only while a hand-off is owed: the Outbox index stays sparse.
        item["outboxShard"] = {"S": outbox_shard(message.id)}
        item["outboxDueAt"] = {"S": rfc3339(outbox_due_at)}
    return item


def _addresses(addresses: tuple[str, ...]) -> dict[str, list[dict[str, str]]]:
    return {"L": [{"S": address} for address in addresses]}


def recipient_attributes(message: Message) -> Item:
    """Who a message goes to, as item attributes: `to` (its first recipient), and an email's lists
    only when it has them (`toList`, `cc`, `bcc`, `suppressedRecipients`), so that a message to one
    address is the item it always was. A claim that drops a suppressed recipient sets them again."""
    item: Item = {"to": {"S": message.to}}
    if message.to_list is not None:
        item["toList"] = _addresses(message.to_list)
    if message.cc is not None:
        item["cc"] = _addresses(message.cc)
    if message.bcc is not None:
        item["bcc"] = _addresses(message.bcc)
    if message.suppressed_recipients:
        item["suppressedRecipients"] = _addresses(message.suppressed_recipients)
    return item


def _listed(item: Item, name: str) -> tuple[str, ...] | None:
    if name not in item:
        return None
    return tuple(value["S"] for value in item[name]["L"])


def opaque_cursor(text: str) -> str:
    """A listing's place as the client sees it: base64url, unpadded, so that no one builds one."""
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def cursor_text(cursor: str) -> str:
    """The place an `opaque_cursor` holds; InvalidCursor when it is not one (its listing still checks
    that the place is one it gives)."""
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        raise InvalidCursor(cursor) from None


def parse_datetime(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def from_item(item: Item) -> Message:
    error = item.get("error", {}).get("M")
    template = item.get("template", {}).get("M")
    return Message(
        id=item["id"]["S"],
        workspace_id=item["workspaceId"]["S"],
        channel=Channel(item["channel"]["S"]),
        to=item["to"]["S"],
        body=item["body"]["S"],
        status=Status(item["status"]["S"]),
        created_at=parse_datetime(item["createdAt"]["S"]),
        updated_at=parse_datetime(item["updatedAt"]["S"]),
        subject=item["subject"]["S"] if "subject" in item else None,
        send_at=parse_datetime(item["sendAt"]["S"]) if "sendAt" in item else None,
        metadata={key: value["S"] for key, value in item.get("metadata", {}).get("M", {}).items()},
        idempotency_key=item["idempotencyKey"]["S"] if "idempotencyKey" in item else None,
        attempts=int(item.get("attempts", {}).get("N", "0")),
        error=MessageFailure(code=error["code"]["S"], message=error["message"]["S"]) if error else None,
        provider_message_id=item["providerMessageId"]["S"] if "providerMessageId" in item else None,
        dedup_lock_id=item["dedupLockId"]["S"] if "dedupLockId" in item else None,
        to_list=_listed(item, "toList"),
        cc=_listed(item, "cc"),
        bcc=_listed(item, "bcc"),
        reply_to=item["replyTo"]["S"] if "replyTo" in item else None,
        html=item["html"]["S"] if "html" in item else None,
        suppressed_recipients=_listed(item, "suppressedRecipients") or (),
        template=TemplateRef(template["name"]["S"], int(template["version"]["N"])) if template else None,
        template_lock_id=item["templateLockId"]["S"] if "templateLockId" in item else None,
        campaign_id=item["campaignId"]["S"] if "campaignId" in item else None,
        campaign_lock_id=item["campaignLockId"]["S"] if "campaignLockId" in item else None,
        batch_key=min(item["batchKeys"]["SS"]) if "batchKeys" in item else None,
        provider=item["provider"]["S"] if "provider" in item else None,
        expires_at=parse_datetime(item["validUntil"]["S"]) if "validUntil" in item else None,
        priority=Priority(item["priority"]["S"]) if "priority" in item else Priority.NORMAL,
        held_for=HeldFor(item["heldFor"]["S"]) if "heldFor" in item else None,
        timezone=item["timezone"]["S"] if "timezone" in item else None,
        retention_days=int(item["retentionDays"]["N"]) if "retentionDays" in item else None,
        provider_attempts=tuple(
            ProviderAttempt(
                attempt["M"]["provider"]["S"],
                AttemptOutcome(attempt["M"]["outcome"]["S"]),
                parse_datetime(attempt["M"]["at"]["S"]),
            )
            for attempt in item.get("providerAttempts", {}).get("L", [])
        ),
    )


def provider_attempts_value(attempts: tuple[ProviderAttempt, ...]) -> dict[str, list[Item]]:
    """A message's provider attempts as the item's `providerAttempts` list."""
    return {
        "L": [
            {
                "M": {
                    "provider": {"S": attempt.provider},
                    "outcome": {"S": attempt.outcome.value},
                    "at": {"S": rfc3339(attempt.at)},
                }
            }
            for attempt in attempts
        ]
    }
