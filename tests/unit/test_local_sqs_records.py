"""sendonce_local: Lambda's SQS event records and partial batch failures."""

from __future__ import annotations

from sendonce_local.event_sources import sqs_record, succeeded_records


def test_a_record_has_lambdas_shape() -> None:
    record = sqs_record(
        {
            "MessageId": "m1",
            "ReceiptHandle": "rh",
            "MD5OfBody": "md5",
            "Body": "{}",
            "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1"},
            "MessageAttributes": {"k": {"StringValue": "v", "DataType": "String"}},
        },
        "SmsQueue",
    )

    assert record == {
        "messageId": "m1",
        "receiptHandle": "rh",
        "body": "{}",
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1"},
        "messageAttributes": {
            "k": {"stringValue": "v", "stringListValues": [], "binaryListValues": [], "dataType": "String"}
        },
        "md5OfBody": "md5",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:SmsQueue",
        "awsRegion": "us-east-1",
    }


RECORDS = [{"messageId": "a"}, {"messageId": "b"}, {"messageId": "c"}]


def test_only_unreported_records_are_deleted() -> None:
    result = {"batchItemFailures": [{"itemIdentifier": "b"}]}

    assert succeeded_records(RECORDS, result, report_failures=True) == [
        {"messageId": "a"},
        {"messageId": "c"},
    ]
    assert succeeded_records(RECORDS, {"batchItemFailures": []}, report_failures=True) == RECORDS
    assert succeeded_records(RECORDS, None, report_failures=True) == RECORDS
    assert succeeded_records(RECORDS, result, report_failures=False) == RECORDS


def test_a_malformed_failure_report_fails_the_whole_batch() -> None:
    assert succeeded_records(RECORDS, {"batchItemFailures": [{"itemIdentifier": "zzz"}]}, True) == []
    assert succeeded_records(RECORDS, {"batchItemFailures": [{}]}, True) == []
