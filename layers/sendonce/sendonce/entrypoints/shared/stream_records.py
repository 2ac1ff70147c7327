"""DynamoDB stream records as Lambda hands them over: what any batch of them needs to name a record.

A batch item failure names a stream record by its `SequenceNumber`; Lambda brings that record and
every later one back. A record without one (never one DynamoDB streamed) is named by "".
"""

from __future__ import annotations

from typing import Any


def sequence_number(record: Any) -> str:
    """The record's `dynamodb.SequenceNumber`, "" if it has none."""
    dynamodb = record.get("dynamodb") if isinstance(record, dict) else None
    return str(dynamodb.get("SequenceNumber", "")) if isinstance(dynamodb, dict) else ""
