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

On the emulators each call takes 25 to 100 ms, so the lateness measured here is theirs. The run is a
correctness check (every message handed over, none twice) and a measurement of what the sweeper
itself spends: its AWS calls (counted in the sweep's process) and its CPU, per message. From those,
the sweeper's shape (its reading thread, its workers, each chunk's batches side by side, its time
budget) and per-call latencies assumed for AWS (`AWS_CALL_MS`, docs/performance.md gives their
basis), `project` works out how long the peak takes on AWS: `projected_aws_seconds`.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from sendonce.adapters.dynamodb_items import message_key, to_item
from sendonce.aws_clients import client
from sendonce.dispatch.outbox import CHUNK, STOP_MARGIN_SECONDS, WORKERS
from sendonce.entrypoints.outbox import build as build_outbox
from sendonce.messages.handoff import MAX_QUEUE_DELAY
from sendonce.messages.ids import new_message_id
from sendonce.messages.model import Channel, Message, Status
from sendonce.observability import metrics
from sendonce.settings import DispatcherSettings
from sendonce.side_by_side import DEFAULT_WORKERS as SIDE_BY_SIDE_WORKERS

from bench.call_counter import COUNTER
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

# What one call takes on AWS, from a Lambda function to the service in its own region: the upper
# end of what each usually answers in (docs/performance.md, "The outbox on AWS"), so that the
# projection errs late. DynamoDB answers a key-value read or write in single-digit milliseconds; a
# Query of one Outbox shard returns a few hundred small entries; SQS takes a little longer for a
# batch of ten, which it stores redundantly before answering.
AWS_CALL_MS = {
    "dynamodb.Query": 10.0,
    "dynamodb.UpdateItem": 10.0,
    "dynamodb.TransactWriteItems": 20.0,
    "sqs.SendMessageBatch": 20.0,
    "sqs.SendMessage": 20.0,
}
OTHER_CALL_MS = 25.0  # a call not named above
READS = ("dynamodb.Query",)  # made by the sweep's reading thread, one page after another
BATCHES = "sqs.SendMessageBatch"  # a chunk's, side by side
# Lambda gives a function one full vCPU at 1,769 MB, and a share of one below it; Python's threads
# run one at a time, so more vCPUs would not help the sweep.
MB_PER_VCPU = 1769
# From the schedule's minute to the sweep's first call: the scheduler's invocation and a cold
# start (bench/cold_start.py: the outbox function's is a few hundred milliseconds).
START_SECONDS = 1.0


@dataclass
class Sweep:
    started: float  # wall time (epoch seconds), as SQS stamps its records
    seconds: float
    cpu_seconds: float  # the sweep's own process: the sweeper's threads (the emulators run elsewhere)
    report: dict[str, int]
    operations: dict[str, int] = field(default_factory=dict)  # its AWS calls, "service.Operation": count


@dataclass(frozen=True)
class Projection:
    """How long `messages` due at once take on AWS (`project`)."""

    messages: int
    seconds: float
    bound: str  # what limits the rate: "cpu" or "calls"
    per_second: float
    sweeps: int
    inputs: dict[str, Any]


def _call_ms(operation: str, call_ms: Mapping[str, float]) -> float:
    return call_ms.get(operation, OTHER_CALL_MS)


