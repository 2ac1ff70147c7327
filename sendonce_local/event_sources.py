"""Lambda's SQS event source mapping: long-poll, invoke with a batch, delete what succeeded.

Failed records are left alone: they come back after their visibility timeout (or whatever the
handler set with ChangeMessageVisibility), and moto moves a message to the dead-letter queue
on the receive after maxReceiveCount.

A mapping runs as many invocations at once as its ScalingConfig's MaximumConcurrency (resolved
with the stack's parameters; WORKERS_PER_MAPPING when it sets none): one poller thread each, each
receiving a batch and invoking the function with it before it receives again. The function's own
cap (`lambda_runtime.MAX_ENVIRONMENTS`, the account's stand-in) bounds all its mappings together:
a mapping gets no more pollers than that, since more could only hold received batches waiting.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from typing import Any

from sendonce_local.constants import REGION
from sendonce_local.intrinsics import Resolver, queue_arn
from sendonce_local.lambda_runtime import LocalFunction
from sendonce_local.template import SqsMapping

log = logging.getLogger("local-stack.sqs")

# A long poll, as Lambda's (which waits up to 20 s): the emulator answers it as soon as a message
# can be received, and at once when the stack stops (EmulatorMiddleware.release_waits).
WAIT_TIME_SECONDS = 5
WORKERS_PER_MAPPING = 3
ERROR_BACKOFF_SECONDS = 1.0


def _message_attribute(value: dict[str, Any]) -> dict[str, Any]:
    attribute: dict[str, Any] = {
        "stringListValues": list(value.get("StringListValues") or []),
        "binaryListValues": [
            base64.b64encode(item).decode("ascii") for item in value.get("BinaryListValues") or []
        ],
        "dataType": value.get("DataType", "String"),
    }
    if "StringValue" in value:
        attribute["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        attribute["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode("ascii")
    return attribute


def sqs_record(message: dict[str, Any], queue_name: str) -> dict[str, Any]:
    """One record of the event Lambda builds from an SQS ReceiveMessage result."""
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": dict(message.get("Attributes") or {}),
        "messageAttributes": {
            name: _message_attribute(value)
            for name, value in (message.get("MessageAttributes") or {}).items()
        },
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn(queue_name),
        "awsRegion": REGION,
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def succeeded_records(
    records: list[dict[str, Any]], result: Any, report_failures: bool
) -> list[dict[str, Any]]:
    """The records to delete after an invocation that returned `result` (Lambda's rules)."""
    if not report_failures or not isinstance(result, dict) or not result.get("batchItemFailures"):
        return list(records)
    failures = result["batchItemFailures"]
    ids = {record["messageId"] for record in records}
    failed: set[str] = set()
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not identifier or identifier not in ids:
            return []  # a malformed answer fails the whole batch
        failed.add(identifier)
    return [record for record in records if record["messageId"] not in failed]


def concurrency_of(mapping: SqsMapping, resolver: Resolver, function_limit: int) -> int:
    """How many invocations `mapping` runs at once: its MaximumConcurrency, resolved, at most the
    function's own limit; WORKERS_PER_MAPPING (at most that limit) when it sets none."""
    if mapping.maximum_concurrency is None:
        return min(WORKERS_PER_MAPPING, function_limit)
    value = resolver.resolve(mapping.maximum_concurrency)
    try:
        wanted = int(str(value))
    except ValueError:
        raise ValueError(
            f"{mapping.function_id}.{mapping.event_name}: MaximumConcurrency {value!r} is not a number"
        ) from None
    if wanted < 1:
        raise ValueError(f"{mapping.function_id}.{mapping.event_name}: MaximumConcurrency {wanted} < 1")
    return min(wanted, function_limit)


class SqsPoller:
    def __init__(
        self,
        mapping: SqsMapping,
        function: LocalFunction,
        sqs: Any,
        url: str,
        stop: threading.Event,
        *,
        workers: int = WORKERS_PER_MAPPING,
    ) -> None:
        self._mapping = mapping
        self._function = function
        self._sqs = sqs
        self._url = url
        self._stop = stop
        self._threads = [
            threading.Thread(target=self._run, name=f"sqs-{mapping.queue_id}-{n}", daemon=True)
            for n in range(workers)
        ]

    @property
    def workers(self) -> int:
        """How many invocations it runs at once."""
        return len(self._threads)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def join(self, timeout: float) -> None:
        """Waits at most `timeout` seconds in all, whatever its number of threads."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception:
                log.exception("polling %s failed", self._mapping.queue_id)
                self._stop.wait(ERROR_BACKOFF_SECONDS)

    def poll_once(self) -> None:
        messages = self._sqs.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=self._mapping.batch_size,
            WaitTimeSeconds=WAIT_TIME_SECONDS,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return
        records = [sqs_record(message, self._mapping.queue_id) for message in messages]
        try:
            result = self._function.invoke({"Records": records})
        except Exception:
            log.exception(
                "%s RAISED on a batch of %d from %s: nothing deleted, the batch comes back after its"
                " visibility timeout",
                self._function.name,
                len(records),
                self._mapping.queue_id,
            )
            return
        done = succeeded_records(records, result, self._mapping.report_batch_item_failures)
        if done:
            self._delete(done)
        log.info(
            "%s <- %s: %d record(s), %d done, %d left for retry",
            self._function.name,
            self._mapping.queue_id,
            len(records),
            len(done),
            len(records) - len(done),
        )

    def _delete(self, records: list[dict[str, Any]]) -> None:
        entries = [
            {"Id": str(n), "ReceiptHandle": record["receiptHandle"]} for n, record in enumerate(records)
        ]
        answer = self._sqs.delete_message_batch(QueueUrl=self._url, Entries=entries)
        for failure in answer.get("Failed") or []:
            log.warning("could not delete a record from %s: %s", self._mapping.queue_id, failure)
