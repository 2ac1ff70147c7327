"""The emulator's TransactWriteItems: moto's semantics, rolling back only the items it wrote."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from sendonce_local import moto_transactions


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    moto_transactions.install()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="T",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        client.put_item(TableName="T", Item={"pk": {"S": "held"}, "v": {"S": "old"}})
        client.put_item(TableName="T", Item={"pk": {"S": "bystander"}, "v": {"S": "untouched"}})
        yield client


def _put(pk: str, value: str, condition: str | None = None) -> dict[str, Any]:
    put: dict[str, Any] = {"TableName": "T", "Item": {"pk": {"S": pk}, "v": {"S": value}}}
    if condition:
        put["ConditionExpression"] = condition
        put["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {"Put": put}


def _items(client: Any) -> dict[str, str]:
    return {item["pk"]["S"]: item["v"]["S"] for item in client.scan(TableName="T")["Items"]}


def test_given_a_committed_transaction_then_every_item_is_written(dynamodb: Any) -> None:
    dynamodb.transact_write_items(TransactItems=[_put("new", "1"), _put("held", "new")])
    assert _items(dynamodb) == {"new": "1", "held": "new", "bystander": "untouched"}


def test_given_a_failed_condition_then_the_earlier_writes_are_undone_and_the_reason_names_the_item(
    dynamodb: Any,
) -> None:
    with pytest.raises(ClientError) as raised:
        dynamodb.transact_write_items(
            TransactItems=[
                _put("new", "1"),
                {
                    "Update": {
                        "TableName": "T",
                        "Key": {"pk": {"S": "bystander"}},
                        "UpdateExpression": "SET v = :v",
                        "ExpressionAttributeValues": {":v": {"S": "changed"}},
                    }
                },
                _put("held", "mine", condition="attribute_not_exists(pk)"),
            ]
        )
    reasons = raised.value.response["CancellationReasons"]
    assert [reason["Code"] for reason in reasons] == ["None", "None", "ConditionalCheckFailed"]
    assert reasons[2]["Item"] == {"pk": {"S": "held"}, "v": {"S": "old"}}
    assert _items(dynamodb) == {"held": "old", "bystander": "untouched"}
