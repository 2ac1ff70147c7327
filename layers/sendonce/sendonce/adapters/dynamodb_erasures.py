"""Erasures' records on DynamoDB, in the messages table (`ERASURE#<id>`, sk `ERASURE`), kept for the
operator's audit (no expiry).

A pending record holds the address (`pendingTo`), the job's place (`cursor`, `listed`,
`unsettled`) and an entry in the ByWorkspace index under `#erasures` (a partition no workspace's
can be: a messages' partition ends in a shard number), where the sweep finds the pending ones. The
completion removes all of them in the write that marks the record done: a done record names no one.
Every write after the create is conditional on the record still pending, so a run that comes late
changes nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sendonce.adapters.dynamodb_items import parse_datetime
from sendonce.adapters.dynamodb_writes import ConditionFailed, DynamoDbTable, Item
from sendonce.clock import rfc3339
from sendonce.erasures.model import Erasure, ErasureCounts, ErasureStatus, ErasureWork
from sendonce.erasures.ports import ErasureJob
from sendonce.errors import DependencyUnavailable

ERASURE_SK = "ERASURE"
PENDING_PARTITION = "#erasures"
_INDEX = "ByWorkspace"
# Each count is an attribute of its own, `count<Kind>`, so a run adds to it in its update.
_COUNT_ATTRIBUTES = {
    name: "count" + "".join(part.capitalize() for part in name.split("_"))
    for name in ErasureCounts.__struct_fields__
}


def erasure_key(erasure_id: str) -> Item:
    return {"pk": {"S": f"ERASURE#{erasure_id}"}, "sk": {"S": ERASURE_SK}}


def _erasure(item: Item) -> Erasure:
    return Erasure(
        id=item["id"]["S"],
        workspace_id=item["workspaceId"]["S"],
        status=ErasureStatus(item["status"]["S"]),
        created_at=parse_datetime(item["createdAt"]["S"]),
        completed_at=parse_datetime(item["completedAt"]["S"]) if "completedAt" in item else None,
        counts=ErasureCounts.of(
            {
                name: int(item.get(attribute, {}).get("N", "0"))
                for name, attribute in _COUNT_ATTRIBUTES.items()
            }
        ),
    )


def _counts_update(added: ErasureCounts) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    """The ADD clauses of the counts that moved, with their names and values."""
    clauses, names, values = [], {}, {}
    for name, count in added.as_dict().items():
        if count:
            names[f"#c_{name}"] = _COUNT_ATTRIBUTES[name]
            values[f":c_{name}"] = {"N": str(count)}
            clauses.append(f"#c_{name} :c_{name}")
    return clauses, names, values


class DynamoDbErasureStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._table = DynamoDbTable(client, table_name)

    def create(self, work: ErasureWork) -> None:
        erasure = work.erasure
        item: Item = {
            **erasure_key(erasure.id),
            "id": {"S": erasure.id},
            "workspaceId": {"S": erasure.workspace_id},
            "status": {"S": erasure.status.value},
            "createdAt": {"S": rfc3339(erasure.created_at)},
            "touchedAt": {"S": rfc3339(erasure.created_at)},
            "pendingTo": {"S": work.to},
            "workspaceShard": {"S": PENDING_PARTITION},
            **{attribute: {"N": "0"} for attribute in _COUNT_ATTRIBUTES.values()},
        }
        written = self._table.write("put_item", Item=item, ConditionExpression="attribute_not_exists(pk)")
        if isinstance(written, ConditionFailed):  # a fresh ULID: cannot happen
            raise DependencyUnavailable("the erasure's id was taken")

    def get(self, workspace_id: str, erasure_id: str) -> Erasure | None:
        item = self._table.get(erasure_key(erasure_id))
        if item is None or item["workspaceId"]["S"] != workspace_id:
            return None  # another workspace's erasure does not exist for this one
        return _erasure(item)

    def work(self, workspace_id: str, erasure_id: str) -> ErasureWork | None:
        item = self._table.get(erasure_key(erasure_id))
        if item is None or item["workspaceId"]["S"] != workspace_id or "pendingTo" not in item:
            return None
        return ErasureWork(
            erasure=_erasure(item),
            to=item["pendingTo"]["S"],
            cursor=item["cursor"]["S"] if "cursor" in item else None,
            listed=bool(item.get("listed", {}).get("BOOL", False)),
            unsettled=frozenset(item.get("unsettled", {}).get("SS", [])),
        )

    def progress(self, work: ErasureWork, added: ErasureCounts, now: datetime) -> None:
        sets = ["touchedAt = :now", "listed = :listed"]
        removes = []
        names: dict[str, str] = {"#status": "status"}
        values: dict[str, Any] = {
            ":now": {"S": rfc3339(now)},
            ":listed": {"BOOL": work.listed},
            ":pending": {"S": ErasureStatus.PENDING.value},
        }
        if work.cursor is not None:
            sets.append("#cursor = :cursor")
            values[":cursor"] = {"S": work.cursor}
        else:
            removes.append("#cursor")
        names["#cursor"] = "cursor"
        if work.unsettled:
            sets.append("unsettled = :unsettled")
            values[":unsettled"] = {"SS": sorted(work.unsettled)}
        else:
            removes.append("unsettled")
        adds, count_names, count_values = _counts_update(added)
        expression = "SET " + ", ".join(sets)
        if removes:
            expression += " REMOVE " + ", ".join(removes)
        if adds:
            expression += " ADD " + ", ".join(adds)
        self._table.write(
            "update_item",
            Key=erasure_key(work.erasure.id),
            UpdateExpression=expression,
            ConditionExpression="#status = :pending",
            ExpressionAttributeNames={**names, **count_names},
            ExpressionAttributeValues={**values, **count_values},
        )  # a failed condition: another run completed it; nothing is left to record

    def complete(self, work: ErasureWork, added: ErasureCounts, now: datetime) -> Erasure | None:
        adds, count_names, count_values = _counts_update(added)
        expression = (
            "SET #status = :done, completedAt = :now, touchedAt = :now "
            "REMOVE pendingTo, #cursor, listed, unsettled, workspaceShard"
        )
        if adds:
            expression += " ADD " + ", ".join(adds)
        answer = self._table.write(
            "update_item",
            Key=erasure_key(work.erasure.id),
            UpdateExpression=expression,
            ConditionExpression="#status = :pending",
            ExpressionAttributeNames={"#status": "status", "#cursor": "cursor", **count_names},
            ExpressionAttributeValues={
                ":done": {"S": ErasureStatus.DONE.value},
                ":pending": {"S": ErasureStatus.PENDING.value},
                ":now": {"S": rfc3339(now)},
                **count_values,
            },
            ReturnValues="ALL_NEW",
        )
        if isinstance(answer, ConditionFailed):
            return None
        return _erasure(answer["Attributes"])

    def stalled(self, before: datetime) -> list[ErasureJob]:
        request: dict[str, Any] = {
            "IndexName": _INDEX,
            "KeyConditionExpression": "workspaceShard = :pending",
            "ExpressionAttributeValues": {":pending": {"S": PENDING_PARTITION}},
        }
        keys: list[Item] = []
        while True:
            answer = self._table.query(**request)
            keys.extend({"pk": item["pk"], "sk": item["sk"]} for item in answer.get("Items", []))
            if "LastEvaluatedKey" not in answer:
                break
            request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        moved_before = rfc3339(before)
        return [
            ErasureJob(item["workspaceId"]["S"], item["id"]["S"])
            for item in self._table.batch_get(keys).values()
            if "pendingTo" in item and item["touchedAt"]["S"] < moved_before
        ]
