"""DynamoDB transactions in moto at the cost DynamoDB has: independent of the table's size.

moto makes a deep copy of every table a TransactWriteItems touches, so that it can restore it
should the transaction be canceled. Every send writes one transaction, so a table of n messages
makes each send O(n): a local stack that has taken a few thousand messages spends most of each
request copying tables, and the latency it shows is moto's, not sendonce's. This version keeps
moto's semantics (conditions, cancellation reasons, ALL_OLD items) and restores only the items
the transaction wrote. The emulator serialises DynamoDB requests, so nothing interleaves.
A canceled transaction also leaves nothing in a table's stream, as on DynamoDB: the records of
its writes and of their undoing are taken back off the stream.

It replaces a method of moto's, so it relies on that method and the ones it calls staying as they
are: tests/unit/test_local_library_patches.py fails when the installed moto is not the pinned one,
when their source changes, or when this version answers any case differently from moto's own.
"""

from __future__ import annotations

import copy
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend

_OPERATIONS = frozenset({"ConditionCheck", "Put", "Delete", "Update"})
_INSTALLED = "_sendonce_item_rollback"
# moto's own, kept for the differential test (this module is imported before `install` runs).
ORIGINAL = DynamoDBBackend.transact_write_items


def _key_of(backend: DynamoDBBackend, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        key: dict[str, Any] = op["Key"]
        return key
    table = backend.get_table(op["TableName"])
    attributes = op["Item"]
    key = {table.hash_key_attr: attributes[table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = attributes[table.range_key_attr]
    return key


def _write(backend: DynamoDBBackend, op_type: str, op: dict[str, Any], key: dict[str, Any]) -> None:
    names = op.get("ExpressionAttributeNames")
    values = op.get("ExpressionAttributeValues")
    condition = op.get("ConditionExpression")
    if op_type == "Put":
        backend.put_item(
            op["TableName"],
            op["Item"],
            condition_expression=condition,
            expression_attribute_names=names,
            expression_attribute_values=values,
        )
    elif op_type == "Delete":
        backend.delete_item(
            op["TableName"],
            key,
            condition_expression=condition,
            expression_attribute_names=names,
            expression_attribute_values=values,
        )
    elif op_type == "Update":
        backend.update_item(
            op["TableName"],
            key,
            update_expression=op["UpdateExpression"],
            condition_expression=condition,
            expression_attribute_names=names,
            expression_attribute_values=values,
        )


def _stream_marks(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> dict[str, int]:
    """How many records each streamed table of the transaction has before it: what an undo goes back to."""
    marks: dict[str, int] = {}
    for item in transact_items:
        for op in item.values():
            name = op.get("TableName") if isinstance(op, dict) else None
            if name is None or name in marks:
                continue
            try:
                shard = backend.get_table(name).stream_shard
            except Exception:  # noqa: S112 (an unknown table: the item's own failure reports it)
                continue
            if shard is not None:
                marks[name] = len(shard.items)
    return marks


def _undo(
    backend: DynamoDBBackend,
    written: list[tuple[str, dict[str, Any], dict[str, Any] | None]],
    stream_marks: dict[str, int],
) -> None:
    for table_name, key, before in reversed(written):
        if before is None:
            backend.delete_item(table_name, key)
        else:
            backend.put_item(table_name, before)
    for table_name, mark in stream_marks.items():
        shard = backend.get_table(table_name).stream_shard
        if shard is not None:
            del shard.items[mark:]


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    written: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
    stream_marks = _stream_marks(self, transact_items)
    seen: set[tuple[str, str]] = set()
    errors: list[tuple[str | None, str | None, dict[str, Any] | None]] = []
    for item in transact_items:
        if len(item) > 1:
            raise TransactWriteSingleOpException
        original_item: dict[str, Any] | None = None
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in _OPERATIONS:
                raise ValueError("Unsupported transaction operation")
            key = _key_of(self, op_type, op)
            identity = (str(op["TableName"]), str(dict(sorted(key.items()))))
            if identity in seen:
                raise MultipleTransactionsException()
            seen.add(identity)
            current = self.get_item(op["TableName"], key)
            condition = op.get("ConditionExpression")
            if condition is not None:
                check = get_filter_expression(
                    condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
                )
                if not check.expr(current):
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)
            if op_type != "ConditionCheck":
                before = copy.deepcopy(current.to_json()["Attributes"]) if current else None
                written.append((op["TableName"], key, before))
                _write(self, op_type, op, key)
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            _undo(self, written, stream_marks)
            raise
        except ConditionalCheckFailed as failed:
            errors.append(("ConditionalCheckFailed", str(failed.message), original_item))
        except Exception as error:  # moto reports any other failure as the item's reason
            errors.append((type(error).__name__, str(error), original_item))
    if any(code is not None for code, _, _ in errors):
        _undo(self, written, stream_marks)
        raise TransactionCanceledException(errors)


def install() -> None:
    """Replace moto's TransactWriteItems with the item-level rollback above (idempotent)."""
    if getattr(DynamoDBBackend.transact_write_items, _INSTALLED, False):
        return
    setattr(transact_write_items, _INSTALLED, True)
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
