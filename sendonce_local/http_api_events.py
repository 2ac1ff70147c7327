"""Payload format 2.0 events of API Gateway HTTP APIs, and how their Lambda responses become HTTP."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from sendonce_local.constants import ACCOUNT_ID, API_ID, REGION

STAGE = "$default"
DOMAIN_NAME = f"{API_ID}.execute-api.{REGION}.amazonaws.com"
TEXTUAL_TYPES = (
    "application/json",
    "application/javascript",
    "application/xml",
    "application/x-www-form-urlencoded",
    "application/yaml",
    "application/x-yaml",
)


@dataclass(frozen=True)
class HttpRequest:
    method: str
    raw_path: str
    raw_query_string: str
    headers: list[tuple[str, str]]  # as received, in order, repeats kept
    body: bytes
    source_ip: str
    protocol: str = "HTTP/1.1"


@dataclass
class HttpResponse:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


def _joined_headers(headers: list[tuple[str, str]]) -> dict[str, str]:
    joined: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            continue
        joined[key] = f"{joined[key]},{value}" if key in joined else value
    return joined


def _cookies(headers: list[tuple[str, str]]) -> list[str]:
    cookies: list[str] = []
    for name, value in headers:
        if name.lower() == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
    return cookies


def _query_parameters(raw_query_string: str) -> dict[str, str]:
    parameters: dict[str, str] = {}
    for name, value in parse_qsl(raw_query_string, keep_blank_values=True):
        parameters[name] = f"{parameters[name]},{value}" if name in parameters else value
    return parameters


def is_textual(content_type: str | None) -> bool:
    if not content_type:
        return True
    media_type = content_type.split(";")[0].strip().lower()
    return (
        media_type.startswith("text/")
        or media_type in TEXTUAL_TYPES
        or media_type.endswith("+json")
        or media_type.endswith("+xml")
    )


def encode_body(body: bytes, content_type: str | None) -> tuple[str, bool]:
    """The event's (body, isBase64Encoded): text as is, anything else base64."""
    if is_textual(content_type):
        try:
            return body.decode("utf-8"), False
        except UnicodeDecodeError:
            pass
    return base64.b64encode(body).decode("ascii"), True


def request_context(request: HttpRequest, route_key: str, now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    headers = _joined_headers(request.headers)
    return {
        "accountId": ACCOUNT_ID,
        "apiId": API_ID,
        "domainName": headers.get("host", DOMAIN_NAME),
        "domainPrefix": headers.get("host", DOMAIN_NAME).split(".")[0].split(":")[0],
        "http": {
            "method": request.method.upper(),
            "path": request.raw_path,
            "protocol": request.protocol,
            "sourceIp": request.source_ip,
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": uuid.uuid4().hex[:16] + "=",
        "routeKey": route_key,
        "stage": STAGE,
        "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "timeEpoch": int(now.timestamp() * 1000),
    }


def _common(request: HttpRequest, route_key: str, path_parameters: dict[str, str]) -> dict[str, Any]:
    event: dict[str, Any] = {
        "routeKey": route_key,
        "rawPath": request.raw_path,
        "rawQueryString": request.raw_query_string,
    }
    cookies = _cookies(request.headers)
    if cookies:
        event["cookies"] = cookies
    event["headers"] = _joined_headers(request.headers)
    # API Gateway tells the function the scheme the caller used (Twilio's signature covers the URL
    # it called); locally that is plain http unless a proxy in front says otherwise.
    event["headers"].setdefault("x-forwarded-proto", "http")
    if request.raw_query_string:
        event["queryStringParameters"] = _query_parameters(request.raw_query_string)
    if path_parameters:
        event["pathParameters"] = dict(path_parameters)
    return event


def proxy_event(
    request: HttpRequest,
    route_key: str,
    path_parameters: dict[str, str],
    context: dict[str, Any],
) -> dict[str, Any]:
    """The `http-api-proxy` event a route's integration receives (no authorizer runs before it)."""
    event: dict[str, Any] = {"version": "2.0", **_common(request, route_key, path_parameters)}
    event["requestContext"] = dict(context)
    content_type = event["headers"].get("content-type")
    if request.body:
        event["body"], event["isBase64Encoded"] = encode_body(request.body, content_type)
    else:
        event["isBase64Encoded"] = False
    return event


def lambda_response(result: Any) -> HttpResponse:
    """The HTTP response API Gateway makes of a payload 2.0 Lambda result."""
    if not (isinstance(result, dict) and "statusCode" in result):
        payload = result if isinstance(result, str) else json.dumps(result)
        return HttpResponse(200, [("Content-Type", "application/json")], payload.encode("utf-8"))
    headers = [(str(k), str(v)) for k, v in (result.get("headers") or {}).items()]
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers.extend((str(name), str(value)) for value in values or [])
    headers.extend(("Set-Cookie", str(cookie)) for cookie in result.get("cookies") or [])
    body = result.get("body")
    if body is None:
        raw = b""
    elif result.get("isBase64Encoded"):
        raw = base64.b64decode(body)
    else:
        raw = (body if isinstance(body, str) else json.dumps(body)).encode("utf-8")
    return HttpResponse(int(result["statusCode"]), headers, raw)


def gateway_error(status: int, message: str) -> HttpResponse:
    """An answer API Gateway gives itself (`{"message": ...}`)."""
    return HttpResponse(
        status, [("Content-Type", "application/json")], json.dumps({"message": message}).encode()
    )
