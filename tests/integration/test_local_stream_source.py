"""The local stack's DynamoDB stream event source mapping against the emulator (moto's streams).

A table with a NEW_AND_OLD_IMAGES stream, written with PutItem, UpdateItem, DeleteItem and
TransactWriteItems (through the local stack's transaction patch), and a recording function in
place of a handler: the records arrive in order, in Lambda's event shape, and a reported failure is
retried from the failed record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from sendonce_local.emulator import table_request
from sendonce_local.stream_sources import StreamPoller, stream_arn
from sendonce_local.template import ResourceSpec, StreamMapping
from tests.integration.conftest import REGION, Stack

TABLE = "StreamedTable"
FAST = {"poll_interval": 0.05, "retry_backoff": 0.05}


def key(name: str) -> dict[str, Any]:
    return {"pk": {"S": name}, "sk": {"S": "ITEM"}}


@dataclass
class RecordingFunction:
    """Stands in for a handler: keeps each event, answers what `answer` says."""

    answer: Callable[[list[dict[str, Any]]], Any] = lambda records: None
    name: str = "MessageChangesFunction"
    events: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def invoke(self, event: dict[str, Any]) -> Any:
        with self._lock:
            self.events.append(event)
        return self.answer(event["Records"])

    @property
    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            return [record for event in self.events for record in event["Records"]]


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


@pytest.fixture
def dynamodb(stack: Stack) -> Any:
    client = boto3.client("dynamodb", region_name=REGION)
    properties = {
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "BillingMode": "PAY_PER_REQUEST",
        "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
    }
    client.create_table(**table_request(ResourceSpec(TABLE, properties)))
    return client


@pytest.fixture
def run_mapping(dynamodb: Any) -> Iterator[Callable[..., StreamPoller]]:
    stop = threading.Event()
    started: list[StreamPoller] = []

    def run(function: RecordingFunction, **changes: Any) -> StreamPoller:
        settings: dict[str, Any] = {
            "function_id": function.name,
            "event_name": "MessageChanges",
            "table_id": TABLE,
            "batch_size": 100,
            "starting_position": "TRIM_HORIZON",
            "report_batch_item_failures": True,
            "bisect": True,
            "batching_window_seconds": 0.0,
        }
        settings.update(changes)
        poller = StreamPoller(
            StreamMapping(**settings),
            function,
            dynamodb,
            boto3.client("dynamodbstreams", region_name=REGION),
            stop,
            **FAST,
        )
        poller.start()
        started.append(poller)
        return poller

    yield run
    stop.set()
    for poller in started:
        poller.join(5)


def test_every_write_arrives_in_order_in_lambdas_event_shape(dynamodb: Any, run_mapping: Any) -> None:
    dynamodb.put_item(
        TableName=TABLE, Item={**key("a"), "status": {"S": "queued"}, "raw": {"B": b"\x00\x01"}}
    )
    function = RecordingFunction()
    run_mapping(function)  # TRIM_HORIZON: the write before the mapping started arrives too
    dynamodb.update_item(
        TableName=TABLE,
        Key=key("a"),
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "sent"}},
    )
    dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": TABLE, "Item": {**key("b"), "status": {"S": "queued"}}}},
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": key("a"),
                    "UpdateExpression": "SET #s = :s",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": {":s": {"S": "delivered"}},
                }
            },
        ]
    )
    dynamodb.delete_item(TableName=TABLE, Key=key("b"))

    wait_for(lambda: len(function.records) >= 5)
    records = function.records
    arn = stream_arn(dynamodb, TABLE)
    assert [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in records] == [
        ("INSERT", "a"),
        ("MODIFY", "a"),
        ("INSERT", "b"),  # the transaction's two writes, each its own record
        ("MODIFY", "a"),
        ("REMOVE", "b"),
    ]
    numbers = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
    assert numbers == sorted(numbers)
    assert len(set(numbers)) == 5
    first = records[0]
    assert set(first) == {
        "eventID",
        "eventName",
        "eventVersion",
        "eventSource",
        "awsRegion",
        "dynamodb",
        "eventSourceARN",
    }
    assert first["eventVersion"] == "1.1"
    assert first["eventSource"] == "aws:dynamodb"
    assert first["awsRegion"] == REGION
    assert first["eventSourceARN"] == arn
    assert arn.startswith(f"arn:aws:dynamodb:{REGION}:123456789012:table/{TABLE}/stream/")
    assert isinstance(first["dynamodb"]["ApproximateCreationDateTime"], int)
    assert abs(first["dynamodb"]["ApproximateCreationDateTime"] - time.time()) < 60
    assert first["dynamodb"]["Keys"] == key("a")
    assert first["dynamodb"]["NewImage"] == {**key("a"), "status": {"S": "queued"}, "raw": {"B": "AAE="}}
    assert "OldImage" not in first["dynamodb"]
    assert first["dynamodb"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert isinstance(first["dynamodb"]["SizeBytes"], int)
    in_transaction = records[3]["dynamodb"]
    assert in_transaction["OldImage"]["status"] == {"S": "sent"}
    assert in_transaction["NewImage"]["status"] == {"S": "delivered"}
    assert records[4]["dynamodb"]["OldImage"]["status"] == {"S": "queued"}
    assert "NewImage" not in records[4]["dynamodb"]


def test_latest_skips_what_was_written_before_the_mapping_started(dynamodb: Any, run_mapping: Any) -> None:
    dynamodb.put_item(TableName=TABLE, Item=key("before"))
    function = RecordingFunction()
    run_mapping(function, starting_position="LATEST")
    dynamodb.put_item(TableName=TABLE, Item=key("after"))

    wait_for(lambda: len(function.records) >= 1)
    time.sleep(0.2)
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in function.records] == ["after"]


def test_a_reported_failure_is_retried_from_the_failed_record(dynamodb: Any, run_mapping: Any) -> None:
    for name in ("r0", "r1", "r2", "r3"):
        dynamodb.put_item(TableName=TABLE, Item=key(name))
    failed_once: list[str] = []

    def answer(records: list[dict[str, Any]]) -> Any:
        for record in records:
            if record["dynamodb"]["Keys"]["pk"]["S"] == "r2" and not failed_once:
                failed_once.append(record["dynamodb"]["SequenceNumber"])
                return {"batchItemFailures": [{"itemIdentifier": record["dynamodb"]["SequenceNumber"]}]}
        return None

    function = RecordingFunction(answer)
    run_mapping(function)

    wait_for(lambda: len(function.events) >= 2)
    batches = [[r["dynamodb"]["Keys"]["pk"]["S"] for r in event["Records"]] for event in function.events]
    assert batches == [["r0", "r1", "r2", "r3"], ["r2", "r3"]]


def test_a_raised_error_retries_the_batch_and_loses_nothing(dynamodb: Any, run_mapping: Any) -> None:
    calls: list[int] = []

    def answer(records: list[dict[str, Any]]) -> Any:
        calls.append(len(records))
        if len(calls) <= 2:
            raise RuntimeError("the function is down")
        return None

    function = RecordingFunction(answer)
    run_mapping(function, bisect=False)
    dynamodb.put_item(TableName=TABLE, Item=key("x"))

    wait_for(lambda: len(calls) >= 3)
    time.sleep(0.2)
    assert [[r["dynamodb"]["Keys"]["pk"]["S"] for r in event["Records"]] for event in function.events] == [
        ["x"],
        ["x"],
        ["x"],
    ]


def test_the_batching_window_gathers_writes(dynamodb: Any, run_mapping: Any) -> None:
    function = RecordingFunction()
    run_mapping(function, batching_window_seconds=1.0)
    for name in ("w0", "w1", "w2"):
        dynamodb.put_item(TableName=TABLE, Item=key(name))

    wait_for(lambda: len(function.records) >= 3)
    assert len(function.events) == 1


def test_a_table_without_a_stream_is_refused(stack: Stack) -> None:
    dynamodb = boto3.client("dynamodb", region_name=REGION)

    with pytest.raises(ValueError, match="has no stream"):
        stream_arn(dynamodb, "IdempotencyTable")


# ---------------------------------------------------------------------------- moto's records vs DynamoDB's
def _all_records(dynamodb: Any) -> list[dict[str, Any]]:
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    arn = stream_arn(dynamodb, TABLE)
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records: list[dict[str, Any]] = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    return records


def test_a_canceled_transaction_leaves_no_stream_record(dynamodb: Any) -> None:
    dynamodb.put_item(TableName=TABLE, Item=key("taken"))
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": key("fresh")}},
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": key("taken"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )

    assert [r["eventName"] for r in _all_records(dynamodb)] == ["INSERT"]


@pytest.mark.xfail(
    strict=True,
    reason="moto's UpdateItem creates a missing item with a PutItem of its key first: two INSERT"
    " records, the first with only the key in its NewImage; DynamoDB writes one INSERT",
)
def test_an_update_that_creates_an_item_is_one_insert(dynamodb: Any) -> None:
    dynamodb.update_item(
        TableName=TABLE,
        Key=key("new"),
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "queued"}},
    )

    records = _all_records(dynamodb)
    assert [r["eventName"] for r in records] == ["INSERT"]
    assert records[0]["dynamodb"]["NewImage"]["status"] == {"S": "queued"}
