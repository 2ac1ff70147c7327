"""SQS batches as Lambda's event source mapping hands them over, each record handled alone.

Failures are reported per record (ReportBatchItemFailures): one bad record never holds back
the rest of its batch, and an event with no records is an empty batch, not an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

LambdaHandler = Callable[[Any, LambdaContext], dict[str, Any]]


def process_batch(
    event: Any, context: LambdaContext, handle_record: Callable[[SQSRecord], str]
) -> dict[str, Any]:
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list) or not records:
        return {"batchItemFailures": []}
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    result = process_partial_response(
        event={"Records": records}, record_handler=handle_record, processor=processor, context=context
    )
    return dict(result)
