"""What the API answers before a request reaches its route: 404 or 405, 401 or 503, 429, 413, 415, and a
body the JSON parser cannot take (400); and the decoded body it hands on.

The caller is found here from the `Authorization` header, through the function's key store: no key,
a malformed header, an unknown or a revoked key is 401; a store that cannot be read is 503 with
Retry-After, never 401. Both come before the request rate, and nothing after them runs.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sendonce.api.errors import ApiError
from sendonce.api.preflight import Checked, RequestBody, check_request
from sendonce.api.routers import ROUTES
from sendonce.api.routes import Route
from sendonce.auth.api_keys import hash_api_key, resolve_workspace

from tests.unit.unit_fakes import InMemoryApiKeys, key_of

WS = "ws"


def _event(
    path: str = "/v1/messages",
    method: str = "POST",
    body: str = "{}",
    content_type: str = "application/json",
    authorization: str | None = f"Bearer {key_of(WS)}",
    route_key: str = "POST /v1/messages",
) -> dict[str, Any]:
    headers = {"content-type": content_type}
    if authorization is not None:
        headers["authorization"] = authorization
    return {
        "routeKey": route_key,
        "rawPath": path,
        "headers": headers,
        "body": body,
        "requestContext": {"http": {"method": method, "path": path}},
    }


@pytest.fixture
def keys() -> InMemoryApiKeys:
    return InMemoryApiKeys.of(WS)


def _check(event: dict[str, Any], keys: InMemoryApiKeys, rated: list[str] | None = None) -> Checked:
    return check_request(
        event, lambda header: resolve_workspace(keys, header), rated.append if rated is not None else None
    )


def _answer(event: dict[str, Any], keys: InMemoryApiKeys, rated: list[str] | None = None) -> ApiError:
    with pytest.raises(ApiError) as raised:
        _check(event, keys, rated)
    return raised.value


def test_given_a_good_key_then_its_workspace_and_the_rate_checked_for_it(keys: InMemoryApiKeys) -> None:
    rated: list[str] = []

    checked = _check(_event(), keys, rated)

    assert checked.workspace == WS
    assert rated == [WS]


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        f"Basic {key_of(WS)}",
        key_of(WS),
        "Bearer sk_wrong",
        f"Bearer {key_of(WS)}x",
    ],
)
def test_given_no_key_or_a_wrong_one_on_a_protected_route_then_401_and_no_rate_counted(
    keys: InMemoryApiKeys, authorization: str | None
) -> None:
    rated: list[str] = []

    error = _answer(_event(authorization=authorization), keys, rated)

    assert (error.status, error.code) == (401, "unauthorized")
    assert rated == []


@pytest.mark.parametrize("authorization", [f"bearer {key_of(WS)}", f"BEARER   {key_of(WS)}  "])
def test_given_the_scheme_in_any_case_then_the_key_is_read(keys: InMemoryApiKeys, authorization: str) -> None:
    assert _check(_event(authorization=authorization), keys).workspace == WS


def test_given_a_header_named_in_another_case_then_it_is_read(keys: InMemoryApiKeys) -> None:
    event = _event()
    event["headers"]["Authorization"] = event["headers"].pop("authorization")

    assert _check(event, keys).workspace == WS


def test_given_a_revoked_key_then_401(keys: InMemoryApiKeys) -> None:
    keys.revoke(key_of(WS))

    assert _answer(_event(), keys).status == 401


def test_given_the_key_store_fails_then_503_with_retry_after_not_401_and_no_rate_counted(
    keys: InMemoryApiKeys,
) -> None:
    keys.failing = True
    rated: list[str] = []

    error = _answer(_event(), keys, rated)

    assert (error.status, error.code) == (503, "unavailable")
    assert error.headers["Retry-After"]
    assert rated == []


def test_given_no_key_while_the_key_store_fails_then_still_401_and_nothing_read(
    keys: InMemoryApiKeys,
) -> None:
    keys.failing = True

    assert _answer(_event(authorization=None), keys).status == 401
    assert keys.reads == 0


def test_given_the_key_store_fails_then_the_log_names_neither_the_key_nor_its_header(
    keys: InMemoryApiKeys, caplog: pytest.LogCaptureFixture
) -> None:
    keys.failing = True

    with caplog.at_level("INFO", logger="sendonce"):
        _answer(_event(), keys)

    assert [record.getMessage() for record in caplog.records] == ["auth.key_lookup_failed"]
    assert key_of(WS) not in caplog.text
    assert hash_api_key(key_of(WS)) not in caplog.text


@pytest.mark.parametrize(
    ("path", "method"), [("/v1/health", "GET"), ("/openapi.json", "GET"), ("/v1/webhooks/http", "POST")]
)
def test_given_a_public_route_then_no_key_is_looked_up(keys: InMemoryApiKeys, path: str, method: str) -> None:
    keys.failing = True
    route = "POST /v1/webhooks/{provider}" if path.startswith("/v1/webhooks") else f"{method} {path}"

    checked = _check(_event(path=path, method=method, authorization=None, route_key=route), keys)

    assert checked.workspace is None
    assert keys.reads == 0


@pytest.mark.parametrize("route_key", ["$default", "GET /v1/messages/{id}"])
def test_given_a_path_no_route_takes_then_404_here_whatever_route_the_gateway_named(
    keys: InMemoryApiKeys, route_key: str
) -> None:
    event = _event(path="/v1/messages/a/b", method="GET", authorization=None, route_key=route_key)

    error = _answer(event, keys)

    assert (error.status, error.code) == (404, "not_found")
    assert keys.reads == 0  # no key sent: none looked up


def test_given_a_good_key_on_a_path_no_route_takes_then_404_and_the_rate_counted(
    keys: InMemoryApiKeys,
) -> None:
    rated: list[str] = []

    error = _answer(_event(path="/v1/nowhere", method="GET", route_key="$default"), keys, rated)

    assert (error.status, error.code) == (404, "not_found")
    assert rated == [WS]  # so that the 404 carries the RateLimit fields


def test_given_a_good_key_and_another_method_then_405_and_the_rate_counted(keys: InMemoryApiKeys) -> None:
    rated: list[str] = []

    error = _answer(_event(method="PUT", route_key="$default"), keys, rated)

    assert (error.status, error.code, error.headers["Allow"]) == (405, "method_not_allowed", "GET, POST")
    assert rated == [WS]


@pytest.mark.parametrize("authorization", [None, "Bearer sk_wrong", "Basic x"])
def test_given_no_good_key_on_a_path_no_route_takes_then_still_404_and_nothing_counted(
    keys: InMemoryApiKeys, authorization: str | None
) -> None:
    rated: list[str] = []

    error = _answer(
        _event(path="/v1/nowhere", authorization=authorization, route_key="$default"), keys, rated
    )

    assert error.status == 404
    assert rated == []


def test_given_the_key_store_fails_on_a_path_no_route_takes_then_still_404_not_503(
    keys: InMemoryApiKeys,
) -> None:
    keys.failing = True

    assert _answer(_event(path="/v1/nowhere", route_key="$default"), keys).status == 404


# ---------------------------------------------------------------------------- an id holding a slash
_ID_ROUTES = [route for route in ROUTES if "{" in route.path]


def _with_id(route: Route, value: str) -> str:
    return re.sub(r"\{\w+\}", value, route.path)


@pytest.mark.parametrize("route", _ID_ROUTES, ids=lambda route: route.key)
@pytest.mark.parametrize("value", ["a%2fb", "a%2Fb", "%2F", "a%252fb", "a%252Fb", "%252F"])
@pytest.mark.parametrize("gateway_names_the_route", [True, False])
def test_given_an_id_that_decodes_to_a_slash_then_404_with_a_good_key_never_401(
    keys: InMemoryApiKeys, route: Route, value: str, gateway_names_the_route: bool
) -> None:
    rated: list[str] = []
    event = _event(
        path=_with_id(route, value),
        method=route.method,
        authorization=None if route.public else f"Bearer {key_of(WS)}",
        route_key=route.key if gateway_names_the_route else "$default",
    )

    error = _answer(event, keys, rated)

    assert (error.status, error.code) == (404, "not_found")
    assert rated == ([] if route.public else [WS])  # a good key's 404 carries the RateLimit fields


@pytest.mark.parametrize("route", [r for r in _ID_ROUTES if not r.public], ids=lambda route: route.key)
def test_given_an_id_that_decodes_to_a_slash_and_no_key_then_401_or_404_never_a_route(
    keys: InMemoryApiKeys, route: Route
) -> None:
    # `%252F`: the gateway routes it to the route (one segment), whose key comes first; `%2F`: no route.
    double = _event(path=_with_id(route, "a%252Fb"), method=route.method, authorization=None)
    single = _event(path=_with_id(route, "a%2Fb"), method=route.method, authorization=None)

    assert _answer(double, keys).status == 401
    assert _answer(single, keys).status == 404


@pytest.mark.parametrize("value", ["a%2Bb", "%2B15550100000", "ann%40x.io", "a%25b", "msg_01"])
def test_given_an_encoded_id_without_a_slash_then_it_reaches_its_route(
    keys: InMemoryApiKeys, value: str
) -> None:
    event = _event(path=f"/v1/suppressions/{value}", method="GET", route_key="GET /v1/suppressions/{to}")

    assert _check(event, keys).workspace == WS


@pytest.mark.parametrize(
    ("path", "method"), [("/v1/health", "GET"), ("/openapi.json", "GET"), ("/v1/webhooks/http", "POST")]
)
def test_given_a_good_key_on_a_public_route_then_it_is_counted_and_a_bad_one_changes_nothing(
    keys: InMemoryApiKeys, path: str, method: str
) -> None:
    route = "POST /v1/webhooks/{provider}" if path.startswith("/v1/webhooks") else f"{method} {path}"
    rated: list[str] = []

    assert _check(_event(path=path, method=method, route_key=route), keys, rated).workspace == WS
    assert rated == [WS]  # its answer carries the RateLimit fields
    for authorization in ("Bearer sk_wrong", "Basic x"):
        assert (
            _check(
                _event(path=path, method=method, authorization=authorization, route_key=route), keys
            ).workspace
            is None
        )
    keys.failing = True
    assert _check(_event(path=path, method=method, route_key=route), keys, rated).workspace is None
    assert rated == [WS]


def _refuse(workspace: str) -> None:
    raise ApiError(429, "rate_limited", f"{workspace} is over its rate")


@pytest.mark.parametrize(
    ("path", "method", "route_key", "answer"),
    [
        ("/v1/health", "GET", "GET /v1/health", None),
        ("/v1/webhooks/http", "POST", "POST /v1/webhooks/{provider}", None),
        ("/v1/nowhere", "GET", "$default", 404),
        ("/v1/messages", "PUT", "$default", 405),
    ],
)
def test_given_a_good_key_over_its_rate_on_a_request_that_needs_none_then_it_is_answered_all_the_same(
    keys: InMemoryApiKeys, path: str, method: str, route_key: str, answer: int | None
) -> None:
    event = _event(path=path, method=method, route_key=route_key)

    if answer is None:
        assert check_request(event, lambda header: resolve_workspace(keys, header), _refuse).workspace == WS
    else:
        with pytest.raises(ApiError) as raised:
            check_request(event, lambda header: resolve_workspace(keys, header), _refuse)
        assert raised.value.status == answer


def test_given_a_good_key_over_its_rate_on_a_route_that_takes_one_then_429(keys: InMemoryApiKeys) -> None:
    with pytest.raises(ApiError) as raised:
        check_request(_event(), lambda header: resolve_workspace(keys, header), _refuse)

    assert raised.value.status == 429


def test_given_no_key_then_401_comes_before_413_and_415(keys: InMemoryApiKeys) -> None:
    event = _event(body="x" * (256 * 1024 + 1), content_type="text/plain", authorization=None)

    assert _answer(event, keys).status == 401


def test_given_a_body_over_256_kib_then_413_before_the_media_type(keys: InMemoryApiKeys) -> None:
    error = _answer(_event(body="x" * (256 * 1024 + 1), content_type="text/plain"), keys)

    assert (error.status, error.code) == (413, "payload_too_large")


@pytest.mark.parametrize("content_type", ["text/plain", "application/json; charset=latin-1", ""])
def test_given_a_body_that_is_not_utf8_json_then_415(keys: InMemoryApiKeys, content_type: str) -> None:
    error = _answer(_event(content_type=content_type), keys)

    assert (error.status, error.code) == (415, "unsupported_media_type")


def test_given_json_nested_too_deeply_then_400_not_an_unexpected_error(keys: InMemoryApiKeys) -> None:
    error = _answer(_event(body="[" * 100_000), keys)

    assert (error.status, error.code) == (400, "validation_error")


def test_given_a_valid_body_in_any_case_of_the_media_type_then_the_router_gets_it_normalised(
    keys: InMemoryApiKeys,
) -> None:
    checked = _check(_event(content_type="Application/JSON; charset=UTF-8", body='{"a": 1}'), keys)

    assert checked.event["headers"]["content-type"] == "application/json; charset=utf-8"
    assert checked.event["body"] == '{"a": 1}'
    assert checked.workspace == WS


# ---------------------------------------------------------------------------- the body, decoded once
SMS = '{"channel": "sms", "to": "+15550100000", "body": "hi"'
LONG = "1" * 5_000  # over Python's 4,300-digit limit of int() on text


def _body_error(body: str, path: str = "/v1/messages", method: str = "POST") -> ApiError:
    error = _answer(
        _event(path=path, method=method, body=body, route_key=f"{method} {path}"), InMemoryApiKeys.of(WS)
    )
    assert (error.status, error.code) == (400, "validation_error"), error.body()
    return error


def _fields(error: ApiError) -> list[str]:
    return [detail["field"] for detail in error.details]


def test_given_a_json_body_then_its_decoded_value_rides_on_with_the_request(keys: InMemoryApiKeys) -> None:
    checked = _check(_event(body=SMS + ', "metadata": {"a": "1"}}'), keys)

    assert checked.body == RequestBody(
        {"channel": "sms", "to": "+15550100000", "body": "hi", "metadata": {"a": "1"}}
    )
    assert (
        checked.event["body"] == SMS + ', "metadata": {"a": "1"}}'
    )  # the text as it came, for no one to parse


def test_given_a_route_that_reads_no_body_then_none_is_decoded(keys: InMemoryApiKeys) -> None:
    event = _event(path="/v1/messages", method="GET", body="{not json", route_key="GET /v1/messages")

    assert _check(event, keys).body is None


@pytest.mark.parametrize(
    ("path", "method", "body", "field"),
    [
        ("/v1/messages", "POST", SMS + f', "sendAt": {LONG}}}', "sendAt"),
        ("/v1/messages", "POST", f'{{"metadata": {{"k": -{LONG}}}}}', "metadata.k"),
        (
            "/v1/messages/batch",
            "POST",
            f'{{"messages": [{SMS}}}, {SMS}, "sendAt": {LONG}}}]}}',
            "messages.1.sendAt",
        ),
        (
            "/v1/webhook-endpoints",
            "POST",
            f'{{"url": "https://example.com", "eventTypes": [{LONG}]}}',
            "eventTypes.0",
        ),
        ("/v1/suppressions", "POST", f'{{"channel": "sms", "to": {LONG}}}', "to"),
        ("/v1/messages/msg_01KDVDNA00QV9D1V5ZMBF8DBMW", "PATCH", f'{{"sendAt": {LONG}}}', "sendAt"),
        ("/v1/events/evt_1/redeliver", "POST", f'{{"endpointId": {LONG}}}', "endpointId"),
        ("/v1/messages", "POST", LONG, "body"),
    ],
)
def test_given_a_number_too_long_for_python_then_400_naming_it_not_a_5xx(
    path: str, method: str, body: str, field: str
) -> None:
    error = _body_error(body, path, method)

    assert _fields(error) == [field]
    assert "5000 digits" in error.details[0]["message"]


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ('{"channel": "sms", "to": "+15550100000", "to": "+15550100001", "body": "hi"}', ["to"]),
        (SMS + ', "metadata": {"a": "1", "b": "2", "a": "3"}}', ["metadata.a"]),
        ('{"a": 1, "a": 2, "b": 1, "b": 2, "a": 3}', ["a", "b"]),
        (f'{{"messages": [{SMS}}}, {SMS}, "to": "+15550100001"}}]}}', ["messages.1.to"]),
        ('{"a": [[{"x": {"y": 1, "y": 1}}]], "a": 1}', ["a", "a.0.0.x.y"]),
    ],
)
def test_given_a_field_repeated_in_one_object_at_any_depth_then_400_naming_each(
    body: str, fields: list[str]
) -> None:
    error = _body_error(body)

    assert sorted(_fields(error)) == sorted(fields)
    assert all("repeated" in detail["message"] for detail in error.details)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ('{"channel": "sms",}', "not valid JSON: Expecting property name"),
        ('{"a": 1} x', "not valid JSON: Extra data"),
        ("\ufeff{}", "not valid JSON: Unexpected UTF-8 BOM"),
        (SMS + ', "metadata": {"a": NaN}}', "NaN, which is not JSON"),
        ('{"a": [Infinity, -Infinity]}', "Infinity, which is not JSON"),
    ],
)
def test_given_any_other_body_the_parser_refuses_then_400_saying_why(body: str, message: str) -> None:
    error = _body_error(body)

    assert any(message in detail["message"] for detail in error.details), error.details


def test_given_many_bad_objects_then_the_first_fifty_are_named_and_the_answer_stays_small() -> None:
    error = _body_error("[" + ", ".join(['{"a": 1, "a": 2}'] * 5_000) + "]")

    assert len(error.details) == 51
    assert error.details[0]["field"] == "0.a"
    assert error.details[-1] == {"field": "body", "message": "and 4950 more like these"}


def test_given_json_that_is_not_utf8_then_415_before_it_is_decoded(keys: InMemoryApiKeys) -> None:
    event = _event(body="")
    event["body"], event["isBase64Encoded"] = "eyJhIjogIukifQ==", True  # {"a": "\xe9"} in latin-1

    assert _answer(event, keys).status == 415


def test_given_a_signed_body_that_is_not_json_then_its_refusal_waits_for_the_signature(
    keys: InMemoryApiKeys,
) -> None:
    event = _event(
        path="/v1/webhooks/http",
        body='{"eventId": "e", "eventId": "f"}',
        authorization=None,
        route_key="POST /v1/webhooks/{provider}",
    )

    checked = _check(event, keys)

    assert checked.event is event  # the signed bytes as they came
    assert checked.body is not None
    with pytest.raises(ApiError) as raised:
        checked.body.json()
    assert [detail["field"] for detail in raised.value.details] == ["eventId"]


# -- hypothesis: the input space of JSON documents is large
names = st.text(max_size=6)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(names, children, max_size=4),
    max_leaves=20,
)
bodies = st.dictionaries(names, documents, min_size=1, max_size=5)


class _Raw:
    """A piece of JSON text put into a document as it is (a repeated name, a long number)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _dumps(node: Any, repeat_in: Any = None, repeat: tuple[str, str] = ("", "")) -> str:
    """JSON text of the node; the object `repeat_in` (by identity) gets the pair `repeat` (a name and
    its JSON text) after its own."""
    if isinstance(node, _Raw):
        return node.text
    if isinstance(node, dict):
        pairs = [f"{json.dumps(name)}: {_dumps(value, repeat_in, repeat)}" for name, value in node.items()]
        if node is repeat_in:
            pairs.append(f"{json.dumps(repeat[0])}: {repeat[1]}")
        return "{" + ", ".join(pairs) + "}"
    if isinstance(node, list):
        return "[" + ", ".join(_dumps(value, repeat_in, repeat) for value in node) + "]"
    return json.dumps(node)


