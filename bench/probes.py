"""The dispatcher, invoked in-process on its real events, counted and timed."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.call_counter import COUNTER
from bench.events import sqs_event
from bench.local_stack import BenchStack
from bench.quiet import silenced_stdout
from sendonce_local.intrinsics import queue_arn
from sendonce_local.lambda_runtime import LambdaContext

QUEUE = "SmsQueue"
DISPATCHER = "DispatchSmsFunction"


@dataclass
class Invocations:
    seconds: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)
    message_bytes: int = 0


def _invoke(stack: BenchStack, name: str, event: dict[str, Any], into: Invocations) -> Any:
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
            result = _invoke(stack, DISPATCHER, sqs_event([record], arn), out)
            if result.get("batchItemFailures"):
                raise RuntimeError(f"the dispatcher failed a record: {result}")
            out.message_bytes = max(out.message_bytes, len(record["Body"].encode()))
    return out


def once(run: Callable[[], Any]) -> None:
    with silenced_stdout():
        run()
