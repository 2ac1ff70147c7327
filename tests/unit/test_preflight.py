"""What the API answers before a request reaches its route: 401 or 503, 429, 413, 415, a body too deep.

The caller is found here from the `Authorization` header, through the function's key store: no key,
a malformed header, an unknown or a revoked key is 401; a store that cannot be read is 503 with
Retry-After, never 401. Both come before the request rate, and nothing after them runs.
"""

from __future__ import annotations

from typing import Any

import pytest
from sendonce.api.errors import ApiError
from sendonce.api.preflight import Checked, check_request
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


def test_given_no_key_on_a_path_no_route_matched_then_the_router_answers_it(keys: InMemoryApiKeys) -> None:
    event = _event(path="/v1/messages/a/b", authorization=None, route_key="$default")

    checked = _check(event, keys)

    assert checked.event is event
    assert checked.workspace is None
    assert keys.reads == 0


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
