"""Every error of CONTRACT section 5 the API answers, and no 500 for any malformed request."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

VALID_SMS = {"channel": "sms", "to": "+15550100000", "body": "hi"}


def _assert_error(answer, status: int, code: str) -> dict[str, Any]:
    assert answer.status == status, answer.raw_body
    assert answer.header("Content-Type").startswith("application/json")
    assert answer.json["success"] is False
    assert answer.json["error"]["code"] == code
    assert isinstance(answer.json["error"]["message"], str)
    assert answer.json["error"]["message"]
    error: dict[str, Any] = answer.json["error"]
    return error


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"channel": "sms", "to": "+15550100000"}, {"body"}),
        ({"channel": "fax", "to": "+15550100000", "body": "hi"}, {"channel"}),
        (VALID_SMS | {"subject": "no"}, {"subject"}),
        ({"channel": "email", "to": "a@example.com", "body": "hi"}, {"subject"}),
        (VALID_SMS | {"to": "5550100000"}, {"to"}),
        (VALID_SMS | {"body": ""}, {"body"}),
        (VALID_SMS | {"body": "x" * 10_001}, {"body"}),
        (VALID_SMS | {"sendAt": "tomorrow"}, {"sendAt"}),
        (VALID_SMS | {"metadata": {f"k{i}": "v" for i in range(21)}}, {"metadata"}),
        (VALID_SMS | {"metadata": {"k": 1}}, {"metadata.k"}),
        (VALID_SMS | {"prority": "high"}, {"prority"}),
        ({"channel": "sms", "to": "nope", "body": "", "extra": True}, {"to", "body", "extra"}),
    ],
)
def test_given_an_invalid_body_then_400_validation_error_naming_each_field(
    stack, body: dict[str, Any], fields: set[str]
) -> None:
    answer = stack.send(body=body)

    error = _assert_error(answer, 400, "validation_error")
    named = {detail["field"] for detail in error["details"]}
    assert fields <= named, named
    assert all(isinstance(detail["message"], str) and detail["message"] for detail in error["details"])
    assert stack.messages() == []
    assert stack.receive("sms") == []


@pytest.mark.parametrize("body", ["", "{", "[1, 2]", '"text"', "null", "42", '{"channel": "sms",}'])
def test_given_a_body_that_is_not_a_json_object_then_400_validation_error(stack, body: str) -> None:
    answer = stack.send(body=body)

    error = _assert_error(answer, 400, "validation_error")
    assert error["details"]
    assert stack.messages() == []


def test_given_no_body_at_all_then_400_validation_error(stack) -> None:
    _assert_error(stack.send(body=None), 400, "validation_error")


@pytest.mark.parametrize(
    ("name", "method"),
    [
        ("api_send_sms.json", "POST"),
        ("api_list_messages.json", "GET"),
        ("api_get_message.json", "GET"),
        ("api_get_message.json", "DELETE"),
    ],
)
def test_given_no_key_or_a_wrong_one_then_401_and_nothing_written(stack, name: str, method: str) -> None:
    for authorization in (None, "Bearer sk_wrong"):
        answer = stack.call(stack.event(name, method=method, headers={"authorization": authorization}))
        _assert_error(answer, 401, "unauthorized")
    assert stack.messages() == []


def test_given_401_then_it_comes_before_413_and_415(stack) -> None:
    event = stack.event(
        "api_send_sms.json", body="x" * (300 * 1024), headers={"content-type": "text/plain"}, workspace=None
    )
    _assert_error(stack.call(event), 401, "unauthorized")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/"),
        ("GET", "/v2/messages"),
        ("POST", "/v1/message"),
        ("GET", "/v1/messages/a/b"),
        ("GET", "/nope"),
    ],
)
def test_given_an_unknown_route_then_404_not_found(stack, method: str, path: str) -> None:
    event = stack.event("api_send_sms.json", method=method, path=path)
    _assert_error(stack.call(event), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/messages", {"GET", "POST"}),
        ("DELETE", "/v1/messages", {"GET", "POST"}),
        ("PUT", "/v1/messages/msg_01KDVDNA00QV9D1V5ZMBF8DBMW", {"GET", "DELETE", "PATCH"}),
        ("POST", "/v1/messages/msg_01KDVDNA00QV9D1V5ZMBF8DBMW", {"GET", "DELETE", "PATCH"}),
        ("POST", "/v1/health", {"GET"}),
    ],
)
def test_given_a_known_path_with_another_method_then_405_with_allow(
    stack, method: str, path: str, allowed: set[str]
) -> None:
    event = stack.event("api_send_sms.json", method=method, path=path)

    answer = stack.call(event)

    _assert_error(answer, 405, "method_not_allowed")
    assert {m.strip() for m in answer.header("Allow").split(",")} == allowed
    assert stack.messages() == []


def test_given_a_body_over_256_kib_then_413_and_nothing_written(stack) -> None:
    big = json.dumps(VALID_SMS | {"metadata": {"pad": "x" * (257 * 1024)}})

    _assert_error(stack.send(body=big), 413, "payload_too_large")
    assert stack.messages() == []


def test_given_a_body_just_under_256_kib_then_not_413(stack) -> None:
    text = json.dumps(VALID_SMS | {"metadata": {"pad": "x" * 500}})
    text = text + " " * (256 * 1024 - len(text))

    assert stack.send(body=text).status == 201


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1", "json"],
)
def test_given_a_body_that_is_not_declared_json_then_415_and_nothing_written(
    stack, content_type: str | None
) -> None:
    answer = stack.send(body=VALID_SMS, headers={"content-type": content_type})

    _assert_error(answer, 415, "unsupported_media_type")
    assert stack.messages() == []


@pytest.mark.parametrize(
    "content_type", ["application/json", "Application/JSON; charset=UTF-8", "application/json;charset=utf-8"]
)
def test_given_json_content_type_variants_then_accepted(stack, content_type: str) -> None:
    assert stack.send(body=VALID_SMS, headers={"content-type": content_type}).status == 201


def test_given_json_that_is_not_utf8_then_415(stack) -> None:
    latin1 = json.dumps(VALID_SMS | {"body": "café"}, ensure_ascii=False).encode("latin-1")
    event = stack.event("api_send_sms.json", base64_body=latin1)

    _assert_error(stack.call(event), 415, "unsupported_media_type")
    assert stack.messages() == []


def test_given_utf8_json_sent_base64_encoded_then_accepted(stack) -> None:
    utf8 = json.dumps(VALID_SMS | {"body": "café ☕"}, ensure_ascii=False).encode("utf-8")

    answer = stack.call(stack.event("api_send_sms.json", base64_body=utf8))

    assert answer.status == 201
    assert answer.json["message"]["body"] == "café ☕"


# ---------------------------------------------------------------------------- no 500, ever
methods = st.sampled_from(
    ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "", "get", "BREW"]
)
paths = st.one_of(
    st.sampled_from(
        [
            "/v1/messages",
            "/v1/messages/",
            "/v1/messages/msg_01KDVDNA00QV9D1V5ZMBF8DBMW",
            "/v1/messages/%00",
            "/v1/health",
            "/openapi.json",
            "/docs",
            "/v1/webhooks/http",
            "",
            "/",
        ]
    ),
    st.text(max_size=40).map(lambda text: "/v1/messages/" + text),
    st.text(max_size=40),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=10,
)
near_valid = st.fixed_dictionaries(
    {},
    optional={
        "channel": st.sampled_from(["sms", "email", "imessage", "SMS", ""]) | json_values,
        "to": st.sampled_from(["+15550100000", "a@example.com", "+1 (555) 010-0000", ""]) | json_values,
        "body": st.text(max_size=50) | json_values,
        "subject": st.text(max_size=10) | json_values,
        "sendAt": st.sampled_from(["2026-01-01T00:00:00Z", "2999-01-01T00:00:00Z", "soon"]) | json_values,
        "metadata": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3) | json_values,
    },
)
bodies = st.one_of(
    st.none(),
    st.text(max_size=200),
    near_valid.map(json.dumps),
    json_values.map(json.dumps),
    st.binary(max_size=60),
)
header_values = st.one_of(
    st.sampled_from(
        ["application/json", "text/plain", "application/json; charset=utf-16", "", ";", "a/b; c"]
    ),
    st.text(max_size=30),
)
headers = st.dictionaries(
    st.sampled_from(["content-type", "idempotency-key", "authorization", "Content-Type", "x-any", ""]),
    header_values,
    max_size=4,
)
query = st.dictionaries(st.sampled_from(["limit", "status", "cursor", "x"]), st.text(max_size=20), max_size=3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    method=methods,
    path=paths,
    body=bodies,
    extra_headers=headers,
    query_parameters=query,
    workspace=st.sampled_from(["ws_local", None, "ws_fuzz"]),
    as_base64=st.booleans(),
)
def test_property_no_request_however_malformed_gets_a_500(
    stack,
    method: str,
    path: str,
    body: str | bytes | None,
    extra_headers: dict[str, str],
    query_parameters: dict[str, str],
    workspace: str | None,
    as_base64: bool,
) -> None:
    event = stack.event(
        "api_send_sms.json",
        method=method,
        path=path,
        headers=dict(extra_headers),
        workspace=workspace,
        query=query_parameters,
        **({"base64_body": body} if isinstance(body, bytes) else {"body": body}),
    )
    if as_base64 and isinstance(body, str):
        event["isBase64Encoded"] = True  # a body that is not base64 although flagged so

    answer = stack.call(event)

    assert 200 <= answer.status < 500, answer.raw_body
    if answer.status == 200 and method.upper() == "GET" and path.rstrip("/") in ("/openapi.json", "/docs"):
        return  # the OpenAPI document and its page are documents, not API answers
    assert answer.header("Content-Type").startswith("application/json")
    assert isinstance(answer.json["success"], bool)
    if not answer.json["success"]:
        assert isinstance(answer.json["error"]["code"], str)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    event=st.one_of(
        st.none(),
        st.lists(st.integers(), max_size=2),
        st.text(max_size=10),
        st.dictionaries(
            st.sampled_from(
                ["version", "rawPath", "requestContext", "headers", "body", "isBase64Encoded", "x"]
            ),
            json_values,
            max_size=6,
        ),
    )
)
def test_property_an_event_of_any_shape_gets_an_answer_not_an_exception(stack, event: Any) -> None:
    from sendonce.api.app import handle  # noqa: PLC0415

    from tests.integration.conftest import FakeLambdaContext  # noqa: PLC0415

    response = handle(event, FakeLambdaContext())

    assert response["statusCode"] < 500 or response["statusCode"] == 503
    assert isinstance(json.loads(response["body"])["success"], bool)


@pytest.mark.parametrize("send_at", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_given_a_send_at_that_is_no_real_instant_then_400_and_nothing_written(stack, send_at: str) -> None:
    answer = stack.send(body=VALID_SMS | {"sendAt": send_at})

    _assert_error(answer, 400, "validation_error")
    assert stack.messages() == []
