"""sendonce_local: the in-process AWS emulator (moto) with the template's tables, queues and buckets."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.emulator import AwsEmulator, client, provision
from sendonce_local.emulator_middleware import is_s3_form_put
from sendonce_local.template import load_template, parse_template
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def emulator() -> Iterator[tuple[AwsEmulator, DeliveryLog]]:
    deliveries = DeliveryLog()
    aws = AwsEmulator("127.0.0.1", free_port(), deliveries)
    aws.start()
    try:
        yield aws, deliveries
    finally:
        aws.stop()


def test_tables_queues_and_provider_calls(emulator: tuple[AwsEmulator, DeliveryLog]) -> None:
    aws, deliveries = emulator
    template = load_template(REPO / "template.yaml")

    urls = provision(template, aws.endpoint, "no-reply@sendonce.local")

    tables = set(client("dynamodb", aws.endpoint).list_tables()["TableNames"])
    assert {t.logical_id for t in template.tables} <= tables
    ttl = client("dynamodb", aws.endpoint).describe_time_to_live(TableName="MessagesTable")
    assert ttl["TimeToLiveDescription"]["AttributeName"] == "expiresAt"
    attributes = client("sqs", aws.endpoint).get_queue_attributes(
        QueueUrl=urls["SmsQueue"], AttributeNames=["All"]
    )
    assert attributes["Attributes"]["VisibilityTimeout"] == "180"
    assert json.loads(attributes["Attributes"]["RedrivePolicy"])["deadLetterTargetArn"].endswith(
        ":SmsDeadLetterQueue"
    )
    buckets = {b["Name"] for b in client("s3", aws.endpoint).list_buckets()["Buckets"]}
    assert "sendonce-local-campaignsbucket" in buckets

    client("sns", aws.endpoint).publish(
        PhoneNumber="+15550100000",
        Message="Hi",
        MessageAttributes={"sendonce.message_id": {"DataType": "String", "StringValue": "msg_sms"}},
    )
    client("sesv2", aws.endpoint).send_email(
        FromEmailAddress="no-reply@sendonce.local",
        Destination={"ToAddresses": ["someone@example.com"]},
        Content={"Simple": {"Subject": {"Data": "S"}, "Body": {"Text": {"Data": "B"}}}},
        EmailTags=[{"Name": "sendonce-message-id", "Value": "msg_email"}],
    )

    recorded = [(d["messageId"], d["provider"], d["to"]) for d in deliveries.all()]
    assert recorded == [("msg_sms", "sns", "+15550100000"), ("msg_email", "ses", "someone@example.com")]


def test_a_message_received_too_often_moves_to_the_dead_letter_queue(
    emulator: tuple[AwsEmulator, DeliveryLog], tmp_path: Path
) -> None:
    aws, _ = emulator
    snippet = {
        "Resources": {
            "FlakyDlq": {"Type": "AWS::SQS::Queue", "Properties": {}},
            "Flaky": {
                "Type": "AWS::SQS::Queue",
                "Properties": {
                    "VisibilityTimeout": 0,
                    "RedrivePolicy": {
                        "deadLetterTargetArn": {"Fn::GetAtt": ["FlakyDlq", "Arn"]},
                        "maxReceiveCount": 2,
                    },
                },
            },
        }
    }
    urls = provision(parse_template(snippet, tmp_path), aws.endpoint, "no-reply@sendonce.local")
    sqs = client("sqs", aws.endpoint)
    sqs.send_message(QueueUrl=urls["Flaky"], MessageBody="poison")

    receives = [
        len(sqs.receive_message(QueueUrl=urls["Flaky"], WaitTimeSeconds=1).get("Messages", []))
        for _ in range(3)
    ]

    assert receives == [1, 1, 0]
    moved = sqs.receive_message(QueueUrl=urls["FlakyDlq"], WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in moved] == ["poison"]


# ---------------------------------------------------------------------------- a waiting receive
# A long-poll receive waits for a change to SQS or for the queue's next hidden or delayed message to
# come due: each case below gets its message within a wait far longer than the message is hidden, so
# a receive that waited for neither would come back empty.
LONG_WAIT_SECONDS = 20


def _queue(aws: AwsEmulator, name: str) -> tuple[Any, str]:
    sqs = client("sqs", aws.endpoint)
    url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
    return sqs, url


def test_a_waiting_receive_gets_a_message_whose_visibility_timeout_ends_while_it_waits(
    emulator: tuple[AwsEmulator, DeliveryLog],
) -> None:
    sqs, url = _queue(emulator[0], "HiddenThenVisible")
    sqs.send_message(QueueUrl=url, MessageBody="again")
    (first,) = sqs.receive_message(QueueUrl=url, VisibilityTimeout=1)["Messages"]

    again = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=LONG_WAIT_SECONDS).get("Messages", [])

    assert [m["MessageId"] for m in again] == [first["MessageId"]]


def test_a_waiting_receive_gets_a_delayed_message_once_its_delay_ends(
    emulator: tuple[AwsEmulator, DeliveryLog],
) -> None:
    sqs, url = _queue(emulator[0], "Delayed")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=1)

    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=LONG_WAIT_SECONDS).get("Messages", [])

    assert [m["Body"] for m in got] == ["later"]


def test_a_waiting_receive_gets_a_message_sent_while_it_waits(
    emulator: tuple[AwsEmulator, DeliveryLog],
) -> None:
    sqs, url = _queue(emulator[0], "SentWhileWaiting")
    received: list[list[dict[str, Any]]] = []
    waiting = threading.Thread(
        target=lambda: received.append(
            sqs.receive_message(QueueUrl=url, WaitTimeSeconds=LONG_WAIT_SECONDS).get("Messages", [])
        )
    )
    waiting.start()
    client("sqs", emulator[0].endpoint).send_message(QueueUrl=url, MessageBody="now")
    waiting.join(LONG_WAIT_SECONDS + 10)

    assert [[m["Body"] for m in got] for got in received] == [["now"]]


def test_a_change_to_one_queue_wakes_the_receives_waiting_on_it_only(
    emulator: tuple[AwsEmulator, DeliveryLog],
) -> None:
    aws = emulator[0]
    sqs, busy = _queue(aws, "Busy")
    _, quiet = _queue(aws, "Quiet")
    changes = aws.middleware.sqs_changes
    busy_seen, quiet_seen = changes.of("Busy").seen(), changes.of("Quiet").seen()

    sqs.send_message(QueueUrl=busy, MessageBody="to the busy queue")

    assert changes.of("Busy").seen() != busy_seen
    assert changes.of("Quiet").seen() == quiet_seen  # its pollers sleep on
    sqs.list_queues()  # names no queue: every queue may have changed
    assert changes.of("Quiet").seen() != quiet_seen
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=quiet).get("Messages", [])] == []


def test_once_waits_are_released_a_waiting_receive_ends_at_once() -> None:
    aws = AwsEmulator("127.0.0.1", free_port(), DeliveryLog())
    aws.start()
    try:
        sqs, url = _queue(aws, "Released")
        received: list[list[dict[str, Any]]] = []
        waiting = threading.Thread(
            target=lambda: received.append(
                sqs.receive_message(QueueUrl=url, WaitTimeSeconds=LONG_WAIT_SECONDS).get("Messages", [])
            )
        )
        waiting.start()
        writes_seen = aws.middleware.table_writes.seen()
        aws.middleware.release_waits()
        waiting.join(LONG_WAIT_SECONDS * 3 / 4)  # before its wait would have ended

        assert not waiting.is_alive()
        assert received == [[]]
        # A stream reader waiting for a write wakes too, to see the stop.
        assert aws.middleware.table_writes.seen() != writes_seen
    finally:
        aws.stop()


def test_a_write_to_a_table_is_marked_and_a_read_or_a_stream_read_is_not(
    emulator: tuple[AwsEmulator, DeliveryLog], tmp_path: Path
) -> None:
    aws, _ = emulator
    snippet = {
        "Resources": {
            "Marked": {
                "Type": "AWS::DynamoDB::Table",
                "Properties": {
                    "BillingMode": "PAY_PER_REQUEST",
                    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                    "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
                },
            }
        }
    }
    provision(parse_template(snippet, tmp_path), aws.endpoint, "no-reply@sendonce.local")
    dynamodb, streams = client("dynamodb", aws.endpoint), client("dynamodbstreams", aws.endpoint)
    writes = aws.middleware.table_writes

    before_write = writes.seen()
    dynamodb.put_item(TableName="Marked", Item={"pk": {"S": "a"}})
    after_write = writes.seen()
    dynamodb.get_item(TableName="Marked", Key={"pk": {"S": "a"}})
    dynamodb.query(
        TableName="Marked",
        KeyConditionExpression="pk = :a",
        ExpressionAttributeValues={":a": {"S": "a"}},
    )
    arn = dynamodb.describe_table(TableName="Marked")["Table"]["LatestStreamArn"]
    streams.describe_stream(StreamArn=arn)

    assert after_write > before_write
    assert writes.seen() == after_write


# ---------------------------------------------------------------------------- buckets
LISTS = {
    "Resources": {
        "Lists": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "sendonce-local-unit-lists"}},
        # Not applied: plain HTTP is all the emulator speaks.
        "ListsPolicy": {
            "Type": "AWS::S3::BucketPolicy",
            "Properties": {
                "Bucket": {"Ref": "Lists"},
                "PolicyDocument": {
                    "Statement": [
                        {
                            "Effect": "Deny",
                            "Principal": "*",
                            "Action": "s3:*",
                            "Resource": {"Fn::Sub": "${Lists.Arn}/*"},
                            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                        }
                    ]
                },
            },
        },
    }
}


def test_a_presigned_upload_sent_as_curl_sends_it_is_stored_whole_and_read_as_the_fan_out_reads_it(
    emulator: tuple[AwsEmulator, DeliveryLog], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sendonce.adapters.s3_recipients import S3RecipientFiles  # noqa: PLC0415
    from sendonce.aws_clients import client as function_client  # noqa: PLC0415

    aws, _ = emulator
    provision(parse_template(LISTS, tmp_path), aws.endpoint, "no-reply@sendonce.local")
    # The environment the local stack gives its functions (sendonce_local.environment.aws_settings).
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    files = S3RecipientFiles(function_client("s3"), "sendonce-local-unit-lists")
    lines = [
        json.dumps({"to": f"+1415555{n:04d}", "data": {"q": "a=1&Version=2"}}).encode() for n in range(3000)
    ]
    body = b"\n".join(lines) + b"\n"

    upload = files.upload_url("ws_unit", "cmp_unit", datetime.now(UTC))
    # Path-style, on the emulator's own host and port: reachable from outside the stack.
    assert upload.url.startswith(
        f"{aws.endpoint}/sendonce-local-unit-lists/campaigns/ws_unit/cmp_unit.jsonl?"
    )
    # As `curl -X PUT --data-binary @file` sends it: typed as a form, which urllib also does.
    put = urllib.request.Request(upload.url, data=body, method="PUT")
    assert put.get_header("Content-type") is None  # urllib adds it as it sends
    with urllib.request.urlopen(put, timeout=30) as answer:
        assert answer.status == 200

    assert files.size("ws_unit", "cmp_unit") == len(body)  # a HEAD's Content-Length is the object's
    read = list(files.lines("ws_unit", "cmp_unit"))
    assert [line for _, line in read] == lines
    offset, line = read[1234]
    assert files.read("ws_unit", "cmp_unit", offset, offset + len(line)) == line
    assert files.size("ws_unit", "cmp_missing") is None


@pytest.mark.parametrize(
    ("method", "service", "content_type", "kept_as_sent"),
    [
        ("PUT", None, "application/x-www-form-urlencoded", False),  # a presigned URL
        ("PUT", "s3", "application/x-www-form-urlencoded; charset=utf-8", False),
        ("PUT", None, "application/json", True),
        ("PUT", None, None, True),
        ("POST", None, "application/x-www-form-urlencoded", True),  # the query protocol's requests
        ("POST", "sns", "application/x-www-form-urlencoded", True),
        ("PUT", "ses", "application/x-www-form-urlencoded", True),
    ],
)
def test_only_an_s3_put_typed_as_a_form_is_taken_as_bytes(
    method: str, service: str | None, content_type: str | None, kept_as_sent: bool
) -> None:
    environ = {"REQUEST_METHOD": method}
    if content_type is not None:
        environ["CONTENT_TYPE"] = content_type

    assert is_s3_form_put(environ, service) is not kept_as_sent
