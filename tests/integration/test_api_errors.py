"""Every error the API answers (docs/api.md, Errors), and no 500 for any malformed request."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
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

    from tests.support.lambda_context import FakeLambdaContext  # noqa: PLC0415

    response = handle(event, FakeLambdaContext())

    assert response["statusCode"] < 500 or response["statusCode"] == 503
    assert isinstance(json.loads(response["body"])["success"], bool)


@pytest.mark.parametrize("send_at", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_given_a_send_at_that_is_no_real_instant_then_400_and_nothing_written(stack, send_at: str) -> None:
    answer = stack.send(body=VALID_SMS | {"sendAt": send_at})

    _assert_error(answer, 400, "validation_error")
    assert stack.messages() == []


# ---------------------------------------------------------------------------- bodies the parser refuses
LONG = "1" * 5_000  # over Python's 4,300-digit limit of int() on text
SMS_TEXT = '{"channel": "sms", "to": "+15550100000", "body": "hi"'


def _call(stack, method: str, path: str, body: str | None = None, **kw: Any):
    name = "api_send_sms.json" if body is not None else "api_get_message.json"
    return stack.call(
        stack.event(name, method=method, path=path, **({"body": body} if body is not None else {}), **kw)
    )


def _nothing_written(stack) -> None:
    assert stack.messages() == []
    assert [item for item in stack.scan("MessagesTable") if item["pk"]["S"].startswith("SUPPRESSION#")] == []
    assert stack.scan("WebhooksTable") == []
    assert stack.scan("IdempotencyTable") == []
    assert stack.receive("sms") == []


def _scheduled(stack) -> str:
    at = (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    answer = stack.send(body=VALID_SMS | {"sendAt": at})
    assert answer.status == 201, answer.raw_body
    message_id: str = answer.json["message"]["id"]
    return message_id


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/messages", SMS_TEXT + f', "sendAt": {LONG}}}', "sendAt"),
        ("/v1/messages", SMS_TEXT + f', "metadata": {{"k": {LONG}}}}}', "metadata.k"),
        ("/v1/messages/batch", f'{{"messages": [{SMS_TEXT}, "sendAt": {LONG}}}]}}', "messages.0.sendAt"),
        ("/v1/messages/batch?validation=strict", f'{{"messages": [{SMS_TEXT}}}, {LONG}]}}', "messages.1"),
        (
            "/v1/webhook-endpoints",
            f'{{"url": "https://example.com/hook", "description": {LONG}}}',
            "description",
        ),
        ("/v1/suppressions", f'{{"channel": "sms", "to": {LONG}}}', "to"),
    ],
)
def test_given_a_number_too_long_for_python_then_400_naming_it_and_nothing_written(
    stack, path: str, body: str, field: str
) -> None:
    path, _, query = path.partition("?")
    query_parameters = dict([query.split("=")]) if query else None
    answer = _call(stack, "POST", path, body, headers={"Idempotency-Key": "k-long"}, query=query_parameters)

    error = _assert_error(answer, 400, "validation_error")
    assert [detail["field"] for detail in error["details"]] == [field]
    assert "5000 digits" in error["details"][0]["message"]
    _nothing_written(stack)


def test_given_an_edit_with_a_number_too_long_then_400_and_the_message_unchanged(stack) -> None:
    message_id = _scheduled(stack)
    before = stack.message(message_id)

    answer = _call(stack, "PATCH", f"/v1/messages/{message_id}", f'{{"sendAt": {LONG}}}')

    error = _assert_error(answer, 400, "validation_error")
    assert error["details"][0]["field"] == "sendAt"
    assert stack.message(message_id) == before


def test_given_a_field_repeated_then_400_naming_it_and_nothing_sent_to_either_number(stack) -> None:
    body = '{"channel": "sms", "to": "+15550100000", "to": "+15550100001", "body": "hi"}'

    error = _assert_error(stack.send(body=body), 400, "validation_error")

    assert error["details"] == [
        {"field": "to", "message": "is repeated: a field may appear once in an object"}
    ]
    _nothing_written(stack)


@pytest.mark.parametrize("validation", ["permissive", "strict"])
def test_given_a_field_repeated_in_a_batch_item_then_the_whole_batch_is_a_400(stack, validation: str) -> None:
    body = f'{{"messages": [{SMS_TEXT}}}, {SMS_TEXT}, "metadata": {{"a": "1", "a": "2"}}}}]}}'

    answer = _call(stack, "POST", "/v1/messages/batch", body, query={"validation": validation})

    error = _assert_error(answer, 400, "validation_error")
    assert [detail["field"] for detail in error["details"]] == ["messages.1.metadata.a"]
    _nothing_written(stack)


def test_given_a_field_repeated_under_an_idempotency_key_then_400_the_key_not_taken(stack) -> None:
    repeated = '{"channel": "sms", "to": "+15550100000", "body": "hi", "body": "hi"}'

    _assert_error(stack.send(body=repeated, key="k-repeat"), 400, "validation_error")
    first = stack.send(body=VALID_SMS, key="k-repeat")
    again = stack.send(body=' {"body": "hi", "to": "+15550100000", "channel": "sms"} ', key="k-repeat")

    assert first.status == 201, first.raw_body  # the 400 was not stored under the key
    assert (again.status, again.header("Idempotency-Replayed")) == (201, "true")  # the same parsed body
    assert again.raw_body == first.raw_body


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"channel": "sms", "to": "+15550100000", "body": NaN}', "NaN, which is not JSON"),
        ('{"channel": "sms",, "to": 1}', "not valid JSON: Expecting property name"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_given_any_other_body_the_parser_refuses_then_400_saying_why(stack, body: str, message: str) -> None:
    error = _assert_error(stack.send(body=body), 400, "validation_error")

    assert message in error["details"][0]["message"]
    _nothing_written(stack)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    where=st.sampled_from(["sendAt", "metadata.k", "subject", "body", "extra"]),
    digits=st.integers(min_value=4_301, max_value=50_000),
    sign=st.sampled_from(["", "-"]),
)
def test_property_a_long_digit_run_anywhere_in_a_send_is_a_400_never_a_5xx(
    stack, where: str, digits: int, sign: str
) -> None:
    placeholder = "<the number>"
    outer, _, inner = where.partition(".")
    fields: dict[str, Any] = dict(VALID_SMS)
    fields[outer] = {inner: placeholder} if inner else placeholder  # `body`: in place of the text
    body = json.dumps(fields).replace(json.dumps(placeholder), sign + "7" * digits)

    error = _assert_error(stack.send(body=body), 400, "validation_error")

    assert [detail["field"] for detail in error["details"]] == [where]
    assert stack.messages() == []


# ---------------------------------------------------------------------------- ids holding a slash
_SLASHED = [
    ("GET", "/v1/messages/{}"),
    ("DELETE", "/v1/messages/{}"),
    ("PATCH", "/v1/messages/{}"),
    ("GET", "/v1/suppressions/{}"),
    ("DELETE", "/v1/suppressions/{}"),
    ("GET", "/v1/webhook-endpoints/{}"),
    ("DELETE", "/v1/webhook-endpoints/{}"),
    ("POST", "/v1/webhook-endpoints/{}/rotate-secret"),
    ("GET", "/v1/events/{}"),
    ("POST", "/v1/events/{}/redeliver"),
]


@pytest.mark.parametrize(("method", "path"), _SLASHED)
@pytest.mark.parametrize("value", ["a%2fb", "a%2Fb", "a%252fb"])
@pytest.mark.parametrize("route_key", ["as API Gateway names it", "$default", "the route's"])
def test_given_an_id_that_decodes_to_a_slash_then_404_with_the_ratelimit_fields_never_401(
    stack, method: str, path: str, value: str, route_key: str
) -> None:
    event = stack.event("api_get_message.json", method=method, path=path.format(value))
    template_route = f"{method} {path.format('{id}' if 'suppressions' not in path else '{to}')}"
    if route_key == "as API Gateway names it":  # `%2F` matches no route; `%252F` one segment, its route
        event["routeKey"] = "$default" if "%2" in value and "%25" not in value else template_route
    else:
        event["routeKey"] = "$default" if route_key == "$default" else template_route

    answer = stack.call(event)

    _assert_error(answer, 404, "not_found")
    assert answer.header("RateLimit")
    assert answer.header("RateLimit-Policy")
    assert stack.messages() == []


# ---------------------------------------------------------------------------- RateLimit on 404 and 405
@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/nope", 404),
        ("GET", "/v1/messages/a/b", 404),
        ("GET", "/v1/messages/", 404),
        ("POST", "/v1/message", 404),
        ("PUT", "/v1/messages", 405),
        ("POST", "/v1/messages/msg_01KDVDNA00QV9D1V5ZMBF8DBMW", 405),
        ("POST", "/v1/health", 405),
        ("GET", "/v1/webhooks/http", 405),
        ("PUT", "/v1/suppressions/%2B15550100000", 405),
    ],
)
def test_given_a_good_key_then_a_404_or_405_carries_the_ratelimit_fields_and_a_bad_one_none(
    stack, method: str, path: str, status: int
) -> None:
    good = stack.call(stack.event("api_get_message.json", method=method, path=path))
    wrong = stack.call(
        stack.event(
            "api_get_message.json", method=method, path=path, headers={"authorization": "Bearer sk_wrong"}
        )
    )
    none = stack.call(stack.event("api_get_message.json", method=method, path=path, workspace=None))

    assert (good.status, wrong.status, none.status) == (status, status, status)
    assert good.header("RateLimit")
    assert good.header("RateLimit-Policy")
    assert wrong.header("RateLimit") is None
    assert none.header("RateLimit") is None
