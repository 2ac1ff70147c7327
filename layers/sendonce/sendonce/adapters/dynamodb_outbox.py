"""The outbox on DynamoDB: the sparse, sharded Outbox index of what is owed, and moving its entries.

An entry is moved only if nobody moved it since it was read (not a dispatcher's claim, nor a
cancel), so the outbox and a dispatcher never both act on a message. Reading follows every shard's
pages to their end, so nothing due is left unread however many entries a shard holds.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from typing import Any

from sendonce.adapters.dynamodb_items import (
    OUTBOX_SHARDS,
    message_key,
    parse_datetime,
    workspace_status,
)
from sendonce.adapters.dynamodb_writes import ConditionFailed, DynamoDbTable, Item
from sendonce.clock import rfc3339
from sendonce.dispatch.ports import OutboxEntry, Reclaim
from sendonce.messages.model import Channel, Status

# Nobody moved it since it was read: not a dispatcher's claim, nor a cancel, nor another sweep.
UNMOVED = "#status = :seen_status AND outboxDueAt = :seen_due"


def _entry(item: Item) -> OutboxEntry:
    return OutboxEntry(
        id=item["pk"]["S"].removeprefix("MSG#"),
        workspace_id=item["workspaceId"]["S"],
        channel=Channel(item["channel"]["S"]),
        status=Status(item["status"]["S"]),
        due_at=parse_datetime(item["outboxDueAt"]["S"]),
        send_at=parse_datetime(item["sendAt"]["S"]) if "sendAt" in item else None,
    )


class DynamoDbOutboxStore:
    def __init__(self, client: Any, table_name: str, page_size: int | None = None) -> None:
        self._table = DynamoDbTable(client, table_name)
        # None: DynamoDB's own pages (1 MB read, several thousand entries of the index's projection).
        self._page_size = page_size

    def due_pages(self, now: datetime, statuses: Collection[Status]) -> Iterator[Sequence[OutboxEntry]]:
        request: dict[str, Any] = {
            "IndexName": "Outbox",
            "KeyConditionExpression": "outboxShard = :shard AND outboxDueAt <= :now",
            "ExpressionAttributeValues": {":now": {"S": rfc3339(now)}},
        }
        if set(statuses) != set(Status):
            wanted = {f":status{index}": {"S": status.value} for index, status in enumerate(statuses)}
            request["FilterExpression"] = f"#status IN ({', '.join(wanted)})"
            request["ExpressionAttributeNames"] = {"#status": "status"}
            request["ExpressionAttributeValues"].update(wanted)
        if self._page_size is not None:
            request["Limit"] = self._page_size
        # The shards take turns, a page each: should the sweep's time run out, every shard has moved on.
        cursors: dict[int, Item | None] = dict.fromkeys(range(OUTBOX_SHARDS))
        while cursors:
            for shard, cursor in list(cursors.items()):
                values = {**request["ExpressionAttributeValues"], ":shard": {"S": str(shard)}}
                page = self._table.query(
                    **{**request, "ExpressionAttributeValues": values},
                    **({"ExclusiveStartKey": cursor} if cursor else {}),
                )
                if page.get("LastEvaluatedKey"):
                    cursors[shard] = page["LastEvaluatedKey"]
                else:
                    del cursors[shard]
                if page.get("Items"):
                    yield [_entry(item) for item in page["Items"]]

    def move_outbox_entry(
        self, entry: OutboxEntry, now: datetime, *, status: Status, due_at: datetime | None
    ) -> bool:
        response = self._move(entry, now, status=status, due_at=due_at)
        return not isinstance(response, ConditionFailed)

    def reclaim(self, entry: OutboxEntry, now: datetime, *, due_at: datetime, max_reclaims: int) -> Reclaim:
        response = self._move(entry, now, status=Status.QUEUED, due_at=due_at, max_reclaims=max_reclaims)
        if not isinstance(response, ConditionFailed):
            return Reclaim.RECLAIMED
        item = response.item or {}
        unmoved = item.get("status", {}).get("S") == entry.status.value and item.get("outboxDueAt", {}).get(
            "S"
        ) == rfc3339(entry.due_at)
        return Reclaim.CAP_REACHED if unmoved else Reclaim.SUPERSEDED

    def _move(
        self,
        entry: OutboxEntry,
        now: datetime,
        *,
        status: Status,
        due_at: datetime | None,
        max_reclaims: int | None = None,
    ) -> dict[str, Any] | ConditionFailed:
        values: dict[str, Any] = {
            ":status": {"S": status.value},
            ":ws_status": {"S": workspace_status(entry.workspace_id, status, entry.id)},
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
        condition = UNMOVED
        extra: dict[str, Any] = {}
        if max_reclaims is not None:
            expression += " ADD reclaims :one"
            condition += " AND (attribute_not_exists(reclaims) OR reclaims < :max_reclaims)"
            values[":one"] = {"N": "1"}
            values[":max_reclaims"] = {"N": str(max_reclaims)}
            # To tell a reached cap from a move by somebody else.
            extra["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return self._table.write(
            "update_item",
            Key=message_key(entry.id),
            UpdateExpression=expression,
            ConditionExpression=condition,
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=values,
            **extra,
        )
