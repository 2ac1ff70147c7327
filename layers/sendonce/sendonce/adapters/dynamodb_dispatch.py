"""The delivery context's store on DynamoDB: claim before send, finish the claimed attempt, settle an
`unknown` message.

Every write is conditional on what the writer saw: a claim only from a waiting, due status; the end
of an attempt only by the claim that started it; a settlement only of a message still `unknown`.
So two dispatchers never both act on a message, and an operator never overrides a known outcome.

A claim is one transaction: the message's update, and the recipient's suppression checks
(`SuppressionGuard`). A transaction returns no item, so the claim is conditioned on the message
being as the dispatcher holds it (its `updatedAt`, which every edit moves on, and its attempts):
the copy its queue record carried, or, when that is stale or missing, the item as read (a refused
condition returns it, so a stale copy costs no read).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from sendonce.adapters.dynamodb_dedup_locks import release_dedup_lock
from sendonce.adapters.dynamodb_items import (
    from_item,
    message_key,
    outbox_shard,
    parse_datetime,
    workspace_status,
)
from sendonce.adapters.dynamodb_suppressions import SuppressionGuard
from sendonce.adapters.dynamodb_writes import ConditionFailed, DynamoDbTable, Item, TryAgain, with_retries
from sendonce.clock import rfc3339
from sendonce.dispatch.ports import ClaimedMessage, ClaimRefused, ClaimSuppressed, SettleRefused
from sendonce.errors import DependencyUnavailable
from sendonce.messages.model import WAITING_STATUSES, Message, MessageFailure, Status
from sendonce.suppressions.model import recipient_key

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


# The claim's update: to `sending`, the attempt counted, and the outbox's deadline for a dead claim.
_CLAIM_UPDATE = (
    "SET #status = :sending, attempts = attempts + :one, attemptStartedAt = :now, "
    "firstAttemptAt = if_not_exists(firstAttemptAt, :now), "
    "updatedAt = :now, outboxShard = :shard, outboxDueAt = :deadline, "
    "workspaceStatus = :ws_sending REMOVE #error"
)
_CLAIM_CONDITION = (
    "workspaceId = :ws AND #status IN (:queued, :accepted, :scheduled) AND "
    "(attribute_not_exists(sendAt) OR sendAt <= :now)"
)


def _claim_values(workspace_id: str, message_id: str, now: datetime, claim_seconds: int) -> dict[str, Any]:
    return {
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
    }


class _Seen(Struct, frozen=True):
    """The message a claim is conditioned on, with what its earlier attempts left on the item."""

    message: Message
    first_attempt_at: datetime | None = None
    throttled_attempts: int = 0

    @classmethod
    def of_item(cls, item: Item) -> _Seen:
        first = item.get("firstAttemptAt")
        return cls(
            from_item(item),
            parse_datetime(first["S"]) if first else None,
            int(item.get("throttledAttempts", {}).get("N", "0")),
        )

    def claimed(self, now: datetime) -> ClaimedMessage:
        """The message as the claim's update leaves it."""
        message = replace(
            self.message.with_status(Status.SENDING, now), attempts=self.message.attempts + 1, error=None
        )
        return ClaimedMessage.of(message, self.first_attempt_at or now, self.throttled_attempts)


def _not_claimable(message: Message | None, now: datetime) -> ClaimRefused | None:
    """Why this message cannot be claimed now, as the claim's condition would find; None: it can."""
    if message is None or message.status not in WAITING_STATUSES:
        return ClaimRefused(current=message)
    if message.send_at is not None and message.send_at > now:
        return ClaimRefused(current=message, not_due_until=message.send_at)
    return None


class DynamoDbDispatchStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._table = DynamoDbTable(client, table_name)

    def claim(
        self,
        workspace_id: str,
        message_id: str,
        now: datetime,
        claim_seconds: int,
        *,
        seen: Message | None = None,
        unless_suppressed: bool = True,
    ) -> ClaimedMessage | ClaimRefused | ClaimSuppressed:
        if not unless_suppressed:
            return self._claim_regardless(workspace_id, message_id, now, claim_seconds)
        # A record's copy is of a message never attempted (a creation's, an edit's): what earlier
        # attempts left on the item is not in it, so a later copy is not relied on.
        held = None
        if (
            seen is not None
            and seen.attempts == 0
            and (seen.id, seen.workspace_id) == (message_id, workspace_id)
        ):
            held = _Seen(seen)
        guard: SuppressionGuard | None = None

        def as_found(item: Item | None) -> _Seen | ClaimRefused:
            """The item as a claim may take it, or why it may not."""
            if item is None or item["workspaceId"]["S"] != workspace_id:
                return ClaimRefused(current=None)
            fresh = _Seen.of_item(item)
            return _not_claimable(fresh.message, now) or fresh

        def attempt() -> ClaimedMessage | ClaimRefused | ClaimSuppressed:
            nonlocal held, guard
            if held is None:
                found = as_found(self._table.get(message_key(message_id)))
                if isinstance(found, ClaimRefused):
                    return found
                held = found
            guard = guard or SuppressionGuard(self._table, workspace_id, recipient_key(held.message.to))
            update = self._claim_update(held.message, now, claim_seconds)
            # A token of this attempt's own: the SDK's retry of a lost answer is then no second claim,
            # while another dispatcher's claim of the same copy is never taken for this one.
            canceled = self._table.transact([update, *guard.items()], token=uuid.uuid4().hex)
            if canceled is None:
                return held.claimed(now)
            if canceled.failed(0):
                found = as_found(canceled.item(0) or self._table.get(message_key(message_id)))
                if isinstance(found, ClaimRefused):
                    return found
                held = found  # changed since it was held: claimed as it is now
                raise TryAgain
            entry = guard.refusal(canceled, 1)
            if entry is not None:
                return ClaimSuppressed(entry.reason.value)
            if canceled.contended:
                raise TryAgain
            raise DependencyUnavailable(f"the claim transaction was canceled: {canceled.codes}")

        return with_retries(attempt, "the claim stayed contended")

    @staticmethod
    def _claim_update(seen: Message, now: datetime, claim_seconds: int) -> dict[str, Any]:
        """The claim's update, conditioned on the message as `seen`: what is sent is what it holds."""
        return {
            "Update": {
                "Key": message_key(seen.id),
                "UpdateExpression": _CLAIM_UPDATE,
                "ConditionExpression": f"{_CLAIM_CONDITION} AND updatedAt = :seen AND attempts = :attempts",
                "ExpressionAttributeNames": {"#status": "status", "#error": "error"},
                "ExpressionAttributeValues": {
                    **_claim_values(seen.workspace_id, seen.id, now, claim_seconds),
                    ":seen": {"S": rfc3339(seen.updated_at)},
                    ":attempts": {"N": str(seen.attempts)},
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _claim_regardless(
        self, workspace_id: str, message_id: str, now: datetime, claim_seconds: int
    ) -> ClaimedMessage | ClaimRefused:
        """The claim alone, whatever the suppression list says (to end a suppressed message)."""
        response = self._table.write(
            "update_item",
            Key=message_key(message_id),
            UpdateExpression=_CLAIM_UPDATE,
            ConditionExpression=_CLAIM_CONDITION,
            ExpressionAttributeNames={"#status": "status", "#error": "error"},
            ExpressionAttributeValues=_claim_values(workspace_id, message_id, now, claim_seconds),
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if not isinstance(response, ConditionFailed):
            return claimed_from_item(response["Attributes"])
        item = response.item or self._table.get(message_key(message_id))
        current = from_item(item) if item and item["workspaceId"]["S"] == workspace_id else None
        return _not_claimable(current, now) or ClaimRefused(current=current)

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
