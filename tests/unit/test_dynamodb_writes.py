"""The shared conditional write: a write that met a transaction on its item is tried again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError
from sendonce.adapters.dynamodb_writes import MAX_ATTEMPTS, ConditionFailed, DynamoDbTable
from sendonce.errors import DependencyUnavailable


def _error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "UpdateItem")


@dataclass
class ScriptedClient:
    """Raises the script's errors in turn, then answers."""

    script: list[ClientError]
    calls: list[dict[str, Any]] = field(default_factory=list)

    def update_item(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        if self.script:
            raise self.script.pop(0)
        return {"Attributes": {"status": {"S": "sending"}}}


def test_a_write_that_met_a_transaction_on_its_item_is_tried_again() -> None:
    client = ScriptedClient([_error("TransactionConflictException")] * 2)

    answer = DynamoDbTable(client, "MessagesTable").write("update_item", Key={})

    assert answer == {"Attributes": {"status": {"S": "sending"}}}
    assert len(client.calls) == 3


def test_a_write_that_keeps_meeting_transactions_is_a_dependency_failure() -> None:
    client = ScriptedClient([_error("TransactionConflictException")] * MAX_ATTEMPTS)

    with pytest.raises(DependencyUnavailable):
        DynamoDbTable(client, "MessagesTable").write("update_item", Key={})

    assert len(client.calls) == MAX_ATTEMPTS


def test_a_failed_condition_is_an_answer_and_anything_else_a_dependency_failure() -> None:
    condition = DynamoDbTable(ScriptedClient([_error("ConditionalCheckFailedException")]), "MessagesTable")
    other = DynamoDbTable(ScriptedClient([_error("ValidationException")]), "MessagesTable")

    assert condition.write("update_item", Key={}) == ConditionFailed(None)
    with pytest.raises(DependencyUnavailable):
        other.write("update_item", Key={})
