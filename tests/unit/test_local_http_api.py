"""sendonce_local: API Gateway HTTP API routing, payload 2.0 events and response mapping."""

from __future__ import annotations

import base64
import json
from typing import Any

from sendonce_local.api_gateway import HttpApi
from sendonce_local.http_api_events import (
    HttpRequest,
    lambda_response,
    proxy_event,
    request_context,
)
from sendonce_local.routing import Router
from sendonce_local.template import HttpRoute

ROUTES = [
    HttpRoute("Api", "Send", "POST", "/v1/messages"),
    HttpRoute("Api", "Get", "GET", "/v1/messages/{id}"),
    HttpRoute("Api", "Exact", "GET", "/v1/messages/latest"),
    HttpRoute("Api", "Fallback", None, None),
]


def request(**overrides) -> HttpRequest:
    fields = {
        "method": "POST",
        "raw_path": "/v1/messages",
        "raw_query_string": "a=1&a=2&b=x",
        "headers": [
            ("Content-Type", "application/json"),
            ("X-Repeat", "one"),
            ("X-Repeat", "two"),
            ("Cookie", "c1=v1; c2=v2"),
            ("User-Agent", "tests"),
        ],
        "body": b'{"hello": "world"}',
        "source_ip": "127.0.0.1",
    }
    fields.update(overrides)
    return HttpRequest(**fields)


def test_routes_prefer_exact_paths_then_parameters_then_default() -> None:
    router = Router(ROUTES)

    assert router.match("GET", "/v1/messages/latest").route.event_name == "Exact"
    found = router.match("GET", "/v1/messages/msg_1")
    assert found.route.event_name == "Get"
    assert found.path_parameters == {"id": "msg_1"}
    assert router.match("PUT", "/v1/messages").route.route_key == "$default"
    assert Router(ROUTES[:1]).match("GET", "/nope") is None


def test_proxy_event_has_the_payload_2_0_shape() -> None:
    req = request()
    event = proxy_event(req, "POST /v1/messages", {}, request_context(req, "POST /v1/messages"))

    assert event["version"] == "2.0"
    assert event["routeKey"] == "POST /v1/messages"
    assert event["rawPath"] == "/v1/messages"
    assert event["rawQueryString"] == "a=1&a=2&b=x"
    assert event["cookies"] == ["c1=v1", "c2=v2"]
    assert event["headers"]["x-repeat"] == "one,two"
    assert "cookie" not in event["headers"]
    assert event["queryStringParameters"] == {"a": "1,2", "b": "x"}
    assert "pathParameters" not in event
    assert event["body"] == '{"hello": "world"}'
    assert event["isBase64Encoded"] is False
    context = event["requestContext"]
    assert context["http"] == {
        "method": "POST",
        "path": "/v1/messages",
        "protocol": "HTTP/1.1",
        "sourceIp": "127.0.0.1",
        "userAgent": "tests",
    }
    assert context["stage"] == "$default"
    assert context["routeKey"] == "POST /v1/messages"
    assert "authorizer" not in context  # no authorizer runs: the function checks the key itself
    assert isinstance(context["timeEpoch"], int)


def test_binary_bodies_are_base64() -> None:
    req = request(headers=[("Content-Type", "application/octet-stream")], body=b"\xff\x00")
    event = proxy_event(req, "$default", {}, request_context(req, "$default"))

    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == b"\xff\x00"


def test_invalid_utf8_json_is_base64() -> None:
    req = request(body=b'{"a": "\xe9"}')
    event = proxy_event(req, "$default", {}, request_context(req, "$default"))

    assert event["isBase64Encoded"] is True


class _Function:
    """A registered function that records the events it is invoked with."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        self.events.append(event)
        return {"statusCode": 401, "headers": {"Content-Type": "application/json"}, "body": "{}"}


def test_a_request_reaches_the_route_function_alone_with_its_authorization_header() -> None:
    api_function = _Function()
    api = HttpApi(ROUTES, {"Api": api_function})  # type: ignore[dict-item]

    response = api.handle(
        request(headers=[("Authorization", "Bearer sk_x"), ("Content-Type", "application/json")])
    )

    assert response.status == 401  # the function's own answer, passed on
    (event,) = api_function.events
    assert event["headers"]["authorization"] == "Bearer sk_x"
    assert "authorizer" not in event["requestContext"]


def test_lambda_responses() -> None:
    response = lambda_response(
        {
            "statusCode": 201,
            "headers": {"Content-Type": "application/json"},
            "cookies": ["a=b"],
            "body": '{"ok": true}',
        }
    )
    assert response.status == 201
    assert ("Set-Cookie", "a=b") in response.headers
    assert response.body == b'{"ok": true}'

    plain = lambda_response({"hello": "world"})
    assert plain.status == 200
    assert json.loads(plain.body) == {"hello": "world"}

    binary = lambda_response(
        {"statusCode": 200, "body": base64.b64encode(b"\x01").decode(), "isBase64Encoded": True}
    )
    assert binary.body == b"\x01"


def test_an_encoded_slash_is_routed_as_api_gateway_routes_it() -> None:
    """The path is decoded once to find the route, and each parameter once more: `%2F` makes two
    segments (`$default`), `%252F` is one segment whose parameter is `a/b`; `rawPath` stays as sent."""
    api_function = _Function()
    api = HttpApi(ROUTES, {"Api": api_function})  # type: ignore[dict-item]

    for raw_path in (
        "/v1/messages/a%2Fb",
        "/v1/messages/a%2fb",
        "/v1/messages/a%252Fb",
        "/v1/messages/%2B1%40x",
    ):
        api.handle(request(method="GET", raw_path=raw_path, body=b""))

    routed = [(e["routeKey"], e["rawPath"], e.get("pathParameters")) for e in api_function.events]
    assert routed == [
        ("$default", "/v1/messages/a%2Fb", None),
        ("$default", "/v1/messages/a%2fb", None),
        ("GET /v1/messages/{id}", "/v1/messages/a%252Fb", {"id": "a/b"}),
        ("GET /v1/messages/{id}", "/v1/messages/%2B1%40x", {"id": "+1@x"}),
    ]
