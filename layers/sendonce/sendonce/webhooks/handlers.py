"""The webhook functions' batches: the stream's records in order, the delivery queue's records alone.

A stream record that fails stops its batch there: it and every later record are reported, so
Lambda brings them back from that record on, in order. A later change of the same message must
never be told before an earlier one, or the earlier one would find itself told already.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from sendonce.adapters.dynamodb_message_stream import change_of
from sendonce.adapters.sqs_webhook_queue import parse_task
from sendonce.observability import logger, metrics
from sendonce.sqs_batches import process_batch
from sendonce.webhooks.delivery import RetryLater
from sendonce.webhooks.dependencies import DeliveryDependencies
from sendonce.webhooks.events import EventRecorder


def handle_stream_batch(recorder: EventRecorder, event: Any) -> dict[str, Any]:
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list):
        return {"batchItemFailures": []}
    recorder.new_batch()
    told = 0
    for index, record in enumerate(records):
        try:
            change = change_of(record)
            if change is not None and recorder.record(change) is not None:
                told += 1
        except Exception:
            failed = records[index:]
            logger.exception(
                "webhook.stream.record_failed",
                extra={"event": "webhook.stream.record_failed", "handed_back": len(failed)},
            )
            metrics.add_metric(name="StreamRecordsHandedBack", unit="Count", value=len(failed))
            return {
                "batchItemFailures": [
                    {"itemIdentifier": str((r.get("dynamodb") or {}).get("SequenceNumber", ""))}
                    for r in failed
                ]
            }
    if told:
        metrics.add_metric(name="WebhookEventsRecorded", unit="Count", value=told)
    return {"batchItemFailures": []}


def handle_delivery_batch(
    dependencies: DeliveryDependencies, event: Any, context: LambdaContext
) -> dict[str, Any]:
    def handle_record(record: SQSRecord) -> str:
        try:
            task = parse_task(record.body)
        except ValueError:
            logger.error(
                "webhook.delivery.unreadable_record",
                extra={"event": "webhook.delivery.unreadable_record", "sqs_message_id": record.message_id},
            )
            raise
        try:
            return dependencies.deliverer.deliver(task).value
        except RetryLater as retry:
            try:
                dependencies.redelivery.postpone(record.receipt_handle, retry.seconds)
            except Exception:  # the queue's own visibility timeout brings it back instead
                logger.warning("webhook.delivery.postpone_failed", extra={"event_id": task.event_id})
            raise

    return process_batch(event, context, handle_record)
