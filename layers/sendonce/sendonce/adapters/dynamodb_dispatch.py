"""The delivery context's store on DynamoDB: claim before send, finish the claimed attempt, settle an
`unknown` message.

Every write is conditional on what the writer saw: a claim only from a waiting, due status; the end
of an attempt only by the claim that started it; a settlement only of a message still `unknown`.
So two dispatchers never both act on a message, and an operator never overrides a known outcome.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sendonce.adapters.dynamodb_dedup_locks import release_dedup_lock
from sendonce.adapters.dynamodb_items import (
    from_item,
    message_key,
    outbox_shard,
    parse_datetime,
    workspace_status,
)
from sendonce.adapters.dynamodb_writes import ConditionFailed, DynamoDbTable, Item
from sendonce.clock import rfc3339
from sendonce.dispatch.ports import ClaimedMessage, ClaimRefused, SettleRefused
from sendonce.messages.model import WAITING_STATUSES, Message, MessageFailure, Status

# What an `unknown` message settled as `failed` says when its attempt left no error of its own.
SETTLED_FAILED = MessageFailure("settled_failed", "an operator settled the message as failed")


def claimed_from_item(item: Item) -> ClaimedMessage:
    started = item.get("firstAttemptAt") or item.get("attemptStartedAt") or item["updatedAt"]
    return ClaimedMessage.of(
        from_item(item),
        first_attempt_at=parse_datetime(started["S"]),
        # Counted when each throttled attempt ended: the attempt this claim starts is not in it.
        throttled_attempts=int(item.get("throttledAttempts", {}).get("N", "0")),
    )


class DynamoDbDispatchStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._table = DynamoDbTable(client, table_name)

    def claim(
        self, workspace_id: str, message_id: str, now: datetime, claim_seconds: int
    ) -> ClaimedMessage | ClaimRefused:
        response = self._table.write(
            "update_item",
            Key=message_key(message_id),
            UpdateExpression=(
                "SET #status = :sending, attempts = attempts + :one, attemptStartedAt = :now, "
                "firstAttemptAt = if_not_exists(firstAttemptAt, :now), "
                "updatedAt = :now, outboxShard = :shard, outboxDueAt = :deadline, "
                "workspaceStatus = :ws_sending REMOVE #error"
            ),
            ConditionExpression=(
                "workspaceId = :ws AND #status IN (:queued, :accepted, :scheduled) AND "
                "(attribute_not_exists(sendAt) OR sendAt <= :now)"
            ),
            ExpressionAttributeNames={"#status": "status", "#error": "error"},
            ExpressionAttributeValues={
                ":sending": {"S": Status.SENDING.value},
                ":one": {"N": "1"},
                ":now": {"S": rfc3339(now)},
                ":shard": {"S": outbox_shard(message_id)},
                ":deadline": {"S": rfc3339(now + timedelta(seconds=claim_seconds))},
                ":queued": {"S": Status.QUEUED.value},
                ":accepted": {"S": Status.ACCEPTED.value},
                ":scheduled": {"S": Status.SCHEDULED.value},
                ":ws_sending": {"S": workspace_status(workspace_id, Status.SENDING, message_id)},
                ":ws": {"S": workspace_id},
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if not isinstance(response, ConditionFailed):
            return claimed_from_item(response["Attributes"])
        item = response.item or self._table.get(message_key(message_id))
        current = from_item(item) if item and item["workspaceId"]["S"] == workspace_id else None
        not_due = None
        if current and current.status in WAITING_STATUSES and current.send_at and current.send_at > now:
            not_due = current.send_at
        return ClaimRefused(current=current, not_due_until=not_due)

    def finish_attempt(
        self,
        message: Message,
        status: Status,
        now: datetime,
        *,
        error: MessageFailure | None = None,
        provider_message_id: str | None = None,
        handoff_due_at: datetime | None = None,
        throttled: bool = False,
    ) -> bool:
        values: dict[str, Any] = {
            ":status": {"S": status.value},
            ":ws_status": {"S": workspace_status(message.workspace_id, status, message.id)},
            ":now": {"S": rfc3339(now)},
            ":sending": {"S": Status.SENDING.value},
            ":attempts": {"N": str(message.attempts)},
        }
        sets = ["#status = :status", "workspaceStatus = :ws_status", "updatedAt = :now"]
        removes = []
        if error is not None:
            sets.append("#error = :error")
            values[":error"] = {"M": {"code": {"S": error.code}, "message": {"S": error.message}}}
        else:
            removes.append("#error")
        if provider_message_id is not None:
            sets.append("providerMessageId = :provider_id")
            values[":provider_id"] = {"S": provider_message_id}
        if handoff_due_at is not None:
            sets.append("outboxDueAt = :due")
            values[":due"] = {"S": rfc3339(handoff_due_at)}
        else:
            removes.extend(["outboxShard", "outboxDueAt"])
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        if throttled:
            expression += " ADD throttledAttempts :one"
            values[":one"] = {"N": "1"}
        response = self._table.write(
            "update_item",
            Key=message_key(message.id),
            UpdateExpression=expression,
            # Only the claim that started this attempt may end it.
            ConditionExpression="#status = :sending AND attempts = :attempts",
            ExpressionAttributeNames={"#status": "status", "#error": "error"},
            ExpressionAttributeValues=values,
        )
        return not isinstance(response, ConditionFailed)

    def settle_unknown(self, message_id: str, status: Status, now: datetime) -> Message | SettleRefused:
        item = self._table.get(message_key(message_id))  # its workspace names its status index entry
        if item is None:
            return SettleRefused(current=None)
        values: dict[str, Any] = {
            ":status": {"S": status.value},
            ":ws_status": {"S": workspace_status(item["workspaceId"]["S"], status, message_id)},
            ":now": {"S": rfc3339(now)},
            ":unknown": {"S": Status.UNKNOWN.value},
        }
        expression = "SET #status = :status, workspaceStatus = :ws_status, updatedAt = :now"
        if status is Status.FAILED:
            # The attempt's own cause stays: the operator learned the outcome, not another cause.
            expression += ", #error = if_not_exists(#error, :error)"
            values[":error"] = {
                "M": {"code": {"S": SETTLED_FAILED.code}, "message": {"S": SETTLED_FAILED.message}}
            }
        else:
            expression += " REMOVE #error"
        response = self._table.write(
            "update_item",
            Key=message_key(message_id),
            UpdateExpression=expression,
            # Only while it is `unknown`: a provider event or another operator may have settled it.
            ConditionExpression="#status = :unknown",
            ExpressionAttributeNames={"#status": "status", "#error": "error"},
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if isinstance(response, ConditionFailed):
            current = response.item or self._table.get(message_key(message_id))
            return SettleRefused(current=from_item(current) if current else None)
        return from_item(response["Attributes"])

    def release_dedup_lock(self, message: Message) -> None:
        release_dedup_lock(self._table, message)
