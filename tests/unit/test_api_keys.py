"""The API function finds its caller itself: the key's hash, looked up through a short cache.

A found key's workspace is kept per execution environment for the cache period, on the injected
clock; an unknown or revoked key and a store that cannot be read are never kept. Through the real
handler, every 401 and 503 has the API's one error body.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sendonce import composition
from sendonce.api import dependencies
from sendonce.api.app import handle
from sendonce.auth.api_keys import hash_api_key, issue_api_key
from sendonce.auth.key_cache import CachedApiKeyStore
from sendonce.aws_clients import client
from sendonce.entrypoints import api as api_function
from sendonce.messages.service import MessageService
from sendonce.settings import ApiSettings, InvalidSettings

from tests.support.lambda_context import FakeLambdaContext
from tests.unit.unit_fakes import (
    API_SETTINGS,
    FakeQueue,
    InMemoryApiKeys,
    InMemoryStore,
    ManualClock,
    fake_api_dependencies,
    key_of,
)

TTL = timedelta(seconds=60)
KEY = "sk_live_key"
WS = "ws_a"


@pytest.fixture
def keys() -> InMemoryApiKeys:
    store = InMemoryApiKeys()
    issue_api_key(store, WS, KEY)
    return store


def _cache(keys: InMemoryApiKeys, clock: ManualClock, **options: Any) -> CachedApiKeyStore:
    return CachedApiKeyStore(keys, TTL, clock=clock, **options)


# ---------------------------------------------------------------------------- the cache's rules
def test_a_found_key_is_read_once_and_then_answered_from_memory(
    keys: InMemoryApiKeys, clock: ManualClock
) -> None:
    cache = _cache(keys, clock)

    assert cache.workspace_for(hash_api_key(KEY)) == WS
    clock.advance(59.999)
    assert cache.workspace_for(hash_api_key(KEY)) == WS

    assert keys.reads == 1


def test_a_found_key_is_read_again_once_its_period_has_passed(
    keys: InMemoryApiKeys, clock: ManualClock
) -> None:
    cache = _cache(keys, clock)
    cache.workspace_for(hash_api_key(KEY))

    clock.advance(60)
    assert cache.workspace_for(hash_api_key(KEY)) == WS
    assert keys.reads == 2
    assert cache.workspace_for(hash_api_key(KEY)) == WS  # and kept afresh from then
    assert keys.reads == 2


def test_a_revoked_key_keeps_working_where_it_was_found_good_for_at_most_the_period(
    keys: InMemoryApiKeys, clock: ManualClock
) -> None:
    cache = _cache(keys, clock)
    cache.workspace_for(hash_api_key(KEY))
    keys.revoke(KEY)

    clock.advance(30)
    assert cache.workspace_for(hash_api_key(KEY)) == WS  # the documented revocation delay
    clock.advance(30)
    assert cache.workspace_for(hash_api_key(KEY)) is None
    assert cache.workspace_for(hash_api_key(KEY)) is None
    assert keys.reads == 3


def test_an_unknown_key_is_never_kept(keys: InMemoryApiKeys, clock: ManualClock) -> None:
    cache = _cache(keys, clock)

    assert cache.workspace_for(hash_api_key("sk_wrong")) is None
    assert cache.workspace_for(hash_api_key("sk_wrong")) is None

    assert keys.reads == 2
    assert len(cache) == 0


def test_a_key_issued_after_a_miss_works_at_once(keys: InMemoryApiKeys, clock: ManualClock) -> None:
    cache = _cache(keys, clock)
    assert cache.workspace_for(hash_api_key("sk_new")) is None

    issue_api_key(keys, "ws_new", "sk_new")

    assert cache.workspace_for(hash_api_key("sk_new")) == "ws_new"


def test_a_store_that_cannot_be_read_raises_and_is_never_kept(
    keys: InMemoryApiKeys, clock: ManualClock
) -> None:
    cache = _cache(keys, clock)
    keys.failing = True

    with pytest.raises(ConnectionError):
        cache.workspace_for(hash_api_key(KEY))
    assert len(cache) == 0

    keys.failing = False
    assert cache.workspace_for(hash_api_key(KEY)) == WS  # the next request reads again


def test_an_expired_key_is_never_answered_from_memory_while_the_store_fails(
    keys: InMemoryApiKeys, clock: ManualClock
) -> None:
    cache = _cache(keys, clock)
    cache.workspace_for(hash_api_key(KEY))
    keys.failing = True

    clock.advance(60)
    with pytest.raises(ConnectionError):
        cache.workspace_for(hash_api_key(KEY))


def test_at_most_max_entries_keys_are_kept_the_least_recently_used_dropped_first(
    keys: InMemoryApiKeys, clock: ManualClock
) -> None:
    for number in range(3):
        issue_api_key(keys, f"ws_{number}", f"sk_{number}")
    cache = _cache(keys, clock, max_entries=2)
    cache.workspace_for(hash_api_key("sk_0"))
    cache.workspace_for(hash_api_key("sk_1"))
    cache.workspace_for(hash_api_key("sk_0"))  # sk_1 is now the least recently used

    cache.workspace_for(hash_api_key("sk_2"))
    reads = keys.reads
    assert cache.workspace_for(hash_api_key("sk_0")) == "ws_0"
    assert cache.workspace_for(hash_api_key("sk_2")) == "ws_2"
    assert keys.reads == reads
    assert cache.workspace_for(hash_api_key("sk_1")) == "ws_1"
    assert keys.reads == reads + 1
    assert len(cache) == 2


def test_a_period_of_zero_reads_the_store_on_every_request(keys: InMemoryApiKeys, clock: ManualClock) -> None:
    cache = CachedApiKeyStore(keys, timedelta(0), clock=clock)

    cache.workspace_for(hash_api_key(KEY))
    cache.workspace_for(hash_api_key(KEY))

    assert keys.reads == 2
    assert len(cache) == 0


def test_a_clock_that_went_back_does_not_keep_a_key_longer(keys: InMemoryApiKeys, clock: ManualClock) -> None:
    cache = _cache(keys, clock)
    cache.workspace_for(hash_api_key(KEY))

    clock.advance(-1)
    cache.workspace_for(hash_api_key(KEY))

    assert keys.reads == 2


def test_the_cache_holds_key_hashes_never_keys(keys: InMemoryApiKeys, clock: ManualClock) -> None:
    cache = _cache(keys, clock)
    cache.workspace_for(hash_api_key(KEY))

    assert KEY not in repr(vars(cache))
    assert hash_api_key(KEY) in repr(vars(cache))


# ---------------------------------------------------------------------------- through the handler
SETTINGS = API_SETTINGS
EVENTS = Path(__file__).resolve().parents[2] / "events"


@pytest.fixture
def api(keys: InMemoryApiKeys, clock: ManualClock) -> Iterator[InMemoryStore]:
    """The API's real handler on in-memory fakes, its key store behind the real cache."""
    store = InMemoryStore()
    dependencies.root.use(
        fake_api_dependencies(
            MessageService(store=store, queue=FakeQueue(), dedup_window=timedelta(minutes=15), clock=clock),
            _cache(keys, clock),
        )
    )
    yield store
    composition.reset_all()


