"""The activity context's store on DynamoDB: the promise's daily counts, and the provider events
recorded against a message.

A workspace's counts of a day are kept on PROMISE_SHARDS counters (`PROMISE#<workspace>#<shard>`,
sort key the day) in the WebhooksTable, beside the events they count: a count goes to the shard its
`spread` hashes to, so a busy workspace's million new messages a day are no hot item, and a day's
read sums the shards (one Query each, for every day asked). A counter is only ever added to (ADD:
no read, no condition) and expires with TTL after PROMISE_RETENTION.

Provider events are found through the MessagesTable's sparse index `ProviderEventsByMessage`
(`eventOf`, the message's id, which only a provider event's record carries).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sendonce.activity.counts import PromiseCount, PromiseDay, PromiseKind
from sendonce.activity.model import RecordedProviderEvent
from sendonce.adapters.dynamodb_items import epoch_seconds, parse_datetime, shard_of
from sendonce.adapters.dynamodb_writes import DynamoDbTable, Item
from sendonce.side_by_side import side_by_side

# One workspace's 10,000 new messages a second, each 2 WCU in its event's transaction: 625 WCU a
# second a shard, under DynamoDB's 1,000 (`bench/capacity.py`'s `busiest_partitions`).
PROMISE_SHARDS = 32
# Shards read at once for a day's counts.
_READERS = 16
# The console shows 31 days; a counter outlives its day by a little more.
PROMISE_RETENTION = timedelta(days=35)
PROVIDER_EVENTS_INDEX = "ProviderEventsByMessage"
_KINDS = {kind.value: kind for kind in PromiseKind}


def promise_key(workspace_id: str, shard: int, day: str) -> Item:
    return {"pk": {"S": f"PROMISE#{workspace_id}#{shard}"}, "sk": {"S": day}}


def promise_update(table_name: str, count: PromiseCount) -> dict[str, Any]:
    """The update that adds `count` to its day's counter: on its own, or an item of a transaction."""
    expires = datetime.fromisoformat(count.day).replace(tzinfo=UTC) + PROMISE_RETENTION
    return {
        "TableName": table_name,
        "Key": promise_key(count.workspace_id, shard_of(count.spread, PROMISE_SHARDS), count.day),
        "UpdateExpression": "ADD #kind :count SET expiresAt = if_not_exists(expiresAt, :expires)",
        "ExpressionAttributeNames": {"#kind": count.kind.value},
        "ExpressionAttributeValues": {":count": {"N": str(count.count)}, ":expires": epoch_seconds(expires)},
    }


def provider_event_attributes(message_id: str, provider: str, occurred_at: str) -> Item:
    """What a provider event's record carries for its message's timeline (the index's key and what
    it projects): never the event's body."""
    return {"eventOf": {"S": message_id}, "provider": {"S": provider}, "occurredAt": {"S": occurred_at}}


class DynamoDbPromiseCounts:
    def __init__(self, client: Any, table_name: str) -> None:
        self._table = DynamoDbTable(client, table_name)

    def add(self, count: PromiseCount) -> None:
        update = promise_update(self._table.name, count)
        del update["TableName"]
        self._table.write("update_item", **update)

    def days(self, workspace_id: str, days: Sequence[str]) -> list[PromiseDay]:
        if not days:
            return []

        def read(shard: int) -> list[Item]:
            items: list[Item] = []
            request: dict[str, Any] = {
                "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :last",
                "ExpressionAttributeValues": {
                    ":pk": {"S": f"PROMISE#{workspace_id}#{shard}"},
                    ":first": {"S": min(days)},
                    ":last": {"S": max(days)},
                },
            }
            while True:
                answer = self._table.query(**request)
                items.extend(answer.get("Items", []))
                if "LastEvaluatedKey" not in answer:
                    return items
                request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

        totals: dict[str, dict[PromiseKind, int]] = {day: {} for day in days}
        for items in side_by_side(read, list(range(PROMISE_SHARDS)), workers=_READERS):
            for item in items:
                counts = totals.get(item["sk"]["S"])
                if counts is None:
                    continue
                for name, kind in _KINDS.items():
                    if name in item:
                        counts[kind] = counts.get(kind, 0) + int(item[name]["N"])
        return [PromiseDay(day, totals[day]) for day in days]


class DynamoDbProviderEventLog:
    def __init__(self, client: Any, table_name: str) -> None:
        self._table = DynamoDbTable(client, table_name)

    def of_message(self, message_id: str) -> list[RecordedProviderEvent]:
        found: list[RecordedProviderEvent] = []
        request: dict[str, Any] = {
            "IndexName": PROVIDER_EVENTS_INDEX,
            "KeyConditionExpression": "eventOf = :message",
            "ExpressionAttributeValues": {":message": {"S": message_id}},
        }
        while True:
            answer = self._table.query(**request)
            found.extend(
                RecordedProviderEvent(
                    provider=item["provider"]["S"],
                    type=item["type"]["S"],
                    recorded_at=parse_datetime(item["recordedAt"]["S"]),
                    occurred_at=item.get("occurredAt", {}).get("S"),
                )
                for item in answer.get("Items", [])
            )
            if "LastEvaluatedKey" not in answer:
                return found
            request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
