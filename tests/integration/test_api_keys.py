"""The API function finds its caller on moto: bearer key -> its hash -> the workspace in ApiKeysTable.

No authorizer runs: the API function reads the key itself, through a cache of the keys it found
good (SENDONCE_API_KEY_CACHE_SECONDS). Every 401 and 503 of the key check is the API's error
body, and a request it stops writes nothing.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.integration.conftest import API_KEY, WORKSPACE


def _key_hash(key: str) -> dict[str, dict[str, str]]:
    return {"keyHash": {"S": hashlib.sha256(key.encode()).hexdigest()}}


def _revoke(stack, key: str) -> None:
    stack.dynamodb.update_item(
        TableName="ApiKeysTable",
        Key=_key_hash(key),
        UpdateExpression="SET revoked = :t",
        ExpressionAttributeValues={":t": {"BOOL": True}},
    )


def _list(stack, authorization: str | None = f"Bearer {API_KEY}"):
    return stack.call(stack.event("api_list_messages.json", headers={"authorization": authorization}))


def _assert_error(answer, status: int, code: str) -> None:
    assert answer.status == status, answer.raw_body
    assert answer.json["success"] is False
    assert answer.json["error"]["code"] == code
    assert set(answer.json["error"]) <= {"code", "message", "details"}


def test_given_the_event_file_with_the_right_key_then_its_workspace(stack) -> None:
    created = stack.send(body={"channel": "sms", "to": "+15550100000", "body": "hi"})

    assert created.status == 201, created.raw_body
    assert stack.messages()[0]["workspaceId"]["S"] == WORKSPACE


@pytest.mark.parametrize("header", [f"bearer {API_KEY}", f"Bearer   {API_KEY}  ", f"BEARER {API_KEY}"])
def test_given_the_right_key_in_any_scheme_case_then_200(stack, header: str) -> None:
    assert _list(stack, header).status == 200


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer", "Bearer ", "Bearer sk_wrong", f"Basic {API_KEY}", API_KEY, f"Bearer {API_KEY}x"],
)
def test_given_a_wrong_or_missing_key_then_401_and_nothing_written(stack, header: str | None) -> None:
    body = {"channel": "sms", "to": "+15550100000", "body": "hi"}
    answer = stack.call(stack.event("api_send_sms.json", body=body, headers={"authorization": header}))

    _assert_error(answer, 401, "unauthorized")
    assert not answer.header("RateLimit")  # no workspace: no rate counted
    assert stack.messages() == []


def test_given_a_header_named_in_another_case_then_it_is_read(stack) -> None:
    event = stack.event("api_list_messages.json")
    event["headers"]["Authorization"] = event["headers"].pop("authorization")

    assert stack.call(event).status == 200


def test_given_the_key_table_then_it_holds_only_the_hash_of_each_key(stack) -> None:
    items = stack.scan("ApiKeysTable")

    assert len(items) == 1
    assert items[0]["keyHash"]["S"] == hashlib.sha256(API_KEY.encode()).hexdigest()
    assert API_KEY not in json.dumps(items)


def test_given_a_key_revoked_before_it_was_used_then_401(stack) -> None:
    _revoke(stack, API_KEY)

    _assert_error(_list(stack), 401, "unauthorized")


def test_given_a_key_revoked_after_it_was_used_then_it_works_until_the_cache_period_ends(stack) -> None:
    assert _list(stack).status == 200

    _revoke(stack, API_KEY)

    # The documented revocation delay: this execution environment found the key good a moment ago.
    assert _list(stack).status == 200


def test_given_no_cache_period_then_a_revoked_key_is_401_at_once(stack) -> None:
    stack.setenv("SENDONCE_API_KEY_CACHE_SECONDS", "0")
    assert _list(stack).status == 200

    _revoke(stack, API_KEY)

    _assert_error(_list(stack), 401, "unauthorized")


def test_given_a_key_found_good_then_the_next_requests_read_no_key(stack) -> None:
    assert _list(stack).status == 200

    stack.dynamodb.delete_table(TableName="ApiKeysTable")  # a read of the key store would now fail

    assert _list(stack).status == 200


def test_given_the_key_store_fails_then_503_with_retry_after_not_401_and_nothing_written(stack) -> None:
    stack.dynamodb.delete_table(TableName="ApiKeysTable")  # every read of the key store now fails

    answer = stack.send(body={"channel": "sms", "to": "+15550100000", "body": "hi"})

    _assert_error(answer, 503, "unavailable")
    assert answer.header("Retry-After")
    assert stack.messages() == []


def test_given_the_key_store_failed_then_its_failure_is_not_remembered(stack) -> None:
    attributes = stack.dynamodb.describe_table(TableName="ApiKeysTable")["Table"]
    stack.dynamodb.delete_table(TableName="ApiKeysTable")
    _assert_error(_list(stack), 503, "unavailable")

    stack.dynamodb.create_table(
        TableName="ApiKeysTable",
        AttributeDefinitions=attributes["AttributeDefinitions"],
        KeySchema=attributes["KeySchema"],
        BillingMode="PAY_PER_REQUEST",
    )
    stack.dynamodb.put_item(
        TableName="ApiKeysTable", Item={**_key_hash(API_KEY), "workspaceId": {"S": WORKSPACE}}
    )

    assert _list(stack).status == 200


def test_given_no_key_while_the_key_store_fails_then_still_401(stack) -> None:
    stack.dynamodb.delete_table(TableName="ApiKeysTable")

    _assert_error(_list(stack, None), 401, "unauthorized")


def test_given_a_public_route_while_the_key_store_fails_then_it_answers(stack) -> None:
    stack.dynamodb.delete_table(TableName="ApiKeysTable")

    answer = stack.call(stack.event("api_health.json", workspace=None))

    assert answer.status == 200


def test_given_two_workspaces_keys_then_each_request_is_its_own_callers(stack) -> None:
    sms = {"channel": "sms", "to": "+15550100000", "body": "hi"}
    mine = stack.send(body=sms).json["message"]
    theirs = stack.send(body=sms, workspace="ws_other").json["message"]

    assert mine["id"] != theirs["id"]  # not a duplicate: another workspace's identity
    assert {item["workspaceId"]["S"] for item in stack.messages()} == {WORKSPACE, "ws_other"}