def _some_container(data: st.DataObject, body: dict[str, Any]) -> tuple[tuple[str, ...], Any]:
    """A dict or list somewhere in the body, and its path: the body itself, or one below it."""
    path: tuple[str, ...] = ()
    node: Any = body
    while True:
        inner = [
            (str(name), child)
            for name, child in (node.items() if isinstance(node, dict) else enumerate(node))
            if isinstance(child, (dict, list))
        ]
        if not inner or not data.draw(st.booleans(), label="deeper"):
            return path, node
        name, node = data.draw(st.sampled_from(inner), label="into")
        path = (*path, name)


def _field(path: tuple[str, ...]) -> str:
    return ".".join(path) or "body"


@given(body=bodies)
def test_property_a_json_object_is_decoded_to_what_it_says(body: dict[str, Any]) -> None:
    checked = _check(_event(body=json.dumps(body)), InMemoryApiKeys.of(WS))

    assert checked.body == RequestBody(body)


@given(body=bodies, data=st.data())
def test_property_a_name_repeated_at_any_depth_is_a_400_naming_it(
    body: dict[str, Any], data: st.DataObject
) -> None:
    path, node = _some_container(data, body)
    if isinstance(node, list):  # a list holds no names: put an object in it
        node.append({})
        path, node = (*path, str(len(node) - 1)), node[-1]
    name = data.draw(st.sampled_from(sorted(node)) if node else names, label="name")
    node[name] = data.draw(documents, label="first")
    # The same object gets the same name again, with any value.
    repeated = _dumps(body, repeat_in=node, repeat=(name, _dumps(data.draw(documents, label="second"))))

    error = _body_error(repeated)

    assert _field((*path, name)) in _fields(error)


@given(
    body=bodies,
    data=st.data(),
    digits=st.integers(min_value=4_301, max_value=20_000),
    sign=st.sampled_from(["", "-"]),
)
def test_property_a_number_too_long_anywhere_is_a_400_naming_it(
    body: dict[str, Any], data: st.DataObject, digits: int, sign: str
) -> None:
    path, node = _some_container(data, body)
    number = _Raw(sign + "9" * digits)
    if isinstance(node, list):
        index = data.draw(st.integers(min_value=0, max_value=len(node)), label="index")
        node.insert(index, number)
        where = (*path, str(index))
    else:
        name = data.draw(names.filter(lambda name: name not in node), label="name")
        node[name] = number
        where = (*path, name)

    error = _body_error(_dumps(body))

    assert _fields(error) == [_field(where)]
    assert f"{digits} digits" in error.details[0]["message"]
