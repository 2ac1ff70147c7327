"""Lambda's DynamoDB stream event source mapping: each shard's records in order, one batch at a time.

Invariant: a shard's records reach the function in sequence order, and a record is passed over only
once the function has succeeded on it (the invocation returned, and reported neither it nor an
earlier record of its batch as failed), or when no pattern of the mapping's FilterCriteria admits
it. Until then it is retried, with nothing after it invoked, as Lambda does with the default
MaximumRetryAttempts (-1): nothing is dropped.

- A batch is up to BatchSize records, gathered for up to MaximumBatchingWindowInSeconds.
- ReportBatchItemFailures: the records before the lowest failed sequence number are done, the
  retry starts at it. A raised error, or an answer that is not a valid report, fails the whole
  batch; with BisectBatchOnFunctionError a failed batch is retried as two halves, in order.
- A retry waits RETRY_BACKOFF_SECONDS, so that a record that always fails does not spin the CPU.
- Given the emulator's `table_writes`, a reader that found nothing new waits for the next write to a
  table (a stream record only ever comes from one) rather than polling four times a second: a
  record is read as soon as it is written, and an idle stack does not keep the emulator busy.
  IDLE_WAIT_SECONDS bounds that wait all the same.

The reader keeps its place with the shard iterator GetRecords returns: it never reads a shard from
its start again (moto keeps every record of a stream; it is not trimmed after 24 hours).
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from sendonce_local.changes import Changes
from sendonce_local.event_filters import passes
from sendonce_local.template import StreamMapping

log = logging.getLogger("local-stack.streams")

POLL_INTERVAL_SECONDS = 0.25  # Lambda polls each shard four times a second
IDLE_WAIT_SECONDS = 1.0  # with `table_writes`: the longest wait for a write before reading again
RETRY_BACKOFF_SECONDS = 1.0
MAX_RECORDS_PER_READ = 1000  # GetRecords' Limit
EVENT_VERSION = "1.1"  # what Lambda's DynamoDB events carry (moto's GetRecords says 1.0)

Step = Literal["idle", "waiting", "done", "failed"]
Invoke = Callable[[dict[str, Any]], Any]


# ---------------------------------------------------------------------------- the event
def _json_value(value: Any) -> Any:
    """An AttributeValue as DynamoDB JSON in Lambda's event: binary values base64-encoded."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    return value


def epoch_seconds(value: Any) -> int:
    """ApproximateCreationDateTime as Lambda sends it: UNIX epoch seconds, rounded down.

    boto3 turns the number GetRecords answers into a datetime; the event carries the number.
    """
    if isinstance(value, datetime):
        return int(value.timestamp())
    return int(float(value))


def lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """One record of the event Lambda builds from a GetRecords record (as boto3 returns it)."""
    change = record["dynamodb"]
    dynamodb: dict[str, Any] = {
        "ApproximateCreationDateTime": epoch_seconds(change["ApproximateCreationDateTime"]),
        "Keys": _json_value(change.get("Keys") or {}),
    }
    for image in ("NewImage", "OldImage"):
        if image in change:
            dynamodb[image] = _json_value(change[image])
    dynamodb["SequenceNumber"] = str(change["SequenceNumber"])
    dynamodb["SizeBytes"] = int(change.get("SizeBytes", 0))
    dynamodb["StreamViewType"] = change.get("StreamViewType", "")
    return {
        "eventID": record["eventID"],
        "eventName": record["eventName"],
        "eventVersion": EVENT_VERSION,
        "eventSource": "aws:dynamodb",
        "awsRegion": record.get("awsRegion", ""),
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }


def sequence_number(record: dict[str, Any]) -> str:
    number: str = record["dynamodb"]["SequenceNumber"]
    return number


# ---------------------------------------------------------------------------- an invocation's outcome
@dataclass(frozen=True)
class Outcome:
    """What an invocation settled: the first `done` records of the batch; `error` if it failed whole."""

    done: int
    error: str | None = None


def judge(records: list[dict[str, Any]], result: Any, report_failures: bool) -> Outcome:
    """Lambda's reading of a handler's answer to a batch of stream records."""
    if not report_failures or result is None:
        return Outcome(len(records))
    if not isinstance(result, dict):
        return Outcome(0, "an answer that is not a batch item failure report")
    failures = result.get("batchItemFailures")
    if not failures:  # absent, null or empty: the whole batch succeeded
        return Outcome(len(records))
    if not isinstance(failures, list):
        return Outcome(0, "batchItemFailures is not a list")
    position = {sequence_number(record): index for index, record in enumerate(records)}
    failed: list[int] = []
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not isinstance(identifier, str) or identifier not in position:
            return Outcome(0, "a batch item failure that names no record of the batch")
        failed.append(position[identifier])
    return Outcome(min(failed))


# ---------------------------------------------------------------------------- one shard
class Function(Protocol):
    """What the mapping invokes (sendonce_local.lambda_runtime.LocalFunction, or a test's fake)."""

    @property
    def name(self) -> str: ...

    def invoke(self, event: Any) -> Any: ...


