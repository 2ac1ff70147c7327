"""The outbox at a scheduled peak: are 10,000 messages due in the same minute all handed over within a minute?

The messages (sendAt T, spread over the three channels) are written into the emulated MessagesTable
in the sending store's own item format (`to_item`), due in the outbox 15 minutes before T as the API
leaves a send beyond SQS's reach. Then the outbox's real sweeper (`build_outbox`: its real store and
queue adapters, its thread pool) runs with its clock at T and the time left of a Lambda context of
the template's OutboxFunction (50 s), sweep after sweep until nothing is due. The schedule starts a
sweep every minute: sweep k runs with its clock at T + k - 1 minutes. Each message's hand-off time
is read from the queues themselves (SQS `SentTimestamp`), so its lateness is that time, counted from
the start of its sweep, plus its sweep's minute. `python -m bench.outbox_peak [--messages N]` runs
it alone and writes bench/outbox_peak.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sendonce.adapters.dynamodb_items import to_item
from sendonce.delivery.dependencies import build_outbox
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status
from sendonce.messages.service import MAX_QUEUE_DELAY
from sendonce.observability import metrics

from bench.local_stack import WORKSPACE, BenchStack, start_stack
from bench.quiet import silenced_stdout
from bench.stats import percentile
from sendonce_local import aws_client, dynamodb_local
from sendonce_local.emulator import create_tables
from sendonce_local.lambda_runtime import LambdaContext

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "outbox_peak.json"
PEAK = 10_000
SCHEDULE_SECONDS = 60  # the outbox function runs every minute
# Ten minutes late is a miss whatever follows; and with no dispatcher claiming what was handed over,
# later sweeps also hand the earlier schedules over again once their grace has passed.
MAX_SWEEPS = 10
MOTO, DYNAMODB_LOCAL = "moto", "dynamodb-local"
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
    if engine == MOTO:
        yield stack.client("dynamodb")
        return
    server = dynamodb_local.start()
    try:
        dynamodb = aws_client.client("dynamodb", server.endpoint)
        create_tables(
            dynamodb,
            replace(
                stack.template, tables=[t for t in stack.template.tables if t.logical_id == "MessagesTable"]
            ),
        )
        with_engine = {"AWS_ENDPOINT_URL_DYNAMODB": server.endpoint}
        saved = {name: os.environ.get(name) for name in with_engine}
        os.environ.update(with_engine)
        try:
            yield dynamodb
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    finally:
        server.stop()


def _records(stack: BenchStack) -> list[tuple[str, float]]:
    """Every record on the three queues: its message id and when SQS took it (epoch seconds)."""
    sqs = stack.client("sqs")
    records: list[tuple[str, float]] = []
    for queue in QUEUES.values():
        while True:
            batch = sqs.receive_message(
                QueueUrl=stack.queue_urls[queue],
                MaxNumberOfMessages=10,
                VisibilityTimeout=900,
                AttributeNames=["SentTimestamp"],
            ).get("Messages", [])
            if not batch:
                break
            records += [
                (json.loads(record["Body"])["messageId"], int(record["Attributes"]["SentTimestamp"]) / 1000)
                for record in batch
            ]
    return records


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
    for minute in range(MAX_SWEEPS):
        # The schedule's k-th sweep: its clock at sendAt + k minutes, moving on with the wall clock.
        started_wall, started, cpu = time.time(), time.monotonic(), time.process_time()
        at = send_at + timedelta(seconds=SCHEDULE_SECONDS * minute)
        sweeper = build_outbox(
            clock=lambda at=at, started=started: at + timedelta(seconds=time.monotonic() - started)
        )
        context = LambdaContext(spec)
        with silenced_stdout():
            report = sweeper.sweep(
                time_left=lambda context=context: context.get_remaining_time_in_millis() / 1000
            )
        metrics.clear_metrics()
        peak.sweeps.append(Sweep(started_wall, time.monotonic() - started, time.process_time() - cpu, report))
        print(
            f"  sweep {minute + 1}: {report} in {peak.sweeps[-1].seconds:.1f} s", file=sys.stderr, flush=True
        )
        if "budget_spent" not in report:
            break
    return peak


def run_outbox_peak(count: int = PEAK, engine: str | None = None) -> OutboxPeak:
    engine = engine or (DYNAMODB_LOCAL if dynamodb_local.unavailable() is None else MOTO)
    stack = start_stack()
    try:
        with messages_table(stack, engine) as dynamodb:
            peak = _sweep_a_peak(stack, dynamodb, count, engine)
        records = _records(stack)
    finally:
        stack.stop()
    peak.distinct = len({message_id for message_id, _ in records})
    for _, taken in records:
        # The sweep that sent it: the last one started before SQS took it.
        minute, sweep = max(
            ((index, sweep) for index, sweep in enumerate(peak.sweeps) if sweep.started <= taken),
            key=lambda pair: pair[1].started,
        )
        peak.lateness.append(SCHEDULE_SECONDS * minute + taken - sweep.started)
    return peak


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
