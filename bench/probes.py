"""The functions off the request path, invoked in-process on their real events, counted and timed:
the hand-off from the table's stream, the dispatcher, and the status function applying a
provider's delivery report."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sendonce.clock import rfc3339, utc_now
from sendonce.provider_events.model import ProviderEvent, ProviderEventType

from bench.call_counter import COUNTER
from bench.events import sqs_event
from bench.local_stack import BenchStack
from bench.quiet import silenced_stdout
from sendonce_local.event_filters import passes
from sendonce_local.intrinsics import queue_arn
from sendonce_local.lambda_runtime import LambdaContext
from sendonce_local.stream_sources import StreamShardReader, lambda_record, stream_arn

QUEUE = "SmsQueue"
DISPATCHER = "DispatchSmsFunction"
EVENTS_QUEUE = "EventsQueue"
STATUS = "StatusFunction"


@dataclass
class Invocations:
    seconds: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)
    message_bytes: int = 0


def invoke(stack: BenchStack, name: str, event: dict[str, Any], into: Invocations) -> Any:
    """The function `name` on `event`, counted and timed into `into`; its answer."""
    function = stack.functions[name]
    handler = function.load()
    context = LambdaContext(function.spec)
    with COUNTER.counting() as log:
        started = time.perf_counter()
        result = handler(event, context)
        into.seconds.append(time.perf_counter() - started)
    into.calls.append(len(log))
    into.operations = log.operations()
    return result


class StreamReaders:
    """The MessagesTable stream as one event source mapping reads it: each shard from where it stopped."""

    def __init__(self, stack: BenchStack) -> None:
        self._streams = stack.client("dynamodbstreams")
        self._arn = stream_arn(stack.client("dynamodb"), "MessagesTable")
        self._readers: dict[str, StreamShardReader] = {}

    def read(self) -> list[dict[str, Any]]:
        """Every record written since the last read, in Lambda's event shape."""
        shards = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"].get("Shards") or []
        records: list[dict[str, Any]] = []
        for shard in shards:
            reader = self._readers.get(shard["ShardId"])
            if reader is None:
                reader = StreamShardReader(self._streams, self._arn, shard["ShardId"], "TRIM_HORIZON")
                reader.open()
                self._readers[shard["ShardId"]] = reader
            while batch := reader.read(1000):
                records += [lambda_record(record, self._arn) for record in batch]
        return records


def hand_off(stack: BenchStack, readers: StreamReaders, batch_size: int = 100) -> Invocations:
    """HandoffFunction on the stream's new creations (what its filter admits), in its batches."""
    (mapping,) = [m for m in stack.template.stream_mappings if m.function_id == "HandoffFunction"]
    records = [record for record in readers.read() if passes(mapping.filters, record)]
    out = Invocations()
    with silenced_stdout():
        for start in range(0, len(records), batch_size):
            result = invoke(stack, "HandoffFunction", {"Records": records[start : start + batch_size]}, out)
            if result.get("batchItemFailures"):
                raise RuntimeError(f"the hand-off failed records: {result}")
    out.message_bytes = len(records)  # here: the creations handed over
    return out


def queued_records(stack: BenchStack, wanted: int) -> list[dict[str, Any]]:
    sqs = stack.client("sqs")
    records: list[dict[str, Any]] = []
    while len(records) < wanted:
        batch = sqs.receive_message(
            QueueUrl=stack.queue_urls[QUEUE],
            MaxNumberOfMessages=min(10, wanted - len(records)),
            AttributeNames=["All"],
            VisibilityTimeout=300,
        ).get("Messages", [])
        if not batch:
            break
        records += batch
    return records


def dispatch(stack: BenchStack, records: list[dict[str, Any]]) -> Invocations:
    """One message per invocation, so the counts are per message."""
    out = Invocations()
    arn = queue_arn(QUEUE)
    with silenced_stdout():
        for record in records:
            result = invoke(stack, DISPATCHER, sqs_event([record], arn), out)
            if result.get("batchItemFailures"):
                raise RuntimeError(f"the dispatcher failed a record: {result}")
            out.message_bytes = max(out.message_bytes, len(record["Body"].encode()))
    return out


def once(run: Callable[[], Any]) -> None:
    with silenced_stdout():
        run()


def apply_delivery_reports(stack: BenchStack, records: list[dict[str, Any]]) -> Invocations:
    """The provider reports each dispatched message delivered: StatusFunction applies the report
    from the events queue, one per invocation, so the counts are per report."""
    out = Invocations()
    arn = queue_arn(EVENTS_QUEUE)
    with silenced_stdout():
        for record in records:
            report = ProviderEvent(
                provider="http",
                event_id=f"evt_{uuid.uuid4().hex}",
                message_id=json.loads(record["Body"])["messageId"],
                type=ProviderEventType.DELIVERED,
                occurred_at=rfc3339(utc_now()),
            )
            queued = {"MessageId": str(uuid.uuid4()), "ReceiptHandle": "bench", "Body": report.to_json()}
            result = invoke(stack, STATUS, sqs_event([queued], arn), out)
            if result.get("batchItemFailures"):
                raise RuntimeError(f"the status function failed a report: {result}")
    return out