def project(
    messages: int,
    calls_per_message: Mapping[str, float],
    reads_per_sweep: Mapping[str, float],
    cpu_seconds_per_message: float,
    *,
    memory_mb: int,
    timeout_seconds: float,
    call_ms: Mapping[str, float] = AWS_CALL_MS,
    workers: int = WORKERS,
    chunk: int = CHUNK,
    margin_seconds: float = STOP_MARGIN_SECONDS,
) -> Projection:
    """The time from the schedule's minute until the last of `messages` is handed over, on AWS.

    The sweep's shape (`sendonce.dispatch.outbox`): one thread reads the Outbox shards' pages one
    after another (`reads_per_sweep` calls of each operation), and hands chunks of `chunk` entries to
    `workers` threads. A worker sends its chunk's `SendMessageBatch` calls side by side (one round
    trip for up to SIDE_BY_SIDE_WORKERS of them), then moves each entry with its own calls, one
    after another (`calls_per_message`, every operation but the batches and the reads), and spends
    its CPU (`cpu_seconds_per_message`, measured, on the function's share of a vCPU). The workers
    are limited by their round trips or by the one vCPU they share, whichever is slower; the reading
    is counted apart, as if nothing overlapped it. A sweep starts no chunk in its last
    `margin_seconds`: what does not fit in one sweep waits for the next, a minute later.
    """
    vcpus = min(1.0, memory_mb / MB_PER_VCPU)
    cpu = cpu_seconds_per_message / vcpus
    read_seconds = sum(count * _call_ms(op, call_ms) for op, count in reads_per_sweep.items()) / 1000
    batches = calls_per_message.get(BATCHES, 0.0) * chunk
    batch_seconds = math.ceil(batches / SIDE_BY_SIDE_WORKERS) * _call_ms(BATCHES, call_ms) / 1000
    move_seconds = (
        sum(
            count * _call_ms(op, call_ms)
            for op, count in calls_per_message.items()
            if op != BATCHES and op not in READS
        )
        / 1000
    )
    chunk_seconds = batch_seconds + chunk * (move_seconds + cpu)
    calls_rate = workers * chunk / chunk_seconds
    cpu_rate = 1 / cpu if cpu else math.inf
    rate = min(calls_rate, cpu_rate)
    work = read_seconds + messages / rate
    usable = timeout_seconds - margin_seconds
    sweeps = max(1, math.ceil(work / usable))
    seconds = (sweeps - 1) * SCHEDULE_SECONDS + START_SECONDS + work - (sweeps - 1) * usable
    return Projection(
        messages=messages,
        seconds=seconds,
        bound="cpu" if cpu_rate <= calls_rate else "calls",
        per_second=rate,
        sweeps=sweeps,
        inputs={
            "assumed_call_ms": dict(call_ms),
            "assumed_other_call_ms": OTHER_CALL_MS,
            "start_seconds": START_SECONDS,
            "vcpus": round(vcpus, 2),
            "workers": workers,
            "chunk": chunk,
            "side_by_side_batches": SIDE_BY_SIDE_WORKERS,
            "usable_seconds_per_sweep": usable,
            "reads_per_sweep": dict(reads_per_sweep),
            "read_seconds": round(read_seconds, 2),
            "chunk_seconds": round(chunk_seconds, 4),
            "per_second_by_calls": round(calls_rate),
            "per_second_by_cpu": round(cpu_rate) if cpu else None,
        },
    )


