"""sendonce_local: the in-process AWS emulator (moto) with the template's tables and queues."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from sendonce_local.deliveries import DeliveryLog
from sendonce_local.emulator import AwsEmulator, client, provision
from sendonce_local.template import load_template, parse_template

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
