"""The sending context's store on DynamoDB: create, read, list and cancel messages.

A new message, its dedup lock and its Idempotency-Key tie are written in one transaction, so a
duplicate always finds the original, and a crash never leaves a lock without its message.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sendonce.adapters.dynamodb_dedup_locks import release_dedup_lock
from sendonce.adapters.dynamodb_items import (
    Item,
    epoch_seconds,
    from_item,
    lock_key,
    message_key,
    parse_datetime,
    tie_key,
    to_item,
    workspace_status,
)
from sendonce.adapters.dynamodb_writes import (
    Cancellation,
    ConditionFailed,
    DynamoDbTable,
    TryAgain,
    with_retries,
)
from sendonce.clock import rfc3339
from sendonce.errors import DependencyUnavailable, InvalidCursor, MessageNotCancelable, MessageNotFound
from sendonce.messages.ids import looks_like_message_id
from sendonce.messages.model import Message, Status
from sendonce.messages.ports import (
    Created,
    CreateOutcome,
    DedupClaim,
    DuplicateOf,
    KeyTie,
    Page,
    TiedToKey,
)

# The items of the create transaction, by position: what each cancellation reason speaks of.
_MESSAGE, _LOCK, _TIE = 0, 1, 2


class DynamoDbSendingStore:
    def __init__(self, client: Any, table_name: str, retention: timedelta | None = None) -> None:
        """`retention`: how long a message is kept after it was sent or due (None: for good)."""
        self._table = DynamoDbTable(client, table_name)
        self._retention = retention

    def _expires_at(self, message: Message) -> datetime | None:
        if self._retention is None:
            return None
        # Counted from its sendAt when later: a scheduled message is never removed before it is sent.
        return max(message.created_at, message.send_at or message.created_at) + self._retention

    def create(
        self, message: Message, claim: DedupClaim, tie: KeyTie | None, handoff_due_at: datetime, now: datetime
    ) -> CreateOutcome:
        message = replace(message, dedup_lock_id=claim.lock_id)
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "Item": to_item(message, handoff_due_at, self._expires_at(message)),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Put": {
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

        def attempt() -> CreateOutcome:
            canceled = self._table.transact(items, token=message.id)
            if canceled is None:
                return Created(message)
            outcome = self._explain(message, tie, canceled)
            if outcome is not None:
                return outcome
            if canceled.contended:
                raise TryAgain  # a lock or tie changed meanwhile
            raise DependencyUnavailable(f"the create transaction was canceled: {canceled.codes}")

        return with_retries(attempt, "the dedup lock stayed contended")

    def _explain(self, message: Message, tie: KeyTie | None, canceled: Cancellation) -> CreateOutcome | None:
        if tie is not None and canceled.failed(_TIE):
            tie_item = canceled.item(_TIE) or self._table.get(tie_key(tie.tie_id))
            if tie_item is None:
                return None
            original = self.get(message.workspace_id, tie_item["messageId"]["S"])
            return TiedToKey(original=original, payload_fingerprint=tie_item["payloadFingerprint"]["S"])
        if canceled.failed(_LOCK):
            lock_item = canceled.item(_LOCK) or self._table.get(lock_key(message.dedup_lock_id or ""))
            if lock_item is None:
                return None
            if lock_item["messageId"]["S"] == message.id:
                # Our own committed write, met again by a retry the engine did not recognise.
                return Created(message)
            original = self._count_duplicate(message.workspace_id, lock_item["messageId"]["S"])
            return DuplicateOf(original=original, locked_at=parse_datetime(lock_item["lockedAt"]["S"]))
        return None

    def mark_handoff_failed(self, message: Message, now: datetime) -> None:
        """Queued -> accepted, and due in the outbox at once: the hand-off is still owed."""
        self._table.write(
            "update_item",
            Key=message_key(message.id),
            UpdateExpression=(
                "SET #status = :accepted, workspaceStatus = :ws_status, updatedAt = :now, outboxDueAt = :now"
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

    def cancel(self, workspace_id: str, message_id: str, now: datetime) -> Message:
        if not looks_like_message_id(message_id):
            raise MessageNotFound(message_id)
        response = self._table.write(
            "update_item",
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
        if isinstance(response, ConditionFailed):
            current = response.item or self._table.get(message_key(message_id))
            if current is None or current["workspaceId"]["S"] != workspace_id:
                raise MessageNotFound(message_id)
            raise MessageNotCancelable(current["status"]["S"])
        return from_item(response["Attributes"])

    def _count_duplicate(self, workspace_id: str, message_id: str) -> Message | None:
        """The original a duplicate was caught against, read by the write that records the catch:
        the committed count is what tells the customer's endpoints (`message.duplicate_blocked`)."""
        answer = self._table.write(
            "update_item",
            Key=message_key(message_id),
            UpdateExpression="ADD duplicatesBlocked :one",
            ConditionExpression="workspaceId = :ws",  # also: never an item where there is none
            ExpressionAttributeValues={":one": {"N": "1"}, ":ws": {"S": workspace_id}},
            ReturnValues="ALL_NEW",
        )
        return None if isinstance(answer, ConditionFailed) else from_item(answer["Attributes"])

    def release_dedup_lock(self, message: Message) -> None:
        release_dedup_lock(self._table, message)

    def get(self, workspace_id: str, message_id: str) -> Message | None:
        if not looks_like_message_id(message_id):
            return None
        item = self._table.get(message_key(message_id))
        if item is None or item["workspaceId"]["S"] != workspace_id:
            return None  # another workspace's message does not exist for this one
        return from_item(item)

    def list(self, workspace_id: str, status: Status | None, limit: int, cursor: str | None) -> Page:
        if status is None:
            index, partition_name, partition = "ByWorkspace", "workspaceId", workspace_id
        else:
            index, partition_name = "ByWorkspaceStatus", "workspaceStatus"
            partition = workspace_status(workspace_id, status)
        query: dict[str, Any] = {
            "IndexName": index,
            "KeyConditionExpression": "#p = :p",
            "ExpressionAttributeNames": {"#p": partition_name},
            "ExpressionAttributeValues": {":p": {"S": partition}},
            "ScanIndexForward": False,
            "Limit": limit + 1,  # one more tells whether another page exists
        }
        if cursor is not None:
            # The cursor is the last id of the page before: listing resumes after it, whatever became of it.
            if not looks_like_message_id(cursor):
                raise InvalidCursor(cursor)
            query["ExclusiveStartKey"] = {
                **message_key(cursor),
                partition_name: {"S": partition},
                "id": {"S": cursor},
            }
        items: list[Item] = []
        while True:
            # DynamoDB ends a query at 1 MB whatever its Limit: read on until the page is full.
            answer = self._table.query(**query)
            items.extend(answer.get("Items", []))
            if len(items) > limit or "LastEvaluatedKey" not in answer:
                break
            query["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
            query["Limit"] = limit + 1 - len(items)
        messages = [from_item(item) for item in items[:limit]]
        next_cursor = messages[-1].id if len(items) > limit and messages else None
        return Page(messages=messages, next_cursor=next_cursor)
