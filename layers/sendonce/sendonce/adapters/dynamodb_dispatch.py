"""The delivery context's store on DynamoDB: claim before send, finish the claimed attempt, settle an
`unknown` message.

Every write is conditional on what the writer saw: a claim only from a waiting, due status; the end
of an attempt, or its hand-over to the next provider, only by the claim that started it; a
settlement only of a message still `unknown`.
So two dispatchers never both act on a message, and an operator never overrides a known outcome.

A claim is one transaction: the message's update, and its recipients' suppression checks
(`SuppressionGuard`; an email to more recipients than its checks fit reads their entries first).
A recipient found suppressed is dropped: the claim is made again at once without them, and writes
the message's recipients less them, each named in `suppressedRecipients`; with nobody left, the
claim is refused (ClaimSuppressed) and the dispatcher ends the message `failed`. A transaction
returns no item, so the claim is conditioned on the message
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
    provider_attempts_value,
    recipient_attributes,
    workspace_status,
)
from sendonce.adapters.dynamodb_suppressions import SuppressionGuard
from sendonce.adapters.dynamodb_writes import ConditionFailed, DynamoDbTable, Item, TryAgain, with_retries
from sendonce.clock import rfc3339
from sendonce.dispatch.ports import ClaimedMessage, ClaimRefused, ClaimSuppressed, SettleRefused
from sendonce.errors import DependencyUnavailable
from sendonce.keyed_hash import KeyedHash
from sendonce.messages.model import WAITING_STATUSES, Message, MessageFailure, ProviderAttempt, Status
from sendonce.suppressions.model import Suppression, recipient_key

# DynamoDB's most items in one transaction: the claim's update, and its recipients' checks.
MAX_TRANSACTION_ITEMS = 100

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

    def claimed(self, now: datetime, sending: Message | None = None) -> ClaimedMessage:
        """The message as the claim's update leaves it (`sending`: less its suppressed recipients)."""
        message = replace(
            (sending or self.message).with_status(Status.SENDING, now),
            attempts=self.message.attempts + 1,
            error=None,
        )
        return ClaimedMessage.of(message, self.first_attempt_at or now, self.throttled_attempts)


def _without(message: Message, refused: dict[str, Suppression]) -> Message | None:
    return message.without(refused.keys()) if refused else message


def _suppressed(message: Message, refused: dict[str, Suppression]) -> ClaimSuppressed:
    """Every recipient suppressed: the first one's reason, in the message's order."""
    first = next(key for key in map(recipient_key, message.recipients) if key in refused)
    return ClaimSuppressed(refused[first].reason.value)


def _not_claimable(message: Message | None, now: datetime) -> ClaimRefused | None:
    """Why this message cannot be claimed now, as the claim's condition would find; None: it can."""
    if message is None or message.status not in WAITING_STATUSES:
        return ClaimRefused(current=message)
    if message.send_at is not None and message.send_at > now:
        return ClaimRefused(current=message, not_due_until=message.send_at)
    return None


