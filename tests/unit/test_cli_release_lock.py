"""sendonce_cli: `sendonce release-lock` deletes the lock the API wrote for the same identity."""

from __future__ import annotations

from typing import Any

import pytest
from sendonce.dedup.identity import dedup_identity
from sendonce_cli.main import build_parser
from sendonce_cli.release_lock import describe, lock_identity, release_lock

from tests.unit.unit_fakes import TEST_KEYED_HASH


class FakeDynamoDb:
    def __init__(self, items: dict[str, dict[str, Any]]) -> None:
        self.items = items
        self.calls: list[dict[str, Any]] = []

    def delete_item(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        old = self.items.pop(request["Key"]["pk"]["S"], None)
        return {"Attributes": old} if old else {}


def test_the_identity_is_the_apis_for_any_form_of_the_recipient() -> None:
    expected = dedup_identity("ws_1", "+15550100000", None, "hi")

    assert lock_identity("ws_1", "sms", "+1 (555) 010-0000", None, "hi") == (expected, "+15550100000")
    assert lock_identity("ws_1", "imessage", "+15550100000", None, "hi")[0] == expected
    assert (
        lock_identity("ws_1", "email", "Ann@Example.COM", "s", "hi")[0]
        == lock_identity("ws_1", "email", "ann@example.com", "s", "hi")[0]
    )
    assert lock_identity("ws_2", "sms", "+15550100000", None, "hi")[0] != expected


def test_release_deletes_the_lock_item_and_says_whether_it_was_there() -> None:
    identity = TEST_KEYED_HASH(dedup_identity("ws_1", "+15550100000", None, "hi"))
    dynamodb = FakeDynamoDb({f"DEDUP#{identity}": {"messageId": {"S": "msg_1"}, "expiresAt": {"N": "2000"}}})

    first = release_lock(
        dynamodb,
        "MessagesTable",
        TEST_KEYED_HASH,
        workspace="ws_1",
        channel="sms",
        to="+15550100000",
        subject=None,
        body="hi",
    )
    again = release_lock(
        dynamodb,
        "MessagesTable",
        TEST_KEYED_HASH,
        workspace="ws_1",
        channel="sms",
        to="+15550100000",
        subject=None,
        body="hi",
    )

    assert dynamodb.calls[0]["Key"] == {"pk": {"S": f"DEDUP#{identity}"}, "sk": {"S": "LOCK"}}
    assert dynamodb.calls[0]["TableName"] == "MessagesTable"
    assert (first.existed, first.message_id, first.expires_at) == (True, "msg_1", 2000)
    assert "released the lock of message msg_1" in describe(first, now=1000)
    assert "1000s left" in describe(first, now=1000)
    assert again.existed is False
    assert "no lock" in describe(again, now=1000)


def test_a_bad_recipient_is_refused() -> None:
    with pytest.raises(ValueError, match="phone number"):
        lock_identity("ws_1", "sms", "not a number", None, "hi")


def test_the_command_line() -> None:
    args = build_parser().parse_args(
        ["release-lock", "--workspace", "ws", "--channel", "email", "--to", "a@b.co", "--body", "b"]
    )

    assert (args.table, args.endpoint_url, args.aws, args.subject) == ("MessagesTable", None, False, None)
    with pytest.raises(SystemExit):
        build_parser().parse_args(
            ["release-lock", "--workspace", "w", "--channel", "fax", "--to", "x", "--body", "b"]
        )