def _get(authorization: str | None, path: str = "/v1/messages") -> tuple[int, dict[str, str], dict[str, Any]]:
    event = json.loads((EVENTS / "api_list_messages.json").read_text(encoding="utf-8"))
    event["headers"].pop("authorization", None)
    if authorization is not None:
        event["headers"]["authorization"] = authorization
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["routeKey"] = event["requestContext"]["routeKey"] = f"GET {path}"
    event.pop("queryStringParameters", None)
    event["rawQueryString"] = ""
    response = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
    return response["statusCode"], response.get("headers") or {}, json.loads(response["body"])


def test_api_given_a_good_key_then_its_workspace_and_one_read_for_many_requests(
    api: InMemoryStore, keys: InMemoryApiKeys
) -> None:
    for _ in range(3):
        status, _, body = _get(f"Bearer {KEY}")
        assert status == 200, body

    assert keys.reads == 1


@pytest.mark.parametrize("authorization", [None, "Bearer sk_wrong", f"Basic {KEY}", key_of(WS)])
def test_api_given_no_key_or_a_wrong_one_then_401_in_the_error_body(
    api: InMemoryStore, authorization: str | None
) -> None:
    status, _, body = _get(authorization)

    assert status == 401
    assert body == {
        "success": False,
        "error": {"code": "unauthorized", "message": body["error"]["message"]},
    }