class ShardReader(Protocol):
    def read(self, limit: int) -> list[dict[str, Any]]:
        """The next records of the shard (as GetRecords returns them), at most `limit`, in order."""
        ...

    @property
    def closed(self) -> bool:
        """The shard has ended (split or disabled): nothing more will be read from it."""
        ...


class ShardPoller:
    """One shard of one mapping: one batch in flight, records in sequence order."""

    def __init__(
        self,
        mapping: StreamMapping,
        reader: ShardReader,
        invoke: Invoke,
        stop: threading.Event,
        *,
        function_name: str,
        shard_id: str,
        stream_arn: str,
        poll_interval: float = POLL_INTERVAL_SECONDS,
        retry_backoff: float = RETRY_BACKOFF_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        table_writes: Changes | None = None,
    ) -> None:
        self._mapping = mapping
        self._function_name = function_name
        self._shard_id = shard_id
        self._stream_arn = stream_arn
        self._reader = reader
        self._invoke = invoke
        self._stop = stop
        self._poll_interval = poll_interval
        self._retry_backoff = retry_backoff
        self._clock = clock
        self._table_writes = table_writes
        self._pending: list[dict[str, Any]] = []  # read, not yet done, in order (Lambda's shape)
        self._gathering_since: float | None = None
        # The sizes of the next batches, set by a failure: the same records again (or the halves of
        # a bisected batch), never topped up with newer records before they are done.
        self._planned: list[int] = []

    @property
    def pending(self) -> int:
        return len(self._pending)

    def run(self) -> None:
        while not self._stop.is_set():
            writes_seen = self._table_writes.seen() if self._table_writes is not None else 0
            try:
                step = self.poll_once()
            except Exception as error:  # the emulator is unreachable or answers an error
                log.warning(
                    "stream.read_failed table=%s shard=%s error=%s",
                    self._mapping.table_id,
                    self._shard_id,
                    type(error).__name__,
                )
                step = "failed"
            if step == "idle" and self._reader.closed and not self._pending:
                log.info("stream.shard_closed table=%s shard=%s", self._mapping.table_id, self._shard_id)
                return
            if step == "failed":
                self._stop.wait(self._retry_backoff)
            elif step == "idle" and self._table_writes is not None:
                self._table_writes.wait_after(writes_seen, IDLE_WAIT_SECONDS)
            elif step in ("idle", "waiting"):
                self._stop.wait(self._poll_interval)

    def poll_once(self) -> Step:
        """Read what the next batch needs, and invoke the function with it once it is due."""
        if not self._planned:
            self._read()
        if not self._pending:
            return "idle"
        if not self._planned and not self._batch_due():
            return "waiting"
        size = self._planned[0] if self._planned else self._mapping.batch_size
        return self._deliver(self._pending[:size])

    def _read(self) -> None:
        room = self._mapping.batch_size - len(self._pending)
        if room <= 0 or self._reader.closed:
            return
        # With filters, most records read may be passed over: read ahead as far as one read goes.
        records = self._reader.read(
            MAX_RECORDS_PER_READ if self._mapping.filters else min(room, MAX_RECORDS_PER_READ)
        )
        # A record no filter admits is done as soon as it is read, as Lambda drops it.
        admitted = [
            event
            for event in (lambda_record(record, self._stream_arn) for record in records)
            if passes(self._mapping.filters, event)
        ]
        if admitted and not self._pending:
            self._gathering_since = self._clock()
        self._pending.extend(admitted)

    def _batch_due(self) -> bool:
        if len(self._pending) >= self._mapping.batch_size or self._reader.closed:
            return True
        started = self._gathering_since if self._gathering_since is not None else self._clock()
        return self._clock() - started >= self._mapping.batching_window_seconds

    def _deliver(self, batch: list[dict[str, Any]]) -> Step:
        try:
            result = self._invoke({"Records": batch})
        except Exception as error:
            outcome = Outcome(0, f"raised {type(error).__name__}")
            log.debug("stream.function_error function=%s", self._function_name, exc_info=True)
        else:
            outcome = judge(batch, result, self._mapping.report_batch_item_failures)
        if self._planned:
            self._planned.pop(0)
        del self._pending[: outcome.done]
        self._gathering_since = self._clock() if self._pending else None
        fields = (
            self._function_name,
            self._mapping.table_id,
            self._shard_id,
            len(batch),
            sequence_number(batch[0]),
            sequence_number(batch[-1]),
        )
        if outcome.done == len(batch):
            log.info("stream.batch_done function=%s table=%s shard=%s records=%d first=%s last=%s", *fields)
            return "done"
        left = len(batch) - outcome.done
        if outcome.error is None:
            self._planned.insert(0, left)
            log.warning(
                "stream.batch_partial function=%s table=%s shard=%s records=%d first=%s last=%s"
                " done=%d retry_from=%s",
                *fields,
                outcome.done,
                sequence_number(self._pending[0]),
            )
        elif self._mapping.bisect and left > 1:
            half = (left + 1) // 2
            self._planned[0:0] = [half, left - half]
            log.warning(
                "stream.batch_bisected function=%s table=%s shard=%s records=%d first=%s last=%s"
                " error=%r halves=%d+%d",
                *fields,
                outcome.error,
                half,
                left - half,
            )
        else:
            self._planned.insert(0, left)
            log.warning(
                "stream.batch_failed function=%s table=%s shard=%s records=%d first=%s last=%s error=%r",
                *fields,
                outcome.error,
            )
        return "failed"