class DynamoDbDispatchStore:
    def __init__(self, client: Any, table_name: str, keyed_hash: KeyedHash) -> None:
        """`keyed_hash`: the deployment's, which the suppression list's keys are made with."""
        self._table = DynamoDbTable(client, table_name)
        self.keyed_hash = keyed_hash

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
        refused: dict[str, Suppression] = {}  # recipients met suppressed by this claim, by key

        def as_found(item: Item | None) -> _Seen | ClaimRefused:
            """The item as a claim may take it, or why it may not."""
            if item is None or item["workspaceId"]["S"] != workspace_id:
                return ClaimRefused(current=None)
            fresh = _Seen.of_item(item)
            return _not_claimable(fresh.message, now) or fresh

        def attempt() -> ClaimedMessage | ClaimRefused | ClaimSuppressed:
            nonlocal held, guard
            while True:
                if held is None:
                    found = as_found(self._table.get(message_key(message_id)))
                    if isinstance(found, ClaimRefused):
                        return found
                    held = found
                guard = guard or SuppressionGuard(
                    self._table, workspace_id, (), room=MAX_TRANSACTION_ITEMS - 1, keyed=self.keyed_hash
                )
                sending = _without(held.message, refused)
                if sending is None:
                    return _suppressed(held.message, refused)
                guard.keys = tuple(recipient_key(address) for address in sending.recipients)
                if not guard.fits and not guard.was_read:  # an email to many: read them first
                    refused.update(guard.read_first())
                    continue
                update = self._claim_update(held.message, now, claim_seconds, sending=sending)
                # A token of this attempt's own: the SDK's retry of a lost answer is then no second
                # claim, while another dispatcher's claim of the same copy is never taken for this one.
                canceled = self._table.transact([update, *guard.items()], token=uuid.uuid4().hex)
                if canceled is None:
                    return held.claimed(now, sending)
                if canceled.failed(0):
                    found = as_found(canceled.item(0) or self._table.get(message_key(message_id)))
                    if isinstance(found, ClaimRefused):
                        return found
                    held = found  # changed since it was held: claimed as it is now
                    raise TryAgain
                met = guard.refusals(canceled, 1)
                if met:
                    refused.update(met)  # dropped, the rest claimed again at once; none left: ended
                    continue
                if canceled.contended:
                    raise TryAgain
                raise DependencyUnavailable(f"the claim transaction was canceled: {canceled.codes}")

        return with_retries(attempt, "the claim stayed contended")

    @staticmethod
    def _claim_update(
        seen: Message, now: datetime, claim_seconds: int, *, sending: Message
    ) -> dict[str, Any]:
        """The claim's update, conditioned on the message as `seen`: what is sent is what it holds,
        less the recipients found suppressed (`sending`), which it writes as the message's."""
        expression, names = _CLAIM_UPDATE, {"#status": "status", "#error": "error"}
        values = {
            **_claim_values(seen.workspace_id, seen.id, now, claim_seconds),
            ":seen": {"S": rfc3339(seen.updated_at)},
            ":attempts": {"N": str(seen.attempts)},
        }
        if sending.recipients != seen.recipients:
            sets = []
            for index, (name, value) in enumerate(recipient_attributes(sending).items()):
                names[f"#r{index}"], values[f":r{index}"] = name, value
                sets.append(f"#r{index} = :r{index}")
            expression = expression.replace(" REMOVE ", ", " + ", ".join(sets) + " REMOVE ", 1)
        return {
            "Update": {
                "Key": message_key(seen.id),
                "UpdateExpression": expression,
                "ConditionExpression": f"{_CLAIM_CONDITION} AND updatedAt = :seen AND attempts = :attempts",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
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
        provider: str | None = None,
        provider_attempts: tuple[ProviderAttempt, ...] | None = None,
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
        if provider is not None:
            sets.append("provider = :provider")
            values[":provider"] = {"S": provider}
        if provider_attempts is not None:
            sets.append("providerAttempts = :provider_attempts")
            values[":provider_attempts"] = provider_attempts_value(provider_attempts)
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

    def next_attempt(
        self,
        message: ClaimedMessage,
        now: datetime,
        claim_seconds: int,
        provider_attempts: tuple[ProviderAttempt, ...],
    ) -> ClaimedMessage | None:
        response = self._table.write(
            "update_item",
            Key=message_key(message.id),
            UpdateExpression=(
                "SET attempts = attempts + :one, attemptStartedAt = :now, firstAttemptAt = :now, "
                "updatedAt = :now, outboxDueAt = :deadline, providerAttempts = :provider_attempts "
                "REMOVE throttledAttempts"
            ),
            # Only the claim that made `message` may go on: a reclaimed one belongs to another.
            ConditionExpression="#status = :sending AND attempts = :attempts",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":now": {"S": rfc3339(now)},
                ":deadline": {"S": rfc3339(now + timedelta(seconds=claim_seconds))},
                ":provider_attempts": provider_attempts_value(provider_attempts),
                ":sending": {"S": Status.SENDING.value},
                ":attempts": {"N": str(message.attempts)},
            },
        )
        if isinstance(response, ConditionFailed):
            return None
        moved = replace(
            message, attempts=message.attempts + 1, updated_at=now, provider_attempts=provider_attempts
        )
        return ClaimedMessage.of(moved, first_attempt_at=now, throttled_attempts=0)

    def record_taken(
        self, message: ClaimedMessage, provider: str, provider_attempts: tuple[ProviderAttempt, ...]
    ) -> bool:
        recorded = len(message.provider_attempts)
        response = self._table.write(
            "update_item",
            Key=message_key(message.id),
            UpdateExpression=(
                "SET providerAttempts = :provider_attempts, provider = if_not_exists(provider, :provider)"
            ),
            ConditionExpression=(
                "attempts = :attempts AND #status IN (:sent, :delivered, :failed) AND "
                + (
                    "size(providerAttempts) = :recorded"
                    if recorded
                    else "attribute_not_exists(providerAttempts)"
                )
            ),
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":provider_attempts": provider_attempts_value(provider_attempts),
                ":provider": {"S": provider},
                ":attempts": {"N": str(message.attempts)},
                ":sent": {"S": Status.SENT.value},
                ":delivered": {"S": Status.DELIVERED.value},
                ":failed": {"S": Status.FAILED.value},
                **({":recorded": {"N": str(recorded)}} if recorded else {}),
            },
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
