"""HandoffFunction: each message created in the MessagesTable, from the table's stream, goes to its
channel's queue, so the request that created it makes one call.

Invariant: every message whose creation the stream brings is handed over at least once, or its
record is reported failed, so the stream brings it (and every later record of the batch) back.
A record the stream never brings is the outbox's, through the entry written with the message.
Handing a message over twice is harmless: its dispatcher's claim is conditional, so it is sent
once. The records' order does not matter here: each creation is handed over on its own.

A record that cannot be read as a message (never one sendonce wrote) is skipped, logged and
counted (`HandoffRecordsUnreadable`): retried, it would fail every time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sendonce.adapters.dynamodb_message_creations import created_of
from sendonce.adapters.sqs_queue import SqsMessageQueue
from sendonce.aws_clients import Clients, client
from sendonce.clock import Clock, utc_now
from sendonce.composition import Root
from sendonce.entrypoints.shared.stream_records import sequence_number
from sendonce.messages.handoff import handoff_of
from sendonce.messages.ports import Handoff, MessageQueue
from sendonce.observability import logger, metrics
from sendonce.settings import HandoffSettings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext


def build(settings: HandoffSettings, clients: Clients) -> MessageQueue:
    """The channels' queues, which each new message from the stream goes to."""
    return SqsMessageQueue(clients("sqs"), settings.queue_urls)


root: Root[MessageQueue] = Root(lambda: build(HandoffSettings.from_environment(), client))


def hand_off_batch(queue: MessageQueue, event: Any, clock: Clock = utc_now) -> dict[str, Any]:
    """Hand every created message of a stream batch over; the records of refused ones are reported."""
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list) or not records:
        return {"batchItemFailures": []}
    now = clock()
    owed: list[tuple[int, Handoff]] = []
    unreadable = 0
    for index, record in enumerate(records):
        try:
            message = created_of(record)
        except (ValueError, KeyError, TypeError, AttributeError):
            logger.error(
                "message.handoff.unreadable_record",
                extra={
                    "event": "message.handoff.unreadable_record",
                    "sequence_number": sequence_number(record),
                },
            )
            unreadable += 1
            continue
        handoff = handoff_of(message, now) if message is not None else None
        if handoff is not None:  # None: not a creation, or scheduled beyond SQS's reach (the outbox's)
            owed.append((index, handoff))
    refused = queue.enqueue_batch([handoff for _, handoff in owed]) if owed else []
    refused_ids = {handoff.message.id for handoff in refused}
    failed = [index for index, handoff in owed if handoff.message.id in refused_ids]
    if failed:
        logger.warning(
            "message.handoff.refused",
            extra={"event": "message.handoff.refused", "message_ids": sorted(refused_ids)},
        )
        metrics.add_metric(name="HandoffFailed", unit="Count", value=len(failed))
    if len(owed) > len(failed):
        metrics.add_metric(name="HandedOff", unit="Count", value=len(owed) - len(failed))
    if unreadable:
        metrics.add_metric(name="HandoffRecordsUnreadable", unit="Count", value=unreadable)
    return {"batchItemFailures": [{"itemIdentifier": sequence_number(records[index])} for index in failed]}


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return hand_off_batch(root.get(), event)