@dataclass
class OutboxPeak:
    messages: int
    engine: str
    write_seconds: float
    memory_mb: int  # the template's OutboxFunction
    timeout_seconds: float
    sweeps: list[Sweep] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)  # seconds after sendAt, one per record
    distinct: int = 0

    def operations(self) -> Counter[str]:
        return sum((Counter(sweep.operations) for sweep in self.sweeps), Counter())

    def calls_per_message(self) -> dict[str, float]:
        """Each operation's calls per message handed over, the reads included."""
        handed = len(self.lateness)
        return {op: count / handed for op, count in sorted(self.operations().items())} if handed else {}

    def projection(self, messages: int = PEAK) -> Projection | None:
        """`messages` (the peak, whatever this run swept) on AWS, from this run's calls and CPU.

        The reads are a sweep's, not a message's: every shard's pages, in each pass (one page a
        shard up to 1 MB of due entries, some thousands), so they are taken from the sweep that
        read the most, which made every pass; the other calls and the CPU scale with the messages.
        """
        handed = len(self.lateness)
        if not handed:
            return None
        reads = {op: float(max(sweep.operations.get(op, 0) for sweep in self.sweeps)) for op in READS}
        moves = {op: count for op, count in self.calls_per_message().items() if op not in READS}
        cpu = sum(sweep.cpu_seconds for sweep in self.sweeps) / handed
        return project(
            messages,
            moves,
            reads,
            cpu,
            memory_mb=self.memory_mb,
            timeout_seconds=self.timeout_seconds,
        )

    def figures(self) -> dict[str, Any]:
        handed = len(self.lateness)
        busy = sum(sweep.seconds for sweep in self.sweeps)
        cpu = sum(sweep.cpu_seconds for sweep in self.sweeps)
        projection = self.projection()
        return {
            "messages": self.messages,
            "engine": self.engine,
            "handed_off": self.distinct,
            "records": handed,
            "sweeps": len(self.sweeps),
            "max_late_s": round(max(self.lateness), 1) if self.lateness else None,
            "p50_late_s": round(percentile(self.lateness, 0.5), 1) if self.lateness else None,
            "per_second": round(handed / busy) if busy else None,
            "calls_per_message": round(sum(self.operations().values()) / handed, 3) if handed else None,
            "cpu_ms_per_message": round(cpu * 1000 / handed, 2) if handed else None,
            "projected_aws_seconds": round(projection.seconds, 1) if projection else None,
            "projected_aws_bound": projection.bound if projection else None,
            "projected_aws_per_second": round(projection.per_second) if projection else None,
        }

    def details(self) -> dict[str, Any]:
        projection = self.projection()
        return {
            "write_seconds": round(self.write_seconds, 1),
            "sweeps": [
                {
                    "seconds": round(sweep.seconds, 1),
                    "cpu_seconds": round(sweep.cpu_seconds, 2),
                    "report": sweep.report,
                    "operations": sweep.operations,
                }
                for sweep in self.sweeps
            ],
            "calls_per_message": {op: round(count, 4) for op, count in self.calls_per_message().items()},
            "projection": (
                {"messages": projection.messages, "sweeps": projection.sweeps, **projection.inputs}
                if projection
                else None
            ),
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
    COUNTER.install()  # before the sweeper builds its clients: each of its calls is counted
    sweeper = build_outbox(
        DispatcherSettings.from_environment(),
        client,
        clock=lambda: at + timedelta(seconds=time.monotonic() - started),
    )
    context = LambdaContext(spec)
    with silenced_stdout(), COUNTER.counting() as log:
        report = sweeper.sweep(time_left=lambda: context.get_remaining_time_in_millis() / 1000)
    metrics.clear_metrics()
    operations = dict(Counter(log.operations()))
    answer.send((report, time.monotonic() - started, time.process_time() - cpu, operations))
    answer.close()


SweepResult = tuple[dict[str, int], float, float, dict[str, int]]


def _sweep_in_child(at: datetime, spec: FunctionSpec) -> SweepResult:
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter inherits no lock held by a thread
    receiving, sending = spawn.Pipe(duplex=False)
    child = spawn.Process(target=_sweep, args=(at, spec, sending), name="outbox-sweep")
    child.start()
    sending.close()
    try:
        result: SweepResult = receiving.recv()
    finally:
        child.join()
    return result


def _sweep_a_peak(stack: BenchStack, dynamodb: Any, count: int, engine: str) -> OutboxPeak:
    send_at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    began = time.perf_counter()
    write_schedules(dynamodb, count, send_at)
    spec = stack.template.functions["OutboxFunction"]
    peak = OutboxPeak(
        messages=count,
        engine=engine,
        write_seconds=time.perf_counter() - began,
        memory_mb=spec.memory_mb,
        timeout_seconds=spec.timeout_seconds,
    )
    print(
        f"outbox peak: {count} messages written on {engine} in {peak.write_seconds:.0f} s; sweeping ...",
        file=sys.stderr,
        flush=True,
    )
    handed: set[str] = set()
    for minute in range(MAX_SWEEPS):
        # The schedule's k-th sweep: its clock at sendAt + k minutes, moving on with the wall clock.
        started_wall = time.time()
        report, seconds, cpu, operations = _sweep_in_child(
            send_at + timedelta(seconds=SCHEDULE_SECONDS * minute), spec
        )
        peak.sweeps.append(Sweep(started_wall, seconds, cpu, report, operations))
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
