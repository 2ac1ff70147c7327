"""The outbox on DynamoDB: the sparse, sharded Outbox index of what is owed, and moving its entries.

An entry is moved only if nobody moved it since it was read (not a dispatcher's claim, nor a
cancel), so the outbox and a dispatcher never both act on a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sendonce.adapters.dynamodb_items import OUTBOX_SHARDS, message_key, parse_datetime, workspace_status
from sendonce.adapters.dynamodb_writes import ConditionFailed, DynamoDbTable
from sendonce.clock import rfc3339
from sendonce.delivery.ports import OutboxEntry
from sendonce.messages.model import Channel, Status


class DynamoDbOutboxStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._table = DynamoDbTable(client, table_name)

    def outbox_due(self, now: datetime, limit: int) -> Sequence[OutboxEntry]:
        entries: list[OutboxEntry] = []
        for shard in range(OUTBOX_SHARDS):
            items = self._table.query(
                IndexName="Outbox",
                KeyConditionExpression="outboxShard = :shard AND outboxDueAt <= :now",
                ExpressionAttributeValues={":shard": {"S": str(shard)}, ":now": {"S": rfc3339(now)}},
                Limit=limit,
            ).get("Items", [])
            entries.extend(
                OutboxEntry(
                    id=item["pk"]["S"].removeprefix("MSG#"),
                    workspace_id=item["workspaceId"]["S"],
                    channel=Channel(item["channel"]["S"]),
                    status=Status(item["status"]["S"]),
                    due_at=parse_datetime(item["outboxDueAt"]["S"]),
                    send_at=parse_datetime(item["sendAt"]["S"]) if "sendAt" in item else None,
                )
                for item in items
            )
        return sorted(entries, key=lambda entry: entry.due_at)[:limit]

    def move_outbox_entry(
        self, entry: OutboxEntry, now: datetime, *, status: Status, due_at: datetime | None
    ) -> bool:
        values: dict[str, Any] = {
            ":status": {"S": status.value},
            ":ws_status": {"S": workspace_status(entry.workspace_id, status)},
            ":now": {"S": rfc3339(now)},
            ":seen_status": {"S": entry.status.value},
            ":seen_due": {"S": rfc3339(entry.due_at)},
        }
        expression = "SET #status = :status, workspaceStatus = :ws_status, updatedAt = :now"
        if due_at is None:
            expression += " REMOVE outboxShard, outboxDueAt"
        else:
            expression += ", outboxDueAt = :due"
            values[":due"] = {"S": rfc3339(due_at)}
        response = self._table.write(
            "update_item",
            Key=message_key(entry.id),
            UpdateExpression=expression,
            # Nobody moved it since it was read: not a dispatcher's claim, nor a cancel.
            ConditionExpression="#status = :seen_status AND outboxDueAt = :seen_due",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=values,
        )
        return not isinstance(response, ConditionFailed)
