"""MessageChangesFunction: each committed status change of a message, from the table's stream,
becomes exactly one event, and a delivery for each endpoint that wants it.

A batch's records of one message are told one after another, in stream order; different
messages go side by side (as Lambda's ParallelizationFactor would run them, keyed by item). A
record that fails stops its message's chain there, and the batch reports every record from the
earliest failure on, so Lambda brings them back from there, in order: a later change of a message
is never told before an earlier one, which would otherwise find itself told already. A record of
another message brought back with them was told already and writes nothing new (its deliveries
not yet attempted may be queued again: at least once, the same `webhook-id`).

A record that cannot be read as a message (never one sendonce wrote) would fail on every retry
and hold its message's later changes back until the stream drops it a day later: it is skipped,
logged and counted (`StreamRecordsUnreadable`, with an alarm) instead.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sendonce.adapters.dynamodb_message_stream import change_of
from sendonce.adapters.dynamodb_webhooks import DynamoDbWebhookStore
from sendonce.adapters.sqs_webhook_queue import SqsDeliveryQueue
from sendonce.api.campaign_view import campaign_shape
from sendonce.api.message_view import message_shape
from sendonce.aws_clients import Clients, client, client_on_first_use
from sendonce.composition import Root
from sendonce.entrypoints.shared.stream_records import sequence_number
from sendonce.observability import logger, metrics
from sendonce.settings import MessageChangesSettings
from sendonce.side_by_side import side_by_side
from sendonce.status_webhooks.events import EventRecorder

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

# Messages told side by side within a batch; botocore pools 10 connections a client.
STREAM_WORKERS = 8


def build(settings: MessageChangesSettings, clients: Clients) -> EventRecorder:
    store = DynamoDbWebhookStore(
        clients("dynamodb"), settings.webhooks_table, campaigns_table=settings.messages_table
    )
    # A change that no endpoint wants queues nothing: SQS is built by the first delivery queued.
    sqs = client_on_first_use("sqs", build=clients)
    return EventRecorder(
        events=store,
        endpoints=store,
        queue=SqsDeliveryQueue(sqs, settings.webhook_queue_url),
        show_message=message_shape,
        show_campaign=campaign_shape,
    )


root: Root[EventRecorder] = Root(lambda: build(MessageChangesSettings.from_environment(), client))


def _item(record: Any) -> str:
    keys = (record.get("dynamodb") or {}).get("Keys") if isinstance(record, dict) else None
    return json.dumps(keys, sort_keys=True)


def handle_stream_batch(recorder: EventRecorder, event: Any, workers: int = STREAM_WORKERS) -> dict[str, Any]:
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list) or not records:
        return {"batchItemFailures": []}
    recorder.new_batch()
    chains: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        chains.setdefault(_item(record), []).append(index)
    failed: list[int] = []
    told: list[int] = []
    unreadable: list[int] = []

    def tell(chain: list[int]) -> None:
        for index in chain:
            try:
                change = change_of(records[index])
            except (ValueError, KeyError, TypeError, AttributeError):
                logger.error(
                    "webhook.stream.unreadable_record",
                    extra={
                        "event": "webhook.stream.unreadable_record",
                        "sequence_number": sequence_number(records[index]),
                    },
                )
                unreadable.append(index)
                continue
            try:
                if change is not None and recorder.record(change) is not None:
                    told.append(index)
            except Exception:
                logger.exception(
                    "webhook.stream.record_failed",
                    extra={
                        "event": "webhook.stream.record_failed",
                        "sequence_number": sequence_number(records[index]),
                    },
                )
                failed.append(index)
                return  # this message's later changes wait for this one

    side_by_side(tell, list(chains.values()), workers)
    if told:
        metrics.add_metric(name="WebhookEventsRecorded", unit="Count", value=len(told))
    if unreadable:
        metrics.add_metric(name="StreamRecordsUnreadable", unit="Count", value=len(unreadable))
    if not failed:
        return {"batchItemFailures": []}
    handed_back = records[min(failed) :]
    metrics.add_metric(name="StreamRecordsHandedBack", unit="Count", value=len(handed_back))
    return {"batchItemFailures": [{"itemIdentifier": sequence_number(r)} for r in handed_back]}


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle_stream_batch(root.get(), event)
