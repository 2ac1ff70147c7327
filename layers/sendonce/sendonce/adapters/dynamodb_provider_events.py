"""The provider events context's store on DynamoDB: each event recorded in the same transaction as
its effects, so an event takes effect once, and a status moves only forward from what was read.

An event's effects are its message's status change and, for an opt-out, a permanent bounce or a
complaint, the recipient's suppression: in the named message's workspace, or (an opt-out naming no
message) in the entry every workspace is subject to (`dynamodb_suppressions`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sendonce.adapters.dynamodb_activity import provider_event_attributes
from sendonce.adapters.dynamodb_dedup_locks import release_dedup_lock
from sendonce.adapters.dynamodb_items import (
    PROVIDER_EVENT_RETENTION,
    epoch_seconds,
    event_key,
    from_item,
    message_key,
    workspace_status,
)
from sendonce.adapters.dynamodb_suppressions import entry_update
from sendonce.adapters.dynamodb_writes import ConditionFailed, DynamoDbTable, TryAgain, with_retries
from sendonce.clock import rfc3339
from sendonce.errors import DependencyUnavailable
from sendonce.keyed_hash import KeyedHash
from sendonce.messages.ids import looks_like_message_id
from sendonce.messages.model import Message
from sendonce.provider_events.model import APPLIES_FROM, RESULTING_STATUS, ProviderEvent
from sendonce.provider_events.ports import ApplyResult, EventOutcome
from sendonce.suppressions.model import Suppression, recipient_key

_EVENT = 0  # the event record's place in the transaction


class DynamoDbProviderEventStore:
    def __init__(self, client: Any, table_name: str, keyed_hash: KeyedHash) -> None:
        """`keyed_hash`: the deployment's, which the suppression list's keys are made with."""
        self._table = DynamoDbTable(client, table_name)
        self._keyed_hash = keyed_hash

    def release_dedup_lock(self, message: Message) -> None:
        release_dedup_lock(self._table, message)

    def apply_provider_event(self, event: ProviderEvent, now: datetime) -> ApplyResult:
        record_event: dict[str, Any] = {
            "Item": {
                **event_key(event.provider, event.event_id),
                **({"messageId": {"S": event.message_id}} if event.message_id else {}),
                "type": {"S": event.type.value},
                "recordedAt": {"S": rfc3339(now)},
                "expiresAt": epoch_seconds(now + PROVIDER_EVENT_RETENTION),
            },
            # A record past its retention that TTL has not deleted yet is no repeat.
            "ConditionExpression": "attribute_not_exists(pk) OR expiresAt <= :now",
            "ExpressionAttributeValues": {":now": epoch_seconds(now)},
        }

        def attempt() -> ApplyResult:
            item = (
                self._table.get(message_key(event.message_id))
                if event.message_id is not None and looks_like_message_id(event.message_id)
                else None
            )
            current = from_item(item) if item else None
            if current is not None and not event.concerns(current):
                current = None  # a live provider's word on a test message, or the other way round
            record = record_event
            if current is not None:  # on its message's timeline
                attributes = provider_event_attributes(current.id, event.provider, event.occurred_at)
                record = {**record_event, "Item": {**record_event["Item"], **attributes}}
            effects = []
            if current is not None and current.status in APPLIES_FROM[event.type]:
                effects.append({"Update": _status_change(event, current, now)})
            effects.extend(
                {"Update": entry_update(*suppression, self._keyed_hash)}
                for suppression in _suppressions(event, current, now)
            )
            if not effects:
                # Nothing to change; still recorded, so that a repeat is known as one.
                recorded = self._table.write("put_item", **record)
                return (
                    EventOutcome.REPEATED if isinstance(recorded, ConditionFailed) else EventOutcome.IGNORED
                ), current
            canceled = self._table.transact([{"Put": record}, *effects])
            if canceled is None:
                return EventOutcome.APPLIED, current
            if canceled.failed(_EVENT):
                return EventOutcome.REPEATED, current
            if not canceled.contended:
                raise DependencyUnavailable(f"the event transaction was canceled: {canceled.codes}")
            raise TryAgain  # the message moved meanwhile: read it again

        return with_retries(attempt, "the message kept changing while an event was applied")


def _suppressions(
    event: ProviderEvent, current: Message | None, now: datetime
) -> list[tuple[str | None, Suppression]]:
    """(workspace, entry) for each recipient the event suppresses (workspace None: every workspace).
    An event naming a message we do not know (gone past its retention) suppresses nothing: no
    workspace is known for it, and another workspace must not be silenced by it. An email's bounce
    suppresses the recipients it names (each once), none of the others."""
    reason = event.suppression_reason
    if reason is None:
        return []
    if event.message_id is None:
        if event.to is None:
            return []
        return [(None, Suppression(to=event.to, reason=reason, created_at=now))]
    if current is None:
        return []
    # Each as the message holds it (the provider may write it in another case), once.
    own = {recipient_key(address): address for address in current.requested_recipients}
    named = [own.get(recipient_key(to), to) for to in (event.to or current.to, *event.also)]
    entries = {
        recipient_key(to): Suppression(to=to, reason=reason, created_at=now, message_id=current.id)
        for to in named
    }
    return [(current.workspace_id, entry) for entry in entries.values()]


def _status_change(event: ProviderEvent, current: Message, now: datetime) -> dict[str, Any]:
    status = RESULTING_STATUS[event.type]
    names = {"#status": "status"}
    values: dict[str, Any] = {
        ":status": {"S": status.value},
        ":ws_status": {"S": workspace_status(current.workspace_id, status, current.id)},
        ":now": {"S": rfc3339(now)},
        ":seen": {"S": current.status.value},
    }
    expression = "SET #status = :status, workspaceStatus = :ws_status, updatedAt = :now"
    if event.error is not None:
        names["#error"] = "error"
        expression += ", #error = :error"
        values[":error"] = {"M": {"code": {"S": event.error.code}, "message": {"S": event.error.message}}}
    return {
        "Key": message_key(current.id),
        "UpdateExpression": expression + " REMOVE outboxShard, outboxDueAt",
        # Only from the status it was read in: never backwards, never twice.
        "ConditionExpression": "#status = :seen",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
