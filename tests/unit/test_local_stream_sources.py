"""sendonce_local: Lambda's DynamoDB stream event source mapping (batches, partial failures, bisection)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sendonce_local import stream_sources
from sendonce_local.changes import Changes
from sendonce_local.stream_sources import Outcome, ShardPoller, judge, lambda_record
from sendonce_local.template import StreamMapping, load_template, parse_template

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/MessagesTable/stream/2026-01-01T00:00:00.000"
FIRST = 1100000000017454423009
OTHER_STREAM = "arn:aws:dynamodb:us-east-1:123456789012:table/Other/stream/2026-01-01T00:00:00"


def raw(n: int, name: str = "INSERT") -> dict[str, Any]:
    """A GetRecords record as boto3 returns it (the time a datetime, binary values bytes)."""
    return {
        "eventID": f"e{n}",
        "eventName": name,
        "eventVersion": "1.0",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": datetime(2026, 1, 1, 12, 0, 0, 700_000, tzinfo=UTC),
            "Keys": {"pk": {"S": f"k{n}"}},
            "NewImage": {"pk": {"S": f"k{n}"}},
            "SequenceNumber": str(FIRST + n),
            "SizeBytes": 10,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }


def seq(n: int) -> str:
    return str(FIRST + n)


def mapping(**changes: Any) -> StreamMapping:
    settings: dict[str, Any] = {
        "function_id": "MessageChangesFunction",
        "event_name": "MessageChanges",
        "table_id": "MessagesTable",
        "batch_size": 4,
        "starting_position": "TRIM_HORIZON",
        "report_batch_item_failures": True,
        "bisect": False,
        "batching_window_seconds": 0.0,
    }
    settings.update(changes)
    return StreamMapping(**settings)


@dataclass
class FakeShard:
    records: list[dict[str, Any]] = field(default_factory=list)
    reads: list[int] = field(default_factory=list)  # the limit of each read
    closed: bool = False

    def read(self, limit: int) -> list[dict[str, Any]]:
        self.reads.append(limit)
        taken, self.records = self.records[:limit], self.records[limit:]
        return taken


Answer = Callable[[list[str]], Any]  # the sequence numbers of a batch -> the handler's answer


@dataclass
class FakeFunction:
    answer: Answer = lambda batch: None
    batches: list[list[str]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def invoke(self, event: dict[str, Any]) -> Any:
        self.events.append(event)
        numbers = [record["dynamodb"]["SequenceNumber"] for record in event["Records"]]
        self.batches.append(numbers)
        return self.answer(numbers)


@dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


def poller(
    shard: FakeShard, function: FakeFunction, clock: Clock | None = None, **changes: Any
) -> ShardPoller:
    return ShardPoller(
        mapping(**changes),
        shard,
        function.invoke,
        threading.Event(),
        function_name="MessageChangesFunction",
        shard_id="shardId-1",
        stream_arn=ARN,
        clock=clock or Clock(),
    )


def drain(shard_poller: ShardPoller, steps: int = 50) -> list[str]:
    outcomes = [shard_poller.poll_once() for _ in range(steps)]
    return [step for step in outcomes if step != "idle"]


# ---------------------------------------------------------------------------- the event
def test_a_record_has_lambdas_shape() -> None:
    record = raw(0, "MODIFY")
    record["dynamodb"]["OldImage"] = {"pk": {"S": "k0"}, "b": {"B": b"\x00\x01"}, "bs": {"BS": [b"\xff"]}}
    record["dynamodb"]["NewImage"] = {"pk": {"S": "k0"}, "m": {"M": {"l": {"L": [{"B": b"a"}, {"N": "1"}]}}}}

    assert lambda_record(record, ARN) == {
        "eventID": "e0",
        "eventName": "MODIFY",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": 1767268800,  # epoch seconds, rounded down
            "Keys": {"pk": {"S": "k0"}},
            "NewImage": {"pk": {"S": "k0"}, "m": {"M": {"l": {"L": [{"B": "YQ=="}, {"N": "1"}]}}}},
            "OldImage": {"pk": {"S": "k0"}, "b": {"B": "AAE="}, "bs": {"BS": ["/w=="]}},
            "SequenceNumber": seq(0),
            "SizeBytes": 10,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
        "eventSourceARN": ARN,
    }


def test_a_remove_has_no_new_image() -> None:
    record = raw(0, "REMOVE")
    record["dynamodb"]["OldImage"] = record["dynamodb"].pop("NewImage")

    assert "NewImage" not in lambda_record(record, ARN)["dynamodb"]
    assert lambda_record(record, ARN)["dynamodb"]["OldImage"] == {"pk": {"S": "k0"}}


# ---------------------------------------------------------------------------- reading an answer
RECORDS = [lambda_record(raw(n), ARN) for n in range(4)]


@pytest.mark.parametrize(
    "answer",
    [None, {}, {"batchItemFailures": []}, {"batchItemFailures": None}, {"other": 1}],
)
def test_an_answer_without_failures_settles_the_whole_batch(answer: Any) -> None:
    assert judge(RECORDS, answer, report_failures=True) == Outcome(4)


def test_the_lowest_failed_sequence_number_is_where_the_retry_starts() -> None:
    answer = {"batchItemFailures": [{"itemIdentifier": seq(3)}, {"itemIdentifier": seq(1)}]}

    assert judge(RECORDS, answer, report_failures=True) == Outcome(1)


@pytest.mark.parametrize(
    "answer",
    [
        {"batchItemFailures": [{"itemIdentifier": ""}]},
        {"batchItemFailures": [{"itemIdentifier": None}]},
        {"batchItemFailures": [{"id": seq(1)}]},
        {"batchItemFailures": [{"itemIdentifier": "999"}]},
        {"batchItemFailures": "x"},
        "ok",
        [1],
    ],
)
def test_an_invalid_report_fails_the_whole_batch(answer: Any) -> None:
    outcome = judge(RECORDS, answer, report_failures=True)

    assert outcome.done == 0
    assert outcome.error


def test_without_report_batch_item_failures_any_answer_is_success() -> None:
    answer = {"batchItemFailures": [{"itemIdentifier": seq(1)}]}

    assert judge(RECORDS, answer, report_failures=False) == Outcome(4)


# ---------------------------------------------------------------------------- batching
def test_records_arrive_in_order_in_batches_of_batch_size() -> None:
    shard = FakeShard([raw(n) for n in range(10)])
    function = FakeFunction()

    assert drain(poller(shard, function)) == ["done", "done", "done"]
    assert function.batches == [
        [seq(n) for n in range(0, 4)],
        [seq(n) for n in range(4, 8)],
        [seq(8), seq(9)],
    ]
    assert function.events[0]["Records"][0]["eventSourceARN"] == ARN


def test_the_reader_keeps_its_place() -> None:
    shard = FakeShard([raw(0)])
    function = FakeFunction()
    shard_poller = poller(shard, function)

    shard_poller.poll_once()
    shard.records.append(raw(1))
    shard_poller.poll_once()

    assert function.batches == [[seq(0)], [seq(1)]]
    assert shard.reads == [4, 4]  # never more than a batch is read ahead


def test_a_partial_batch_waits_for_the_batching_window() -> None:
    shard = FakeShard([raw(0), raw(1)])
    function = FakeFunction()
    clock = Clock()
    shard_poller = poller(shard, function, clock, batching_window_seconds=1.0)

    assert shard_poller.poll_once() == "waiting"
    clock.now += 0.5
    shard.records.append(raw(2))
    assert shard_poller.poll_once() == "waiting"
    clock.now += 0.5
    assert shard_poller.poll_once() == "done"
    assert function.batches == [[seq(0), seq(1), seq(2)]]


def test_a_full_batch_does_not_wait_for_the_window() -> None:
    shard = FakeShard([raw(n) for n in range(4)])
    function = FakeFunction()

    assert poller(shard, function, batching_window_seconds=300.0).poll_once() == "done"
    assert function.batches == [[seq(n) for n in range(4)]]


def test_nothing_to_read_is_idle() -> None:
    function = FakeFunction()

    assert poller(FakeShard(), function).poll_once() == "idle"
    assert function.batches == []


# ---------------------------------------------------------------------------- failures and retries
def test_a_partial_failure_retries_from_the_lowest_failed_record() -> None:
    shard = FakeShard([raw(n) for n in range(6)])
    answers = iter(
        [{"batchItemFailures": [{"itemIdentifier": seq(3)}, {"itemIdentifier": seq(2)}]}, None, None]
    )
    function = FakeFunction(lambda batch: next(answers))

    assert drain(poller(shard, function)) == ["failed", "done", "done"]
    assert function.batches == [
        [seq(0), seq(1), seq(2), seq(3)],
        [seq(2), seq(3)],  # the records of the failed batch from the lowest failure, nothing newer
        [seq(4), seq(5)],
    ]


def test_a_raised_error_retries_the_whole_batch_until_it_succeeds() -> None:
    shard = FakeShard([raw(n) for n in range(5)])
    calls = iter([RuntimeError("boom"), RuntimeError("boom"), None, None])

    def answer(batch: list[str]) -> Any:
        outcome = next(calls)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    function = FakeFunction(answer)

    assert drain(poller(shard, function)) == ["failed", "failed", "done", "done"]
    whole = [seq(n) for n in range(4)]
    assert function.batches == [whole, whole, whole, [seq(4)]]


def test_an_invalid_report_retries_the_whole_batch() -> None:
    shard = FakeShard([raw(n) for n in range(2)])
    answers = iter([{"batchItemFailures": [{"itemIdentifier": "nope"}]}, None])
    function = FakeFunction(lambda batch: next(answers))

    assert drain(poller(shard, function)) == ["failed", "done"]
    assert function.batches == [[seq(0), seq(1)], [seq(0), seq(1)]]


def test_bisect_splits_a_failed_batch_until_the_poison_record_is_alone() -> None:
    shard = FakeShard([raw(n) for n in range(8)])
    poisoned = {seq(2)}
    healed = threading.Event()

    def answer(batch: list[str]) -> Any:
        if poisoned & set(batch) and not healed.is_set():
            raise ValueError("poison")
        return None

    function = FakeFunction(answer)
    shard_poller = poller(shard, function, batch_size=8, bisect=True)
    steps = [shard_poller.poll_once() for _ in range(6)]

    assert function.batches == [
        [seq(n) for n in range(8)],
        [seq(n) for n in range(4)],  # first half fails again
        [seq(0), seq(1)],  # its first half succeeds
        [seq(2), seq(3)],
        [seq(2)],  # alone now, and retried as it is: never skipped
        [seq(2)],
    ]
    assert steps == ["failed", "failed", "done", "failed", "failed", "failed"]

    healed.set()
    drain(shard_poller)

    assert function.batches[6:] == [[seq(2)], [seq(3)], [seq(n) for n in range(4, 8)]]


def test_bisect_after_a_partial_failure_retries_only_the_rest() -> None:
    shard = FakeShard([raw(n) for n in range(4)])
    answers = iter([{"batchItemFailures": [{"itemIdentifier": seq(1)}]}, None])
    function = FakeFunction(lambda batch: next(answers))

    assert drain(poller(shard, function, bisect=True)) == ["failed", "done"]
    assert function.batches == [[seq(n) for n in range(4)], [seq(1), seq(2), seq(3)]]


def test_records_written_during_a_retry_wait_for_it() -> None:
    shard = FakeShard([raw(0), raw(1)])
    answers = iter([RuntimeError("down"), None, None])

    def answer(batch: list[str]) -> Any:
        outcome = next(answers)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    function = FakeFunction(answer)
    shard_poller = poller(shard, function)

    shard_poller.poll_once()
    shard.records.extend([raw(2), raw(3)])
    drain(shard_poller)

    assert function.batches == [[seq(0), seq(1)], [seq(0), seq(1)], [seq(2), seq(3)]]


def test_run_backs_off_after_a_failure_and_stops_on_request() -> None:
    shard = FakeShard([raw(0)])
    stop = threading.Event()
    waits: list[float] = []

    class RecordingStop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            if len(waits) >= 3:
                stop.set()
            return stop.is_set()

        def is_set(self) -> bool:
            return stop.is_set()

    def fail(event: dict[str, Any]) -> Any:
        raise RuntimeError("always")

    shard_poller = ShardPoller(
        mapping(),
        shard,
        fail,
        RecordingStop(),
        function_name="F",
        shard_id="s",
        stream_arn=ARN,
        poll_interval=0.25,
        retry_backoff=1.0,
    )
    shard_poller.run()

    assert waits == [1.0, 1.0, 1.0]  # a failing record is retried once a second, not in a spin
    assert shard_poller.pending == 1  # and never dropped


def test_run_polls_at_the_poll_interval_when_idle() -> None:
    stop = threading.Event()
    waits: list[float] = []

    class RecordingStop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            stop.set()
            return True

        def is_set(self) -> bool:
            return stop.is_set()

    ShardPoller(
        mapping(),
        FakeShard(),
        FakeFunction().invoke,
        RecordingStop(),
        function_name="F",
        shard_id="s",
        stream_arn=ARN,
        poll_interval=0.25,
    ).run()

    assert waits == [0.25]


def test_a_read_error_is_logged_without_records_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    class BrokenShard(FakeShard):
        def read(self, limit: int) -> list[dict[str, Any]]:
            raise ConnectionError("emulator gone")

    stop = threading.Event()

    class OneWait(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            stop.set()
            return True

        def is_set(self) -> bool:
            return stop.is_set()

    with caplog.at_level("INFO", logger="local-stack.streams"):
        ShardPoller(
            mapping(),
            BrokenShard(),
            FakeFunction().invoke,
            OneWait(),
            function_name="F",
            shard_id="s",
            stream_arn=ARN,
        ).run()

    assert [r.getMessage() for r in caplog.records] == [
        "stream.read_failed table=MessagesTable shard=s error=ConnectionError"
    ]


def test_logs_name_records_by_sequence_number_only(caplog: pytest.LogCaptureFixture) -> None:
    record = raw(0)
    record["dynamodb"]["NewImage"] = {"pk": {"S": "k0"}, "body": {"S": "SECRET-BODY"}}
    shard = FakeShard([record])
    answers = iter([{"batchItemFailures": [{"itemIdentifier": seq(0)}]}, None])
    function = FakeFunction(lambda batch: next(answers))

    with caplog.at_level("DEBUG", logger="local-stack.streams"):
        drain(poller(shard, function))

    messages = [r.getMessage() for r in caplog.records]
    assert [m.split()[0] for m in messages] == ["stream.batch_partial", "stream.batch_done"]
    assert all("SECRET-BODY" not in m for m in messages)


# ---------------------------------------------------------------------------- the template's events
def test_a_dynamodb_event_becomes_a_stream_mapping(tmp_path: Path) -> None:
    document = {
        "Resources": {
            "MessagesTable": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
            "MessageChangesFunction": {
                "Type": "AWS::Serverless::Function",
                "Properties": {
                    "CodeUri": "functions/message_changes/",
                    "Handler": "app.handler",
                    "Events": {
                        "MessageChanges": {
                            "Type": "DynamoDB",
                            "Properties": {
                                "Stream": {"Fn::GetAtt": ["MessagesTable", "StreamArn"]},
                                "StartingPosition": "TRIM_HORIZON",
                                "BatchSize": 100,
                                "MaximumBatchingWindowInSeconds": 1,
                                "BisectBatchOnFunctionError": True,
                                "FunctionResponseTypes": ["ReportBatchItemFailures"],
                            },
                        },
                        "Plain": {
                            "Type": "DynamoDB",
                            "Properties": {
                                "Stream": OTHER_STREAM,
                                "StartingPosition": "LATEST",
                                "Enabled": False,
                            },
                        },
                    },
                },
            },
        }
    }

    template = parse_template(document, tmp_path)

    assert template.stream_mappings == [
        StreamMapping(
            function_id="MessageChangesFunction",
            event_name="MessageChanges",
            table_id="MessagesTable",
            batch_size=100,
            starting_position="TRIM_HORIZON",
            report_batch_item_failures=True,
            bisect=True,
            enabled=True,
            batching_window_seconds=1.0,
        ),
        StreamMapping(
            function_id="MessageChangesFunction",
            event_name="Plain",
            table_id="Other",
            batch_size=100,
            starting_position="LATEST",
            report_batch_item_failures=False,
            bisect=False,
            enabled=False,
            batching_window_seconds=0.0,
        ),
    ]


def test_a_stream_mapping_needs_a_starting_position(tmp_path: Path) -> None:
    event = {"Type": "DynamoDB", "Properties": {"Stream": {"Fn::GetAtt": ["T", "StreamArn"]}}}
    document = {
        "Resources": {
            "F": {"Type": "AWS::Serverless::Function", "Properties": {"Events": {"E": event}}},
        }
    }

    with pytest.raises(ValueError, match="StartingPosition"):
        parse_template(document, tmp_path)


def test_every_stream_mapping_of_the_template_reads_a_table_with_images() -> None:
    template = load_template(Path(__file__).resolve().parents[2] / "template.yaml")
    tables = {table.logical_id: table.properties for table in template.tables}

    for stream_mapping in template.stream_mappings:
        stream = tables[stream_mapping.table_id].get("StreamSpecification") or {}
        assert stream.get("StreamViewType") == "NEW_AND_OLD_IMAGES", stream_mapping
        assert stream_mapping.function_id in template.functions


def test_given_the_emulators_table_writes_an_idle_reader_waits_for_the_next_write_not_a_poll_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stream_sources, "IDLE_WAIT_SECONDS", 600.0)  # so only the write can wake it
    writes = Changes()
    shard, function, stop = FakeShard(), FakeFunction(), threading.Event()
    shard_poller = ShardPoller(
        mapping(),
        shard,
        function.invoke,
        stop,
        function_name="F",
        shard_id="s",
        stream_arn=ARN,
        table_writes=writes,
    )
    reader = threading.Thread(target=shard_poller.run, daemon=True)
    reader.start()
    try:
        assert _within(lambda: shard.reads)  # it has read once, found nothing, and waits
        shard.records.append(raw(0))
        writes.mark()

        assert _within(lambda: function.batches)
        assert function.batches == [[seq(0)]]
    finally:
        stop.set()
        writes.mark()
        reader.join(10)
    assert not reader.is_alive()


def _within(check: Callable[[], Any], seconds: float = 30.0) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := check()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found
