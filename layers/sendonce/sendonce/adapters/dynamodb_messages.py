"""The message store on DynamoDB.

A new message, its dedup lock and its Idempotency-Key tie are written in one transaction, so a
duplicate always finds the original, and a crash never leaves a lock without its message.
"""

from __future__ import annotations

import builtins
import random
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sendonce.adapters.dynamodb_items import (
    OUTBOX_SHARDS,
    Item,
    epoch_seconds,
    from_item,
    lock_key,
    message_key,
    outbox_shard,
    tie_key,
    to_item,
    workspace_status,
)
from sendonce.clock import rfc3339
from sendonce.errors import DependencyUnavailable, InvalidCursor, MessageNotCancelable, MessageNotFound
from sendonce.messages.ids import looks_like_message_id
from sendonce.messages.model import WAITING_STATUSES, Channel, Message, MessageError, Status
from sendonce.observability import logger
from sendonce.ports import (
    ClaimRefused,
    Created,
    CreateOutcome,
    DedupClaim,
    DuplicateOf,
    KeyTie,
    OutboxEntry,
    Page,
    TiedToKey,
)

CONDITION_FAILED = "ConditionalCheckFailed"
CONFLICT = "TransactionConflict"
# Two transactions on one lock at once: one wins, the other is canceled with a conflict and
# retried here, then meets the winner's lock as a failed condition.
MAX_CONFLICT_RETRIES = 8


def error_code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    code: str = response.get("Error", {}).get("Code", "")
    return code


class DynamoDbMessageStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    # ------------------------------------------------------------------ writes of the API
    def create(
        self, message: Message, claim: DedupClaim, tie: KeyTie | None, handoff_due_at: datetime, now: datetime
    ) -> CreateOutcome:
        message = replace(message, dedup_lock_id=claim.lock_id)
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(message, handoff_due_at),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": {
                        **lock_key(claim.lock_id),
                        "messageId": {"S": message.id},
                        "workspaceId": {"S": message.workspace_id},
                        "lockedAt": {"S": rfc3339(now)},
                        "expiresAt": epoch_seconds(claim.expires_at),
                    },
                    # An expired lock the TTL sweep has not deleted yet never blocks.
                    "ConditionExpression": "attribute_not_exists(pk) OR expiresAt <= :now",
                    "ExpressionAttributeValues": {":now": epoch_seconds(now)},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ]
        if tie is not None:
            items.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": {
                            **tie_key(tie.tie_id),
                            "messageId": {"S": message.id},
                            "workspaceId": {"S": message.workspace_id},
                            "payloadFingerprint": {"S": tie.payload_fingerprint},
                            "createdAt": {"S": rfc3339(now)},
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            )
        for attempt in range(MAX_CONFLICT_RETRIES):
            try:
                # The token makes the SDK's own retry of a committed transaction a no-op success.
                self._client.transact_write_items(TransactItems=items, ClientRequestToken=message.id)
                return Created(message)
            except Exception as error:
                if error_code(error) != "TransactionCanceledException":
                    raise DependencyUnavailable(str(error)) from error
                reasons = getattr(error, "response", {}).get("CancellationReasons", [])
                outcome = self._explain_cancellation(message, tie, reasons)
                if outcome is not None:
                    return outcome
                if not any(reason.get("Code") == CONFLICT for reason in reasons):
                    raise DependencyUnavailable(str(error)) from error
                time.sleep(random.uniform(0.005, 0.02) * (attempt + 1))
        raise DependencyUnavailable("the dedup lock stayed contended")

    def _explain_cancellation(
        self, message: Message, tie: KeyTie | None, reasons: list[dict[str, Any]]
    ) -> CreateOutcome | None:
        codes = [reason.get("Code") for reason in reasons]
        if tie is not None and len(codes) > 2 and codes[2] == CONDITION_FAILED:
            tie_item = reasons[2].get("Item") or self._get_item(tie_key(tie.tie_id))
            if tie_item is None:
                return None  # the tie vanished meanwhile: try again
            original = self.get(message.workspace_id, tie_item["messageId"]["S"])
            return TiedToKey(original=original, payload_fingerprint=tie_item["payloadFingerprint"]["S"])
        if len(codes) > 1 and codes[1] == CONDITION_FAILED:
            lock_item = reasons[1].get("Item") or self._get_item(lock_key(message.dedup_lock_id or ""))
            if lock_item is None:
                return None  # released meanwhile: try again
            original = self.get(message.workspace_id, lock_item["messageId"]["S"])
            locked_at = datetime.fromisoformat(lock_item["lockedAt"]["S"].replace("Z", "+00:00"))
            return DuplicateOf(original=original, locked_at=locked_at)
        return None

    def mark_handoff_failed(self, message: Message, now: datetime) -> None:
        """Queued -> accepted, and due in the outbox at once: the hand-off is still owed."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=message_key(message.id),
                UpdateExpression=(
                    "SET #status = :accepted, workspaceStatus = :ws_status, "
                    "updatedAt = :now, outboxDueAt = :now"
                ),
                ConditionExpression="#status = :queued",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":accepted": {"S": Status.ACCEPTED.value},
                    ":ws_status": {"S": workspace_status(message.workspace_id, Status.ACCEPTED)},
                    ":now": {"S": rfc3339(now)},
                    ":queued": {"S": Status.QUEUED.value},
                },
            )
        except Exception as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise DependencyUnavailable(str(error)) from error

    def cancel(self, workspace_id: str, message_id: str, now: datetime) -> Message:
        if not looks_like_message_id(message_id):
            raise MessageNotFound(message_id)
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=message_key(message_id),
                UpdateExpression=(
                    "SET #status = :canceled, workspaceStatus = :ws_status, updatedAt = :now "
                    "REMOVE outboxShard, outboxDueAt"
                ),
                ConditionExpression=(
                    "workspaceId = :ws AND #status IN (:accepted, :scheduled, :queued) AND attempts = :zero"
                ),
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":canceled": {"S": Status.CANCELED.value},
                    ":ws_status": {"S": workspace_status(workspace_id, Status.CANCELED)},
                    ":now": {"S": rfc3339(now)},
                    ":ws": {"S": workspace_id},
                    ":accepted": {"S": Status.ACCEPTED.value},
                    ":scheduled": {"S": Status.SCHEDULED.value},
                    ":queued": {"S": Status.QUEUED.value},
                    ":zero": {"N": "0"},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise DependencyUnavailable(str(error)) from error
            current = getattr(error, "response", {}).get("Item") or self._get_item(message_key(message_id))
            if current is None or current["workspaceId"]["S"] != workspace_id:
                raise MessageNotFound(message_id) from error
            raise MessageNotCancelable(current["status"]["S"]) from error
        return from_item(response["Attributes"])

    # ------------------------------------------------------------------ reads
    def _get_item(self, key: Item) -> Item | None:
        try:
            item: Item | None = self._client.get_item(
                TableName=self._table, Key=key, ConsistentRead=True
            ).get("Item")
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
        return item

    def get(self, workspace_id: str, message_id: str) -> Message | None:
        if not looks_like_message_id(message_id):
            return None
        item = self._get_item(message_key(message_id))
        if item is None or item["workspaceId"]["S"] != workspace_id:
            return None  # another workspace's message does not exist for this one
        return from_item(item)

    def list(self, workspace_id: str, status: Status | None, limit: int, cursor: str | None) -> Page:
        if status is None:
            index, partition_name, partition = "ByWorkspace", "workspaceId", workspace_id
        else:
            index, partition_name, partition = (
                "ByWorkspaceStatus",
                "workspaceStatus",
                workspace_status(workspace_id, status),
            )
        query: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": index,
            "KeyConditionExpression": "#p = :p",
            "ExpressionAttributeNames": {"#p": partition_name},
            "ExpressionAttributeValues": {":p": {"S": partition}},
            "ScanIndexForward": False,
            "Limit": limit + 1,  # one more tells whether another page exists
        }
        if cursor is not None:
            after = _decode_cursor(cursor)
            query["ExclusiveStartKey"] = {
                **message_key(after),
                partition_name: {"S": partition},
                "id": {"S": after},
            }
        try:
            items = self._client.query(**query).get("Items", [])
        except Exception as error:
            raise DependencyUnavailable(str(error)) from error
        messages = [from_item(item) for item in items[:limit]]
        next_cursor = _encode_cursor(messages[-1].id) if len(items) > limit and messages else None
        return Page(messages=messages, next_cursor=next_cursor)

    # ------------------------------------------------------------------ writes of the dispatchers
    def claim(
        self, workspace_id: str, message_id: str, now: datetime, claim_seconds: int
    ) -> Message | ClaimRefused:
        deadline = datetime.fromtimestamp(now.timestamp() + claim_seconds, tz=now.tzinfo)
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=message_key(message_id),
                UpdateExpression=(
                    "SET #status = :sending, attempts = attempts + :one, attemptStartedAt = :now, "
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
                    ":deadline": {"S": rfc3339(deadline)},
                    ":queued": {"S": Status.QUEUED.value},
                    ":accepted": {"S": Status.ACCEPTED.value},
                    ":scheduled": {"S": Status.SCHEDULED.value},
                    ":ws_sending": {"S": workspace_status(workspace_id, Status.SENDING)},
                    ":ws": {"S": workspace_id},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise DependencyUnavailable(str(error)) from error
            item = getattr(error, "response", {}).get("Item") or self._get_item(message_key(message_id))
            current = from_item(item) if item else None
            not_due = None
            if current and current.status in WAITING_STATUSES and current.send_at and current.send_at > now:
                not_due = current.send_at
            return ClaimRefused(current=current, not_due_until=not_due)
        return from_item(response["Attributes"])

    def finish_attempt(
        self,
        message: Message,
        status: Status,
        now: datetime,
        *,
        error: MessageError | None = None,
        provider_message_id: str | None = None,
        handoff_due_at: datetime | None = None,
    ) -> bool:
        names = {"#status": "status", "#error": "error"}
        values: dict[str, Any] = {
            ":status": {"S": status.value},
            ":ws_status": {"S": workspace_status(message.workspace_id, status)},
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
        try:
            self._client.update_item(
                TableName=self._table,
                Key=message_key(message.id),
                UpdateExpression=expression,
                ConditionExpression="#status = :sending AND attempts = :attempts",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as error_:
            if error_code(error_) == "ConditionalCheckFailedException":
                return False
            raise DependencyUnavailable(str(error_)) from error_
        return True

    def release_dedup_lock(self, message: Message) -> None:
        """Best effort: a lock that cannot be released now still expires with its window."""
        if message.dedup_lock_id is None:
            return
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=lock_key(message.dedup_lock_id),
                # Only the lock this message owns: a later message may hold the identity now.
                ConditionExpression="messageId = :id",
                ExpressionAttributeValues={":id": {"S": message.id}},
            )
        except Exception as error:
            if error_code(error) != "ConditionalCheckFailedException":
                logger.warning(
                    "message.dedup.lock_release_failed",
                    extra={"event": "message.dedup.lock_release_failed", "message_id": message.id},
                )
            return
        logger.info(
            "message.dedup.lock_released",
            extra={"event": "message.dedup.lock_released", "message_id": message.id},
        )

    # ------------------------------------------------------------------ the outbox
    def outbox_due(self, now: datetime, limit: int) -> Sequence[OutboxEntry]:
        entries: builtins.list[OutboxEntry] = []
        for shard in range(OUTBOX_SHARDS):
            try:
                items = self._client.query(
                    TableName=self._table,
                    IndexName="Outbox",
                    KeyConditionExpression="outboxShard = :shard AND outboxDueAt <= :now",
                    ExpressionAttributeValues={":shard": {"S": str(shard)}, ":now": {"S": rfc3339(now)}},
                    Limit=limit,
                ).get("Items", [])
            except Exception as error:
                raise DependencyUnavailable(str(error)) from error
            entries.extend(
                OutboxEntry(
                    id=item["pk"]["S"].removeprefix("MSG#"),
                    workspace_id=item["workspaceId"]["S"],
                    channel=Channel(item["channel"]["S"]),
                    status=Status(item["status"]["S"]),
                    due_at=datetime.fromisoformat(item["outboxDueAt"]["S"].replace("Z", "+00:00")),
                    send_at=(
                        datetime.fromisoformat(item["sendAt"]["S"].replace("Z", "+00:00"))
                        if "sendAt" in item
                        else None
                    ),
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
        try:
            self._client.update_item(
                TableName=self._table,
                Key=message_key(entry.id),
                UpdateExpression=expression,
                # Nobody moved it since it was read: not a dispatcher's claim, nor a cancel.
                ConditionExpression="#status = :seen_status AND outboxDueAt = :seen_due",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=values,
            )
        except Exception as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise DependencyUnavailable(str(error)) from error
        return True


def _encode_cursor(message_id: str) -> str:
    return message_id  # the last id of the page: listing resumes after it, whatever became of it


def _decode_cursor(cursor: str) -> str:
    if not looks_like_message_id(cursor):
        raise InvalidCursor(cursor)
    return cursor
