"""The Lambda authorizer through functions/authorizer/app.py: bearer key -> workspace, keys stored hashed."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from tests.integration.conftest import API_KEY, FakeLambdaContext, function, load_event


def _authorize(authorization: str | None) -> dict:
    event = copy.deepcopy(load_event("authorizer_request.json"))
    event["headers"].pop("authorization", None)
    if authorization is not None:
        event["headers"]["authorization"] = authorization
    result: dict = function("authorizer").handler(event, FakeLambdaContext(function_name="Authorizer"))
    return result


def test_given_the_event_file_with_the_right_key_then_its_workspace(stack) -> None:
    result = function("authorizer").handler(load_event("authorizer_request.json"), FakeLambdaContext())

    assert result == {"isAuthorized": True, "context": {"workspaceId": "ws_local"}}


@pytest.mark.parametrize("header", [f"bearer {API_KEY}", f"Bearer   {API_KEY}  ", f"BEARER {API_KEY}"])
def test_given_the_right_key_in_any_scheme_case_then_its_workspace(stack, header: str) -> None:
    assert _authorize(header)["context"]["workspaceId"] == "ws_local"


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer", "Bearer ", "Bearer sk_wrong", f"Basic {API_KEY}", API_KEY, f"Bearer {API_KEY}x"],
)
def test_given_a_wrong_or_missing_key_then_an_empty_workspace_and_the_api_answers_401(
    stack, header: str | None
) -> None:
    result = _authorize(header)

    assert result["context"]["workspaceId"] == ""
    # API Gateway passes the authorizer's context on; the API then answers 401 in the contract's body.
    event = stack.event("api_send_sms.json", workspace=result["context"]["workspaceId"])
    answer = stack.call(event)
    assert answer.status == 401
    assert answer.json["error"]["code"] == "unauthorized"
    assert stack.messages() == []


def test_given_a_header_named_in_another_case_then_it_is_read(stack) -> None:
    event = copy.deepcopy(load_event("authorizer_request.json"))
    event["headers"]["Authorization"] = event["headers"].pop("authorization")

    assert function("authorizer").handler(event, FakeLambdaContext())["context"]["workspaceId"] == "ws_local"


@pytest.mark.parametrize("event", [None, {}, {"headers": None}, {"headers": ["x"]}, "text"])
def test_given_a_malformed_event_then_an_empty_workspace_not_an_exception(stack, event: object) -> None:
    assert function("authorizer").handler(event, FakeLambdaContext())["context"]["workspaceId"] == ""


def test_given_the_key_table_then_it_holds_only_the_hash_of_each_key(stack) -> None:
    items = stack.scan("ApiKeysTable")

    assert len(items) == 1
    assert items[0]["keyHash"]["S"] == hashlib.sha256(API_KEY.encode()).hexdigest()
    assert API_KEY not in json.dumps(items)


def test_given_a_revoked_key_then_an_empty_workspace(stack) -> None:
    stack.dynamodb.update_item(
        TableName="ApiKeysTable",
        Key={"keyHash": {"S": hashlib.sha256(API_KEY.encode()).hexdigest()}},
        UpdateExpression="SET revoked = :t",
        ExpressionAttributeValues={":t": {"BOOL": True}},
    )

    assert _authorize(f"Bearer {API_KEY}")["context"]["workspaceId"] == ""


def test_given_the_key_store_fails_then_the_api_answers_503_with_retry_after_not_401(stack) -> None:
    stack.dynamodb.delete_table(TableName="ApiKeysTable")  # every read of the key store now fails

    result = _authorize(f"Bearer {API_KEY}")

    assert result["context"] == {"workspaceId": "", "keyLookup": "failed"}
    event = stack.event("api_send_sms.json")
    event["requestContext"]["authorizer"] = {"lambda": result["context"]}
    answer = stack.call(event)
    assert answer.status == 503
    assert answer.json["error"]["code"] == "unavailable"
    assert answer.header("Retry-After")
    assert stack.messages() == []


def test_given_no_key_while_the_key_store_fails_then_still_401(stack) -> None:
    stack.dynamodb.delete_table(TableName="ApiKeysTable")

    assert _authorize(None)["context"] == {"workspaceId": ""}  # nothing to look up: a missing key
