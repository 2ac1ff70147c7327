"""The outbox at a scheduled peak: are 10,000 messages due in the same minute all handed over within a minute?

The messages (sendAt T, spread over the three channels) are written into the emulated MessagesTable
in the sending store's own item format (`to_item`), due in the outbox 15 minutes before T as the API
leaves a send beyond SQS's reach. Then the outbox's real sweeper (`build_outbox`: its real store and
queue adapters, its thread pool) runs with its clock at T and the time left of a Lambda context of
the template's OutboxFunction (50 s), sweep after sweep until nothing is due, each in a process of
its own as each invocation is. The schedule starts a sweep every minute: sweep k runs with its
clock at T + k - 1 minutes. Between sweeps a stand-in for the dispatchers takes every record off
the queues and the message out of the table, so nothing is handed over twice. Each message's
hand-off time is read from the queues themselves (SQS `SentTimestamp`), so its lateness is that
time, counted from the start of its sweep, plus its sweep's minute. `python -m bench.outbox_peak
[--messages N]` runs it alone and writes bench/outbox_peak.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from sendonce.adapters.dynamodb_items import message_key, to_item
from sendonce.aws_clients import client
from sendonce.entrypoints.outbox import build as build_outbox
from sendonce.messages.handoff import MAX_QUEUE_DELAY
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status
from sendonce.observability import metrics
from sendonce.settings import DispatcherSettings

from bench.local_stack import DYNAMODB_LOCAL, MOTO, WORKSPACE, BenchStack, dynamodb_engine, start_stack
from bench.quiet import silenced_stdout
from bench.stats import percentile
from sendonce_local import dynamodb_local
from sendonce_local.lambda_runtime import LambdaContext
from sendonce_local.template import FunctionSpec

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "outbox_peak.json"
PEAK = 10_000
SCHEDULE_SECONDS = 60  # the outbox function runs every minute
# Ten minutes late is a miss whatever follows; and with no dispatcher claiming what was handed over,
# later sweeps also hand the earlier schedules over again once their grace has passed.
MAX_SWEEPS = 10
RECIPIENTS = {"sms": "+15550100000", "imessage": "+15550100001", "email": "peak@example.com"}
QUEUES = {"sms": "SmsQueue", "imessage": "ImessageQueue", "email": "EmailQueue"}


@dataclass
class Sweep:
    started: float  # wall time (epoch seconds), as SQS stamps its records
    seconds: float
    cpu_seconds: float  # this process's CPU: the sweeper's threads, and moto's SQS with them
    report: dict[str, int]


@dataclass
class OutboxPeak:
    messages: int
    engine: str
    write_seconds: float
    sweeps: list[Sweep] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)  # seconds after sendAt, one per record
    distinct: int = 0

    def figures(self) -> dict[str, Any]:
        handed = len(self.lateness)
        busy = sum(sweep.seconds for sweep in self.sweeps)
        cpu = sum(sweep.cpu_seconds for sweep in self.sweeps)
        return {
            "messages": self.messages,
            "engine": self.engine,
            "handed_off": self.distinct,
            "records": handed,
            "sweeps": len(self.sweeps),
            "max_late_s": round(max(self.lateness), 1) if self.lateness else None,
            "p50_late_s": round(percentile(self.lateness, 0.5), 1) if self.lateness else None,
            "per_second": round(handed / busy) if busy else None,
            "cpu_ms_per_message": round(cpu * 1000 / handed, 2) if handed else None,
        }

    def details(self) -> dict[str, Any]:
        return {
            "write_seconds": round(self.write_seconds, 1),
            "sweeps": [{"seconds": round(sweep.seconds, 1), "report": sweep.report} for sweep in self.sweeps],
        }


def _message(channel: str, index: int, send_at: datetime) -> Message:
    created = send_at - timedelta(days=1)
    return Message(
        id=new_message_id(int(created.timestamp() * 1000)),
        workspace_id=WORKSPACE,
        channel=Channel(channel),
        to=RECIPIENTS[channel],
        subject="Peak" if channel == "email" else None,
        body=f"peak {index}",
        status=Status.SCHEDULED,
        created_at=created,
        updated_at=created,
        send_at=send_at,
    )


def write_schedules(dynamodb: Any, count: int, send_at: datetime) -> None:
    """`count` scheduled messages, as the sending store writes them, due in the outbox 15 minutes early."""
    channels = list(RECIPIENTS)
    items = [
        to_item(_message(channels[index % len(channels)], index, send_at), send_at - MAX_QUEUE_DELAY)
        for index in range(count)
    ]
    for start in range(0, len(items), 25):
        requests: dict[str, Any] = {
            "MessagesTable": [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        }
        while requests:
            requests = dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}


@contextmanager
def messages_table(stack: BenchStack, engine: str) -> Iterator[Any]:
    """A client of the MessagesTable the outbox will read: moto's, or one on DynamoDB Local.

    moto answers a GSI query by reading every item of the table, so at 10,000 items one query of
    one shard costs what the whole peak does on AWS; DynamoDB Local (AWS's own engine) reads only
    the shard, as DynamoDB does. SQS stays on moto either way.
    """
    with dynamodb_engine(stack, engine, ("MessagesTable",)) as dynamodb:
        yield dynamodb


def _take_records(stack: BenchStack) -> list[tuple[str, float]]:
    """Every record on the three queues, taken off them: its message id and when SQS took it (epoch s).

    Each batch is deleted as it is read, as a dispatcher would, so moto never rescans what was read.
    """
    sqs = stack.client("sqs")
    records: list[tuple[str, float]] = []
    for queue in QUEUES.values():
        url = stack.queue_urls[queue]
        while True:
            batch = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=900, AttributeNames=["SentTimestamp"]
            ).get("Messages", [])
            if not batch:
                break
            records += [
                (json.loads(record["Body"])["messageId"], int(record["Attributes"]["SentTimestamp"]) / 1000)
                for record in batch
            ]
            sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(index), "ReceiptHandle": record["ReceiptHandle"]}
                    for index, record in enumerate(batch)
                ],
            )
    return records


def _finish(dynamodb: Any, message_ids: set[str]) -> None:
    """The dispatchers' stand-in: a handed-off message leaves the outbox (here: the table), so later
    sweeps do not hand it over again once its grace has passed, as they would with nobody claiming."""
    keys = [{"DeleteRequest": {"Key": message_key(message_id)}} for message_id in sorted(message_ids)]
    for start in range(0, len(keys), 25):
        requests: dict[str, Any] = {"MessagesTable": keys[start : start + 25]}
        while requests:
            requests = dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}


def _sweep(at: datetime, spec: FunctionSpec, answer: Connection) -> None:
    """One invocation of the outbox function, in a process of its own (a fresh interpreter, as an
    execution environment is): the sweeper's CPU is then its own, not shared under one lock with the
    emulator's SQS as threads of one process."""
    started, cpu = time.monotonic(), time.process_time()
    sweeper = build_outbox(
        DispatcherSettings.from_environment(),
        client,
        clock=lambda: at + timedelta(seconds=time.monotonic() - started),
    )
    context = LambdaContext(spec)
    with silenced_stdout():
        report = sweeper.sweep(time_left=lambda: context.get_remaining_time_in_millis() / 1000)
    metrics.clear_metrics()
    answer.send((report, time.monotonic() - started, time.process_time() - cpu))
    answer.close()


def _sweep_in_child(at: datetime, spec: FunctionSpec) -> tuple[dict[str, int], float, float]:
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter inherits no lock held by a thread
    receiving, sending = spawn.Pipe(duplex=False)
    child = spawn.Process(target=_sweep, args=(at, spec, sending), name="outbox-sweep")
    child.start()
    sending.close()
    try:
        result: tuple[dict[str, int], float, float] = receiving.recv()
    finally:
        child.join()
    return result


def _sweep_a_peak(stack: BenchStack, dynamodb: Any, count: int, engine: str) -> OutboxPeak:
    send_at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    began = time.perf_counter()
    write_schedules(dynamodb, count, send_at)
    peak = OutboxPeak(messages=count, engine=engine, write_seconds=time.perf_counter() - began)
    spec = stack.template.functions["OutboxFunction"]
    print(
        f"outbox peak: {count} messages written on {engine} in {peak.write_seconds:.0f} s; sweeping ...",
        file=sys.stderr,
        flush=True,
    )
    handed: set[str] = set()
    for minute in range(MAX_SWEEPS):
        # The schedule's k-th sweep: its clock at sendAt + k minutes, moving on with the wall clock.
        started_wall = time.time()
        report, seconds, cpu = _sweep_in_child(send_at + timedelta(seconds=SCHEDULE_SECONDS * minute), spec)
        peak.sweeps.append(Sweep(started_wall, seconds, cpu, report))
        print(f"  sweep {minute + 1}: {report} in {seconds:.1f} s", file=sys.stderr, flush=True)
        records = _take_records(stack)
        for _, taken in records:
            peak.lateness.append(SCHEDULE_SECONDS * minute + taken - started_wall)
        taken_ids = {message_id for message_id, _ in records}
        handed |= taken_ids
        _finish(dynamodb, taken_ids)
        if "budget_spent" not in report:
            break
    peak.distinct = len(handed)
    return peak


def run_outbox_peak(count: int = PEAK, engine: str | None = None) -> OutboxPeak:
    engine = engine or (DYNAMODB_LOCAL if dynamodb_local.unavailable() is None else MOTO)
    stack = start_stack()
    try:
        with messages_table(stack, engine) as dynamodb:
            return _sweep_a_peak(stack, dynamodb, count, engine)
    finally:
        stack.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.outbox_peak", description=__doc__)
    parser.add_argument("--messages", type=int, default=PEAK)
    parser.add_argument("--engine", choices=[DYNAMODB_LOCAL, MOTO], help="default: DynamoDB Local if it runs")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    peak = run_outbox_peak(args.messages, args.engine)
    result = {"outbox_peak": peak.figures(), "details": peak.details()}
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