def test_api_given_the_key_store_fails_then_503_with_retry_after_in_the_error_body(
    api: InMemoryStore, keys: InMemoryApiKeys
) -> None:
    keys.failing = True

    status, headers, body = _get(f"Bearer {KEY}")

    assert status == 503
    assert headers["Retry-After"]
    assert body["success"] is False
    assert body["error"]["code"] == "unavailable"


def test_api_given_the_key_store_fails_then_the_next_request_reads_it_again(
    api: InMemoryStore, keys: InMemoryApiKeys
) -> None:
    keys.failing = True
    assert _get(f"Bearer {KEY}")[0] == 503

    keys.failing = False
    assert _get(f"Bearer {KEY}")[0] == 200
    assert keys.reads == 2


def test_api_given_a_public_route_then_no_key_is_read(api: InMemoryStore, keys: InMemoryApiKeys) -> None:
    keys.failing = True

    status, _, _ = _get(None, path="/v1/health")

    assert status == 200
    assert keys.reads == 0


def test_api_a_request_after_one_with_a_good_key_sees_no_workspace_of_it(
    api: InMemoryStore, keys: InMemoryApiKeys
) -> None:
    assert _get(f"Bearer {KEY}")[0] == 200

    assert _get(None)[0] == 401
    assert _get(None, path="/v1/health")[0] == 200
    assert _get(None)[0] == 401


@pytest.fixture
def unbuildable_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The API's dependencies cannot be built: its settings are missing from the environment (the API
    function's root, which its entry point builds from them)."""
    assert dependencies.root is api_function.root
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    composition.reset_all()
    yield
    composition.reset_all()


def test_api_given_no_key_then_401_without_building_any_dependency(unbuildable_root: None) -> None:
    status, _, body = _get(None)

    assert status == 401
    assert body["error"]["code"] == "unauthorized"


def test_api_given_a_key_and_no_key_store_to_be_had_then_503_not_401(unbuildable_root: None) -> None:
    status, headers, body = _get(f"Bearer {KEY}")

    assert status == 503
    assert headers["Retry-After"]
    assert body["error"]["code"] == "unavailable"


# ---------------------------------------------------------------------------- the setting
def test_the_api_root_checks_keys_through_a_cache_of_the_settings_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    settings = ApiSettings.from_environment({**SETTINGS, "SENDONCE_API_KEY_CACHE_SECONDS": "5"})

    built = api_function.build(settings, client)

    assert isinstance(built.api_keys, CachedApiKeyStore)
    assert built.api_keys.ttl == timedelta(seconds=5)
    assert ApiSettings.from_environment(SETTINGS).api_key_cache_seconds == 60


@pytest.mark.parametrize("value", ["-1", "301", "soon"])
def test_a_cache_period_outside_0_to_300_seconds_is_refused(value: str) -> None:
    with pytest.raises(InvalidSettings, match="SENDONCE_API_KEY_CACHE_SECONDS"):
        ApiSettings.from_environment({**SETTINGS, "SENDONCE_API_KEY_CACHE_SECONDS": value})


def test_the_api_settings_need_the_key_table() -> None:
    without = {name: value for name, value in SETTINGS.items() if name != "API_KEYS_TABLE"}

    with pytest.raises(InvalidSettings, match="API_KEYS_TABLE"):
        ApiSettings.from_environment(without)