# ---------------------------------------------------------------------------- the emulator's stream
class StreamShardReader:
    """A shard read through the dynamodbstreams API, keeping its place with the shard iterator."""

    def __init__(self, streams: Any, stream_arn: str, shard_id: str, starting_position: str) -> None:
        self._streams = streams
        self._stream_arn = stream_arn
        self._shard_id = shard_id
        self._starting_position = starting_position
        self._iterator: str | None = None
        self._last_sequence: str | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def open(self) -> None:
        """Take the starting position now (LATEST means: from the moment the mapping starts)."""
        self._iterator = self._new_iterator()

    def read(self, limit: int) -> list[dict[str, Any]]:
        if self._closed:
            return []
        if self._iterator is None:
            self._iterator = self._new_iterator()
        try:
            answer = self._streams.get_records(ShardIterator=self._iterator, Limit=limit)
        except Exception:
            self._iterator = None  # expired or lost: the next read resumes after the last record
            raise
        records: list[dict[str, Any]] = answer.get("Records") or []
        if records:
            self._last_sequence = sequence_number(records[-1])
        self._iterator = answer.get("NextShardIterator")
        if self._iterator is None:
            self._closed = True
        return records

    def _new_iterator(self) -> str:
        arguments: dict[str, Any] = {"StreamArn": self._stream_arn, "ShardId": self._shard_id}
        if self._last_sequence is None:
            arguments["ShardIteratorType"] = self._starting_position
        else:
            arguments["ShardIteratorType"] = "AFTER_SEQUENCE_NUMBER"
            arguments["SequenceNumber"] = self._last_sequence
        iterator: str = self._streams.get_shard_iterator(**arguments)["ShardIterator"]
        return iterator


def stream_arn(dynamodb: Any, table: str) -> str:
    """The ARN of the table's current stream (the label is the emulator's, as in AWS)."""
    description = dynamodb.describe_table(TableName=table)["Table"]
    arn = description.get("LatestStreamArn")
    if not arn or not (description.get("StreamSpecification") or {}).get("StreamEnabled", True):
        raise ValueError(f"table {table} has no stream: its template resource needs a StreamSpecification")
    return str(arn)


class StreamPoller:
    """A `Type: DynamoDB` event of the template: one thread per shard of the table's stream."""

    def __init__(
        self,
        mapping: StreamMapping,
        function: Function,
        dynamodb: Any,
        streams: Any,
        stop: threading.Event,
        *,
        poll_interval: float = POLL_INTERVAL_SECONDS,
        retry_backoff: float = RETRY_BACKOFF_SECONDS,
        table_writes: Changes | None = None,
    ) -> None:
        self._mapping = mapping
        self._function = function
        self._dynamodb = dynamodb
        self._streams = streams
        self._stop = stop
        self._poll_interval = poll_interval
        self._retry_backoff = retry_backoff
        self._table_writes = table_writes
        self._threads: list[threading.Thread] = []
        self.shards: list[ShardPoller] = []

    def start(self) -> None:
        """Find the stream's shards and take their starting positions, then poll each in a thread."""
        arn = stream_arn(self._dynamodb, self._mapping.table_id)
        description = self._streams.describe_stream(StreamArn=arn)["StreamDescription"]
        for shard in description.get("Shards") or []:
            shard_id = shard["ShardId"]
            reader = StreamShardReader(self._streams, arn, shard_id, self._mapping.starting_position)
            reader.open()
            poller = ShardPoller(
                self._mapping,
                reader,
                self._function.invoke,
                self._stop,
                function_name=self._function.name,
                shard_id=shard_id,
                stream_arn=arn,
                poll_interval=self._poll_interval,
                retry_backoff=self._retry_backoff,
                table_writes=self._table_writes,
            )
            self.shards.append(poller)
            self._threads.append(
                threading.Thread(
                    target=poller.run, name=f"stream-{self._mapping.table_id}-{shard_id}", daemon=True
                )
            )
        log.info(
            "stream.mapping_started function=%s table=%s shards=%d starting_position=%s batch_size=%d",
            self._function.name,
            self._mapping.table_id,
            len(self.shards),
            self._mapping.starting_position,
            self._mapping.batch_size,
        )
        for thread in self._threads:
            thread.start()

    def join(self, timeout: float) -> None:
        """Waits at most `timeout` seconds in all, whatever its number of threads."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
