"""What the API answers before a request reaches its route: 401, 413, 415, and a body too deep."""

from __future__ import annotations

from typing import Any

import pytest
from sendonce.api.errors import ApiError
from sendonce.api.preflight import check_request


def _event(
    path: str = "/v1/messages",
    method: str = "POST",
    body: str = "{}",
    content_type: str = "application/json",
    workspace: str | None = "ws",
    route_key: str = "POST /v1/messages",
) -> dict[str, Any]:
    context: dict[str, Any] = {"http": {"method": method, "path": path}}
    if workspace:
        context["authorizer"] = {"lambda": {"workspaceId": workspace}}
    return {
        "routeKey": route_key,
        "rawPath": path,
        "headers": {"content-type": content_type},
        "body": body,
        "requestContext": context,
    }


def _answer(event: dict[str, Any]) -> tuple[int, str]:
    with pytest.raises(ApiError) as raised:
        check_request(event)
    return raised.value.status, raised.value.code


def test_given_no_workspace_on_a_protected_route_then_401() -> None:
    assert _answer(_event(workspace=None)) == (401, "unauthorized")


def test_given_no_workspace_on_a_path_no_route_matched_then_the_router_answers_it() -> None:
    event = _event(path="/v1/messages/a/b", workspace=None, route_key="$default")
    assert check_request(event) is event


def test_given_a_body_over_256_kib_then_413_before_the_media_type() -> None:
    assert _answer(_event(body="x" * (256 * 1024 + 1), content_type="text/plain")) == (
        413,
        "payload_too_large",
    )


@pytest.mark.parametrize("content_type", ["text/plain", "application/json; charset=latin-1", ""])
def test_given_a_body_that_is_not_utf8_json_then_415(content_type: str) -> None:
    assert _answer(_event(content_type=content_type)) == (415, "unsupported_media_type")


def test_given_json_nested_too_deeply_then_400_not_an_unexpected_error() -> None:
    assert _answer(_event(body="[" * 100_000)) == (400, "validation_error")


def test_given_a_valid_body_in_any_case_of_the_media_type_then_the_router_gets_it_normalised() -> None:
    checked = check_request(_event(content_type="Application/JSON; charset=UTF-8", body='{"a": 1}'))
    assert checked["headers"]["content-type"] == "application/json; charset=utf-8"
    assert checked["body"] == '{"a": 1}'
