"""sendonce_local: API Gateway HTTP API routing, payload 2.0 events and response mapping."""

from __future__ import annotations

import base64
import json

from sendonce_local.http_api_events import (
    HttpRequest,
    authorizer_event,
    is_authorized,
    lambda_response,
    proxy_event,
    request_context,
)
from sendonce_local.routing import Router
from sendonce_local.template import Authorizer, HttpRoute

AUTH = Authorizer("Keys", "AuthorizerFunction", simple_responses=True, payload_format_version="2.0")
ROUTES = [
    HttpRoute("Api", "Send", "POST", "/v1/messages", AUTH),
    HttpRoute("Api", "Get", "GET", "/v1/messages/{id}", AUTH),
    HttpRoute("Api", "Exact", "GET", "/v1/messages/latest", AUTH),
    HttpRoute("Api", "Fallback", None, None, None),
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
    event = proxy_event(
        req, "POST /v1/messages", {}, request_context(req, "POST /v1/messages"), {"workspaceId": "w"}
    )

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
    assert context["authorizer"] == {"lambda": {"workspaceId": "w"}}
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


def test_authorizer_event() -> None:
    req = request()
    event = authorizer_event(
        req, "GET /v1/messages/{id}", {"id": "m"}, request_context(req, "GET /v1/messages/{id}")
    )

    assert event["version"] == "2.0"
    assert event["type"] == "REQUEST"
    assert event["routeArn"].endswith("/$default/GET/v1/messages/{id}")
    assert event["pathParameters"] == {"id": "m"}
    assert event["headers"]["content-type"] == "application/json"


def test_authorizer_answers() -> None:
    assert is_authorized({"isAuthorized": True, "context": {"w": "1"}}, True) == (True, {"w": "1"})
    assert is_authorized({"isAuthorized": False}, True) == (False, {})
    assert is_authorized(None, True) == (False, {})


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
