"""The simulator's records on DynamoDB, in the messages table, under the test twin's own partition.

`SIMULATOR#<workspace>`: `DELIVERY#<message id>` for the call the simulator accepted for a message
(written once per Idempotency-Key, which is the message id: a repeat finds it and records nothing),
and `CALLS#<message id>` counting its calls. Every read and write names the workspace in the key, so
a workspace sees only its own. Each record expires with the test data (`modes.TEST_DATA_RETENTION`);
they are no messages, so the table's stream consumers pass them by.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sendonce.adapters.dynamodb_items import epoch_seconds, parse_datetime
from sendonce.adapters.dynamodb_writes import ConditionFailed, DynamoDbTable, Item
from sendonce.clock import rfc3339
from sendonce.errors import DependencyUnavailable
from sendonce.modes import TEST_DATA_RETENTION
from sendonce.simulator.ports import MAX_LISTED, SimulatedDelivery

DELIVERY = "DELIVERY#"
CALLS = "CALLS#"


def _partition(workspace_id: str) -> dict[str, str]:
    return {"S": f"SIMULATOR#{workspace_id}"}


class DynamoDbSimulatorStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._table = DynamoDbTable(client, table_name)

    def count_call(self, workspace_id: str, message_id: str, now: datetime) -> int:
        answer = self._table.write(
            "update_item",
            Key={"pk": _partition(workspace_id), "sk": {"S": CALLS + message_id}},
            UpdateExpression="ADD calls :one SET expiresAt = if_not_exists(expiresAt, :expires)",
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":expires": epoch_seconds(now + TEST_DATA_RETENTION),
            },
            ReturnValues="UPDATED_NEW",
        )
        if isinstance(answer, ConditionFailed):  # no condition: cannot happen
            raise DependencyUnavailable("the simulator's call count was not written")
        return int(answer["Attributes"]["calls"]["N"])

    def accept(self, delivery: SimulatedDelivery) -> tuple[SimulatedDelivery, bool]:
        names = {"#to": "to", "#at": "at"}
        values: dict[str, Any] = {
            ":message": {"S": delivery.message_id},
            ":workspace": {"S": delivery.workspace_id},
            ":channel": {"S": delivery.channel},
            ":to": {"S": delivery.to},
            ":body": {"S": delivery.body},
            ":at": {"S": rfc3339(delivery.at)},
            ":provider": {"S": delivery.provider_id},
            ":key": {"S": delivery.idempotency_key},
            ":expires": epoch_seconds(delivery.at + TEST_DATA_RETENTION),
        }
        expression = (
            "SET messageId = :message, workspaceId = :workspace, channel = :channel, #to = :to, "
            "body = :body, #at = :at, providerId = :provider, idempotencyKey = :key, expiresAt = :expires"
        )
        if delivery.subject is not None:
            expression += ", subject = :subject"
            values[":subject"] = {"S": delivery.subject}
        for name, addresses in (("toList", delivery.to_list), ("cc", delivery.cc), ("bcc", delivery.bcc)):
            if addresses is not None:  # an email's lists, only when it has them
                expression += f", {name} = :{name}"
                values[f":{name}"] = {"L": [{"S": address} for address in addresses]}
        # UpdateItem, not PutItem: the dispatchers' role writes the table with UpdateItem alone.
        answer = self._table.write(
            "update_item",
            Key={"pk": _partition(delivery.workspace_id), "sk": {"S": DELIVERY + delivery.idempotency_key}},
            UpdateExpression=expression,
            ConditionExpression="attribute_not_exists(pk)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if isinstance(answer, ConditionFailed):
            if answer.item is None:
                raise DependencyUnavailable("the simulator's first answer could not be read")
            return _delivery(answer.item), False
        return delivery, True

    def deliveries(self, workspace_id: str, message_id: str | None) -> list[SimulatedDelivery]:
        if message_id is not None:
            item = self._table.get({"pk": _partition(workspace_id), "sk": {"S": DELIVERY + message_id}})
            return [_delivery(item)] if item else []
        answer = self._table.query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :delivery)",
            ExpressionAttributeValues={":pk": _partition(workspace_id), ":delivery": {"S": DELIVERY}},
            ScanIndexForward=False,  # message ids sort by creation: newest first
            Limit=MAX_LISTED,
            ConsistentRead=True,
        )
        return [_delivery(item) for item in answer.get("Items", [])]


def _delivery(item: Item) -> SimulatedDelivery:
    return SimulatedDelivery(
        workspace_id=item["workspaceId"]["S"],
        message_id=item["messageId"]["S"],
        channel=item["channel"]["S"],
        to=item["to"]["S"],
        subject=item["subject"]["S"] if "subject" in item else None,
        body=item["body"]["S"],
        at=parse_datetime(item["at"]["S"]),
        provider_id=item["providerId"]["S"],
        idempotency_key=item["idempotencyKey"]["S"],
        to_list=_listed(item, "toList"),
        cc=_listed(item, "cc"),
        bcc=_listed(item, "bcc"),
    )


def _listed(item: Item, name: str) -> tuple[str, ...] | None:
    return tuple(value["S"] for value in item[name]["L"]) if name in item else None
