"""Provider events on DynamoDB: each event recorded in the same transaction as its effect."""

from __future__ import annotations

import random
import time
from datetime import datetime
from typing import Any

from sendonce.adapters.dynamodb_items import (
    PROVIDER_EVENT_RETENTION,
    epoch_seconds,
    event_key,
    from_item,
    message_key,
    workspace_status,
)
from sendonce.adapters.dynamodb_messages import (
    CONDITION_FAILED,
    MAX_CONFLICT_RETRIES,
    DynamoDbMessageStore,
    error_code,
)
from sendonce.clock import rfc3339
from sendonce.errors import DependencyUnavailable
from sendonce.messages.ids import looks_like_message_id
from sendonce.provider_events.applier import ApplyResult, EventOutcome
from sendonce.provider_events.model import APPLIES_FROM, RESULTING_STATUS, ProviderEvent


class DynamoDbProviderEventStore(DynamoDbMessageStore):
    """The message store, and what provider events do to its messages."""

    def apply_provider_event(self, event: ProviderEvent, now: datetime) -> ApplyResult:
        event_item = {
            **event_key(event.provider, event.event_id),
            "messageId": {"S": event.message_id},
            "type": {"S": event.type.value},
            "recordedAt": {"S": rfc3339(now)},
            "expiresAt": epoch_seconds(now + PROVIDER_EVENT_RETENTION),
        }
        record_event = {
            "TableName": self._table,
            "Item": event_item,
            "ConditionExpression": "attribute_not_exists(pk) OR expiresAt <= :now",
            "ExpressionAttributeValues": {":now": epoch_seconds(now)},
        }
        for _ in range(MAX_CONFLICT_RETRIES):
            item = (
                self._get_item(message_key(event.message_id))
                if looks_like_message_id(event.message_id)
                else None
            )
            current = from_item(item) if item else None
            if current is None or current.status not in APPLIES_FROM[event.type]:
                # Nothing to change; still recorded, so that a repeat is known as one.
                try:
                    self._client.put_item(**record_event)
                except Exception as error:
                    if error_code(error) == "ConditionalCheckFailedException":
                        return EventOutcome.REPEATED, current
                    raise DependencyUnavailable(str(error)) from error
                return EventOutcome.IGNORED, current
            status = RESULTING_STATUS[event.type]
            values: dict[str, Any] = {
                ":status": {"S": status.value},
                ":ws_status": {"S": workspace_status(current.workspace_id, status)},
                ":now": {"S": rfc3339(now)},
                ":seen": {"S": current.status.value},
            }
            expression = "SET #status = :status, workspaceStatus = :ws_status, updatedAt = :now"
            if event.error is not None:
                expression += ", #error = :error"
                values[":error"] = {
                    "M": {"code": {"S": event.error.code}, "message": {"S": event.error.message}}
                }
            expression += " REMOVE outboxShard, outboxDueAt"
            try:
                self._client.transact_write_items(
                    TransactItems=[
                        {"Put": record_event},
                        {
                            "Update": {
                                "TableName": self._table,
                                "Key": message_key(current.id),
                                "UpdateExpression": expression,
                                # Only from the status it was read in: never backwards, never twice.
                                "ConditionExpression": "#status = :seen",
                                "ExpressionAttributeNames": {"#status": "status", "#error": "error"}
                                if event.error is not None
                                else {"#status": "status"},
                                "ExpressionAttributeValues": values,
                            }
                        },
                    ]
                )
            except Exception as error:
                if error_code(error) != "TransactionCanceledException":
                    raise DependencyUnavailable(str(error)) from error
                codes = [
                    reason.get("Code")
                    for reason in getattr(error, "response", {}).get("CancellationReasons", [])
                ]
                if codes and codes[0] == CONDITION_FAILED:
                    return EventOutcome.REPEATED, current
                time.sleep(random.uniform(0.005, 0.02))
                continue
            return EventOutcome.APPLIED, current
        raise DependencyUnavailable("the message kept changing while an event was applied")
