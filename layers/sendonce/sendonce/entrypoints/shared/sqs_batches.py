"""SQS batches as Lambda's event source mapping hands them over, each record handled alone: the
dispatchers', the status function's and the webhook delivery function's.

Failures are reported per record (ReportBatchItemFailures): one bad record never holds back
the rest of its batch, and an event with no records is an empty batch, not an error. Records are
handled one after another, or side by side (`workers`) where one may wait long on something of its
own (a webhook endpoint) and must not hold the others.

A record handler raises to fail its record; whatever it returns is its outcome, for the logs.
`read_record` and `retried_later` are the two things every handler does around its own work: a
record it cannot read fails alone and is logged, and work that says `RetryLater` puts its record
back on the queue for that long.
This is the whole of partial batch responses for SQS: a library's batch utility would bring in its
every event source's models on each cold start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from msgspec import Struct

from sendonce.errors import RetryLater
from sendonce.observability import logger
from sendonce.side_by_side import side_by_side

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

LambdaHandler = Callable[[Any, "LambdaContext"], dict[str, Any]]
T = TypeVar("T")


class Redelivery(Protocol):
    def postpone(self, receipt_handle: str, seconds: int) -> None:
        """Bring a queued record back after `seconds` instead of its visibility timeout."""
        ...


class SqsRecord(Struct, frozen=True):
    """What a handler reads of one SQS record of the event."""

    message_id: str
    body: str
    receipt_handle: str
    receive_count: int = 1  # SQS's ApproximateReceiveCount: this receive included
    source_arn: str = ""  # the queue it came from (eventSourceARN)

    @classmethod
    def of(cls, record: dict[str, Any]) -> SqsRecord:
        attributes = record.get("attributes")
        count = attributes.get("ApproximateReceiveCount") if isinstance(attributes, dict) else None
        return cls(
            message_id=record["messageId"],
            body=record.get("body") or "",
            receipt_handle=record.get("receiptHandle") or "",
            receive_count=int(count) if isinstance(count, str) and count.isdecimal() else 1,
            source_arn=record.get("eventSourceARN") or "",
        )


def process_batch(event: Any, handle_record: Callable[[SqsRecord], str], workers: int = 1) -> dict[str, Any]:
    """Each record through `handle_record`, on up to `workers` threads; the records that raised, as
    Lambda's `batchItemFailures`, in the batch's order.

    A record without a `messageId` cannot be reported on its own: the invocation fails instead
    (once every other record has been handled), and SQS brings the whole batch back.
    """
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list) or not records:
        return {"batchItemFailures": []}

    def failure_of(raw: Any) -> dict[str, str] | None:
        record = SqsRecord.of(raw)
        try:
            handle_record(record)
        except Exception as error:  # the record fails alone; its handler has logged what it knows
            logger.debug(
                "sqs.record_failed",
                extra={"sqs_message_id": record.message_id, "error": f"{type(error).__name__}: {error}"},
            )
            return {"itemIdentifier": record.message_id}
        return None

    failures = side_by_side(failure_of, records, workers)  # workers=1: one after another, on this thread
    return {"batchItemFailures": [failure for failure in failures if failure is not None]}


def read_record(
    record: SqsRecord,
    parse: Callable[[str], T],
    unreadable: type[Exception],
    event: str,
) -> T:
    """The record's body as `parse` reads it. One it cannot read is logged under `event` (its SQS
    id, never its body) and fails alone: its redrive takes it to the dead-letter queue."""
    try:
        return parse(record.body)
    except unreadable:
        logger.error(event, extra={"event": event, "sqs_message_id": record.message_id})
        raise


def retried_later(
    redelivery: Redelivery, record: SqsRecord, work: Callable[[], str], event: str, **extra: str
) -> str:
    """`work`'s outcome. When it raises RetryLater, the record fails and is postponed by its
    seconds; should the postpone fail (logged under `event`), its visibility timeout brings it back."""
    try:
        return work()
    except RetryLater as retry:
        try:
            redelivery.postpone(record.receipt_handle, retry.seconds)
        except Exception:  # the queue's own visibility timeout brings it back instead
            logger.warning(event, extra={"event": event, **extra})
        raise
